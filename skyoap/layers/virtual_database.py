"""The VIRTUAL_DATABASE layer: the databases services call, which nobody
reports from, measured from their callers' spans as SkyWalking measures them
(its ``VirtualDatabaseProcessor``).

A span of the Database layer counts one call for the database its peer
names. One slower than the threshold of its ``db.type`` samples its
``db.statement`` twice: for the database's list and for the calling
service's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skyoap.layers import spans
from skyoap.layers import widgets as w
from skyoap.layers.layer import CALLS, CalledView, Layer, MenuItem
from skyoap.model.metrics import DatabaseAccessMetrics
from skyoap.model.records import SampledRecord
from skyoap.model.spans import Segment, Span, SpanLayer
from skyoap.vocabulary import catalogue as c
from skyoap.vocabulary.entity import Scope

NAME = "VIRTUAL_DATABASE"
DATABASE_STATEMENTS = "top_n_database_statement"
SERVICE_STATEMENTS = "top_n_service_database_statement"
"""The lists statements are sampled into, by SkyWalking's names (the second
is the calling service's, of the GENERAL layer)."""


def _database(
    sums: spans.Sums, samples: list[SampledRecord], segment: Segment, span: Span, details: Mapping[str, str],
    slow: spans.SlowThresholds,
) -> None:  # fmt: skip
    """A call to the database the span's peer names, sampled for the
    database and its caller when slower than its ``db.type``'s threshold."""
    if not span.peer:
        return
    kind, latency = details.get("db.type", ""), span.end_time - span.start_time
    spans.count(
        sums, (DatabaseAccessMetrics, (span.peer, kind), span.start_time // 60_000), span.is_error, latency
    )
    if kind and latency > slow.database.of(kind) and details.get("db.statement", "").strip():
        statement = details["db.statement"]
        samples.append(spans.sample(DATABASE_STATEMENTS, span.peer, False, statement, segment, span))
        samples.append(spans.sample(SERVICE_STATEMENTS, segment.service, True, statement, segment, span))


def _databases() -> tuple[dict[str, Any], ...]:
    """The databases services call, and their slow statements."""
    return w.layer_pages(
        NAME,
        "Virtual-Database",
        w.listing("ServiceList", "Virtual-Database-Service", "database_access"),
        (
            "Overview",
            [
                *w.calls("database_access"),
                w.top("Slow Statements (ms)", f"top_n({DATABASE_STATEMENTS},10,des)"),
            ],
        ),
    )


LAYER = Layer(
    NAME,
    MenuItem("Virtual Database", "virtual_database", "Databases services call, known from their spans."),
    (
        *c.calls("database_access", DatabaseAccessMetrics, Scope.SERVICE, normal=False),
        c.sampled(DATABASE_STATEMENTS, normal=False),
        c.sampled(SERVICE_STATEMENTS, normal=True),  # of the calling service: its page lists them
    ),
    _databases,
    known_by=DatabaseAccessMetrics,
    span_layer=SpanLayer.DATABASE,
    measure=_database,
    called=CalledView("Databases", "database_access", CALLS, ((DATABASE_STATEMENTS, "statement"),)),
)
