from __future__ import annotations

import threading
from pathlib import Path

from agent import Agent
from wiring.config import NodeConfig
from wiring.node import Node


def test_a_closed_node_leaves_no_thread_behind(tmp_path: Path) -> None:
    before = {t.ident for t in threading.enumerate()}
    config = NodeConfig().with_options(
        host="127.0.0.1", port=0, admin_port=0, embedded_path=str(tmp_path / "skyoap.db")
    )
    node = Node(config).start()
    try:
        ids = Agent(node.address, "orders", retry_interval_s=0.05).register(timeout_s=30)
        assert (ids.service_id, ids.instance_id) == (1, 1)
        started = {t.name for t in threading.enumerate() if t.ident not in before}
        # Every drain pool, periodic task and server of a mixed node runs.
        pools = {"REGISTER_L1-0", "REGISTER_L2-0", "METRICS_L1-0", "METRICS_L2-0", "RECORD_PERSIST-0"}
        assert pools <= started
        assert {"metrics-persist", "remote-client-refresh", "remote-sender", "admin-http"} <= started
    finally:
        node.close(5)
    assert [t.name for t in threading.enumerate() if t.ident not in before and t.is_alive()] == []
