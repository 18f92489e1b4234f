"""The ``skyoap`` command."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence

from deploy.options import add_options, config_from
from pipeline.config import NodeConfig
from storage.api import StorageError


def _node(args: argparse.Namespace) -> int:
    from deploy.node import Node

    config = config_from(args, NodeConfig)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    node = Node(config).start()
    # One line on stdout that scripts can wait for (the port is real even when 0 was asked for).
    print(f"skyoap node listening on {node.address}", flush=True)
    try:
        stop.wait()
    finally:
        node.close()
    return 0


def _demo(args: argparse.Namespace) -> int:
    from deploy.demo import run_demo

    return run_demo(
        config_from(args, NodeConfig), args.services, args.instances, args.heartbeat_s, args.duration_s
    )


def _inventory(args: argparse.Namespace) -> int:
    from deploy.inventory_table import print_inventory
    from pipeline.inventory import INVENTORY_TYPES
    from storage.select import open_storage

    storage = open_storage(config_from(args, NodeConfig))
    try:
        storage.inventory.install(INVENTORY_TYPES)
        print_inventory(storage.inventory, sys.stdout, args.limit)
    finally:
        storage.close()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="skyoap",
        description="A SkyWalking-style telemetry ingestion pipeline. Every option can also be set "
        "in the environment as SKYOAP_<OPTION> (e.g. SKYOAP_STORAGE=elasticsearch).",
    )
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR [default: INFO]")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    node = sub.add_parser("node", help="run a node until SIGINT or SIGTERM", description="Run a node.")
    add_options(node, NodeConfig)
    node.set_defaults(run=_node)

    demo = sub.add_parser(
        "demo",
        help="run a mixed node and a fleet of simulated agents, then print the inventory",
        description="Run a mixed node (a temporary embedded storage unless told otherwise) and simulated "
        "agents that register and heart-beat; print the registered inventory at the end.",
    )
    demo.add_argument("--services", type=int, default=10, help="services to simulate [default: 10]")
    demo.add_argument("--instances", type=int, default=4, help="instances (agents) per service [default: 4]")
    demo.add_argument("--heartbeat-s", type=float, default=1.0, help="heartbeat interval [default: 1]")
    demo.add_argument("--duration-s", type=float, default=3.0, help="how long agents heart-beat [default: 3]")
    add_options(demo, NodeConfig)
    demo.set_defaults(run=_demo)

    inventory = sub.add_parser(
        "inventory",
        help="print the registered services, instances, endpoints and addresses",
        description="Print the inventory a storage holds (the storage options say which).",
    )
    inventory.add_argument("--limit", type=int, default=10_000, help="rows per table [default: 10000]")
    add_options(inventory, NodeConfig)
    inventory.set_defaults(run=_inventory)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s",
    )
    try:
        return int(args.run(args))
    except (ValueError, OSError, StorageError) as e:
        print(f"skyoap {args.command}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
