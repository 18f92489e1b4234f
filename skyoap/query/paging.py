"""SkyWalking's ``Pagination`` input and the time window of a record search,
with the bounds every record query keeps to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from skyoap.model.metrics import minute_bucket
from skyoap.vocabulary.duration import Duration

MAX_PAGE_SIZE = 1000
"""The most rows one page of traces or logs holds."""

MAX_DEPTH = 10_000
"""How far into a search paging reaches (``pageNum * pageSize``): what
Elasticsearch reads of a search by default (``index.max_result_window``),
held on both storages alike."""


@dataclass(frozen=True, slots=True)
class Page:
    offset: int
    limit: int

    @classmethod
    def of(cls, paging: Mapping[str, Any]) -> Page:
        """From the protocol's ``Pagination``; ValueError past the bounds."""
        size, number = paging["pageSize"], paging.get("pageNum")
        number = 1 if number is None else number
        if size < 1 or size > MAX_PAGE_SIZE:
            raise ValueError(f"paging.pageSize must be 1 to {MAX_PAGE_SIZE}, not {size}")
        if number < 1:
            raise ValueError(f"paging.pageNum counts from 1, not {number}")
        if number * size > MAX_DEPTH:
            raise ValueError(
                f"paging reaches row {number * size}, past the first {MAX_DEPTH} rows a search reads: "
                "narrow the condition (a shorter queryDuration, a service, a trace id) rather than "
                "page further"
            )
        return cls((number - 1) * size, size)


@dataclass(frozen=True, slots=True)
class Window:
    """A Duration as records are searched by: its minutes (which days and
    buckets to read) and its milliseconds, end excluded (every step of the
    Duration whole, the last included)."""

    first_bucket: int
    last_bucket: int
    start_ms: int
    end_ms: int

    @classmethod
    def of(cls, given: Mapping[str, Any]) -> Window:
        """Of any length, as SkyWalking searches records: its UI asks the
        last half hour by the SECOND, past the steps metrics read
        (``duration.MAX_STEPS``), and what is past the records' time to live
        is gone anyway."""
        duration = Duration.of(given)
        start_ms = int(duration.start_time.timestamp() * 1000)
        end_ms = duration.end_ms
        return cls(minute_bucket(start_ms), minute_bucket(end_ms - 1), start_ms, end_ms)
