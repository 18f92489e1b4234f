"""Records in Elasticsearch: one index per model and day (``{prefix}_segment-20261121``),
created by an index template on the first write into it, so that a day's
records are found, and dropped, by their index name alone.

A record's document is also its entry on the model's topic: the write that
stores it gives it its partition, offset and publication time
(``POSITION_FIELDS``), and the topic is read from the same indices
(``storage/elasticsearch/topics.py``)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence

from model.records import Record
from model.topics import Position
from storage.api import R, check_where, each_position
from storage.elasticsearch.client import (
    POSITION_FIELDS,
    ElasticsearchClient,
    doc_id,
    mapping_of,
    raise_if_busy,
    translated_errors,
    where_query,
    with_position,
)

MAX_DAYS_NAMED = 62
"""A query over more days than this searches every day's index of the model
(with the time filter) instead of naming each one."""


def day_of(bucket: int) -> datetime.date | None:
    """The day of a minute, hour or day bucket; None for a bucket of no real day."""
    day = bucket
    while day > 99_999_999:  # a minute or an hour bucket
        day //= 100
    try:
        return datetime.date(day // 10_000, day // 100 % 100, day % 100)
    except ValueError:
        return None


class ElasticsearchRecordDAO:
    def __init__(self, client: ElasticsearchClient) -> None:
        self._client = client
        self._es = client.es

    def install(self, models: Sequence[type[Record]]) -> None:
        for model in models:
            mapping = mapping_of(model)
            mapping["properties"].update(POSITION_FIELDS)
            self._client.put_template(model.MODEL, mapping)  # day indices of earlier releases gain positions

    def _index(self, model: type[Record], day: int) -> str:
        return f"{self._client.index(model.MODEL)}-{day}"

    def insert(
        self, model: type[R], items: Sequence[R], positions: Sequence[Position] | None = None
    ) -> dict[str, str]:
        keys = {doc_id(i.key()): i.key() for i in items}
        placed = each_position(positions, len(items))
        actions = (
            {
                "_op_type": "index",
                "_index": self._index(model, i.day),
                "_id": doc_id(i.key()),
                "_source": with_position(i.to_row(), p),
            }
            for i, p in zip(items, placed, strict=True)
        )
        what = f"writing {len(items)} {model.MODEL} records"
        failures = self._client.bulk(actions, what)
        raise_if_busy(failures, what)  # records are written by id: writing them all again is harmless
        return {keys[f["_id"]]: str(f.get("error")) for f in failures}

    def indices(self, model: type[Record], first_bucket: int, last_bucket: int) -> str:
        """The indices holding the records of a time range, comma separated."""
        first, last = day_of(first_bucket), day_of(last_bucket)
        if first is None or last is None or last < first or (last - first).days >= MAX_DAYS_NAMED:
            return f"{self._client.index(model.MODEL)}-*"
        days = (first + datetime.timedelta(days=n) for n in range((last - first).days + 1))
        return ",".join(self._index(model, int(d.strftime("%Y%m%d"))) for d in days)

    def query(
        self,
        model: type[R],
        first_bucket: int,
        last_bucket: int,
        where: Mapping[str, str] | None = None,
        limit: int = 1000,
    ) -> list[R]:
        index = self.indices(model, first_bucket, last_bucket)
        with translated_errors(f"searching {model.MODEL} records"):
            res = self._es.search(
                index=index,
                size=limit,
                sort=[{"time_bucket": "desc"}],
                query=where_query(first_bucket, last_bucket, check_where(model, where)),
                ignore_unavailable=True,
                allow_no_indices=True,
            )
        return [model.from_row(h["_source"]) for h in res["hits"]["hits"]]

    def close(self) -> None:
        self._client.close()
