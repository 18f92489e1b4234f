"""Inventory rows in Elasticsearch.

Each model has an index with one document per key (the key is the document id,
or its digest where the key is too long for one),
written with ``op_type=create`` so that Elasticsearch itself refuses a second
row for a name. Ids are kept unique by the reservation fence: one document per
scope in ``sequence_fence`` holding the last id handed out, moved forward with a
compare-and-set before any row uses an id (see ``reserve_sequences``).
"""

from __future__ import annotations

import threading
import time
import typing
from collections.abc import Callable, Sequence
from typing import Any

import elasticsearch
from elasticsearch import Elasticsearch

from skyoap.model.inventory import Inventory
from skyoap.model.topics import Position
from skyoap.storage.api import I, InsertOutcome, StorageError, Stored, each_position
from skyoap.storage.elasticsearch.client import (
    POSITION_FIELDS,
    DeadlineReads,
    ElasticsearchClient,
    doc_id,
    mapping_of,
    position_of,
    raise_if_busy,
    translated_errors,
    with_position,
)

FENCE_INDEX = "sequence_fence"
_FENCE_MAPPING = {"dynamic": "strict", "properties": {"last": {"type": "long"}}}
_REFRESH_AT_MOST_EVERY_S = 1.0


class ElasticsearchInventoryDAO:
    def __init__(self, client: ElasticsearchClient, reads: DeadlineReads | None = None) -> None:
        """With ``reads``, the DAO reads through them (what an agent's call
        waits on), and closing it leaves the shared client open."""
        self._client = client
        self._es: Callable[[], Elasticsearch] = reads.es if reads else lambda: client.es
        self._owns_client = reads is None
        self._refreshed: dict[str, float] = {}
        self._refresh_lock = threading.Lock()

    def install(self, models: Sequence[type[Inventory]]) -> None:
        self._client.create_index(FENCE_INDEX, _FENCE_MAPPING)
        for model in models:
            mapping = mapping_of(model)
            mapping["properties"].update(POSITION_FIELDS)
            self._client.create_index(model.MODEL, mapping)

    def _mget(self, index: str, ids: Sequence[str]) -> list[dict[str, Any]]:
        if not ids:
            return []
        with translated_errors(f"reading {len(ids)} documents of {index}"):
            docs = self._es().mget(index=self._client.index(index), ids=list(ids), realtime=True)["docs"]
        return [d for d in docs if d.get("found")]

    def get_many(self, model: type[I], keys: Sequence[str]) -> dict[str, Stored[I]]:
        found: dict[str, Stored[I]] = {}
        for d in self._mget(model.MODEL, [doc_id(k) for k in keys]):
            item = model.from_row(d["_source"])
            found[item.key()] = Stored(
                item, (d["_seq_no"], d["_primary_term"]), position=position_of(d["_source"])
            )
        return found

    def get_by_sequence(self, model: type[I], sequence: int) -> I | None:
        # A search sees what was written before the last refresh only, so a miss
        # refreshes and asks again; at most once a second, since ids nobody
        # registered (pings after storage was wiped) can come in storms.
        index = self._client.index(model.MODEL)
        for attempt in range(2):
            with translated_errors(f"finding id {sequence} in {index}"):
                hits = self._es().search(index=index, size=1, query={"term": {"sequence": sequence}})["hits"][
                    "hits"
                ]
            if hits:
                return model.from_row(hits[0]["_source"])
            if attempt or not self._may_refresh(model.MODEL):
                break
        return None

    def _may_refresh(self, name: str) -> bool:
        now = time.monotonic()
        with self._refresh_lock:
            if now - self._refreshed.get(name, -1e9) < _REFRESH_AT_MOST_EVERY_S:
                return False
            self._refreshed[name] = now
        index = self._client.index(name)
        with translated_errors(f"refreshing {index}"):
            self._es().indices.refresh(index=index)
        return True

    def update(
        self,
        model: type[I],
        rows: Sequence[tuple[Stored[I], I]],
        positions: Sequence[Position] | None = None,
    ) -> list[str]:
        index = self._client.index(model.MODEL)
        actions = []
        placed = each_position(positions, len(rows))
        for (stored, new), position in zip(rows, placed, strict=True):
            seq_no, term = typing.cast(tuple[int, int], stored.version)
            actions.append(
                {
                    "_op_type": "index",
                    "_index": index,
                    "_id": doc_id(new.key()),
                    "_source": with_position(new.to_row(), position),
                    "if_seq_no": seq_no,
                    "if_primary_term": term,
                }
            )
        keys = {doc_id(new.key()): new.key() for _, new in rows}
        failures = self._client.bulk(actions, f"updating {len(actions)} rows of {index}")
        return [keys[f["_id"]] for f in self._only_conflicts(failures, index)]

    @staticmethod
    def _only_conflicts(failures: list[dict[str, Any]], index: str) -> list[dict[str, Any]]:
        other = [f for f in failures if f.get("status") != 409]
        raise_if_busy(other, f"writing to {index}")
        if other:
            raise StorageError(f"{len(other)} writes to {index} failed, the first: {other[0].get('error')}")
        return failures

    def insert(
        self, model: type[I], items: Sequence[I], positions: Sequence[Position] | None = None
    ) -> InsertOutcome:
        index = self._client.index(model.MODEL)
        placed = each_position(positions, len(items))
        docs = [
            {
                "_op_type": "create",
                "_index": index,
                "_id": doc_id(i.key()),
                "_source": with_position(i.to_row(), p),
            }
            for i, p in zip(items, placed, strict=True)
        ]
        keys = {d["_id"]: i.key() for d, i in zip(docs, items, strict=True)}
        failures = self._client.bulk(docs, f"inserting {len(docs)} rows into {index}")
        taken = {keys[f["_id"]] for f in self._only_conflicts(failures, index)}
        return InsertOutcome(
            inserted=[i.key() for i in items if i.key() not in taken],
            key_taken=[i.key() for i in items if i.key() in taken],
        )

    def _fence(self, model: type[Inventory]) -> tuple[int, dict[str, Any]]:
        """The last reserved id of ``model``'s scope, and how to write the fence
        only if nobody moved it since (or create it only if it does not exist)."""
        index = self._client.index(FENCE_INDEX)
        with translated_errors(f"reading the sequence fence of {model.MODEL}"):
            try:
                doc = self._es().get(index=index, id=model.MODEL, realtime=True)
            except elasticsearch.NotFoundError:
                # No fence yet (or it was lost): it starts above every stored row.
                return self._stored_max(model), {"op_type": "create"}
        return int(doc["_source"]["last"]), {
            "if_seq_no": doc["_seq_no"],
            "if_primary_term": doc["_primary_term"],
        }

    def reserve_sequences(self, model: type[Inventory], first: int, last: int) -> bool:
        index = self._client.index(FENCE_INDEX)
        while True:
            fenced, condition = self._fence(model)
            if first <= fenced:
                return False
            try:
                with translated_errors(f"moving the sequence fence of {model.MODEL} to {last}"):
                    fence = {"last": last}
                    self._client.writes.index(index=index, id=model.MODEL, document=fence, **condition)
                return True
            except StorageError as e:
                if not isinstance(e.__cause__, elasticsearch.ConflictError):
                    raise
                # Another writer moved the fence between our read and write: read again.

    def max_sequence(self, model: type[Inventory]) -> int:
        return max(self._fence(model)[0], self._stored_max(model))

    def _stored_max(self, model: type[Inventory]) -> int:
        self._client.refresh(model.MODEL)
        with translated_errors(f"reading the largest id stored in {model.MODEL}"):
            res = self._es().search(
                index=self._client.index(model.MODEL), size=0, aggs={"top": {"max": {"field": "sequence"}}}
            )
        value = res["aggregations"]["top"]["value"]
        return int(value) if value is not None else 0

    def list(self, model: type[I], limit: int = 10_000) -> list[I]:
        self._client.refresh(model.MODEL)
        with translated_errors(f"listing {model.MODEL}"):
            res = self._es().search(
                index=self._client.index(model.MODEL),
                size=limit,
                sort=[{"sequence": "asc"}],
                query={"match_all": {}},
            )
        return [model.from_row(h["_source"]) for h in res["hits"]["hits"]]

    def names_of_service(self, model: type[Inventory], service_id: int, limit: int) -> Sequence[str]:
        with translated_errors(f"listing the names of service {service_id} in {model.MODEL}"):
            res = self._es().search(
                index=self._client.index(model.MODEL),
                size=min(limit, 10_000),  # Elasticsearch's max_result_window
                sort=[{"sequence": "asc"}],
                source_includes=["name"],
                query={"term": {"service_id": service_id}},
            )
        return [h["_source"]["name"] for h in res["hits"]["hits"]]

    def stale(
        self, model: type[I], cutoff_ms: int, limit: int = 10_000, active: bool | None = True
    ) -> Sequence[Stored[I]]:
        filters: list[dict[str, Any]] = [{"range": {"heartbeat_time": {"lt": cutoff_ms}}}]
        if active is not None:
            filters.append({"term": {"active": active}})
        self._client.refresh(model.MODEL)
        index = self._client.index(model.MODEL)
        with translated_errors(f"finding stale rows of {index}"):
            hits = self._es().search(
                index=index,
                size=limit,
                seq_no_primary_term=True,
                query={"bool": {"filter": filters}},
            )["hits"]["hits"]
        return [
            Stored(
                model.from_row(h["_source"]),
                (h["_seq_no"], h["_primary_term"]),
                position=position_of(h["_source"]),
            )
            for h in hits
        ]

    def remove(self, model: type[I], rows: Sequence[Stored[I]]) -> Sequence[str]:
        index = self._client.index(model.MODEL)
        actions = []
        for row in rows:
            seq_no, term = typing.cast(tuple[int, int], row.version)
            actions.append(
                {
                    "_op_type": "delete",
                    "_index": index,
                    "_id": doc_id(row.item.key()),
                    "if_seq_no": seq_no,
                    "if_primary_term": term,
                }
            )
        keys = {doc_id(r.item.key()): r.item.key() for r in rows}
        failures = self._client.bulk(actions, f"removing {len(actions)} rows of {index}")
        gone = [f for f in failures if f.get("status") != 404]  # removed meanwhile
        return [keys[f["_id"]] for f in self._only_conflicts(gone, index)]

    def close(self) -> None:
        if self._owns_client:
            self._client.close()
