"""What measuring the calls of a layer's spans shares: when a call is slow
(SkyWalking's ``slowDBAccessThreshold``, ``slowCacheReadThreshold`` and
``slowCacheWriteThreshold``), the sums calls are counted into, and the
records a slow call is sampled as."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from skyoap.model import sketch
from skyoap.model.metrics import CallMetrics, minute_bucket
from skyoap.model.records import SampledRecord
from skyoap.model.spans import Segment, Span
from skyoap.model.stream import Text

MAX_STATEMENT_CHARS = 2000
"""The longest statement sampled; a longer one is cut (SkyWalking's ``maxSlowSQLLength``)."""


@dataclass(frozen=True)
class Thresholds:
    """Latencies (ms) past which a call is slow, by the type of what it
    called (``db.type``, ``cache.type``, compared lower-cased)."""

    default_ms: int
    by_type: Mapping[str, int] = field(default_factory=dict)

    def of(self, kind: str) -> int:
        return self.by_type.get(kind.lower(), self.default_ms)

    @classmethod
    def parse(cls, text: str, flag: str) -> Thresholds:
        """``default:200,mongodb:100`` (SkyWalking's form); ValueError naming what is wrong."""
        found: dict[str, int] = {}
        for part in (p.strip() for p in text.split(",")):
            matched = _THRESHOLD.fullmatch(part)
            if matched is None:
                raise ValueError(f"{flag}: {part[:100]!r} is not TYPE:MS with a whole number of ms")
            found[matched["type"].lower()] = int(matched["ms"])
        if "default" not in found:
            raise ValueError(f"{flag}: {text[:100]!r} gives no default:MS")
        return cls(found.pop("default"), found)


_THRESHOLD = re.compile(r"(?P<type>[^:,\s]+)\s*:\s*(?P<ms>\d+)")


@dataclass(frozen=True)
class SlowThresholds:
    """When a call is sampled (SkyWalking's ``slowDBAccessThreshold``,
    ``slowCacheReadThreshold`` and ``slowCacheWriteThreshold``)."""

    database: Thresholds = Thresholds(200, {"mongodb": 100})
    cache_read: Thresholds = Thresholds(20, {"redis": 10})
    cache_write: Thresholds = Thresholds(20, {"redis": 10})


DEFAULT_SLOW = SlowThresholds()


Key = tuple[type[CallMetrics], tuple[str, ...], int]
"""A metric's model, its entity's names and the minute (ms // 60,000)."""


Sums = dict[Key, list[Any]]
"""Calls summed by metric, as ``segments.Sums``."""


Measure = Callable[[Sums, list[SampledRecord], Segment, Span, Mapping[str, str], SlowThresholds], None]
"""What one span of a layer counts for, added to the sums, and the slow calls
it samples (the span's tags given as ``details``)."""


def count(sums: Sums, key: Key, error: bool, latency: int) -> None:
    slot = sketch.bucket_of(latency)
    held = sums.get(key)
    if held is None:
        sums[key] = [1, int(error), latency, {slot: 1}, 0, 0]
    else:
        held[0] += 1
        held[1] += error
        held[2] += latency
        held[3][slot] = held[3].get(slot, 0) + 1


def sample(
    metric: str, service: str, normal: bool, statement: str, segment: Segment, span: Span
) -> SampledRecord:
    return SampledRecord(
        time_bucket=minute_bucket(span.start_time),
        record_id=f"{metric}/{segment.segment_id}/{segment.spans.index(span)}",
        metric=metric,
        service=service,
        normal=normal,
        statement=Text(statement[:MAX_STATEMENT_CHARS]),
        latency=span.end_time - span.start_time,
        trace_id=segment.trace_id,
        timestamp=span.start_time,
    )
