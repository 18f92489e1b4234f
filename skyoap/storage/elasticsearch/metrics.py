"""Metrics rows in Elasticsearch: a time series of indices per model and
downsampling level, one document per key, written with the version read
(``if_seq_no``) so that a merge never overwrites a value it did not see. Each
document keeps the rounds its value includes in ``applied_rounds``, a field
stored but not indexed, and its version's place on the metrics topic
(``POSITION_FIELDS``).

Minute and hour rows go into an index per day, day rows into an index per
month (``PERIODS``), each created by an index template on its first write, so
that time to live drops whole indices (``expire``)."""

from __future__ import annotations

import datetime
import logging
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from elasticsearch import helpers

from skyoap.model.metrics import SEP, Downsampling, Metrics, not_finite
from skyoap.model.stream import ColumnType
from skyoap.storage.api import (
    APPLIED_ROUNDS,
    Equal,
    M,
    MetricsWrite,
    PutOutcome,
    StorageError,
    StorageUnavailable,
    Stored,
    check_columns,
    check_where,
)
from skyoap.storage.elasticsearch.client import (
    BUSY_STATUSES,
    POSITION_FIELDS,
    ElasticsearchClient,
    Period,
    doc_id,
    mapping_of,
    position_of,
    translated_errors,
    where_query,
    with_position,
)

log = logging.getLogger(__name__)

RETRIABLE_STATUSES = frozenset({409, *BUSY_STATUSES})
"""A version conflict or a busy server: the row was certainly not written."""

PERIODS = {Downsampling.MINUTE: Period.DAY, Downsampling.HOUR: Period.DAY, Downsampling.DAY: Period.MONTH}
"""What one index of each level holds: a day of minutes or hours, a month of
days (ninety day indices per model would cost Elasticsearch ninety shards)."""

_SEARCH_PERIODS: dict[str, Any] = {"ignore_unavailable": True, "allow_no_indices": True}
LATEST_PAGE = 1000
"""Entities one page of ``latest`` answers, each with its newest row."""
MAX_HITS = 10_000
"""The most hits one search answers (Elasticsearch's ``index.max_result_window``):
a query for more rows reads them a search at a time."""


def index_name(model: type[Metrics], level: Downsampling) -> str:
    """The base name of the model's indices of ``level`` (each ends with ``-{yyyymmdd}``)."""
    return f"{model.MODEL}_{level.value}"


def _bucket(key: str) -> int:
    return int(key.split(SEP, 1)[0])


class ElasticsearchMetricsDAO:
    def __init__(self, client: ElasticsearchClient) -> None:
        self._client = client
        self._es = client.es

    def _base(self, model: type[Metrics], level: Downsampling) -> str:
        return self._client.index(index_name(model, level))

    def install(self, models: Sequence[type[Metrics]]) -> None:
        for model in models:
            mapping = mapping_of(model)
            mapping["properties"][APPLIED_ROUNDS] = {"type": "object", "enabled": False}
            mapping["properties"].update(POSITION_FIELDS)
            for level in Downsampling:
                self._client.put_template(index_name(model, level), mapping)
                self._move_single_index(model, level)

    def _move_single_index(self, model: type[Metrics], level: Downsampling) -> None:
        """Moves the rows of an index of an earlier release, which held every
        bucket of the model and level, into the indices of their periods, then
        drops it. A row already in its period's index is left as it is, so a
        move cut short is finished by the next start."""
        single = self._base(model, level)
        with translated_errors(f"looking for {single}"):
            if not self._es.indices.exists(index=single):
                return
        period = PERIODS[level]
        actions = (
            {
                "_op_type": "create",
                "_index": period.index(single, h["_source"]["time_bucket"]),
                "_id": h["_id"],
                "_source": h["_source"],
            }
            for h in helpers.scan(self._es, index=single, query={"query": {"match_all": {}}})
        )
        what = f"moving the rows of {single} into indices per {period.value}"
        refused = [f for f in self._client.bulk(actions, what) if f.get("status") != 409]
        if refused:
            raise StorageError(f"{what}: {len(refused)} refused, the first: {refused[0].get('error')}")
        with translated_errors(f"dropping {single}"):
            self._es.indices.refresh(index=f"{single}-*", **_SEARCH_PERIODS)
            self._es.indices.delete(index=single)
        log.info("moved the rows of %s into indices per %s", single, period.value)

    def get_many(self, model: type[M], level: Downsampling, keys: Sequence[str]) -> dict[str, Stored[M]]:
        if not keys:
            return {}
        base, period = self._base(model, level), PERIODS[level]
        docs = [{"_index": period.index(base, _bucket(k)), "_id": doc_id(k)} for k in keys]
        with translated_errors(f"reading {len(keys)} documents of {base}"):
            found_docs = self._es.mget(docs=[d for d in docs if d["_index"]], realtime=True)["docs"]
        found: dict[str, Stored[M]] = {}
        for d in found_docs:
            error = d.get("error")
            if error and error.get("type") != "index_not_found_exception":  # no such index: no such row
                # A row that cannot be read now must not pass for an absent one.
                raise StorageUnavailable(f"Elasticsearch could not read {d['_id']} of {d['_index']}: {error}")
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
        base, period = self._base(model, level), PERIODS[level]
        keys: dict[str, str] = {}
        actions: list[dict[str, Any]] = []
        outcome = PutOutcome()
        for row in rows:
            key = row.value.key()
            index = period.index(base, row.value.time_bucket)
            if index is None:
                outcome.failed[key] = f"time bucket {row.value.time_bucket} is of no real day"
                continue
            values = row.value.to_row()
            why = not_finite(values)
            if why is not None:  # Elasticsearch would keep it as null, read back as 0
                outcome.failed[key] = why
                continue
            source = with_position({**values, APPLIED_ROUNDS: row.rounds}, row.position)
            action: dict[str, Any] = {"_index": index, "_id": doc_id(key), "_source": source}
            if row.stored is None:
                action["_op_type"] = "create"
            else:
                seq_no, term = typing.cast(tuple[int, int], row.stored.version)
                action.update(_op_type="index", if_seq_no=seq_no, if_primary_term=term)
            keys[action["_id"]] = key
            actions.append(action)
        for failure in self._client.bulk(actions, f"writing {len(actions)} rows of {base}"):
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
        where: Mapping[str, Equal] | None = None,
        limit: int = 10_000,
    ) -> list[M]:
        base = self._base(model, level)
        # Newest first. A query for more rows than one search answers reads a
        # bucket's rows by their names too (which make their keys): an order a
        # search can go on from where the last one stopped. Sorting by them
        # costs Elasticsearch, so a query that fits one search does not.
        names = [c.name for c in model.columns() if c.type is ColumnType.STRING] if limit > MAX_HITS else []
        search: dict[str, Any] = {
            "index": PERIODS[level].indices(base, first_bucket, last_bucket),
            "sort": [
                {"time_bucket": "desc"},
                *({name: {"order": "asc", "unmapped_type": "keyword"}} for name in names),
            ],
            "query": where_query(first_bucket, last_bucket, check_where(model, where)),
            **_SEARCH_PERIODS,
        }
        found: list[M] = []
        while len(found) < limit:
            size = min(limit - len(found), MAX_HITS)
            with translated_errors(f"searching {base}"):
                hits = self._es.search(size=size, **search)["hits"]["hits"]
            found += [model.from_row(h["_source"]) for h in hits]
            if len(hits) < size:
                break
            search["search_after"] = hits[-1]["sort"]
        return found

    def distinct(
        self, model: type[Metrics], level: Downsampling, first_bucket: int, columns: Sequence[str]
    ) -> set[tuple[str, ...]]:
        base = self._base(model, level)
        sources = [{c: {"terms": {"field": c}}} for c in check_columns(model, columns)]
        with translated_errors(f"refreshing {base}-*"):
            self._es.indices.refresh(index=f"{base}-*", **_SEARCH_PERIODS)  # rows written a moment ago count
        found: set[tuple[str, ...]] = set()
        after: dict[str, Any] | None = None
        while True:
            composite: dict[str, Any] = {"size": 10_000, "sources": sources}
            if after is not None:
                composite["after"] = after
            with translated_errors(f"listing the entities of {base}"):
                answer = self._es.search(
                    index=f"{base}-*",
                    size=0,
                    query={"range": {"time_bucket": {"gte": first_bucket}}},
                    aggs={"entities": {"composite": composite}},
                    **_SEARCH_PERIODS,
                )
            entities = answer.get("aggregations", {}).get("entities", {})
            found.update(tuple(b["key"][c] for c in columns) for b in entities.get("buckets", []))
            after = entities.get("after_key")
            if not entities.get("buckets") or after is None:
                return found

    def latest(self, model: type[M], level: Downsampling, first_bucket: int, by: str) -> list[M]:
        """A composite aggregation by ``by``, paged, each bucket's newest row its top hit."""
        base = self._base(model, level)
        (column,) = check_columns(model, [by])
        newest = {"top_hits": {"size": 1, "sort": [{"time_bucket": "desc"}]}}
        found: list[M] = []
        after: dict[str, Any] | None = None
        while True:
            composite: dict[str, Any] = {
                "size": LATEST_PAGE,
                "sources": [{column: {"terms": {"field": column}}}],
            }
            if after is not None:
                composite["after"] = after
            with translated_errors(f"reading the newest rows of {base} by {column}"):
                answer = self._es.search(
                    index=f"{base}-*",
                    size=0,
                    query={"range": {"time_bucket": {"gte": first_bucket}}},
                    aggs={"by": {"composite": composite, "aggs": {"newest": newest}}},
                    **_SEARCH_PERIODS,
                )
            entities = answer.get("aggregations", {}).get("by", {})
            for bucket in entities.get("buckets", []):
                found.extend(model.from_row(h["_source"]) for h in bucket["newest"]["hits"]["hits"])
            after = entities.get("after_key")
            if not entities.get("buckets") or after is None:
                return found

    def expire(self, model: type[Metrics], level: Downsampling, keep_from: datetime.date) -> int:
        """Drops the indices whose whole period lies before ``keep_from``; an
        index that also holds later days stays whole."""
        base = self._base(model, level)
        with translated_errors(f"listing {base}-*"):
            names = self._es.indices.get(index=f"{base}-*", allow_no_indices=True)
        old = PERIODS[level].before(names, keep_from)
        if not old:
            return 0
        with translated_errors(f"dropping {', '.join(old)}"):
            self._es.indices.refresh(index=",".join(old))  # so that the count is of every row
            rows = self._es.count(index=",".join(old))["count"]
            self._es.indices.delete(index=",".join(old))
        return int(rows)

    def close(self) -> None:
        self._client.close()
