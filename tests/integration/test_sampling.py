"""Storage-side trace sampling across a cluster: two receivers decide alike,
with nothing said between them, which traces they store; every segment is
measured either way."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

from skyoap.agent.traces import report
from skyoap.deploy.cluster import LocalCluster
from skyoap.model.metrics import (
    SEP,
    CallMetrics,
    Downsampling,
    ServiceMetrics,
    ServiceRelationMetrics,
    minute_bucket,
)
from skyoap.model.records import SegmentRecord
from skyoap.proto.skywalking import tracing_pb2
from skyoap.receiver.sampling import draw
from skyoap.storage.api import RecordSearch
from skyoap.storage.select import open_storage
from tests.integration.cluster_support import metric
from tests.integration.helpers import eventually
from tests.integration.test_cluster import storage_of

TRACES = 2000
ERROR_EVERY = 25
"""Every 25th trace fails in both its services: 80 error traces."""


def trace(i: int, now: int) -> tuple[tracing_pb2.SegmentObject, tracing_pb2.SegmentObject]:
    """Trace ``i``: front's /buy calling back's /reserve, a segment each."""
    trace_id = str(uuid.uuid5(uuid.NAMESPACE_OID, f"trace-{i}"))
    error = i % ERROR_EVERY == 0
    front = tracing_pb2.SegmentObject(
        traceId=trace_id, traceSegmentId=f"{trace_id}.0", service="front", serviceInstance="front-1",
        spans=[
            tracing_pb2.SpanObject(
                spanId=0, parentSpanId=-1, spanType=tracing_pb2.Entry, operationName="/buy",
                startTime=now, endTime=now + 20, isError=error,
            ),
            tracing_pb2.SpanObject(
                spanId=1, parentSpanId=0, spanType=tracing_pb2.Exit, operationName="/reserve",
                peer="back:8080", startTime=now + 1, endTime=now + 19, isError=error,
            ),
        ],
    )  # fmt: skip
    ref = tracing_pb2.SegmentReference(
        refType=tracing_pb2.CrossProcess, traceId=trace_id, parentTraceSegmentId=f"{trace_id}.0",
        parentSpanId=1, parentService="front", parentServiceInstance="front-1", parentEndpoint="/buy",
        networkAddressUsedAtPeer="back:8080",
    )  # fmt: skip
    back = tracing_pb2.SegmentObject(
        traceId=trace_id, traceSegmentId=f"{trace_id}.1", service="back", serviceInstance="back-1",
        spans=[
            tracing_pb2.SpanObject(
                spanId=0, parentSpanId=-1, spanType=tracing_pb2.Entry, operationName="/reserve",
                startTime=now + 2, endTime=now + 18, isError=error, refs=[ref],
            ),
        ],
    )  # fmt: skip
    return front, back


def test_a_tenth_of_the_traces_is_stored_whole_on_two_receivers_and_every_call_measured(
    local_cluster: Callable[..., LocalCluster], tmp_path: Path
) -> None:
    settings = tmp_path / "trace-sampling-policy-settings.yml"
    settings.write_text("default:\n  rate: 1000\n  duration: -1\n")
    cluster = local_cluster("--trace-sampling-settings", str(settings))
    cluster.add("aggregator")
    fronts, backs = cluster.add("receiver"), cluster.add("receiver")
    now = int(time.time() * 1000)
    minute = minute_bucket(now)
    traces = [trace(i, now) for i in range(TRACES)]
    for start in range(0, TRACES, 500):  # each service's segments to its own receiver
        report(fronts.address, [front for front, _ in traces[start : start + 500]])
        report(backs.address, [back for _, back in traces[start : start + 500]])

    by_rate = {front.traceId for front, _ in traces if draw(front.traceId) < 1000}
    errors = {front.traceId for i, (front, _) in enumerate(traces) if i % ERROR_EVERY == 0}
    assert 180 <= len(by_rate) <= 220  # 10 % ± 1 of 2,000 traces
    kept = by_rate | errors
    storage = open_storage(storage_of(cluster))
    try:

        def stored() -> bool:
            search = RecordSearch(first_bucket=minute, last_bucket=minute, limit=5000)
            found = {s.segment_id for s in storage.records.search(SegmentRecord, search)}
            assert found == {f"{t}.{n}" for t in kept for n in (0, 1)}
            return True

        def calls(model: type[CallMetrics], want: dict[str, tuple[int, int]]) -> bool:
            found = storage.metrics.query(model, Downsampling.MINUTE, minute, minute)
            assert {m.entity(): (m.calls, m.errors) for m in found} == want
            return True

        # Every segment of each kept trace, from both receivers, and nothing else.
        eventually(stored)
        # Every call of every trace measured, kept or not.
        eventually(lambda: calls(ServiceMetrics, {"front": (2000, 80), "back": (2000, 80)}))
        relations = [("User", "front", "server"), ("front", "back", "server")]
        relations.append(("front", "back:8080", "client"))
        eventually(lambda: calls(ServiceRelationMetrics, {SEP.join(r): (2000, 80) for r in relations}))
    finally:
        storage.close()
    for node in (fronts, backs):
        counted = {
            (outcome, reason): metric(
                node, "skyoap_trace_sampling_segments_total", outcome=outcome, reason=reason
            )
            for outcome, reason in (("kept", "rate"), ("kept", "error"), ("dropped", "rate"))
        }
        kept_errors = len(errors - by_rate)
        assert counted == {
            ("kept", "rate"): len(by_rate),
            ("kept", "error"): kept_errors,
            ("dropped", "rate"): TRACES - len(by_rate) - kept_errors,
        }
