"""The main job on one machine: a mixed node on the embedded storage and a fleet
of simulated agents that register, heart-beat and report traces; then the
inventory and the services' metrics."""

from __future__ import annotations

import logging
import random
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc

from skyoap.agent import Agent
from skyoap.agent.traces import chain_trace, report
from skyoap.deploy.inventory_table import print_inventory
from skyoap.deploy.query import print_query
from skyoap.edge.config import ServerConfig
from skyoap.query.config import QueryConfig
from skyoap.runtime import clock
from skyoap.storage.config import StorageConfig
from skyoap.storage.select import open_storage
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node

log = logging.getLogger(__name__)


def endpoints_of(service: str) -> list[str]:
    return [f"GET:/api/{service}/orders", f"POST:/api/{service}/pay"]


SERVE_REPORT_S = 10.0
"""How often ``--serve`` reports more traces, so the UI's charts move."""


class Traffic:
    """The demo's services calling each other in chains of three, the last of
    each chain querying its database."""

    def __init__(self, target: str, agents: list[Agent]) -> None:
        self._target = target
        self._rng = random.Random(1)
        self._instances: dict[str, list[str]] = {}
        for a in agents:
            self._instances.setdefault(a.service_name, []).append(a.instance_uuid)
        self._names = sorted(self._instances, key=lambda n: int(n.rsplit("-", 1)[1]))
        self._sent = 0

    def report(self, traces: int) -> int:
        """Reports ``traces`` more traces, started now; the segments sent."""
        names, now = self._names, clock.now_ms()
        segments = []
        for t in range(self._sent, self._sent + traces):
            chain = names[t % len(names) :][:3]
            segments += chain_trace(
                f"demo-trace-{t}", chain, now, self._rng, self._instances,
                {n: endpoints_of(n) for n in chain}, database=f"db-{chain[-1]}:5432",
            )  # fmt: skip
        self._sent += traces
        report(self._target, segments)
        return len(segments)


def run_demo(
    config: NodeConfig,
    services: int,
    instances: int,
    heartbeat_s: float,
    duration_s: float,
    traces: int,
    serve: bool = False,
) -> int:
    """The demo; with ``serve``, the node stays up on its configured query port,
    its services reporting on, until SIGINT or SIGTERM."""
    with tempfile.TemporaryDirectory(prefix="skyoap-demo-") as tmp:
        config = _on_this_machine(config, Path(tmp), serve)
        with Node(config) as node:
            started = time.monotonic()
            agents = _agents_up(node, services, instances, heartbeat_s)
            print(
                f"every agent has its ids after {time.monotonic() - started:.2f} s; "
                f"heart-beating for {duration_s:g} s",
                file=sys.stderr,
            )
            traffic = Traffic(node.address, agents)
            print(f"{traces} traces reported ({traffic.report(traces)} segments)", file=sys.stderr)
            if serve:
                _serve(node.ui_url, lambda: traffic.report(max(1, traces // 30)))
            else:
                threading.Event().wait(duration_s)
            for a in agents:
                a.close()
        # The node drained its chains into storage on close; read what it stored.
        _print_stored(config)
    if not serve:
        ui = f"http://127.0.0.1:{config.query.port or QueryConfig.port}/"
        print(f"\nTo look at it in a browser: `skyoap demo --serve`, then open {ui}", file=sys.stdout)
    return 0


def _on_this_machine(config: NodeConfig, tmp: Path, serve: bool) -> NodeConfig:
    """``config`` with what it left at its defaults made the demo's: storage in
    ``tmp``, free ports (the query port kept with ``serve``), loopback only."""
    if config.storage.embedded_path == StorageConfig.embedded_path:
        config = config.with_options(embedded_path=str(tmp / "skyoap.db"))
    default_port = config.server.port == ServerConfig.port
    default_query_port = config.query.port == QueryConfig.port
    return config.with_options(
        host="127.0.0.1",
        port=0 if default_port else config.server.port,
        query_port=0 if default_query_port and not serve else config.query.port,
        # The demo's queries and UI stay on this machine unless told otherwise.
        query_host="127.0.0.1" if config.query.host == QueryConfig.host else config.query.host,
    )


def _agents_up(node: Node, services: int, instances: int, heartbeat_s: float) -> list[Agent]:
    """``instances`` agents of each of ``services``, registered with their
    endpoints and addresses, heart-beating."""
    agents = [
        Agent(
            node.address,
            f"demo-service-{s}",
            properties={"host": f"host-{s}-{i}", "language": "python"},
            retry_interval_s=0.2,
        )
        for s in range(services)
        for i in range(instances)
    ]
    print(
        f"node listening on {node.address} (queries at {node.query_url or 'none'}); "
        f"{len(agents)} agents registering",
        file=sys.stderr,
    )

    def bring_up(a: Agent) -> None:
        a.register(timeout_s=60)
        a.register_endpoints(endpoints_of(a.service_name))
        a.register_addresses([f"db-{a.service_name}:5432"])
        a.start_heartbeat(heartbeat_s)

    with ThreadPoolExecutor(max_workers=min(64, len(agents))) as pool:
        list(pool.map(bring_up, agents))
    return agents


def _print_stored(config: NodeConfig) -> None:
    """The inventory, services and relations the storage of ``config`` holds."""
    storage = open_storage(config.storage)
    try:
        print_inventory(storage.inventory, sys.stdout)
        for what in ("services", "relations"):
            print(file=sys.stdout)
            print_query(storage, what, None, 15, 50, sys.stdout)
    finally:
        storage.close()


def _serve(ui_url: str | None, report_more: Callable[[], object]) -> None:
    """Keeps the demo up, reporting more every ``SERVE_REPORT_S``, until SIGINT or SIGTERM."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    print(f"the web UI: {ui_url or 'off (the query port is off)'}  (Ctrl-C stops the demo)", flush=True)
    try:
        while not stop.wait(SERVE_REPORT_S):
            try:
                report_more()
            except grpc.RpcError as e:  # the node shedding load, say: the demo goes on
                log.warning("the demo's traces were not all reported: %s", e.details())
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
