"""Entries of the row topics, put there as a writer does, for tests of what
reads them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from skyoap.model.topics import Bounds, TopicRecord
from skyoap.storage.api import TopicDAO


class Entry(NamedTuple):
    key: str
    value: dict[str, Any]
    timestamp_ms: int


def publish(topics: TopicDAO, topic: str, partition: int, entries: Sequence[Entry]) -> Bounds:
    """Writes ``entries`` at the offsets after the partition's highest, kept
    as row versions, and moves the end over them."""
    first = topics.next_offset(topic, partition)
    topics.keep(
        topic,
        [
            TopicRecord(topic, partition, first + i, e.timestamp_ms, e.key, e.value)
            for i, e in enumerate(entries)
        ],
    )
    topics.advance(topic, {partition: first + len(entries)})
    return next(b for b in topics.bounds(topic) if b.partition == partition)
