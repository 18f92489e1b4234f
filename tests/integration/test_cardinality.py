"""Cardinality guards on a real node: raw URLs grouped by rules, and a bound
on the endpoints of a service that holds across restarts."""

from __future__ import annotations

import time
from pathlib import Path

from skyoap.model.inventory import EndpointInventory, ServiceInventory
from skyoap.model.metrics import Downsampling, EndpointMetrics, minute_bucket
from skyoap.proto.skywalking import tracing_pb2
from skyoap.receiver.cardinality import OTHER
from skyoap.storage.select import open_storage
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.helpers import eventually, stored
from tests.integration.telemetry_data import collect, span

BOUND = 100


def segments(service: str, paths: list[str], now: int) -> list[tracing_pb2.SegmentObject]:
    return [
        tracing_pb2.SegmentObject(
            traceId=f"t-{service}-{i}",
            traceSegmentId=f"s-{service}-{i}",
            service=service,
            serviceInstance=f"{service}-1",
            spans=[span(0, -1, tracing_pb2.Entry, now, 3, False, operationName=path)],
        )
        for i, path in enumerate(paths)
    ]


def endpoint_calls(config: NodeConfig, service: str, minute: int) -> dict[str, int]:
    storage = open_storage(config.storage)
    try:
        rows = storage.metrics.query(EndpointMetrics, Downsampling.MINUTE, minute, minute)
        return {m.endpoint: m.calls for m in rows if m.service == service}
    finally:
        storage.close()


def endpoints_of(config: NodeConfig, service: str) -> list[str]:
    sids = [s.sequence for s in stored(config.storage, ServiceInventory) if s.name == service]
    return sorted(e.name for e in stored(config.storage, EndpointInventory) if e.service_id in sids)


def test_ten_thousand_raw_urls_leave_at_most_the_bound_of_endpoints_and_rules_group_them(
    tmp_path: Path,
) -> None:
    rules = tmp_path / "endpoint-groups.txt"
    rules.write_text(
        "# users are grouped for one service\n[users]\n/users/{id}\n[*]\nGET:/files/{path} = GET:/files/.+\n"
    )
    config = NodeConfig().with_options(
        host="127.0.0.1",
        port=0,
        query_port=0,
        embedded_path=str(tmp_path / "skyoap.db"),
        endpoint_groups=str(rules),
        max_endpoints_per_service=BOUND,
        metrics_persist_interval_s=0.5,
        metrics_l1_flush_period_s=0.2,
    )
    now = int(time.time() * 1000)
    minute = minute_bucket(now)
    node = Node(config).start()
    try:
        collect(node.address, segments("shop", [f"/orders/{i}" for i in range(10_000)], now))
        collect(node.address, segments("users", [f"/users/{i}" for i in range(500)], now))
        collect(node.address, segments("shop", [f"GET:/files/a/{i}.txt" for i in range(50)], now))
        admitted = [f"/orders/{i}" for i in range(BOUND - 1)]
        want = {**dict.fromkeys(admitted, 1), OTHER: 10_000 - (BOUND - 1) + 50}
        eventually(lambda: endpoint_calls(config, "shop", minute) == want)
        eventually(lambda: endpoint_calls(config, "users", minute) == {"/users/{id}": 500})
        eventually(lambda: endpoints_of(config, "shop") == sorted([*admitted, OTHER]))
        eventually(lambda: endpoints_of(config, "users") == ["/users/{id}"])
        # Past the bound, the files' group is folded too: it is a new name.
        folded = node.instruments.value("skyoap_cardinality_folded_total", kind="endpoint")
        assert folded == 10_000 - (BOUND - 1) + 50
    finally:
        node.close()

    # A restarted node reads the service's endpoints from storage: a new name
    # is folded, not admitted as the first of a new set.
    node = Node(config).start()
    try:
        collect(node.address, segments("shop", ["/orders/new", "/orders/5"], now))
        want[OTHER] += 1
        want["/orders/5"] += 1
        eventually(lambda: endpoint_calls(config, "shop", minute) == want)
        assert node.instruments.value("skyoap_cardinality_folded_total", kind="endpoint") == 1
        assert len(endpoints_of(config, "shop")) == BOUND
    finally:
        node.close()
