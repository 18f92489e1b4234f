"""The ``skyoap`` Spark data source (Python Data Source API, pyspark 4.2+).

Batch reads of a topic, or of a stored table (inventory, metrics, records)::

    spark.read.format("skyoap").option("topic", "segment").load()
    spark.read.format("skyoap").option("table", "endpoint_metrics").option("level", "minute")
        .option("minutes", 60).load()

A topic reads as Kafka's source reads one (``topic``, ``partition``,
``offset``, ``timestamp``, ``key``, ``value``), with a typed column for each
field of its records or rows (``analytics/entries.py``), in Arrow batches.

With ``pushFilters`` set to true, filters on ``service``, ``endpoint``,
``time_bucket``, ``timestamp`` and ``partition`` (equality, ``IN`` and
ranges) are run by the storage, so a read of one service fetches only that
service's entries. This needs ``spark.sql.python.filterPushdown.enabled``
(``analytics.spark.session`` sets it). It is an option because pyspark 4.3
keeps a DataFrame's last pushed filters for its later scans that push none:
``df.where("service = 'a'").count()`` then ``df.count()`` counts service
``a`` only. Load such a DataFrame for each query.

Where to read, with the Kafka source's options:

- ``startingOffsets``: ``earliest`` (batch default), ``latest`` (stream
  default) or JSON, ``{"segment": {"0": 5, "1": -2}}`` (-2: earliest,
  -1: latest; ``{"0": 5}`` also works); ``endingOffsets`` (batch):
  ``latest`` or JSON;
- ``startingTimestamp`` / ``endingTimestamp`` (batch), in ms since the epoch:
  from (up to) the first entry published at or after it, in every partition;
  a partition with nothing that recent starts (ends) at its end. It takes
  precedence over the offsets;
- ``minPartitions``: split the partitions' offsets into at least that many
  Spark partitions;
- ``failOnDataLoss`` (default true): fail when retention removed offsets the
  read still had to read; false skips them.

A table read names a time window (``minutes`` back from now, or ``start_ms``
and ``end_ms``) and reads only that window's buckets, one Spark partition per
hour (per day for hour and day rows).

Streaming reads of a topic: each topic partition's offset is part of Spark's
offset, so a query restarted from its checkpoint resumes exactly where its
last batch ended::

    spark.readStream.format("skyoap").option("topic", "metrics")
        .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 10000).load()

(``maxRecordsPerTrigger`` is the same limit.) ``group`` reports each
finished batch as that consumer group's committed offsets, so ``skyoap
consumer`` shows the query's lag (the checkpoint stays the truth).

Storage options are the node's: ``storage``, ``embedded_path``, ``es_hosts``,
``es_index_prefix``.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from skyoap.analytics.entries import TopicEntries, table_schema
from skyoap.model.inventory import INVENTORY_TYPES
from skyoap.model.metrics import METRICS_TYPES, Downsampling
from skyoap.model.records import RECORD_TYPES
from skyoap.model.stream import StreamData
from skyoap.model.topics import FILTERED_COLUMNS, Bounds, Topic, Where
from skyoap.runtime import clock
from skyoap.runtime.batching import BatchPolicy
from skyoap.storage.api import OffsetOutOfRange
from skyoap.storage.config import StorageConfig, StorageKind

if TYPE_CHECKING:
    from skyoap.storage.select import OpenStorage

TABLES: dict[str, type[StreamData]] = {m.MODEL: m for m in (*INVENTORY_TYPES, *METRICS_TYPES, *RECORD_TYPES)}
READ = BatchPolicy(max_items=1000)
"""Records one read of a topic partition takes."""
SLICE_LIMIT = 10_000
"""Most rows one time slice of a table read may hold."""
EARLIEST, LATEST = -2, -1
"""Kafka's offsets meaning a partition's start and its end."""


def config_of(options: Mapping[str, str]) -> StorageConfig:
    """The storage a read names (option keys arrive lower-cased)."""
    defaults = StorageConfig()
    return StorageConfig(
        kind=StorageKind(options.get("storage", defaults.kind.value)),
        embedded_path=options.get("embedded_path", defaults.embedded_path),
        es_hosts=options.get("es_hosts", defaults.es_hosts),
        es_index_prefix=options.get("es_index_prefix", defaults.es_index_prefix),
    )


def options_of(config: StorageConfig) -> dict[str, str]:
    """The read options naming ``config``'s storage (the inverse of ``config_of``)."""
    return {
        "storage": config.kind.value,
        "embedded_path": config.embedded_path,
        "es_hosts": config.es_hosts,
        "es_index_prefix": config.es_index_prefix,
    }


def _batches(
    options: Mapping[str, str], entries: TopicEntries, span: InputPartition, where: Where | None = None
) -> Iterator[pa.RecordBatch]:
    """The entries ``start <= offset < end`` of one partition that match ``where``."""
    from skyoap.storage.select import topics_of

    if span.value is None:  # Spark's one partition of a read that has none
        return
    topic, (partition, start, end) = entries.topic.value, span.value
    skip_lost = options.get("failondataloss", "true").lower() == "false"
    with topics_of(config_of(options)) as (topics, _):
        offset = start
        while offset < end:
            try:
                fetched = topics.read(topic, partition, offset, min(READ.max_items, end - offset), where)
            except OffsetOutOfRange as e:
                if not skip_lost or e.offset > e.end:
                    raise RuntimeError(f"{e}; set failOnDataLoss=false to skip what retention removed") from e
                offset = e.start
                continue
            records = [r for r in fetched.records if r.offset < end]
            if records:
                yield entries.batch(records)
            if fetched.next_offset <= offset:
                return
            offset = fetched.next_offset


def _spans(ranges: Mapping[int, tuple[int, int]], min_partitions: int) -> list[InputPartition]:
    """Spark partitions reading ``ranges`` (partition → offsets ``start <= o < end``):
    one per partition, split evenly until there are ``min_partitions``."""
    ranges = {p: r for p, r in sorted(ranges.items()) if r[1] > r[0]}
    total = sum(e - s for s, e in ranges.values())
    spans = []
    for p, (s, e) in ranges.items():
        pieces = max(1, math.ceil((e - s) * min_partitions / total)) if min_partitions > len(ranges) else 1
        step = math.ceil((e - s) / pieces)
        spans += [InputPartition((p, at, min(at + step, e))) for at in range(s, e, step)]
    return spans


class SkyoapDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "skyoap"

    def _topic(self) -> Topic:
        name = self.options.get("topic") or self.options.get("path")
        if not name:
            raise ValueError("name a topic (option topic) or a table (option table) to read")
        return Topic.named(name)

    def schema(self) -> StructType:
        table = self.options.get("table")
        if table is None:
            return TopicEntries(self._topic()).schema
        return table_schema(_model(table))

    def reader(self, schema: StructType) -> DataSourceReader:
        if "table" in self.options:
            return TableReader(self.options)
        if self.options.get("pushfilters", "false").lower() == "true":
            return FilteringTopicReader(self.options, self._topic())
        return TopicReader(self.options, self._topic())

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        if "table" in self.options:
            raise ValueError("tables are read in batch; stream a topic instead (option topic)")
        return TopicStreamReader(self.options, self._topic())


def _model(table: str) -> type[StreamData]:
    if table not in TABLES:
        raise ValueError(f"there is no table {table!r}; the tables are {', '.join(sorted(TABLES))}")
    return TABLES[table]


def _bounds(options: Mapping[str, str], topic: Topic) -> dict[int, Bounds]:
    from skyoap.storage.select import topics_of

    with topics_of(config_of(options)) as (topics, _):
        bounds = {b.partition: b for b in topics.bounds(topic.value)}
    if not bounds:
        raise ValueError(f"topic {topic.value} has no partitions yet: no node has installed it")
    return bounds


def _offsets(option: str, spec: str, topic: Topic, bounds: Mapping[int, Bounds]) -> dict[int, int]:
    """Where ``startingOffsets`` or ``endingOffsets`` (``option``) puts each
    partition: ``earliest``, ``latest``, or JSON in Kafka's form
    (``{"<topic>": {"0": 5}}``, -2 earliest, -1 latest) or ours (``{"0": 5}``);
    a partition the JSON does not name starts at its start, ends at its end."""
    if spec in ("earliest", "latest"):
        return {p: b.start if spec == "earliest" else b.end for p, b in bounds.items()}
    try:
        given = json.loads(spec)
        if topic.value in given:
            given = given[topic.value]
        given = {int(p): int(o) for p, o in given.items()}
    except (ValueError, AttributeError, TypeError) as e:
        example = f'{{"{topic.value}": {{"0": 5, "1": -2}}}}'
        raise ValueError(f"{option} must be earliest, latest or JSON like {example}, not {spec!r}") from e
    unknown = sorted(set(given) - set(bounds))
    if unknown:
        raise ValueError(f"topic {topic.value} has no partition {unknown[0]} ({option})")
    default = LATEST if option == "endingOffsets" else EARLIEST
    at = {p: given.get(p, default) for p in bounds}
    return {
        p: bounds[p].start if o == EARLIEST else bounds[p].end if o == LATEST else o for p, o in at.items()
    }


def _by_time(
    options: Mapping[str, str], topic: Topic, bounds: Mapping[int, Bounds], ms: str
) -> dict[int, int]:
    """Each partition's first offset published at or after ``ms``; its end when none is."""
    from skyoap.storage.select import topics_of

    try:
        timestamp_ms = int(ms)
    except ValueError:
        raise ValueError(f"a timestamp option is in ms since the epoch, not {ms!r}") from None
    with topics_of(config_of(options)) as (topics, _):
        found = {p: topics.offset_for_time(topic.value, p, timestamp_ms) for p in bounds}
    return {p: b.end if (at := found[p]) is None else at for p, b in bounds.items()}


def _position(
    options: Mapping[str, str], topic: Topic, bounds: Mapping[int, Bounds], which: str, default: str
) -> dict[int, int]:
    """Where a read starts (``which`` = starting) or ends (ending), by timestamp or by offsets."""
    ms = options.get(f"{which}timestamp")
    if ms is not None:
        return _by_time(options, topic, bounds, ms)
    return _offsets(f"{which}Offsets", options.get(f"{which}offsets", default), topic, bounds)


@dataclass
class Pushed:
    """The filters of a topic read that its storage runs (``Where``) or that
    pick its partitions."""

    equal: dict[str, frozenset[Any]] = field(default_factory=dict)
    between: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)

    def where(self) -> Where | None:
        columns = set(FILTERED_COLUMNS)
        equal = {c: v for c, v in self.equal.items() if c in columns}
        between = {c: v for c, v in self.between.items() if c in columns}
        published = self.between.get("timestamp", (None, None))
        if not equal and not between and published == (None, None):
            return None
        return Where(equal, between, published)

    def partitions(self, bounds: Mapping[int, Bounds]) -> dict[int, Bounds]:
        low, high = self.between.get("partition", (None, None))
        wanted = self.equal.get("partition")
        return {
            p: b
            for p, b in bounds.items()
            if (wanted is None or p in wanted) and (low is None or p >= low) and (high is None or p <= high)
        }

    def take(self, f: Filter, columns: set[str]) -> bool:
        """Records ``f`` if it is one the read runs; False if Spark must."""
        path: tuple[str, ...] = getattr(f, "attribute", ())
        column = path[0] if len(path) == 1 else None
        if column not in columns or getattr(f, "value", None) is None:
            return False
        if isinstance(f, In) and column != "timestamp":
            self._equal(column, frozenset(f.value))
            return True
        if not isinstance(f, (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)):
            return False
        if column != "timestamp" and isinstance(f, EqualTo):
            self._equal(column, frozenset([f.value]))
            return True
        low, high = _range(f, column == "timestamp")
        was_low, was_high = self.between.get(column, (None, None))
        self.between[column] = (
            low if was_low is None else was_low if low is None else max(low, was_low),
            high if was_high is None else was_high if high is None else min(high, was_high),
        )
        return True

    def _equal(self, column: str, values: frozenset[Any]) -> None:
        self.equal[column] = self.equal[column] & values if column in self.equal else values


def _range(f: Filter, timestamp: bool) -> tuple[int | None, int | None]:
    """The inclusive bounds of a comparison with an integer, or with a
    timestamp as whole milliseconds (entries are published to the ms)."""
    value: Any = f.value  # type: ignore[attr-defined]
    if timestamp:
        micros = (_utc(value) - _EPOCH) // datetime.timedelta(microseconds=1)
        floor, ceil = micros // 1000, -(-micros // 1000)
    else:
        floor = ceil = int(value)
    if isinstance(f, EqualTo):
        return ceil, floor
    if isinstance(f, GreaterThan):
        return floor + 1, None
    if isinstance(f, GreaterThanOrEqual):
        return ceil, None
    if isinstance(f, LessThan):
        return None, ceil - 1
    return None, floor


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _utc(value: datetime.datetime) -> datetime.datetime:
    return value.replace(tzinfo=datetime.UTC) if value.tzinfo is None else value


class TopicReader(DataSourceReader):
    """A topic between two positions (by default, all of it as it is now)."""

    def __init__(self, options: Mapping[str, str], topic: Topic) -> None:
        self.options = dict(options)
        self.entries = TopicEntries(topic)
        self.pushed = Pushed()

    def partitions(self) -> Sequence[InputPartition]:
        topic = self.entries.topic
        bounds = self.pushed.partitions(_bounds(self.options, topic))
        starts = _position(self.options, topic, bounds, "starting", "earliest")
        ends = _position(self.options, topic, bounds, "ending", "latest")
        return _spans({p: (starts[p], ends[p]) for p in bounds}, int(self.options.get("minpartitions", "0")))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _batches(self.options, self.entries, partition, self.pushed.where())


class FilteringTopicReader(TopicReader):
    """A topic read whose filters the storage runs (option ``pushFilters``)."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        columns = {"partition", "timestamp"} | {f.column for f in self.entries.fields} & set(FILTERED_COLUMNS)
        for f in filters:
            if not self.pushed.take(f, columns):
                yield f


class TableReader(DataSourceReader):
    """A stored table over a time window, one Spark partition per slice of it."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = dict(options)
        self.model = _model(options["table"])
        self.level = Downsampling(options.get("level", "minute"))
        now_ms = clock.now_ms()
        self.end_ms = int(options.get("end_ms", now_ms))
        self.start_ms = int(options.get("start_ms", self.end_ms - int(options.get("minutes", "60")) * 60_000))
        if self.start_ms > self.end_ms:
            raise ValueError(f"start_ms {self.start_ms} is after end_ms {self.end_ms}")

    def _dao(self, storage: OpenStorage) -> Any:
        """The DAO of the model's kind (inventory, records or metrics)."""
        if self.model in INVENTORY_TYPES:
            return storage.inventory
        return storage.records if self.model in RECORD_TYPES else storage.metrics

    def partitions(self) -> list[InputPartition]:
        from skyoap.storage.select import open_storage

        storage = open_storage(config_of(self.options))
        try:  # a storage no node has written the table to reads as empty, not as an error
            self._dao(storage).install([self.model])
        finally:
            storage.close()
        if self.model in INVENTORY_TYPES:
            return [InputPartition((0, 0))]
        step_ms = 3_600_000 if self.level is Downsampling.MINUTE or self.model in RECORD_TYPES else 86_400_000
        level = Downsampling.MINUTE if self.model in RECORD_TYPES else self.level
        slices: list[InputPartition] = []
        at = self.start_ms - self.start_ms % step_ms
        while at <= self.end_ms:
            first, last = max(at, self.start_ms), min(at + step_ms - 1, self.end_ms)
            slices.append(InputPartition((level.bucket_of(first), level.bucket_of(last))))
            at += step_ms
        return slices

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        first_bucket, last_bucket = partition.value
        from skyoap.storage.select import open_storage

        storage = open_storage(config_of(self.options))
        try:
            dao, model = self._dao(storage), self.model
            if model in INVENTORY_TYPES:
                rows: list[Any] = dao.list(model, limit=1_000_000)
            elif model in RECORD_TYPES:
                rows = dao.query(model, first_bucket, last_bucket, limit=SLICE_LIMIT)
            else:
                rows = dao.query(model, self.level, first_bucket, last_bucket, limit=SLICE_LIMIT)
        finally:
            storage.close()
        if len(rows) >= SLICE_LIMIT:
            raise RuntimeError(
                f"{self.model.MODEL} holds more than {SLICE_LIMIT} rows between buckets "
                f"{first_bucket} and {last_bucket}; read a coarser level or a narrower window"
            )
        names = [c.name for c in self.model.columns()]
        for item in rows:
            row = {**item.to_row(), **item.derived()}
            yield tuple(row.get(n) for n in names)


class TopicStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are ``{"<partition>": next offset}``."""

    def __init__(self, options: Mapping[str, str], topic: Topic) -> None:
        self.options = dict(options)
        self.entries = TopicEntries(topic)
        self.topic = topic.value
        self.fail_on_data_loss = self.options.get("failondataloss", "true").lower() != "false"
        limit = self.options.get("maxoffsetspertrigger", self.options.get("maxrecordspertrigger", "0"))
        self.max_records = int(limit)
        self.min_partitions = int(self.options.get("minpartitions", "0"))
        self.target: dict[str, int] | None = None

    def initialOffset(self) -> dict[str, int]:
        bounds = _bounds(self.options, self.entries.topic)
        return {
            str(p): o
            for p, o in _position(self.options, self.entries.topic, bounds, "starting", "latest").items()
        }

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_records) if self.max_records > 0 else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = {str(p): b.end for p, b in _bounds(self.options, self.entries.topic).items()}

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        bounds = _bounds(self.options, self.entries.topic)
        begin: dict[str, int] = {}
        for p, b in bounds.items():
            first = b.start
            at = int(start.get(str(p), first))
            if at < first:
                if self.fail_on_data_loss:
                    raise RuntimeError(
                        f"offsets {at} to {first - 1} of {self.topic}/{p} were removed by retention "
                        "before this query read them; set failOnDataLoss=false to skip them"
                    )
                at = first
            begin[str(p)] = at
        ends = {str(p): b.end for p, b in bounds.items()}
        if self.target is not None:
            ends = {p: min(e, self.target.get(p, e)) for p, e in ends.items()}
        if isinstance(limit, ReadMaxRows):
            return _share(begin, ends, limit.max_rows)
        return {p: max(begin[p], ends[p]) for p in begin}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return _spans({int(p): (int(start.get(p, e)), int(e)) for p, e in end.items()}, self.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _batches(self.options, self.entries, partition)

    def commit(self, end: dict[str, int]) -> None:
        group = self.options.get("group")
        if not group:
            return
        from skyoap.consumer.group import Group, channel_name
        from skyoap.storage.select import topics_of

        with topics_of(config_of(self.options)) as (topics, state):
            ends = {channel_name(self.topic, b.partition): b.end for b in topics.bounds(self.topic)}
            offsets = {
                channel_name(self.topic, int(p)): (int(o) - 1, None) for p, o in end.items() if int(o) > 0
            }
            Group(state, group).commit(None, offsets, ends)


def _share(begin: Mapping[str, int], ends: Mapping[str, int], max_rows: int) -> dict[str, int]:
    """Where each partition's batch ends when a batch holds ``max_rows`` at most:
    shared evenly, what one partition does not need going to the others."""
    out = dict(begin)
    left = max_rows
    waiting = [p for p in begin if ends[p] > begin[p]]
    while left > 0 and waiting:
        share = max(1, left // len(waiting))
        for p in list(waiting):
            take = min(share, ends[p] - out[p], left)
            out[p] += take
            left -= take
            if out[p] >= ends[p]:
                waiting.remove(p)
            if left == 0:
                break
    return out
