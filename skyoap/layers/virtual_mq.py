"""The VIRTUAL_MQ layer: the message brokers services use, which nobody
reports from, measured from their callers' spans as SkyWalking measures them
(its ``VirtualMQProcessor``).

A span of the MQ layer counts a message produced (an exit) or consumed (an
entry) for the broker and its topic or queue, by its time in transit."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from skyoap.layers import spans
from skyoap.layers import widgets as w
from skyoap.layers.layer import CalledView, Layer, MenuItem
from skyoap.model.metrics import Metrics, MQAccessMetrics, MQEndpointAccessMetrics
from skyoap.model.records import SampledRecord
from skyoap.model.spans import ENTRY, EXIT, Segment, Span, SpanLayer
from skyoap.vocabulary import catalogue as c
from skyoap.vocabulary.entity import Scope

NAME = "VIRTUAL_MQ"


def _message(
    sums: spans.Sums, samples: list[SampledRecord], segment: Segment, span: Span, details: Mapping[str, str],
    slow: spans.SlowThresholds,
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
    spans.count(sums, (MQAccessMetrics, (broker, operation), minute), span.is_error, transit)
    endpoint = "/".join(n for n in (details.get("mq.topic", ""), details.get("mq.queue", "")) if n.strip())
    if endpoint:
        spans.count(
            sums, (MQEndpointAccessMetrics, (broker, endpoint, operation), minute), span.is_error, transit
        )


def _metrics(prefix: str, model: type[Metrics], scope: Scope) -> list[c.MetricDef]:
    """A broker's (or its topic's) messages, as SkyWalking names them: those
    consumed by load, success rate, time in transit and its percentiles;
    those produced by load and success rate."""
    consumed = c.calls(f"{prefix}_consume", model, scope, where={"operation": "consume"}, normal=False)
    produced = c.calls(f"{prefix}_produce", model, scope, where={"operation": "produce"}, normal=False)
    latency = dataclasses.replace(consumed[1], name=f"{prefix}_consume_latency")
    return [consumed[0], consumed[2], latency, consumed[3], produced[0], produced[2]]


def _queue_page(prefix: str) -> list[w.Widget]:
    """A broker's or a topic's messages: consumed, and produced."""
    return [
        w.line("Consume Load", f"{prefix}_consume_cpm", unit="msgs / min"),
        w.line("Consume Success Rate", f"{prefix}_consume_sla/100", unit="%"),
        w.line("Avg Transmission Latency", f"{prefix}_consume_latency", unit="ms"),
        w.line(
            "Transmission Latency Percentile",
            w.PERCENTILES.format(metric=f"{prefix}_consume_percentile"),
            unit="ms",
        ),
        w.line("Produce Load", f"{prefix}_produce_cpm", unit="msgs / min"),
        w.line("Produce Success Rate", f"{prefix}_produce_sla/100", unit="%"),
    ]


def _queues() -> tuple[dict[str, Any], ...]:
    """The message brokers services use, and their topics and queues."""
    endpoint = w.dashboard(
        "Virtual-MQ-Endpoint", "Endpoint", w.tabs(("Overview", _queue_page("mq_endpoint"))), layer=NAME
    )
    return (
        *w.layer_pages(
            NAME,
            "Virtual-MQ",
            w.listing("ServiceList", "Virtual-MQ-Service", "mq_service_consume", "latency"),
            ("Overview", _queue_page("mq_service")),
            ("Topics", [w.listing("EndpointList", "Virtual-MQ-Endpoint", "mq_endpoint_consume", "latency")]),
        ),
        endpoint,
    )


LAYER = Layer(
    NAME,
    MenuItem("Virtual MQ", "virtual_mq", "Message brokers services use, known from their spans."),
    (
        *_metrics("mq_service", MQAccessMetrics, Scope.SERVICE),
        *_metrics("mq_endpoint", MQEndpointAccessMetrics, Scope.ENDPOINT),
    ),
    _queues,
    known_by=MQAccessMetrics,
    span_layer=SpanLayer.MQ,
    measure=_message,
    called=CalledView(
        "Message brokers",
        "mq_service",
        (
            ("Consumed (msgs / min)", "consume_cpm"),
            ("In transit (ms)", "consume_latency"),
            ("Consumed ok (%)", "consume_sla/100"),
            ("Produced (msgs / min)", "produce_cpm"),
        ),
    ),
)
