"""The main job on one machine: a mixed node on the embedded storage and a fleet
of simulated agents that register and heart-beat; then the inventory."""

from __future__ import annotations

import logging
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from agent import Agent
from deploy.inventory_table import print_inventory
from deploy.node import Node
from pipeline.config import NodeConfig
from storage.select import open_storage

log = logging.getLogger(__name__)


def run_demo(config: NodeConfig, services: int, instances: int, heartbeat_s: float, duration_s: float) -> int:
    with tempfile.TemporaryDirectory(prefix="skyoap-demo-") as tmp:
        if config.embedded_path == NodeConfig.embedded_path:
            config = replace(config, embedded_path=str(Path(tmp) / "skyoap.db"))
        config = replace(config, host="127.0.0.1", port=0 if config.port == NodeConfig.port else config.port)
        with Node(config) as node:
            target = node.address
            agents = [
                Agent(
                    target,
                    f"demo-service-{s}",
                    properties={"host": f"host-{s}-{i}", "language": "python"},
                    retry_interval_s=0.2,
                )
                for s in range(services)
                for i in range(instances)
            ]
            print(f"node listening on {target}; {len(agents)} agents registering", file=sys.stderr)
            started = time.monotonic()

            def bring_up(a: Agent) -> None:
                a.register(timeout_s=60)
                a.register_endpoints([f"GET:/api/{a.service_name}/orders", f"POST:/api/{a.service_name}/pay"])
                a.register_addresses([f"db-{a.service_name}:5432"])
                a.start_heartbeat(heartbeat_s)

            with ThreadPoolExecutor(max_workers=min(64, len(agents))) as pool:
                list(pool.map(bring_up, agents))
            print(
                f"every agent has its ids after {time.monotonic() - started:.2f} s; "
                f"heart-beating for {duration_s:g} s",
                file=sys.stderr,
            )
            threading.Event().wait(duration_s)
            for a in agents:
                a.close()
        # The node drained its chains into storage on close; read what it stored.
        storage = open_storage(config)
        try:
            print_inventory(storage.inventory, sys.stdout)
        finally:
            storage.close()
    return 0
