"""Virtual services: the databases and caches spans called, which nobody
reports from, measured from their callers' spans as SkyWalking measures
them (its ``VirtualDatabaseProcessor`` and ``VirtualCacheProcessor``), and
their slow statements and commands sampled as records.

A span of the Database layer counts one call for the database its peer
names; one of the Cache layer with a ``cache.type`` tag, for the cache its
peer names (``{cache.type}-local`` without one), by its ``cache.op``. A
database call slower than the threshold of its ``db.type`` samples its
``db.statement`` twice: for the database's list and for the calling
service's; a cache read or write slower than the threshold of its
``cache.type`` samples ``{cache.cmd} {cache.key}`` for the cache's."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from skyoap.model.metrics import CacheAccessMetrics, CallMetrics, DatabaseAccessMetrics, minute_bucket
from skyoap.model.records import SampledRecord
from skyoap.model.stream import Text

if TYPE_CHECKING:
    from skyoap.receiver.segments import Segment, Span

DATABASE, CACHE = 1, 5
"""The span layers (SkyWalking's ``SpanLayer``) of the calls measured here."""
LAYERS = frozenset((DATABASE, CACHE))

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


def accesses(span: Span) -> Iterator[tuple[type[CallMetrics], tuple[str, ...]]]:
    """The virtual services' metrics ``span`` counts a call for, each a model
    and its entity's names."""
    if span.layer == DATABASE:
        if span.peer:
            yield DatabaseAccessMetrics, (span.peer, dict(span.details).get("db.type", ""))
        return
    found = _cache(span)
    if found is not None:
        name, operation, _ = found
        yield CacheAccessMetrics, (name, "all")
        if operation:
            yield CacheAccessMetrics, (name, operation)


def _cache(span: Span) -> tuple[str, str, str] | None:
    """The cache a span of the Cache layer called, its operation (read,
    write, or "" for any other) and its type; None when it names no type."""
    details = dict(span.details)
    kind = details.get("cache.type", "")
    if span.layer != CACHE or not kind.strip():
        return None
    operation = details.get("cache.op", "")
    return span.peer or f"{kind}-local", operation if operation in ("read", "write") else "", kind


def samples(called: Iterable[tuple[Segment, Span]], slow: SlowThresholds) -> list[SampledRecord]:
    """The slow calls of ``called`` (spans of the layers measured here, with
    their segments), each sampled for the lists it belongs to."""
    found: list[SampledRecord] = []
    for segment, span in called:
        latency = span.end_time - span.start_time
        for metric, service, normal, statement in _sampled(segment, span, latency, slow):
            index = segment.spans.index(span)
            found.append(
                SampledRecord(
                    time_bucket=minute_bucket(span.start_time),
                    record_id=f"{metric}/{segment.segment_id}/{index}",
                    metric=metric,
                    service=service,
                    normal=normal,
                    statement=Text(statement[:MAX_STATEMENT_CHARS]),
                    latency=latency,
                    trace_id=segment.trace_id,
                    timestamp=span.start_time,
                )
            )
    return found


def _sampled(
    segment: Segment, span: Span, latency: int, slow: SlowThresholds
) -> Sequence[tuple[str, str, bool, str]]:
    """The lists a call is sampled for (metric, service, normal, statement)."""
    details = dict(span.details)
    if span.layer == DATABASE:
        kind, statement = details.get("db.type"), details.get("db.statement", "")
        if not span.peer or kind is None or latency <= slow.database.of(kind) or not statement.strip():
            return ()
        return (
            (DATABASE_STATEMENTS, span.peer, False, statement),
            (SERVICE_STATEMENTS, segment.service, True, statement),
        )
    found = _cache(span)
    if found is None:
        return ()
    name, operation, kind = found
    threshold = {"read": slow.cache_read, "write": slow.cache_write}.get(operation)
    if threshold is None or latency <= threshold.of(kind):
        return ()
    command = f"{details.get('cache.cmd', '')} {details.get('cache.key', '')}".strip()
    return ((CACHE_READS if operation == "read" else CACHE_WRITES, name, False, command),)
