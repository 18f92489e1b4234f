"""Segments put on their topic as a record worker puts them, for the tests
of what stores and reads them."""

from __future__ import annotations

import time

from skyoap.aggregator.topics import Topics
from skyoap.model.metrics import minute_bucket
from skyoap.model.records import SegmentRecord
from skyoap.model.stream import Text
from skyoap.model.topics import Table, Topic
from skyoap.runtime.instruments import Instruments
from skyoap.storage.select import OpenStorage

SEGMENTS = Table(SegmentRecord)
PARTITIONS = {t: 2 for t in Topic}


def segments(n: int, prefix: str = "s", at_ms: int | None = None) -> list[SegmentRecord]:
    at_ms = int(time.time() * 1000) if at_ms is None else at_ms
    return [
        SegmentRecord(
            time_bucket=minute_bucket(at_ms),
            segment_id=f"{prefix}{i}",
            trace_id=f"t{i}",
            service="web",
            instance="web-1",
            endpoint=f"GET:/{i}",
            start_time=at_ms,
            end_time=at_ms + i,
            latency_ms=i,
            is_error=i % 2 == 0,
            spans=1,
            data=Text("AA=="),
        )
        for i in range(n)
    ]


def install(storage: OpenStorage) -> None:
    storage.records.install([SegmentRecord])
    storage.topics.install({t.value: n for t, n in PARTITIONS.items()})


def record_topics(storage: OpenStorage, ranges: object = None) -> Topics:
    return Topics(
        storage.topics,
        storage.records,
        storage.offsets if ranges is None else ranges,  # type: ignore[arg-type]
        PARTITIONS,
        Instruments(),
        interval_s=60,  # rounds run when the test says
    )


def write(topics: Topics, storage: OpenStorage, items: list[SegmentRecord]) -> None:
    """What a record worker does with a bulk."""
    placement = topics.place(SEGMENTS, items, 0)
    refused = storage.records.insert(SegmentRecord, items, placement.positions)
    topics.written(placement, refused)
