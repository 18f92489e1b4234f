"""Metrics rows in Elasticsearch: an index per model and downsampling level,
one document per key, written with the version read (``if_seq_no``) so that a
merge never overwrites a value it did not see. Each document keeps the rounds
its value includes in ``applied_rounds``, a field stored but not indexed, and
its version's place on the metrics topic (``POSITION_FIELDS``)."""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from typing import Any

from model.metrics import Downsampling, Metrics
from storage.api import APPLIED_ROUNDS, M, MetricsWrite, PutOutcome, Stored, check_where
from storage.elasticsearch.client import (
    BUSY_STATUSES,
    POSITION_FIELDS,
    ElasticsearchClient,
    doc_id,
    mapping_of,
    position_of,
    translated_errors,
    where_query,
    with_position,
)

RETRIABLE_STATUSES = frozenset({409, *BUSY_STATUSES})
"""A version conflict or a busy server: the row was certainly not written."""


def index_name(model: type[Metrics], level: Downsampling) -> str:
    return f"{model.MODEL}_{level.value}"


class ElasticsearchMetricsDAO:
    def __init__(self, client: ElasticsearchClient) -> None:
        self._client = client
        self._es = client.es

    def install(self, models: Sequence[type[Metrics]]) -> None:
        for model in models:
            mapping = mapping_of(model)
            mapping["properties"][APPLIED_ROUNDS] = {"type": "object", "enabled": False}
            mapping["properties"].update(POSITION_FIELDS)
            for level in Downsampling:
                self._client.create_index(index_name(model, level), mapping)

    def get_many(self, model: type[M], level: Downsampling, keys: Sequence[str]) -> dict[str, Stored[M]]:
        if not keys:
            return {}
        index = self._client.index(index_name(model, level))
        with translated_errors(f"reading {len(keys)} documents of {index}"):
            docs = self._es.mget(index=index, ids=[doc_id(k) for k in keys], realtime=True)["docs"]
        found: dict[str, Stored[M]] = {}
        for d in docs:
            if d.get("found"):
                source = d["_source"]
                item = model.from_row(source)
                found[item.key()] = Stored(
                    item,
                    (d["_seq_no"], d["_primary_term"]),
                    source.get(APPLIED_ROUNDS) or {},
                    position_of(source),
                )
        return found

    def put(self, model: type[M], level: Downsampling, rows: Sequence[MetricsWrite[M]]) -> PutOutcome:
        index = self._client.index(index_name(model, level))
        keys: dict[str, str] = {}
        actions: list[dict[str, Any]] = []
        for row in rows:
            key = row.value.key()
            source = with_position({**row.value.to_row(), APPLIED_ROUNDS: row.rounds}, row.position)
            action: dict[str, Any] = {"_index": index, "_id": doc_id(key), "_source": source}
            if row.stored is None:
                action["_op_type"] = "create"
            else:
                seq_no, term = typing.cast(tuple[int, int], row.stored.version)
                action.update(_op_type="index", if_seq_no=seq_no, if_primary_term=term)
            keys[action["_id"]] = key
            actions.append(action)
        outcome = PutOutcome()
        for failure in self._client.bulk(actions, f"writing {len(actions)} rows of {index}"):
            key = keys[failure["_id"]]
            if failure.get("status") in RETRIABLE_STATUSES:
                outcome.retry.append(key)
            else:
                outcome.failed[key] = str(failure.get("error"))
        return outcome

    def query(
        self,
        model: type[M],
        level: Downsampling,
        first_bucket: int,
        last_bucket: int,
        where: Mapping[str, str] | None = None,
        limit: int = 10_000,
    ) -> list[M]:
        index = self._client.index(index_name(model, level))
        with translated_errors(f"searching {index}"):
            res = self._es.search(
                index=index,
                size=limit,
                sort=[{"time_bucket": "desc"}],
                query=where_query(first_bucket, last_bucket, check_where(model, where)),
            )
        return [model.from_row(h["_source"]) for h in res["hits"]["hits"]]

    def close(self) -> None:
        self._client.close()
