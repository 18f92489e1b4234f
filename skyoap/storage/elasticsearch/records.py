"""Records in Elasticsearch: one index per model and day (``{prefix}_segment-20261121``),
created by an index template on the first write into it, so that a day's
records are found, and dropped, by their index name alone.

A record's document is also its entry on the model's topic: the write that
stores it gives it its partition, offset and publication time
(``POSITION_FIELDS``), and the topic is read from the same indices
(``storage/elasticsearch/topics.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from skyoap.model.records import Record
from skyoap.model.topics import Position
from skyoap.storage.api import R, RecordSearch, check_where, each_position
from skyoap.storage.elasticsearch.client import (
    POSITION_FIELDS,
    DeadlineReads,
    ElasticsearchClient,
    Period,
    doc_id,
    mapping_of,
    raise_if_busy,
    translated_errors,
    where_query,
    with_position,
)

READ_LIMIT_S = 30.0
"""The longest a search answers in, outside a call's deadline."""

TAG_VALUES_MAX = 10_000
"""The most distinct tag values one search gathers."""


class ElasticsearchRecordDAO:
    def __init__(self, client: ElasticsearchClient) -> None:
        self._client = client
        self._es = client.es
        self._reads = DeadlineReads(client, READ_LIMIT_S)

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

    def _indices(self, model: type[Record], first_bucket: int | None, last_bucket: int | None) -> str:
        base = self._client.index(model.MODEL)
        if first_bucket is None or last_bucket is None:
            return f"{base}-*"
        return Period.DAY.indices(base, first_bucket, last_bucket)

    def search(self, model: type[R], search: RecordSearch) -> list[R]:
        search.check(model)
        order = "desc" if search.descending else "asc"
        with translated_errors(f"searching {model.MODEL} records"):
            res = self._reads.es().search(
                index=self._indices(model, search.first_bucket, search.last_bucket),
                from_=search.offset,
                size=search.limit,
                sort=[{search.order_by: order}, {model.KEY: "asc"}],
                query=_search_query(model, search),
                track_total_hits=False,
                ignore_unavailable=True,
                allow_no_indices=True,
            )
        return [model.from_row(h["_source"]) for h in res["hits"]["hits"]]

    def tag_values(
        self, model: type[Record], first_bucket: int, last_bucket: int, limit: int, prefix: str = ""
    ) -> list[str]:
        RecordSearch(tags=("",)).check(model)
        window = RecordSearch(first_bucket=first_bucket, last_bucket=last_bucket)
        terms: dict[str, Any] = {
            "field": model.TAGS,
            "size": min(limit, TAG_VALUES_MAX),
            "order": {"_key": "asc"},
        }
        if prefix:
            # Lucene's regular expressions take any character escaped.
            terms["include"] = "".join(c if c.isalnum() else "\\" + c for c in prefix) + ".*"
        with translated_errors(f"gathering the tags of {model.MODEL} records"):
            res = self._reads.es().search(
                index=self._indices(model, first_bucket, last_bucket),
                size=0,
                query=_search_query(model, window, [{"prefix": {model.TAGS: prefix}}] if prefix else []),
                aggregations={"tags": {"terms": terms}},
                ignore_unavailable=True,
                allow_no_indices=True,
            )
        buckets = res.get("aggregations", {}).get("tags", {}).get("buckets", [])
        return [b["key"] for b in buckets]

    def close(self) -> None:
        self._client.close()


def _search_query(
    model: type[Record], search: RecordSearch, more: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    filters: list[dict[str, Any]] = list(more or [])
    if search.first_bucket is not None and search.last_bucket is not None:
        filters.append({"range": {"time_bucket": {"gte": search.first_bucket, "lte": search.last_bucket}}})
    filters += [{"term": {name: value}} for name, value in search.equal.items()]
    filters += [{"terms": {name: list(values)}} for name, values in search.one_of.items()]
    if search.any_of:
        alternatives = [
            {"bool": {"filter": [{"terms": {name: list(values)}} for name, values in alternative.items()]}}
            for alternative in search.any_of
        ]
        filters.append({"bool": {"should": alternatives, "minimum_should_match": 1}})
    filters += [{"range": {name: {"gte": low}}} for name, low in search.at_least.items()]
    filters += [{"range": {name: {"lte": high}}} for name, high in search.at_most.items()]
    filters += [{"term": {model.TAGS: tag}} for tag in search.tags]

    def phrases(words: Mapping[str, Sequence[str]]) -> list[dict[str, Any]]:
        return [{"match_phrase": {f"{n}.words": k}} for n, keywords in words.items() for k in keywords]

    return {"bool": {"filter": filters + phrases(search.contains), "must_not": phrases(search.lacks)}}
