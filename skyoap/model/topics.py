"""Topics: what L2 persisted, read again as partitioned streams that consumers
follow by offset (``consumer/``, ``analytics/``).

Every topic has a fixed number of partitions. A record's partition is the hash
of its key, so one entity's changes stay in order. Each record, and each
version of a row, is stored with its partition and offset: the stored data is
the stream. Offsets grow within a partition, with gaps where a write was
refused; the partition's *end* (its high watermark) moves only once every
record below it is durable and readable. A reader therefore never skips a
record that becomes visible later. Retention moves the partition's *start*.
"""

from __future__ import annotations

import enum
import zlib
from dataclasses import dataclass, field
from typing import Any

from skyoap.model.inventory import INVENTORY_TYPES
from skyoap.model.metrics import METRICS_TYPES, Downsampling, Metrics
from skyoap.model.records import RECORD_MODELS
from skyoap.model.stream import StreamData


class Topic(enum.Enum):
    """The streams the pipeline writes, named after what they carry."""

    INVENTORY = "inventory"
    """Services, instances, endpoints and addresses as L2 registered or updated them."""
    SEGMENT = "segment"
    LOG = "log"
    EVENT = "event"
    """Each report of an event, as agents sent it."""
    SAMPLED_RECORD = "sampled_record"
    """Slow database statements and cache commands."""
    PROFILE = "profile"
    """The thread dumps agents took for profiling tasks."""
    ALARM = "alarm"
    """Alarms and their recoveries as the rules raised them."""
    METRICS = "metrics"
    """Metric rows (every scope and level) as L2 stored them after merging."""

    @property
    def tables(self) -> tuple[Table, ...]:
        """The stored rows or records that are the topic's entries."""
        if self is Topic.METRICS:
            return tuple(Table(m, level) for m in METRICS_TYPES for level in Downsampling)
        if self is Topic.INVENTORY:
            return tuple(Table(m) for m in INVENTORY_TYPES)
        return (Table(RECORD_MODELS[self.value]),)

    @classmethod
    def of(cls, model: type[StreamData]) -> Topic:
        """The topic ``model``'s rows or records are entries of."""
        if model.MODEL in RECORD_MODELS:
            return cls(model.MODEL)
        return cls.METRICS if issubclass(model, Metrics) else cls.INVENTORY

    @classmethod
    def named(cls, name: str) -> Topic:
        try:
            return cls(name)
        except ValueError:
            raise ValueError(
                f"there is no topic {name!r}; the topics are {', '.join(t.value for t in cls)}"
            ) from None


def partition_of(key: str, partitions: int) -> int:
    """The partition of a record's key (stable across processes and versions)."""
    return zlib.crc32(key.encode()) % partitions


@dataclass(frozen=True)
class Table:
    """The rows of one model (and downsampling level, for metrics): a row, as
    it is stored, is the entry of its current version on the model's topic."""

    model: type[StreamData]
    level: Downsampling | None = None

    def value(self, item: StreamData) -> dict[str, Any]:
        """The value of ``item``'s entry: its key and columns, and for rows,
        what they are rows of."""
        if self.model.MODEL in RECORD_MODELS:
            return {"key": item.key(), **item.to_row()}
        kind = (
            {"model": self.model.MODEL}
            if self.level is None
            else {"model": self.model.MODEL, "level": self.level.value}
        )
        return {"key": item.key(), **kind, **item.to_row()}


FILTERED_COLUMNS = ("service", "endpoint", "time_bucket")
"""The columns a read of a topic may be filtered by (``Where``), besides the
time an entry was published."""


@dataclass(frozen=True)
class Where:
    """The entries a filtered read of a topic returns: those whose column
    ``c`` holds one of ``equal[c]`` and lies within ``between[c]``, and that
    were published within ``published`` (ms since the epoch). Bounds are
    inclusive; None leaves a side open. An entry without a filtered column (a
    row of another model) does not match."""

    equal: dict[str, frozenset[Any]] = field(default_factory=dict)
    between: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    published: tuple[int | None, int | None] = (None, None)

    def __post_init__(self) -> None:
        unknown = sorted((set(self.equal) | set(self.between)) - set(FILTERED_COLUMNS))
        if unknown:
            raise ValueError(
                f"a topic cannot be filtered by {', '.join(unknown)}; "
                f"only by {', '.join(FILTERED_COLUMNS)} and the time published"
            )


@dataclass(frozen=True)
class TopicRecord:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: str
    value: dict[str, Any]


@dataclass(frozen=True)
class Fetched:
    """What a read from an offset found: the records, in offset order, and
    where the next read starts. A partition may have gaps (an offset whose
    record was written again elsewhere, or refused), so the next read starts
    after the last offset looked at, which may lie past the last record."""

    records: list[TopicRecord]
    next_offset: int


@dataclass(frozen=True)
class Position:
    """Where a record is on its topic: written with the record itself."""

    partition: int
    offset: int
    published_ms: int


@dataclass(frozen=True)
class Reservation:
    """Offsets ``start`` to ``end - 1`` of a partition, handed to one writer
    (see ``storage.api.OffsetRanges``). ``epoch`` names the partition's set-up
    the range belongs to."""

    topic: str
    partition: int
    start: int
    end: int
    epoch: str


@dataclass(frozen=True)
class Bounds:
    """The readable offsets of a partition: ``start <= offset < end``."""

    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class Retention:
    """A partition keeps records younger than ``max_age_s`` and at most
    ``max_records`` of them, whichever removes more."""

    max_age_s: float
    max_records: int

    def start(self, b: Bounds, first_young: int | None) -> int:
        """Where partition ``b`` starts once trimmed, given its first offset
        young enough to keep (None: none is)."""
        return max(b.start, b.end - self.max_records, b.end if first_young is None else first_young)
