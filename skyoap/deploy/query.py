"""``skyoap query``: services, instances, endpoints, the relations between
services, instances and endpoints, and recent traces, with their metrics over
the last minutes, as tables for people."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from skyoap.deploy.tables import table, utc_ms
from skyoap.model.metrics import (
    CallMetrics,
    Downsampling,
    EndpointMetrics,
    EndpointRelationMetrics,
    ServiceInstanceMetrics,
    ServiceInstanceRelationMetrics,
    ServiceMetrics,
    ServiceRelationMetrics,
    merge_into,
    minute_bucket,
)
from skyoap.model.records import SegmentRecord
from skyoap.model.stream import ColumnType
from skyoap.runtime import clock
from skyoap.storage.select import OpenStorage

MAX_ROWS = 10_000
"""Minute rows one query reads (Elasticsearch's default result window)."""

ENTITIES: dict[str, tuple[type[CallMetrics], list[str], str]] = {
    "services": (ServiceMetrics, ["service"], "service"),
    "instances": (ServiceInstanceMetrics, ["service", "instance"], "service"),
    "endpoints": (EndpointMetrics, ["service", "endpoint"], "service"),
    "relations": (ServiceRelationMetrics, ["source", "dest", "seen by"], "source"),
    "instance-relations": (ServiceInstanceRelationMetrics,
                           ["source", "source instance", "dest", "dest instance", "seen by"],
                           "source_service"),
    "endpoint-relations": (EndpointRelationMetrics,
                           ["source", "source endpoint", "dest", "dest endpoint"], "source_service"),
}  # fmt: skip
"""What ``skyoap query`` shows metrics of: the model, its entity's columns, and
the column ``--service`` selects by (for relations, the calling service)."""

HEADERS = ["calls", "cpm", "errors", "sla %", "resp_time ms", "p50", "p90", "p99", "latest minute (UTC)"]
"""SkyWalking's names: sla is the share of calls that succeeded, resp_time their mean."""


def _window(minutes: int) -> tuple[int, int]:
    now = clock.now_ms()
    return minute_bucket(now - (minutes - 1) * 60_000), minute_bucket(now)


def _figures(m: CallMetrics, minutes: int, latest: int) -> list[object]:
    return [
        m.calls,
        f"{m.calls / minutes:.1f}",
        m.errors,
        f"{m.sla / 100:.2f}",
        m.resp_time,
        m.percentile(50),
        m.percentile(90),
        m.percentile(99),
        f"{str(latest)[:8]} {str(latest)[8:10]}:{str(latest)[10:]}",
    ]


def _names(m: CallMetrics) -> list[str]:
    """The names of ``m``'s entity: its model's string columns (the entity's
    key leaves the server's side of an instance relation unsaid)."""
    return [getattr(m, c.name) for c in m.columns() if c.type is ColumnType.STRING]


def _over_window(
    storage: OpenStorage, model: type[CallMetrics], minutes: int, where: dict[str, str]
) -> tuple[list[tuple[CallMetrics, int]], bool]:
    """Each entity's calls over the window, merged, with its latest minute, busiest
    first; and whether the window held more minute rows than were read."""
    first, last = _window(minutes)
    rows = storage.metrics.query(model, Downsampling.MINUTE, first, last, where, MAX_ROWS)
    latest: dict[str, int] = {}
    for r in rows:
        latest[r.entity()] = max(latest.get(r.entity(), 0), r.time_bucket)
    merged: dict[str, CallMetrics] = {}
    merge_into(merged, (r.downsampled(Downsampling.DAY) for r in rows))
    found = sorted(
        ((m, latest[m.entity()]) for m in merged.values()), key=lambda x: (-x[0].calls, x[0].entity())
    )
    return found, len(rows) >= MAX_ROWS


def print_query(
    storage: OpenStorage, what: str, service: str | None, minutes: int, limit: int, out: TextIO
) -> None:
    title = f"{what} over the last {minutes} minutes" + (f" of service {service}" if service else "")
    if what == "segments":
        first, last = _window(minutes)
        segments = storage.records.query(
            SegmentRecord, first, last, {"service": service} if service else {}, limit
        )
        print(f"{title} (newest first, at most {limit})", file=out)
        rows: Sequence[Sequence[object]] = [
            (
                utc_ms(s.start_time),
                s.service,
                s.instance,
                s.endpoint,
                s.latency_ms,
                "yes" if s.is_error else "",
                s.spans,
                s.trace_id,
            )
            for s in sorted(segments, key=lambda s: -s.start_time)
        ]
        print(
            table(
                ["start (UTC)", "service", "instance", "endpoint", "ms", "error", "spans", "trace id"], rows
            ),
            file=out,
        )
        return
    model, names, by = ENTITIES[what]
    found, truncated = _over_window(storage, model, minutes, {by: service} if service else {})
    print(title, file=out)
    # Services show their apdex too, by each one's threshold.
    apdex = ["apdex"] if model is ServiceMetrics else []
    rows = [
        [*_names(m), *_figures(m, minutes, latest)]
        + ([f"{m.apdex / 10_000:.2f}"] if isinstance(m, ServiceMetrics) else [])
        for m, latest in found[:limit]
    ]
    print(table([*names, *HEADERS, *apdex], rows), file=out)
    if truncated:
        print(
            f"(only the newest {MAX_ROWS} minute rows were read, so the figures are partial: "
            "narrow the window with --minutes or --service)",
            file=out,
        )
