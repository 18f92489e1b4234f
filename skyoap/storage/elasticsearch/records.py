"""Records in Elasticsearch: one index per model and day (``{prefix}_segment-20261121``),
created by an index template on the first write into it, so that a day's
records are found, and dropped, by their index name alone.

A record's document is also its entry on the model's topic: the write that
stores it gives it its partition, offset and publication time
(``POSITION_FIELDS``), and the topic is read from the same indices
(``storage/elasticsearch/topics.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from skyoap.model.records import Record
from skyoap.model.topics import Position
from skyoap.storage.api import R, check_where, each_position
from skyoap.storage.elasticsearch.client import (
    POSITION_FIELDS,
    ElasticsearchClient,
    Period,
    doc_id,
    mapping_of,
    raise_if_busy,
    translated_errors,
    where_query,
    with_position,
)


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

    def query(
        self,
        model: type[R],
        first_bucket: int,
        last_bucket: int,
        where: Mapping[str, str] | None = None,
        limit: int = 1000,
    ) -> list[R]:
        index = Period.DAY.indices(self._client.index(model.MODEL), first_bucket, last_bucket)
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
