"""The main job on one machine: a mixed node on the embedded storage and a fleet
of simulated agents that register, heart-beat and report traces; then the
inventory and the services' metrics."""

from __future__ import annotations

import logging
import random
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from skyoap.agent import Agent
from skyoap.agent.traces import chain_trace, report
from skyoap.deploy.inventory_table import print_inventory
from skyoap.deploy.query import print_query
from skyoap.query.config import QueryConfig
from skyoap.runtime import clock
from skyoap.storage.config import StorageConfig
from skyoap.storage.select import open_storage
from skyoap.wiring.config import NodeConfig, ServerConfig
from skyoap.wiring.node import Node

log = logging.getLogger(__name__)


def endpoints_of(service: str) -> list[str]:
    return [f"GET:/api/{service}/orders", f"POST:/api/{service}/pay"]


def run_demo(
    config: NodeConfig, services: int, instances: int, heartbeat_s: float, duration_s: float, traces: int
) -> int:
    with tempfile.TemporaryDirectory(prefix="skyoap-demo-") as tmp:
        if config.storage.embedded_path == StorageConfig.embedded_path:
            config = config.with_options(embedded_path=str(Path(tmp) / "skyoap.db"))
        default_port = config.server.port == ServerConfig.port
        default_query_port = config.query.port == QueryConfig.port
        config = config.with_options(
            host="127.0.0.1",
            port=0 if default_port else config.server.port,
            query_port=0 if default_query_port else config.query.port,
        )
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
            print(
                f"node listening on {target} (queries at {node.query_url or 'none'}); "
                f"{len(agents)} agents registering",
                file=sys.stderr,
            )
            started = time.monotonic()

            def bring_up(a: Agent) -> None:
                a.register(timeout_s=60)
                a.register_endpoints(endpoints_of(a.service_name))
                a.register_addresses([f"db-{a.service_name}:5432"])
                a.start_heartbeat(heartbeat_s)

            with ThreadPoolExecutor(max_workers=min(64, len(agents))) as pool:
                list(pool.map(bring_up, agents))
            print(
                f"every agent has its ids after {time.monotonic() - started:.2f} s; "
                f"heart-beating for {duration_s:g} s",
                file=sys.stderr,
            )
            rng = random.Random(1)
            names = [f"demo-service-{s}" for s in range(services)]
            by_service: dict[str, list[str]] = {}
            for a in agents:
                by_service.setdefault(a.service_name, []).append(a.instance_uuid)
            paths = {n: endpoints_of(n) for n in names}
            segments = [
                seg
                for t in range(traces)
                for seg in chain_trace(
                    f"demo-trace-{t}", names[t % services :][:3], clock.now_ms(), rng, by_service, paths
                )
            ]
            report(target, segments)
            print(f"{traces} traces reported ({len(segments)} segments)", file=sys.stderr)
            threading.Event().wait(duration_s)
            for a in agents:
                a.close()
        # The node drained its chains into storage on close; read what it stored.
        storage = open_storage(config.storage)
        try:
            print_inventory(storage.inventory, sys.stdout)
            for what in ("services", "relations"):
                print(file=sys.stdout)
                print_query(storage, what, None, 15, 50, sys.stdout)
        finally:
            storage.close()
    return 0
