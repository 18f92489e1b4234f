from __future__ import annotations

import json
import socket
import threading
import urllib.request
from pathlib import Path

import pytest

from skyoap.agent import Agent
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node


def test_a_closed_node_leaves_no_thread_behind(tmp_path: Path) -> None:
    before = {t.ident for t in threading.enumerate()}
    config = NodeConfig().with_options(
        host="127.0.0.1", port=0, admin_port=0, query_port=0, embedded_path=str(tmp_path / "skyoap.db")
    )
    node = Node(config).start()
    try:
        ids = Agent(node.address, "orders", retry_interval_s=0.05).register(timeout_s=30)
        assert (ids.service_id, ids.instance_id) == (1, 1)
        assert node.query_url is not None
        asked = urllib.request.Request(node.query_url, data=b'{"query": "{ checkHealth { score } }"}')
        with urllib.request.urlopen(asked, timeout=30) as answer:
            assert json.load(answer) == {"data": {"checkHealth": {"score": 0}}}
        started = {t.name for t in threading.enumerate() if t.ident not in before}
        # Every drain pool, periodic task and server of a mixed node runs.
        pools = {"REGISTER_L1-0", "REGISTER_L2-0", "METRICS_L1-0", "METRICS_L2-0", "RECORD_PERSIST-0"}
        assert pools <= started
        assert {"metrics-persist", "remote-client-refresh", "remote-sender", "admin-http"} <= started
        assert {"query-http", "query_0"} <= started
    finally:
        node.close(5)
    assert [t.name for t in threading.enumerate() if t.ident not in before and t.is_alive()] == []


def test_a_node_that_fails_to_start_says_why_and_releases_its_port(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        admin_port = taken.getsockname()[1]
        config = NodeConfig().with_options(
            host="127.0.0.1",
            port=0,
            admin_port=admin_port,
            query_port=0,
            embedded_path=str(tmp_path / "skyoap.db"),
        )
        node = Node(config)
        with pytest.raises(OSError, match="in use"):
            node.start()
        assert node.server is not None
        grpc_port = node.server.port
    # The port the failed node had bound is free again, and a taken one is refused clearly.
    again = Node(config.with_options(port=grpc_port, admin_port=-1)).start()
    try:
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{grpc_port}: the address is in use"):
            Node(config.with_options(port=grpc_port, admin_port=-1)).start()
    finally:
        again.close(5)


def test_a_taken_query_port_stops_the_node_saying_so_and_frees_its_other_ports(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        query_port = taken.getsockname()[1]
        config = NodeConfig().with_options(
            host="127.0.0.1",
            port=0,
            query_host="127.0.0.1",
            query_port=query_port,
            embedded_path=str(tmp_path / "skyoap.db"),
        )
        node = Node(config)
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{query_port} for queries: "):
            node.start()
        assert node.server is not None
        grpc_port = node.server.port
    again = Node(config.with_options(port=grpc_port)).start()  # both ports free again
    try:
        assert (again.port, again.query_port) == (grpc_port, query_port)
    finally:
        again.close(5)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"memory_limit_mb": 0}, "--memory-limit-mb must be at least 1, not 0"),
        ({"call_deadline_s": 0.0}, "--call-deadline-s must be above 0, not 0: calls wait that long"),
        ({"topic_commit_interval_s": 0.0}, "--topic-commit-interval-s must be above 0, not 0"),
        (
            {"topic_lease_s": 0.5},
            r"--topic-lease-s \(0.5\) must be longer than --topic-commit-interval-s \(0.5\)",
        ),
        ({"max_concurrent_calls": 0}, "--max-concurrent-calls must be at least 1, not 0"),
        ({"stream_idle_s": 0.0}, "--stream-idle-s must be above 0, not 0"),
        ({"auth_token": "s3cr\u00e9t"}, "--auth-token must be printable ASCII: it travels as gRPC metadata"),
        ({"auth_token": "line\nbreak"}, "--auth-token must be printable ASCII"),
        ({"max_spans_per_segment": 0}, "--max-spans-per-segment must be at least 1, not 0"),
        ({"max_endpoints_per_service": -3}, "--max-endpoints-per-service must be at least 1, not -3"),
    ],
)
def test_limits_that_could_never_work_are_refused_with_the_option_named(
    options: dict[str, float | str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        Node(NodeConfig().with_options(**options))
