"""Inventory rows in Elasticsearch.

Each model has two indices: ``<model>`` with one document per key (the key is
the document id), and ``<model>_seq`` with one document per allocated sequence
(the sequence is the document id). Both are written with ``op_type=create``, so
Elasticsearch itself refuses a second document for a key or for a sequence;
this is what keeps ids unique even if the lock or the allocator fails.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from typing import Any

from pipeline.inventory import Inventory
from storage.api import I, InsertOutcome, StorageError, Stored
from storage.elasticsearch.client import ElasticsearchClient, mapping_of, translated_errors

_SEQ_MAPPING = {"dynamic": "strict", "properties": {"key": {"type": "keyword"}, "sequence": {"type": "long"}}}


def _seq(model: type[Inventory]) -> str:
    return f"{model.MODEL}_seq"


class ElasticsearchInventoryDAO:
    def __init__(self, client: ElasticsearchClient) -> None:
        self._client = client
        self._es = client.es

    def install(self, models: Sequence[type[Inventory]]) -> None:
        for model in models:
            self._client.create_index(model.MODEL, mapping_of(model))
            self._client.create_index(_seq(model), _SEQ_MAPPING)

    def _mget(self, index: str, ids: Sequence[str]) -> list[dict[str, Any]]:
        if not ids:
            return []
        with translated_errors(f"reading {len(ids)} documents of {index}"):
            docs = self._es.mget(index=self._client.index(index), ids=list(ids), realtime=True)["docs"]
        return [d for d in docs if d.get("found")]

    def get_many(self, model: type[I], keys: Sequence[str]) -> dict[str, Stored[I]]:
        return {
            d["_id"]: Stored(model.from_row(d["_source"]), (d["_seq_no"], d["_primary_term"]))
            for d in self._mget(model.MODEL, keys)
        }

    def get_by_sequence(self, model: type[I], sequence: int) -> I | None:
        claims = self._mget(_seq(model), [str(sequence)])
        if not claims:
            return None
        rows = self.get_many(model, [claims[0]["_source"]["key"]])
        return next(iter(rows.values())).item if rows else None

    def update(self, model: type[I], rows: Sequence[tuple[Stored[I], I]]) -> list[str]:
        index = self._client.index(model.MODEL)
        actions = []
        for stored, new in rows:
            seq_no, term = typing.cast(tuple[int, int], stored.version)
            actions.append(
                {
                    "_op_type": "index",
                    "_index": index,
                    "_id": new.key(),
                    "_source": new.to_row(),
                    "if_seq_no": seq_no,
                    "if_primary_term": term,
                }
            )
        failures = self._client.bulk(actions, f"updating {len(actions)} rows of {index}")
        return [f["_id"] for f in self._only_conflicts(failures, index)]

    @staticmethod
    def _only_conflicts(failures: list[dict[str, Any]], index: str) -> list[dict[str, Any]]:
        other = [f for f in failures if f.get("status") != 409]
        if other:
            raise StorageError(f"{len(other)} writes to {index} failed, the first: {other[0].get('error')}")
        return failures

    def insert(self, model: type[I], items: Sequence[I]) -> InsertOutcome:
        outcome = InsertOutcome()
        if not items:
            return outcome
        seq_index = self._client.index(_seq(model))
        by_key = {item.key(): item for item in items}
        claims = [
            {
                "_op_type": "create",
                "_index": seq_index,
                "_id": str(item.sequence),
                "_source": {"key": key, "sequence": item.sequence},
            }
            for key, item in by_key.items()
        ]
        refused = self._only_conflicts(
            self._client.bulk(claims, f"claiming sequences in {seq_index}"), seq_index
        )
        if refused:
            # A claim refused because this key made it in an earlier, interrupted attempt is still ours.
            holders = {
                d["_id"]: d["_source"]["key"] for d in self._mget(_seq(model), [f["_id"] for f in refused])
            }
            sequence_of = {str(item.sequence): key for key, item in by_key.items()}
            for f in refused:
                key = sequence_of[f["_id"]]
                if holders.get(f["_id"]) != key:
                    outcome.sequence_taken.append(key)
                    del by_key[key]

        index = self._client.index(model.MODEL)
        docs = [
            {"_op_type": "create", "_index": index, "_id": key, "_source": item.to_row()}
            for key, item in by_key.items()
        ]
        taken = {
            f["_id"] for f in self._only_conflicts(self._client.bulk(docs, f"inserting into {index}"), index)
        }
        outcome.key_taken.extend(taken)
        outcome.inserted.extend(k for k in by_key if k not in taken)
        if taken:  # give back the sequences claimed for keys another writer stored first
            releases = [
                {"_op_type": "delete", "_index": seq_index, "_id": str(by_key[k].sequence)} for k in taken
            ]
            self._client.bulk(releases, f"releasing claims in {seq_index}")
        return outcome

    def max_sequence(self, model: type[Inventory]) -> int:
        self._client.refresh(_seq(model))
        with translated_errors(f"reading the largest sequence of {model.MODEL}"):
            res = self._es.search(
                index=self._client.index(_seq(model)), size=0, aggs={"top": {"max": {"field": "sequence"}}}
            )
        value = res["aggregations"]["top"]["value"]
        return int(value) if value is not None else 0

    def list(self, model: type[I], limit: int = 10_000) -> list[I]:
        self._client.refresh(model.MODEL)
        with translated_errors(f"listing {model.MODEL}"):
            res = self._es.search(
                index=self._client.index(model.MODEL),
                size=limit,
                sort=[{"sequence": "asc"}],
                query={"match_all": {}},
            )
        return [model.from_row(h["_source"]) for h in res["hits"]["hits"]]

    def deactivate_stale(self, model: type[Inventory], cutoff_ms: int) -> int:
        self._client.refresh(model.MODEL)
        index = self._client.index(model.MODEL)
        with translated_errors(f"finding stale rows of {index}"):
            res = self._es.search(
                index=index,
                size=10_000,
                seq_no_primary_term=True,
                source=False,
                query={
                    "bool": {
                        "filter": [
                            {"term": {"active": True}},
                            {"range": {"heartbeat_time": {"lt": cutoff_ms}}},
                        ]
                    }
                },
            )
        actions = [
            {
                "_op_type": "update",
                "_index": index,
                "_id": h["_id"],
                "doc": {"active": False},
                "if_seq_no": h["_seq_no"],
                "if_primary_term": h["_primary_term"],
            }
            for h in res["hits"]["hits"]
        ]
        changed = self._only_conflicts(self._client.bulk(actions, f"deactivating rows of {index}"), index)
        return len(actions) - len(changed)

    def close(self) -> None:
        self._client.close()
