"""Topics and consumer-group state in Elasticsearch.

A partition's bounds are a document of ``{prefix}_topic_partitions``, changed
only by versioned writes.

A topic's entries are the documents of its records and rows themselves
(``Topic.tables``): each carries its partition and offset
(``POSITION_FIELDS``), given by whichever node wrote it from ranges reserved
for the partition (``OffsetRanges``); that node moves the end (``advance``)
once they are readable. A row updated in place keeps only its current version,
so the version it overwrites is first copied into the topic's history
(``{prefix}_topic_{name}_versions-{day}``, ``keep``), readable before the
overwrite is. A read searches the history and the rows together.

Retention drops whole day indices: of the records, or of the history (rows
stay, below the start).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import elasticsearch

from skyoap.model.metrics import Downsampling, Metrics, day_of
from skyoap.model.records import RECORD_MODELS
from skyoap.model.topics import (
    FILTERED_COLUMNS,
    Bounds,
    Fetched,
    Position,
    Table,
    Topic,
    TopicRecord,
    Where,
)
from skyoap.storage.api import OffsetOutOfRange, StorageError, TopicRetention
from skyoap.storage.elasticsearch.client import (
    POSITION_FIELDS,
    ElasticsearchClient,
    Period,
    position_fields,
    raise_if_busy,
    translated_errors,
)
from skyoap.storage.elasticsearch.metrics import index_name

log = logging.getLogger(__name__)

_HISTORY_MAPPING = {
    "dynamic": "strict",
    "properties": {
        "key": {"type": "keyword"},
        "value": {"type": "object", "enabled": False},
        # The version's own columns that reads filter by (``Where``).
        "service": {"type": "keyword"},
        "endpoint": {"type": "keyword"},
        "time_bucket": {"type": "long"},
        **POSITION_FIELDS,
    },
}
_BOUNDS_MAPPING = {
    "dynamic": "strict",
    "properties": {
        "topic": {"type": "keyword"},
        "partition": {"type": "integer"},
        "start": {"type": "long"},
        "end": {"type": "long"},
    },
}
_STATE_MAPPING = {"dynamic": "strict", "properties": {"value": {"type": "object", "enabled": False}}}
BOUNDS = "topic_partitions"
STATE = "shared_state"
PARTITION, OFFSET, PUBLISHED = POSITION_FIELDS


def _history(topic: str) -> str:
    return f"topic_{topic}_versions"


@dataclass(frozen=True)
class _Layout:
    """Where a topic's entries are."""

    indices: str
    """The indices (and patterns of day indices) searched, comma separated."""
    days: str
    """The pattern of the day indices retention drops."""
    tables: dict[str, Table]
    """The table of each index of rows (of each time series of indices, by its base name)."""
    record_key: str | None = None
    """The key column of the records a topic of records holds."""

    @staticmethod
    def in_partition(partition: int, *more: dict[str, Any], **offsets: int) -> dict[str, Any]:
        """The query for a partition's entries with offsets in range (``gte=…, lt=…``)."""
        filters = [{"term": {PARTITION: partition}}, {"range": {OFFSET: offsets}}, *more]
        return {"bool": {"filter": filters}}

    @staticmethod
    def matching(where: Where | None) -> list[dict[str, Any]]:
        """The filters of the entries ``where`` selects."""
        if where is None:
            return []

        def within(low: int | None, high: int | None) -> dict[str, Any]:
            return {k: v for k, v in (("gte", low), ("lte", high)) if v is not None}

        filters: list[dict[str, Any]] = [{"terms": {c: list(values)}} for c, values in where.equal.items()]
        filters += [{"range": {c: within(*bounds)}} for c, bounds in where.between.items()]
        if where.published != (None, None):
            filters.append({"range": {PUBLISHED: within(*where.published)}})
        return filters

    def entry(self, topic: str, partition: int, hit: dict[str, Any]) -> TopicRecord:
        src = hit["_source"]
        offset, published = src.pop(OFFSET), src.pop(PUBLISHED)
        del src[PARTITION]
        if self.record_key is not None:
            key = src[self.record_key]
            return TopicRecord(topic, partition, offset, published, key, {"key": key, **src})
        index = hit["_index"]
        table = self.tables.get(index) or self.tables.get(index.rsplit("-", 1)[0])
        if table is None:  # a version kept in the history
            return TopicRecord(topic, partition, offset, published, src["key"], src["value"])
        item = table.model.from_row(src)
        return TopicRecord(topic, partition, offset, published, item.routing_key(), table.value(item))


_SEARCH_DAYS: dict[str, Any] = {"ignore_unavailable": True, "allow_no_indices": True}
"""Search options for patterns of day indices, which may match none."""


class ElasticsearchTopicDAO(TopicRetention):
    def __init__(self, client: ElasticsearchClient) -> None:
        self._client = client
        self._es = client.es
        self._layouts: dict[str, _Layout] = {}
        self._seen: dict[tuple[str, int], Bounds] = {}
        """The bounds each partition was last read with (ends only move up)."""

    def _layout(self, topic: str) -> _Layout:
        layout = self._layouts.get(topic)
        if layout is not None:
            return layout
        model = RECORD_MODELS.get(topic)
        if model is not None:
            days = f"{self._client.index(topic)}-*"
            layout = _Layout(days, days, {}, model.KEY)
        else:
            days = f"{self._client.index(_history(topic))}-*"
            tables = {
                self._client.index(
                    t.model.MODEL if t.level is None else index_name(cast(type[Metrics], t.model), t.level)
                ): t
                for t in Topic.named(topic).tables
            }
            searched = (name if t.level is None else f"{name}-*" for name, t in tables.items())
            layout = _Layout(",".join([days, *searched]), days, tables)
        self._layouts[topic] = layout
        return layout

    def install(self, topics: Mapping[str, int]) -> None:
        self._client.create_index(BOUNDS, _BOUNDS_MAPPING)
        for topic, partitions in topics.items():
            if topic not in RECORD_MODELS:
                self._client.put_template(_history(topic), _HISTORY_MAPPING)
            existing = {b.partition for b in self.bounds(topic)}
            # The last partition is created first: a topic whose install was
            # cut short is completed to the count it was first given.
            count = max(existing) + 1 if existing else partitions
            for p in sorted(set(range(count)) - existing, reverse=True):
                installed_before = contextlib.suppress(elasticsearch.ConflictError)
                with translated_errors(f"creating partition {topic}/{p}"), installed_before:
                    self._client.writes.create(
                        index=self._client.index(BOUNDS),
                        id=f"{topic}-{p}",
                        document={"topic": topic, "partition": p, "start": 0, "end": 0},
                        refresh=True,
                    )

    def _get_bounds(self, topic: str, partition: int) -> tuple[Bounds, tuple[int, int]]:
        with translated_errors(f"reading the bounds of {topic}/{partition}"):
            try:
                doc = self._es.get(index=self._client.index(BOUNDS), id=f"{topic}-{partition}")
            except elasticsearch.NotFoundError:
                raise StorageError(f"topic {topic} has no partition {partition}") from None
        src = doc["_source"]
        return Bounds(partition, src["start"], src["end"]), (doc["_seq_no"], doc["_primary_term"])

    def _set_bounds(self, topic: str, b: Bounds, version: tuple[int, int]) -> bool:
        with translated_errors(f"moving the bounds of {topic}/{b.partition}"):
            try:
                self._client.writes.index(
                    index=self._client.index(BOUNDS),
                    id=f"{topic}-{b.partition}",
                    document={"topic": topic, "partition": b.partition, "start": b.start, "end": b.end},
                    if_seq_no=version[0],
                    if_primary_term=version[1],
                )
            except elasticsearch.ConflictError:
                return False
        return True

    def _move_start(self, topic: str, partition: int, start: int) -> int:
        while True:  # whoever else moves the bounds meanwhile
            b, version = self._get_bounds(topic, partition)
            moved = Bounds(partition, max(b.start, min(start, b.end)), b.end)
            if moved == b or self._set_bounds(topic, moved, version):
                return moved.start

    def keep(self, topic: str, versions: Sequence[TopicRecord]) -> None:
        if topic in RECORD_MODELS:
            raise StorageError(f"the {topic} topic is its records: they are never overwritten")
        if not versions:
            return
        history = self._client.index(_history(topic))
        actions = (
            {
                "_op_type": "index",
                "_index": f"{history}-{Downsampling.DAY.bucket_of(v.timestamp_ms)}",
                "_id": f"{v.partition}-{v.offset}",
                "_source": {
                    "key": v.key,
                    "value": v.value,
                    **{c: v.value[c] for c in FILTERED_COLUMNS if c in v.value},
                    **position_fields(_position(v)),
                },
            }
            for v in versions
        )
        what = f"keeping {len(versions)} versions of {topic} rows"
        failures = self._client.bulk(actions, what)
        raise_if_busy(failures, what)
        if failures:
            raise StorageError(f"{what}: {len(failures)} refused, the first: {failures[0].get('error')}")
        self._refresh(self._layout(topic).days)

    def advance(self, topic: str, ends: Mapping[int, int]) -> None:
        """One read of the partitions' bounds and one bulk of versioned
        writes; a partition someone else moved meanwhile is tried again."""
        index = self._client.index(BOUNDS)
        left = dict(ends)
        while left:
            with translated_errors(f"reading the bounds of {topic}"):
                docs = self._es.mget(index=index, ids=[f"{topic}-{p}" for p in left])["docs"]
            actions = []
            for partition, doc in zip(left, docs, strict=True):
                if not doc.get("found"):
                    raise StorageError(f"topic {topic} has no partition {partition}")
                src = doc["_source"]
                if left[partition] > src["end"]:
                    actions.append(
                        {
                            "_op_type": "index",
                            "_index": index,
                            "_id": doc["_id"],
                            "_source": {**src, "end": left[partition]},
                            "if_seq_no": doc["_seq_no"],
                            "if_primary_term": doc["_primary_term"],
                        }
                    )
            what = f"moving the ends of {topic}"
            failures = self._client.bulk(actions, what)
            raise_if_busy(failures, what)
            if any(f.get("status") != 409 for f in failures):
                raise StorageError(f"{what}: {failures[0].get('error')}")
            moved_meanwhile = {f["_id"] for f in failures}
            left = {p: e for p, e in left.items() if f"{topic}-{p}" in moved_meanwhile}

    def make_readable(self, topic: str) -> None:
        self._refresh(self._layout(topic).indices)

    def _refresh(self, index: str) -> None:
        with translated_errors(f"refreshing {index}"):
            self._es.indices.refresh(index=index, **_SEARCH_DAYS)

    def next_offset(self, topic: str, partition: int) -> int:
        b, _ = self._get_bounds(topic, partition)
        with translated_errors(f"finding the highest offset of {topic}/{partition}"):
            answer = self._es.search(
                index=self._layout(topic).indices,
                query={"term": {PARTITION: partition}},
                size=0,
                aggs={"top": {"max": {"field": OFFSET}}},
                **_SEARCH_DAYS,
            )
        found = answer.get("aggregations", {}).get("top", {}).get("value")  # none: no index yet
        return max(b.end, 0 if found is None else int(found) + 1)

    def bounds(self, topic: str) -> list[Bounds]:
        """The partitions are found by search (they were created refreshed); their
        bounds are read by id, which sees every move without a refresh."""
        index = self._client.index(BOUNDS)
        with translated_errors(f"reading the partitions of {topic}"):
            try:
                hits = self._es.search(
                    index=index, query={"term": {"topic": topic}}, source=False, size=10_000
                )["hits"]["hits"]
                if not hits:
                    return []
                docs = self._es.mget(index=index, ids=[h["_id"] for h in hits])["docs"]
            except elasticsearch.NotFoundError:
                return []
        found = (d["_source"] for d in docs if d.get("found"))
        return sorted(
            (Bounds(d["partition"], d["start"], d["end"]) for d in found), key=lambda b: b.partition
        )

    def _bounds_for(self, topic: str, partition: int, offset: int, limit: int) -> Bounds:
        """The partition's bounds, asked for again unless a read of ``limit``
        offsets from ``offset`` stays below the end last seen: a reader
        catching up makes one request per read, and what reaches the end
        sees where it is now."""
        b = self._seen.get((topic, partition))
        if b is None or not b.start <= offset or offset + limit > b.end:
            b = self._fresh_bounds(topic, partition)
        return b

    def _fresh_bounds(self, topic: str, partition: int) -> Bounds:
        b, _ = self._get_bounds(topic, partition)
        self._seen[(topic, partition)] = b
        return b

    def read(
        self, topic: str, partition: int, offset: int, limit: int, where: Where | None = None
    ) -> Fetched:
        b = self._bounds_for(topic, partition, offset, limit)
        if not b.start <= offset <= b.end:
            raise OffsetOutOfRange(topic, partition, offset, b.start, b.end)
        if offset == b.end:
            return Fetched([], offset)
        layout = self._layout(topic)
        size = min(limit, 10_000)
        with translated_errors(f"reading {topic}/{partition} from {offset}"):
            hits = self._es.search(
                index=layout.indices,
                query=layout.in_partition(partition, *layout.matching(where), gte=offset, lt=b.end),
                sort=[{OFFSET: "asc"}],
                size=size,
                **_SEARCH_DAYS,
            )["hits"]["hits"]
        records: list[TopicRecord] = []
        for h in hits:
            r = layout.entry(topic, partition, h)
            if not records or records[-1].offset != r.offset:  # a version both kept and still the row's
                records.append(r)
        if not records or records[0].offset != offset:  # a gap, or retention ran since the bounds were read
            now = self._fresh_bounds(topic, partition)
            if offset < now.start:
                raise OffsetOutOfRange(topic, partition, offset, now.start, now.end)
        return Fetched(records, records[-1].offset + 1 if len(hits) == size else b.end)

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        b, _ = self._get_bounds(topic, partition)
        return self._first_since(topic, b, timestamp_ms)

    def _first_since(self, topic: str, b: Bounds, timestamp_ms: int) -> int | None:
        layout = self._layout(topic)
        with translated_errors(f"finding the records of {topic}/{b.partition} from {timestamp_ms}"):
            hits = self._es.search(
                index=layout.indices,
                query=layout.in_partition(
                    b.partition, {"range": {PUBLISHED: {"gte": timestamp_ms}}}, gte=b.start, lt=b.end
                ),
                sort=[{OFFSET: "asc"}],
                source=False,
                docvalue_fields=[{"field": OFFSET}],
                size=1,
                **_SEARCH_DAYS,
            )["hits"]["hits"]
        return int(hits[0]["fields"][OFFSET][0]) if hits else None

    def _per_partition(self, index: str, agg: dict[str, Any]) -> dict[int, dict[str, Any]]:
        """``agg`` over each partition's records in ``index``, by partition."""
        with translated_errors(f"summing up {index} by partition"):
            answer = self._es.search(
                index=index,
                size=0,
                aggs={"p": {"terms": {"field": PARTITION, "size": 10_000}, "aggs": agg}},
                **_SEARCH_DAYS,
            )
        buckets = answer.get("aggregations", {}).get("p", {}).get("buckets", [])
        return {int(b["key"]): b for b in buckets}

    def _old_days(self, pattern: str, cutoff_ms: int) -> tuple[list[str], list[str]]:
        """The day indices of ``pattern`` before ``cutoff_ms``'s day, and the others."""
        with translated_errors(f"listing {pattern}"):
            names = sorted(self._es.indices.get(index=pattern, allow_no_indices=True))
        cutoff = day_of(Downsampling.DAY.bucket_of(cutoff_ms))
        old = Period.DAY.before(names, cutoff) if cutoff is not None else []
        return old, [n for n in names if n not in old]

    def _drop_history(self, topic: str, cutoff_ms: int) -> None:
        old, _ = self._old_days(self._layout(topic).days, cutoff_ms)
        if old:
            with translated_errors(f"dropping {', '.join(old)}"):
                self._es.indices.delete(index=",".join(old))

    def _drop_days(self, topic: str, cutoff_ms: int) -> dict[int, int]:
        old, kept = self._old_days(self._layout(topic).days, cutoff_ms)
        if not old:
            return {}
        lowest = self._per_partition(",".join(kept), {"low": {"min": {"field": OFFSET}}}) if kept else {}
        removed = {p: b["doc_count"] for p, b in self._per_partition(",".join(old), {}).items()}
        for b in self.bounds(topic):
            low = lowest.get(b.partition)
            self._move_start(topic, b.partition, b.end if low is None else int(low["low"]["value"]))
        with translated_errors(f"dropping {', '.join(old)}"):
            self._es.indices.delete(index=",".join(old))
        return removed

    def close(self) -> None:
        self._client.close()


def _position(v: TopicRecord) -> Position:
    return Position(v.partition, v.offset, v.timestamp_ms)


class ElasticsearchStateStore:
    def __init__(self, client: ElasticsearchClient) -> None:
        self._client = client
        self._es = client.es
        self._installed = False

    def _index(self) -> str:
        """The index, created on the first write (reads of a missing one find nothing)."""
        if not self._installed:
            self._client.create_index(STATE, _STATE_MAPPING)
            self._installed = True
        return self._client.index(STATE)

    def load(self, name: str) -> tuple[dict[str, Any] | None, object]:
        with translated_errors(f"reading the shared state {name}"):
            try:
                doc = self._es.get(index=self._client.index(STATE), id=name)
            except elasticsearch.NotFoundError:
                return None, None
        return doc["_source"]["value"], (doc["_seq_no"], doc["_primary_term"])

    def swap(self, name: str, version: object, value: dict[str, Any]) -> bool:
        with translated_errors(f"writing the shared state {name}"):
            try:
                if version is None:
                    self._client.writes.create(index=self._index(), id=name, document={"value": value})
                else:
                    seq_no, term = cast(tuple[int, int], version)
                    self._client.writes.index(
                        index=self._client.index(STATE),
                        id=name,
                        document={"value": value},
                        if_seq_no=seq_no,
                        if_primary_term=term,
                    )
            except elasticsearch.ConflictError:
                return False
        return True

    def names(self) -> list[str]:
        index = self._client.index(STATE)
        with translated_errors("listing the shared state"):
            try:
                self._es.indices.refresh(index=index)
                hits = self._es.search(index=index, source=False, size=10_000)["hits"]["hits"]
            except elasticsearch.NotFoundError:
                return []
        return sorted(h["_id"] for h in hits)

    def close(self) -> None:
        self._client.close()
