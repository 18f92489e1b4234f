"""The VIRTUAL_CACHE layer: the caches services call, which nobody reports
from, measured from their callers' spans as SkyWalking measures them (its
``VirtualCacheProcessor``).

A span of the Cache layer with a ``cache.type`` tag counts one call for the
cache its peer names (``{cache.type}-local`` without one), by its
``cache.op``. A read or write slower than the threshold of its
``cache.type`` samples ``{cache.cmd} {cache.key}`` for the cache's list."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skyoap.layers import spans
from skyoap.layers import widgets as w
from skyoap.layers.layer import CALLS, CalledView, Layer, MenuItem
from skyoap.model.metrics import CacheAccessMetrics
from skyoap.model.records import SampledRecord
from skyoap.model.spans import Segment, Span, SpanLayer
from skyoap.vocabulary import catalogue as c
from skyoap.vocabulary.entity import Scope

NAME = "VIRTUAL_CACHE"
CACHE_READS = "top_n_cache_read_command"
CACHE_WRITES = "top_n_cache_write_command"
"""The lists slow commands are sampled into, by SkyWalking's names."""


def _cache(
    sums: spans.Sums, samples: list[SampledRecord], segment: Segment, span: Span, details: Mapping[str, str],
    slow: spans.SlowThresholds,
) -> None:  # fmt: skip
    """A call to the cache the span's peer names (``{cache.type}-local``
    without one), for all its calls and its operation's; a read or a write
    slower than its type's threshold sampled."""
    kind = details.get("cache.type", "")
    if not kind.strip():
        return
    name, operation = span.peer or f"{kind}-local", details.get("cache.op", "")
    latency, minute = span.end_time - span.start_time, span.start_time // 60_000
    spans.count(sums, (CacheAccessMetrics, (name, "all"), minute), span.is_error, latency)
    if operation not in ("read", "write"):
        return
    spans.count(sums, (CacheAccessMetrics, (name, operation), minute), span.is_error, latency)
    if latency > (slow.cache_read if operation == "read" else slow.cache_write).of(kind):
        command = f"{details.get('cache.cmd', '')} {details.get('cache.key', '')}".strip()
        samples.append(
            spans.sample(
                CACHE_READS if operation == "read" else CACHE_WRITES, name, False, command, segment, span
            )
        )


def _caches() -> tuple[dict[str, Any], ...]:
    """The caches services call: their reads, writes and every call, and the slow commands."""
    return w.layer_pages(
        NAME,
        "Virtual-Cache",
        w.listing("ServiceList", "Virtual-Cache-Service", "cache_access"),
        (
            "Overview",
            [
                *w.calls("cache_read", kind="Read"),
                *w.calls("cache_write", kind="Write"),
                w.top("Slow Reads (ms)", f"top_n({CACHE_READS},10,des)"),
                w.top("Slow Writes (ms)", f"top_n({CACHE_WRITES},10,des)"),
            ],
        ),
    )


LAYER = Layer(
    NAME,
    MenuItem("Virtual Cache", "virtual_cache", "Caches services call, known from their spans."),
    (
        *(
            metric
            for operation, prefix in (
                ("read", "cache_read"),
                ("write", "cache_write"),
                ("all", "cache_access"),
            )
            for metric in c.calls(
                prefix, CacheAccessMetrics, Scope.SERVICE, where={"operation": operation}, normal=False
            )
        ),
        c.sampled(CACHE_READS, normal=False),
        c.sampled(CACHE_WRITES, normal=False),
    ),
    _caches,
    known_by=CacheAccessMetrics,
    span_layer=SpanLayer.CACHE,
    measure=_cache,
    called=CalledView("Caches", "cache_access", CALLS, ((CACHE_READS, "read"), (CACHE_WRITES, "write"))),
)
