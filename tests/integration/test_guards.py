"""The cardinality guards on a real node, on both storages: the callers a
segment's references name, the bound on services, and the names and ids the
``Register`` service hands out all stay within the bounds."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from skyoap.agent import Agent
from skyoap.model.inventory import EndpointInventory, ServiceInstanceInventory, ServiceInventory
from skyoap.model.metrics import (
    CallMetrics,
    Downsampling,
    EndpointRelationMetrics,
    ServiceInstanceRelationMetrics,
    ServiceMetrics,
    ServiceRelationMetrics,
    minute_bucket,
)
from skyoap.proto.skywalking import tracing_pb2
from skyoap.receiver.cardinality import OTHER
from skyoap.storage.select import open_storage
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.helpers import eventually, stored
from tests.integration.telemetry_data import collect, span

CALLERS = 200


def called(now: int, caller: int) -> tracing_pb2.SegmentObject:
    """A segment of ``shop`` whose entry was called by service ``caller-N``."""
    ref = tracing_pb2.SegmentReference(
        refType=tracing_pb2.CrossProcess,
        traceId=f"t-{caller}",
        parentTraceSegmentId=f"p-{caller}",
        parentSpanId=0,
        parentService=f"caller-{caller}",
        parentServiceInstance=f"caller-{caller}-pod",
        parentEndpoint=f"/caller-{caller}",
        networkAddressUsedAtPeer="shop:8080",
    )
    entry = span(0, -1, tracing_pb2.Entry, now, 3, False, operationName="/buy", refs=[ref])
    return tracing_pb2.SegmentObject(
        traceId=f"t-{caller}", traceSegmentId=f"s-{caller}", service="shop", serviceInstance="shop-1",
        spans=[entry],
    )  # fmt: skip


def served(now: int, service: str, instance: str) -> tracing_pb2.SegmentObject:
    """A segment of ``service`` whose entry no traced service called."""
    entry = span(0, -1, tracing_pb2.Entry, now, 3, False, operationName="/x")
    return tracing_pb2.SegmentObject(
        traceId=f"t-{service}", traceSegmentId=f"s-{service}-{now}", service=service,
        serviceInstance=instance, spans=[entry],
    )  # fmt: skip


def rows(
    config: NodeConfig, model: type[CallMetrics], minute: int, *fields: str
) -> dict[tuple[str, ...], int]:
    """The calls of each entity of ``model`` in ``minute``, by ``fields``."""
    storage = open_storage(config.storage)
    try:
        found = storage.metrics.query(model, Downsampling.MINUTE, minute, minute)
        return {tuple(getattr(m, f) for f in fields): m.calls for m in found}
    finally:
        storage.close()


def waits_for(
    config: NodeConfig, model: type[CallMetrics], minute: int, fields: tuple[str, ...]
) -> Callable[[dict[Any, int]], None]:
    def wait(want: dict[Any, int]) -> None:
        eventually(lambda: rows(config, model, minute, *fields) == want)

    return wait


def test_the_callers_references_name_make_at_most_the_bounded_relations(node_config: NodeConfig) -> None:
    config = node_config.with_options(
        max_services=5,
        max_instances_per_service=3,
        max_endpoints_per_service=3,
        metrics_persist_interval_s=0.3,
        metrics_l1_flush_period_s=0.2,
    )
    now = int(time.time() * 1000)
    minute = minute_bucket(now)
    node = Node(config).start()
    try:
        collect(node.address, [called(now, i) for i in range(CALLERS)])
        # "shop" takes one of the five services: three callers, then (other),
        # whose instances and endpoints are bounded in turn.
        others = CALLERS - 3
        waits_for(config, ServiceRelationMetrics, minute, ("source", "dest"))(
            {**{(f"caller-{i}", "shop"): 1 for i in range(3)}, (OTHER, "shop"): others}
        )
        pairs = {
            **{(f"caller-{i}", f"caller-{i}-pod"): 1 for i in range(3)},
            (OTHER, "caller-3-pod"): 1,
            (OTHER, "caller-4-pod"): 1,
            (OTHER, OTHER): others - 2,
        }
        waits_for(config, ServiceInstanceRelationMetrics, minute, ("source_service", "source_instance"))(
            pairs
        )
        endpoints = {
            **{(f"caller-{i}", f"/caller-{i}"): 1 for i in range(3)},
            (OTHER, "/caller-3"): 1,
            (OTHER, "/caller-4"): 1,
            (OTHER, OTHER): others - 2,
        }
        waits_for(config, EndpointRelationMetrics, minute, ("source_service", "source_endpoint"))(endpoints)
        assert node.instruments.value("skyoap_cardinality_folded_total", kind="service") == others
        assert [s.name for s in stored(config.storage, ServiceInventory)] == ["shop"]
    finally:
        node.close()


def test_services_past_max_services_are_folded_with_their_instances(node_config: NodeConfig) -> None:
    config = node_config.with_options(
        max_services=4,
        max_instances_per_service=2,
        metrics_persist_interval_s=0.3,
        metrics_l1_flush_period_s=0.2,
    )
    now = int(time.time() * 1000)
    minute = minute_bucket(now)
    node = Node(config).start()
    try:
        segments = [served(now, f"svc-{i}", f"pod-{i}") for i in range(20)]
        collect(node.address, segments)
        want = {**{(f"svc-{i}",): 1 for i in range(3)}, (OTHER,): 17}
        waits_for(config, ServiceMetrics, minute, ("service",))(want)
        names = sorted([*(f"svc-{i}" for i in range(3)), OTHER])
        eventually(lambda: sorted(s.name for s in stored(config.storage, ServiceInventory)) == names, 60)
        other = next(s.sequence for s in stored(config.storage, ServiceInventory) if s.name == OTHER)

        def instances_of_other() -> list[str]:
            return sorted(
                i.name for i in stored(config.storage, ServiceInstanceInventory) if i.service_id == other
            )

        eventually(lambda: instances_of_other() == sorted(["pod-3", OTHER]), 60)
    finally:
        node.close()

    # A restarted node reads the services from storage: a new one is folded.
    node = Node(config).start()
    try:
        collect(node.address, [served(now, "svc-0", "pod-0"), served(now, "svc-new", "pod-new")])
        want[("svc-0",)] += 1
        want[(OTHER,)] += 1
        waits_for(config, ServiceMetrics, minute, ("service",))(want)
        assert node.instruments.value("skyoap_cardinality_folded_total", kind="service") == 1
    finally:
        node.close()


def test_register_answers_names_past_a_bound_with_the_id_of_other(node_config: NodeConfig) -> None:
    config = node_config.with_options(
        max_services=3, max_instances_per_service=2, max_endpoints_per_service=2
    )
    node = Node(config).start()
    agents = [Agent(node.address, f"legacy-{i}", retry_interval_s=0.1) for i in range(6)]
    try:
        ids = [agent.register(timeout_s=60) for agent in agents]
        services = {agent.service_name: i.service_id for agent, i in zip(agents, ids, strict=True)}
        by_name = {s.name: s.sequence for s in stored(config.storage, ServiceInventory)}
        assert sorted(by_name) == sorted(["legacy-0", "legacy-1", OTHER])
        assert services == {
            "legacy-0": by_name["legacy-0"],
            "legacy-1": by_name["legacy-1"],
            **{f"legacy-{i}": by_name[OTHER] for i in range(2, 6)},
        }
        # legacy-2..5 are instances of (other): one of them, then (other).
        instances = stored(config.storage, ServiceInstanceInventory)
        assert len([i for i in instances if i.service_id == by_name[OTHER]]) == 2
        assert len(instances) == 4
        endpoint_ids = agents[0].register_endpoints(["/a", "/b", "/c"], timeout_s=60)
        endpoints = {e.name: e.sequence for e in stored(config.storage, EndpointInventory)}
        assert sorted(endpoints) == sorted(["/a", OTHER])
        assert endpoint_ids == {"/a": endpoints["/a"], "/b": endpoints[OTHER], "/c": endpoints[OTHER]}
    finally:
        for agent in agents:
            agent.close()
        node.close()
