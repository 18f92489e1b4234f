"""The ``skyoap`` Spark data source (Python Data Source API, pyspark 4.2+).

Batch reads of a topic, or of a stored table (inventory, metrics, records)::

    spark.read.format("skyoap").option("topic", "segment").load()
    spark.read.format("skyoap").option("table", "endpoint_metrics").option("level", "minute")
        .option("minutes", 60).load()

A table read names a time window (``minutes`` back from now, or ``start_ms``
and ``end_ms``) and reads only that window's buckets, one Spark partition per
hour (per day for hour and day rows).

Streaming reads of a topic: each topic partition's offset is part of Spark's
offset, so a query restarted from its checkpoint resumes exactly where its
last batch ended::

    spark.readStream.format("skyoap").option("topic", "metrics")
        .option("startingOffsets", "earliest")   # or "latest", or '{"0": 5, "1": 0}'
        .option("maxRecordsPerTrigger", 10000).load()

``failOnDataLoss`` (default true) fails the query when retention removed
offsets it still had to read; false skips them. ``group`` reports each
finished batch as that consumer group's committed offsets, so ``skyoap
consumer`` shows the query's lag (the checkpoint stays the truth).

Storage options are the node's: ``storage``, ``embedded_path``, ``es_hosts``,
``es_index_prefix``.
"""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from model.inventory import INVENTORY_TYPES
from model.metrics import METRICS_TYPES, Downsampling
from model.records import RECORD_TYPES
from model.stream import ColumnType, StreamData
from model.topics import Topic
from runtime.batching import BatchPolicy
from storage.api import OffsetOutOfRange
from storage.config import StorageConfig, StorageKind

if TYPE_CHECKING:
    from storage.select import OpenStorage

TOPIC_SCHEMA = "topic STRING, partition INT, offset LONG, timestamp TIMESTAMP, key STRING, value STRING"
"""A topic's rows; ``value`` is the stored row as JSON (``from_json`` or
``get_json_object`` reads it)."""

TABLES: dict[str, type[StreamData]] = {m.MODEL: m for m in (*INVENTORY_TYPES, *METRICS_TYPES, *RECORD_TYPES)}
_SPARK_TYPES = {
    ColumnType.STRING: "STRING",
    ColumnType.TEXT: "STRING",
    ColumnType.INT: "LONG",
    ColumnType.BOOL: "BOOLEAN",
    ColumnType.FLOAT: "DOUBLE",
    ColumnType.INTS: "ARRAY<LONG>",
    ColumnType.MAP: "MAP<STRING, STRING>",
}
READ = BatchPolicy(max_items=1000)
"""Records one read of a topic partition takes."""
SLICE_LIMIT = 10_000
"""Most rows one time slice of a table read may hold."""


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


def _topic_rows(
    options: Mapping[str, str], topic: str, partition: int, start: int, end: int
) -> Iterator[tuple[Any, ...]]:
    """The records ``start <= offset < end`` of one partition, as rows."""
    from storage.select import topics_of

    skip_lost = options.get("failondataloss", "true").lower() == "false"
    with topics_of(config_of(options)) as (topics, _):
        offset = start
        while offset < end:
            try:
                fetched = topics.read(topic, partition, offset, min(READ.max_items, end - offset))
            except OffsetOutOfRange as e:
                if not skip_lost or e.offset > e.end:
                    raise RuntimeError(f"{e}; set failOnDataLoss=false to skip what retention removed") from e
                offset = e.start
                continue
            for r in fetched.records:
                if r.offset >= end:
                    return
                ts = datetime.datetime.fromtimestamp(r.timestamp_ms / 1000, datetime.UTC)
                yield (topic, partition, r.offset, ts, r.key, json.dumps(r.value, separators=(",", ":")))
            if fetched.next_offset <= offset:
                return
            offset = fetched.next_offset


def topic_slice(partition: int, start: int, end: int) -> InputPartition:
    """A Spark partition of a topic read: offsets ``start <= offset < end`` of one partition."""
    return InputPartition((partition, start, end))


class SkyoapDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "skyoap"

    def _topic(self) -> str:
        name = self.options.get("topic") or self.options.get("path")
        if not name:
            raise ValueError("name a topic (option topic) or a table (option table) to read")
        return Topic.named(name).value

    def schema(self) -> str:
        table = self.options.get("table")
        if table is None:
            return TOPIC_SCHEMA
        model = _model(table)
        return ", ".join(f"{c.name} {_SPARK_TYPES[c.type]}" for c in model.columns())

    def reader(self, schema: StructType) -> DataSourceReader:
        if "table" in self.options:
            return TableReader(self.options)
        return TopicReader(self.options, self._topic())

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        if "table" in self.options:
            raise ValueError("tables are read in batch; stream a topic instead (option topic)")
        return TopicStreamReader(self.options, self._topic())


def _model(table: str) -> type[StreamData]:
    if table not in TABLES:
        raise ValueError(f"there is no table {table!r}; the tables are {', '.join(sorted(TABLES))}")
    return TABLES[table]


def _bounds(options: Mapping[str, str], topic: str) -> dict[int, tuple[int, int]]:
    from storage.select import topics_of

    with topics_of(config_of(options)) as (topics, _):
        bounds = {b.partition: (b.start, b.end) for b in topics.bounds(topic)}
    if not bounds:
        raise ValueError(f"topic {topic} has no partitions yet: no node has installed it")
    return bounds


class TopicReader(DataSourceReader):
    """A topic as it is now: every partition from its start to its end."""

    def __init__(self, options: Mapping[str, str], topic: str) -> None:
        self.options = dict(options)
        self.topic = topic

    def partitions(self) -> list[InputPartition]:
        return [
            topic_slice(p, s, e) for p, (s, e) in sorted(_bounds(self.options, self.topic).items()) if e > s
        ]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        yield from _topic_rows(self.options, self.topic, *partition.value)


class TableReader(DataSourceReader):
    """A stored table over a time window, one Spark partition per slice of it."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = dict(options)
        self.model = _model(options["table"])
        self.level = Downsampling(options.get("level", "minute"))
        now_ms = int(time.time() * 1000)
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
        from storage.select import open_storage

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
        from storage.select import open_storage

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

    def __init__(self, options: Mapping[str, str], topic: str) -> None:
        self.options = dict(options)
        self.topic = topic
        self.fail_on_data_loss = self.options.get("failondataloss", "true").lower() != "false"
        self.max_records = int(self.options.get("maxrecordspertrigger", "0"))
        self.target: dict[str, int] | None = None

    def initialOffset(self) -> dict[str, int]:
        bounds = _bounds(self.options, self.topic)
        starting = self.options.get("startingoffsets", "latest")
        if starting in ("earliest", "latest"):
            return {str(p): (s if starting == "earliest" else e) for p, (s, e) in bounds.items()}
        try:
            given = {int(p): int(o) for p, o in json.loads(starting).items()}
        except (ValueError, AttributeError) as e:
            raise ValueError(
                f'startingOffsets must be earliest, latest or JSON like {{"0": 5}}, not {starting!r}'
            ) from e
        unknown = sorted(set(given) - set(bounds))
        if unknown:
            raise ValueError(f"topic {self.topic} has no partition {unknown[0]} (startingOffsets)")
        return {str(p): given.get(p, s) for p, (s, _) in bounds.items()}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_records) if self.max_records > 0 else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = {str(p): e for p, (_, e) in _bounds(self.options, self.topic).items()}

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        bounds = _bounds(self.options, self.topic)
        begin: dict[str, int] = {}
        for p, (first, _) in bounds.items():
            at = int(start.get(str(p), first))
            if at < first:
                if self.fail_on_data_loss:
                    raise RuntimeError(
                        f"offsets {at} to {first - 1} of {self.topic}/{p} were removed by retention "
                        "before this query read them; set failOnDataLoss=false to skip them"
                    )
                at = first
            begin[str(p)] = at
        ends = {str(p): e for p, (_, e) in bounds.items()}
        if self.target is not None:
            ends = {p: min(e, self.target.get(p, e)) for p, e in ends.items()}
        if isinstance(limit, ReadMaxRows):
            return _share(begin, ends, limit.max_rows)
        return {p: max(begin[p], ends[p]) for p in begin}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [
            topic_slice(int(p), int(start.get(p, e)), int(e))
            for p, e in sorted(end.items(), key=lambda kv: int(kv[0]))
            if int(e) > int(start.get(p, e))
        ]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        yield from _topic_rows(self.options, self.topic, *partition.value)

    def commit(self, end: dict[str, int]) -> None:
        group = self.options.get("group")
        if not group:
            return
        from consumer.group import Group, channel_name
        from storage.select import topics_of

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
