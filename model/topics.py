"""Topics: what L2 persisted, kept again as partitioned streams that consumers
read by offset (``consumer/``, ``analytics/``).

Every topic has a fixed number of partitions. A record's partition is the hash
of its key, so one entity's changes stay in order. Within a partition offsets
start at 0 and grow by one per record; the partition's *end* (its high
watermark) is the offset the next record will get, and it moves only once
every record below it is durable and readable. A reader therefore never skips
a record that becomes visible later. Retention removes records from the front
and moves the partition's *start*.
"""

from __future__ import annotations

import enum
import zlib
from dataclasses import dataclass
from typing import Any

from model.records import RECORD_MODELS


class Topic(enum.Enum):
    """The streams the pipeline writes, named after what they carry."""

    INVENTORY = "inventory"
    """Services, instances, endpoints and addresses as L2 registered or updated them."""
    SEGMENT = "segment"
    LOG = "log"
    METRICS = "metrics"
    """Metric rows (every scope and level) as L2 stored them after merging."""

    @property
    def of_records(self) -> bool:
        """Whether the topic's entries are the stored records themselves (each
        segment and log line is written once, with its partition and offset),
        rather than copies appended after a row was stored."""
        return self.value in RECORD_MODELS

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
class Entry:
    """One record to append: what the writer knows before it has an offset."""

    key: str
    value: dict[str, Any]
    timestamp_ms: int


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

    def __len__(self) -> int:
        return self.end - self.start


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
