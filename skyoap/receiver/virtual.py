"""Virtual services: the databases, caches and message queues spans called,
which nobody reports from, measured from their callers' spans as SkyWalking
measures them (its ``VirtualDatabaseProcessor``, ``VirtualCacheProcessor``
and ``VirtualMQProcessor``), and their slow statements and commands
sampled as records.

A span of the Database layer counts one call for the database its peer
names; one of the Cache layer with a ``cache.type`` tag, for the cache its
peer names (``{cache.type}-local`` without one), by its ``cache.op``. A
database call slower than the threshold of its ``db.type`` samples its
``db.statement`` twice: for the database's list and for the calling
service's; a cache read or write slower than the threshold of its
``cache.type`` samples ``{cache.cmd} {cache.key}`` for the cache's. A span
of the MQ layer counts a message produced (an exit) or consumed (an
entry) for the broker and its topic or queue (``_queue``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from skyoap.model.metrics import (
    CacheAccessMetrics,
    CallMetrics,
    DatabaseAccessMetrics,
    MQAccessMetrics,
    MQEndpointAccessMetrics,
    latency_bucket,
    minute_bucket,
)
from skyoap.model.records import SampledRecord
from skyoap.model.spans import ENTRY, EXIT, Segment, Span, SpanLayer
from skyoap.model.stream import Text

LAYERS = frozenset((SpanLayer.DATABASE, SpanLayer.MQ, SpanLayer.CACHE))
"""The span layers of the calls measured here."""

MAX_STATEMENT_CHARS = 2000
"""The longest statement sampled; a longer one is cut (SkyWalking's ``maxSlowSQLLength``)."""

DATABASE_STATEMENTS = "top_n_database_statement"
SERVICE_STATEMENTS = "top_n_service_database_statement"
CACHE_READS = "top_n_cache_read_command"
CACHE_WRITES = "top_n_cache_write_command"
"""The lists samples belong to, by SkyWalking's names."""


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


def measure(called: Iterable[tuple[Segment, Span]], slow: SlowThresholds) -> tuple[Sums, list[SampledRecord]]:
    """What the spans of ``called`` (of the layers measured here, with their
    segments) count for, summed by metric, and their slow calls sampled."""
    sums: Sums = {}
    samples: list[SampledRecord] = []
    for segment, span in called:
        _BY_LAYER[span.layer](sums, samples, segment, span, dict(span.details), slow)
    return sums, samples


def _database(
    sums: Sums, samples: list[SampledRecord], segment: Segment, span: Span, details: Mapping[str, str],
    slow: SlowThresholds,
) -> None:  # fmt: skip
    """A call to the database the span's peer names, sampled for the
    database and its caller when slower than its ``db.type``'s threshold."""
    if not span.peer:
        return
    kind, latency = details.get("db.type", ""), span.end_time - span.start_time
    _count(
        sums, (DatabaseAccessMetrics, (span.peer, kind), span.start_time // 60_000), span.is_error, latency
    )
    if kind and latency > slow.database.of(kind) and details.get("db.statement", "").strip():
        statement = details["db.statement"]
        samples.append(_sample(DATABASE_STATEMENTS, span.peer, False, statement, segment, span))
        samples.append(_sample(SERVICE_STATEMENTS, segment.service, True, statement, segment, span))


def _cache(
    sums: Sums, samples: list[SampledRecord], segment: Segment, span: Span, details: Mapping[str, str],
    slow: SlowThresholds,
) -> None:  # fmt: skip
    """A call to the cache the span's peer names (``{cache.type}-local``
    without one), for all its calls and its operation's; a read or a write
    slower than its type's threshold sampled."""
    kind = details.get("cache.type", "")
    if not kind.strip():
        return
    name, operation = span.peer or f"{kind}-local", details.get("cache.op", "")
    latency, minute = span.end_time - span.start_time, span.start_time // 60_000
    _count(sums, (CacheAccessMetrics, (name, "all"), minute), span.is_error, latency)
    if operation not in ("read", "write"):
        return
    _count(sums, (CacheAccessMetrics, (name, operation), minute), span.is_error, latency)
    if latency > (slow.cache_read if operation == "read" else slow.cache_write).of(kind):
        command = f"{details.get('cache.cmd', '')} {details.get('cache.key', '')}".strip()
        samples.append(
            _sample(CACHE_READS if operation == "read" else CACHE_WRITES, name, False, command, segment, span)
        )


def _count(sums: Sums, key: Key, error: bool, latency: int) -> None:
    slot = latency_bucket(latency)
    held = sums.get(key)
    if held is None:
        sums[key] = [1, int(error), latency, {slot: 1}, 0, 0]
    else:
        held[0] += 1
        held[1] += error
        held[2] += latency
        held[3][slot] = held[3].get(slot, 0) + 1


def _queue(
    sums: Sums, samples: list[SampledRecord], segment: Segment, span: Span, details: Mapping[str, str],
    slow: SlowThresholds,
) -> None:  # fmt: skip
    """Counts a message a span of the MQ layer sent (an exit: to its peer) or
    took (an entry: from the address its reference names, else its peer),
    by its time in transit, for the broker and its topic or queue."""
    if span.kind == ENTRY:
        operation = "consume"
        used = span.refs[0].address if span.refs else ""
        broker = used if used.strip() else span.peer
    elif span.kind == EXIT:
        operation, broker = "produce", span.peer
    else:
        return
    if not broker.strip():
        return
    given = details.get("transmission.latency", "")
    transit = int(given) if given.isascii() and given.isdigit() else 0
    minute = span.start_time // 60_000
    _count(sums, (MQAccessMetrics, (broker, operation), minute), span.is_error, transit)
    endpoint = "/".join(n for n in (details.get("mq.topic", ""), details.get("mq.queue", "")) if n.strip())
    if endpoint:
        _count(sums, (MQEndpointAccessMetrics, (broker, endpoint, operation), minute), span.is_error, transit)


def _sample(
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


_Measure = Callable[[Sums, list[SampledRecord], Segment, Span, Mapping[str, str], SlowThresholds], None]
_BY_LAYER: dict[int, _Measure] = {
    SpanLayer.DATABASE: _database,
    SpanLayer.CACHE: _cache,
    SpanLayer.MQ: _queue,
}
