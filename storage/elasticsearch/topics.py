"""Topics and consumer-group state in Elasticsearch.

A partition's bounds are a document of ``{prefix}_topic_partitions``, changed
only by versioned writes.

The topics of records are the records' own day indices (``{prefix}_segment-*``):
each document carries its partition and offset (``storage/elasticsearch/records.py``),
written by whichever node stored it at offsets reserved from the partition's
ranges (``OffsetRanges``); the node's committer moves the end (``advance``)
once they are readable. Retention drops whole day indices.

Any other topic is one index (``{prefix}_topic_{name}``) of entries appended
after their rows were stored; an entry is the document ``{partition}-{offset}``,
created with ``op_type=create`` so that no offset is ever written twice.

Appends to one partition take the partition's global lock (Redis), write the
records above the end, refresh the index and only then move the end: readers,
who never read at or above the end, see every record below it. A writer that
died or stalled holding the lock may have left records above the end; the
next writer finds them by the conflict of its own write, keeps the ones
contiguous with the end (they are durable) and deletes the rest (never
visible), then writes again.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import elasticsearch

from model.metrics import Downsampling
from model.records import RECORD_MODELS
from model.topics import Bounds, Entry, Fetched, Retention, TopicRecord
from storage.api import OffsetOutOfRange, SequenceAllocator, StorageError, StorageUnavailable
from storage.elasticsearch.client import BUSY_STATUSES, ElasticsearchClient, translated_errors
from storage.elasticsearch.records import POSITION_FIELDS

log = logging.getLogger(__name__)

_RECORD_MAPPING = {
    "dynamic": "strict",
    "properties": {
        "partition": {"type": "integer"},
        "offset": {"type": "long"},
        "timestamp_ms": {"type": "long"},
        "key": {"type": "keyword"},
        "value": {"type": "object", "enabled": False},
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
_APPEND_ATTEMPTS = 5


def _records(topic: str) -> str:
    return f"topic_{topic}"


@dataclass(frozen=True)
class _Layout:
    """Where a topic's entries are and what their fields are called."""

    index: str
    """The index, or the pattern of day indices, the entries are in."""
    partition: str = "partition"
    offset: str = "offset"
    time: str = "timestamp_ms"
    record_key: str | None = None
    """The key column of the records a topic of records holds."""

    def in_partition(self, partition: int, *more: dict[str, Any], **offsets: int) -> dict[str, Any]:
        """The query for a partition's entries with offsets in range (``gte=…, lt=…``)."""
        filters = [{"term": {self.partition: partition}}, {"range": {self.offset: offsets}}, *more]
        return {"bool": {"filter": filters}}

    def entry(self, topic: str, partition: int, src: dict[str, Any]) -> TopicRecord:
        if self.record_key is None:
            return TopicRecord(topic, partition, src["offset"], src["timestamp_ms"], src["key"], src["value"])
        offset, published = src.pop(self.offset), src.pop(self.time)
        del src[self.partition]
        key = src[self.record_key]
        return TopicRecord(topic, partition, offset, published, key, {"key": key, **src})


_SEARCH_DAYS: dict[str, Any] = {"ignore_unavailable": True, "allow_no_indices": True}
"""Search options for a pattern of day indices, which may match none."""


class ElasticsearchTopicDAO:
    def __init__(self, client: ElasticsearchClient, locks: SequenceAllocator | None = None) -> None:
        """``locks`` serialise appends; a DAO without them (a consumer's) only reads."""
        self._client = client
        self._es = client.es
        self._locks = locks

    def _layout(self, topic: str) -> _Layout:
        model = RECORD_MODELS.get(topic)
        if model is None:
            return _Layout(self._client.index(_records(topic)))
        partition, offset, time = POSITION_FIELDS
        return _Layout(f"{self._client.index(topic)}-*", partition, offset, time, model.KEY)

    def install(self, topics: Mapping[str, int]) -> None:
        self._client.create_index(BOUNDS, _BOUNDS_MAPPING)
        for topic, partitions in topics.items():
            if topic not in RECORD_MODELS:
                self._client.create_index(_records(topic), _RECORD_MAPPING)
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

    def _move_bounds(self, topic: str, partition: int, start: int = 0, end: int = 0) -> Bounds:
        """Moves the partition's start and end up to ``start`` and ``end``
        (never down), whoever else moves them meanwhile. The start stops at
        the end: only ``end`` says which records are readable."""
        while True:
            b, version = self._get_bounds(topic, partition)
            new_end = max(b.end, end)
            moved = Bounds(partition, max(b.start, min(start, new_end)), new_end)
            if moved == b or self._set_bounds(topic, moved, version):
                return moved

    def append(self, topic: str, partition: int, entries: Sequence[Entry]) -> Bounds:
        if self._locks is None:
            raise StorageError("this stream storage only reads: it was opened without the global lock")
        if topic in RECORD_MODELS:
            raise StorageError(f"the {topic} topic is its records: storing one publishes it")
        with self._locks.lock(f"topic:{topic}:{partition}"):
            busy: list[dict[str, Any]] = []
            for _ in range(_APPEND_ATTEMPTS):
                b, version = self._get_bounds(topic, partition)
                failures = self._client.bulk(
                    (
                        {
                            "_op_type": "create",
                            "_index": self._client.index(_records(topic)),
                            "_id": f"{partition}-{b.end + i}",
                            "_source": {
                                "partition": partition,
                                "offset": b.end + i,
                                "timestamp_ms": e.timestamp_ms,
                                "key": e.key,
                                "value": e.value,
                            },
                        }
                        for i, e in enumerate(entries)
                    ),
                    f"appending {len(entries)} records to {topic}/{partition}",
                )
                self._client.refresh(_records(topic))
                busy = failures
                if failures:
                    log.warning(
                        "%d of %d records not appended to %s/%d (%s); repairing the partition and writing "
                        "again", len(failures), len(entries), topic, partition, failures[0].get("error"),
                    )  # fmt: skip
                    self._repair(topic, partition)
                    continue
                moved = Bounds(partition, b.start, b.end + len(entries))
                if self._set_bounds(topic, moved, version):
                    return moved
                self._repair(topic, partition)  # a stale writer moved them: look again
        error = StorageUnavailable if any(f.get("status") in BUSY_STATUSES for f in busy) else StorageError
        raise error(f"could not append to {topic}/{partition} in {_APPEND_ATTEMPTS} attempts")

    def _repair(self, topic: str, partition: int) -> None:
        """Moves the end over the records contiguous with it and deletes the
        ones past the first gap, which no reader has seen."""
        b, version = self._get_bounds(topic, partition)
        layout = self._layout(topic)
        end = b.end
        with translated_errors(f"repairing {topic}/{b.partition}"):
            hits = self._es.search(
                index=layout.index,
                query=layout.in_partition(b.partition, gte=end),
                sort=[{"offset": "asc"}],
                source=False,
                docvalue_fields=[{"field": "offset"}],
                size=10_000,
            )["hits"]["hits"]
            offsets = [h["fields"]["offset"][0] for h in hits]
            for o in offsets:
                if o != end:
                    break
                end += 1
            stray = [o for o in offsets if o >= end]
        if stray:
            self._delete(topic, b.partition, stray)
        if end == b.end and not stray:
            return
        if end != b.end:
            self._set_bounds(topic, Bounds(b.partition, b.start, end), version)
        log.warning(
            "%s/%d repaired: the end moved from %d to %d over records a writer left; %d stray ones deleted",
            topic, b.partition, b.end, end, len(stray),
        )  # fmt: skip

    def _delete(self, topic: str, partition: int, offsets: Iterable[int]) -> None:
        """Deletes records by id (this Elasticsearch may lack delete-by-query)."""
        actions = (
            {"_op_type": "delete", "_index": self._client.index(_records(topic)), "_id": f"{partition}-{o}"}
            for o in offsets
        )
        failures = self._client.bulk(actions, f"removing records of {topic}/{partition}")
        failed = [f for f in failures if f.get("status") != 404]  # 404: gone already
        if failed:
            raise StorageError(f"{len(failed)} records of {topic}/{partition} not removed: {failed[0]}")

    def advance(self, topic: str, partition: int, end: int) -> None:
        self._move_bounds(topic, partition, end=end)

    def make_readable(self, topic: str) -> None:
        index = self._layout(topic).index
        with translated_errors(f"refreshing {index}"):
            self._es.indices.refresh(index=index, **_SEARCH_DAYS)

    def next_offset(self, topic: str, partition: int) -> int:
        b, _ = self._get_bounds(topic, partition)
        layout = self._layout(topic)
        with translated_errors(f"finding the highest offset of {topic}/{partition}"):
            answer = self._es.search(
                index=layout.index,
                query={"term": {layout.partition: partition}},
                size=0,
                aggs={"top": {"max": {"field": layout.offset}}},
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

    def read(self, topic: str, partition: int, offset: int, limit: int) -> Fetched:
        b, _ = self._get_bounds(topic, partition)
        if not b.start <= offset <= b.end:
            raise OffsetOutOfRange(topic, partition, offset, b.start, b.end)
        if offset == b.end:
            return Fetched([], offset)
        layout = self._layout(topic)
        size = min(limit, 10_000)
        with translated_errors(f"reading {topic}/{partition} from {offset}"):
            hits = self._es.search(
                index=layout.index,
                query=layout.in_partition(partition, gte=offset, lt=b.end),
                sort=[{layout.offset: "asc"}],
                size=size,
                **_SEARCH_DAYS,
            )["hits"]["hits"]
        records = [layout.entry(topic, partition, h["_source"]) for h in hits]
        if not records or records[0].offset != offset:  # a gap, or retention ran between the two reads
            now, _ = self._get_bounds(topic, partition)
            if offset < now.start:
                raise OffsetOutOfRange(topic, partition, offset, now.start, now.end)
        return Fetched(records, records[-1].offset + 1 if len(records) == size else b.end)

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        b, _ = self._get_bounds(topic, partition)
        layout = self._layout(topic)
        with translated_errors(f"finding the records of {topic}/{partition} from {timestamp_ms}"):
            hits = self._es.search(
                index=layout.index,
                query=layout.in_partition(
                    partition, {"range": {layout.time: {"gte": timestamp_ms}}}, gte=b.start, lt=b.end
                ),
                sort=[{layout.offset: "asc"}],
                source=False,
                docvalue_fields=[{"field": layout.offset}],
                size=1,
                **_SEARCH_DAYS,
            )["hits"]["hits"]
        return int(hits[0]["fields"][layout.offset][0]) if hits else None

    def trim(self, topic: str, retention: Retention, now_ms: int) -> dict[int, int]:
        if self._locks is None:
            raise StorageError("this stream storage only reads: it was opened without the global lock")
        if topic in RECORD_MODELS:
            return self._drop_days(topic, now_ms - int(retention.max_age_s * 1000))
        removed = {}
        cutoff_ms = now_ms - int(retention.max_age_s * 1000)
        for seen in self.bounds(topic):
            with self._locks.lock(f"topic:{topic}:{seen.partition}"):
                b, version = self._get_bounds(topic, seen.partition)
                with translated_errors(f"finding the young records of {topic}/{b.partition}"):
                    hits = self._es.search(
                        index=self._client.index(_records(topic)),
                        query=self._layout(topic).in_partition(
                            b.partition,
                            {"range": {"timestamp_ms": {"gte": cutoff_ms}}},
                            gte=b.start,
                            lt=b.end,
                        ),
                        sort=[{"offset": "asc"}],
                        source=False,
                        docvalue_fields=[{"field": "offset"}],
                        size=1,
                    )["hits"]["hits"]
                young = hits[0]["fields"]["offset"][0] if hits else b.end
                start = max(b.start, b.end - retention.max_records, young)
                if start == b.start:
                    continue
                # The start moves first: a reader then finds the records gone
                # only below a start that says so.
                if not self._set_bounds(topic, Bounds(b.partition, start, b.end), version):
                    continue  # changed meanwhile; the next round trims it
                self._delete(topic, b.partition, range(b.start, start))
                removed[b.partition] = start - b.start
        return removed

    def _per_partition(self, topic: str, index: str, agg: dict[str, Any]) -> dict[int, dict[str, Any]]:
        """``agg`` over each partition's records in ``index``, by partition."""
        layout = self._layout(topic)
        with translated_errors(f"summing up {index} by partition"):
            answer = self._es.search(
                index=index,
                size=0,
                aggs={"p": {"terms": {"field": layout.partition, "size": 10_000}, "aggs": agg}},
                **_SEARCH_DAYS,
            )
        buckets = answer.get("aggregations", {}).get("p", {}).get("buckets", [])
        return {int(b["key"]): b for b in buckets}

    def _drop_days(self, topic: str, cutoff_ms: int) -> dict[int, int]:
        """Drops the day indices of records older than ``cutoff_ms``'s day.
        Each partition's start moves first, to the lowest offset left (never
        past its end)."""
        cutoff = Downsampling.DAY.bucket_of(cutoff_ms)
        layout = self._layout(topic)
        with translated_errors(f"listing {layout.index}"):
            names = sorted(self._es.indices.get(index=layout.index, allow_no_indices=True))
        old = [n for n in names if n.rsplit("-", 1)[-1].isdigit() and int(n.rsplit("-", 1)[-1]) < cutoff]
        if not old:
            return {}
        kept = ",".join(n for n in names if n not in old)
        low_agg = {"low": {"min": {"field": layout.offset}}}
        lowest = self._per_partition(topic, kept, low_agg) if kept else {}
        removed = {p: b["doc_count"] for p, b in self._per_partition(topic, ",".join(old), {}).items()}
        for b in self.bounds(topic):
            low = lowest.get(b.partition)
            self._move_bounds(topic, b.partition, start=b.end if low is None else int(low["low"]["value"]))
        with translated_errors(f"dropping {', '.join(old)}"):
            self._es.indices.delete(index=",".join(old))
        return removed

    def close(self) -> None:
        self._client.close()


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
