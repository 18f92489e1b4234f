"""Items per second through the remote hop between two nodes: this process's
real gRPC remote client streaming batches to a separate process running the
real RemoteService, beside the same client streaming to a handler that only
counts messages (the ceiling).

    .venv/bin/python -m bench.remote_hop [--items 200000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from bench.cpu import Usage, measuring
from bench.registration import spawn, stop
from bench.results import Figure, at_least, record
from skyoap.model.inventory import ServiceInstanceInventory
from skyoap.model.stream import Stage, worker_id
from skyoap.remote.grpc_client import GrpcRemoteClient
from skyoap.runtime.instruments import Instruments

L2 = worker_id(ServiceInstanceInventory, Stage.L2)


def items_per_s(address: str, count: int, usage: Usage | None = None, server_pid: int | None = None) -> float:
    """What the remote client streams to ``address`` a second; ``usage`` gets
    the CPU the server (``server_pid``) and this process used meanwhile."""
    instruments = Instruments()
    client = GrpcRemoteClient(address, instruments, buffer_size=50_000, give_back=lambda items: None)
    client.start()
    # A heartbeat-sized item: what L1 sends most of.
    items = [
        ServiceInstanceInventory(name=f"inst-{i}", service_id=i % 50 + 1, instance_uuid=f"uuid-{i:08d}",
                                 heartbeat_time=1_700_000_000_000 + i, properties={"host": f"h{i % 20}"})
        for i in range(count)
    ]  # fmt: skip
    started = time.perf_counter()
    with measuring(usage or Usage(), node_pid=server_pid):
        for item in items:
            client.push(L2, item)
        while instruments.value("skyoap_remote_sent_total", target=address) < count:
            time.sleep(0.005)
    elapsed = time.perf_counter() - started
    client.close(5)
    return count / elapsed


def cpu_line(usage: Usage, items: int) -> str:
    return (
        f"server {usage.node_s / usage.wall_s:.2f} cores ({usage.node_s / items * 1e6:.1f} us/item), "
        f"client {usage.load_s / usage.wall_s:.2f} cores ({usage.load_s / items * 1e6:.1f} us/item)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument(
        "--rounds", type=int, default=3, help="alternating runs of each, the median is reported"
    )
    args = parser.parse_args()
    print(f"# {os.cpu_count()} cores; {args.items} items per run, {args.rounds} runs each, alternating")
    service, service_address = spawn(
        [sys.executable, "-m", "bench.remote_server", "--mode", "service"], r"listening on (\S+)"
    )
    empty, empty_address = spawn(
        [sys.executable, "-m", "bench.remote_server", "--mode", "empty"], r"listening on (\S+)"
    )
    try:
        items_per_s(service_address, 20_000)  # warm-up of both
        items_per_s(empty_address, 20_000)
        real, ceiling = [], []
        real_usage, ceiling_usage = Usage(), Usage()
        for _ in range(args.rounds):
            ceiling.append(items_per_s(empty_address, args.items, ceiling_usage, empty.pid))
            real.append(items_per_s(service_address, args.items, real_usage, service.pid))
    finally:
        stop(service)
        stop(empty)
    r, c = statistics.median(real), statistics.median(ceiling)
    print(f"empty handler (ceiling): {c:10.0f} items/s   runs: {', '.join(f'{v:.0f}' for v in ceiling)}")
    print(f"  CPU of the last run: {cpu_line(ceiling_usage, args.items)}")
    print(f"RemoteService:           {r:10.0f} items/s   runs: {', '.join(f'{v:.0f}' for v in real)}")
    print(f"  CPU of the last run: {cpu_line(real_usage, args.items)}")
    print(f"remote hop at {r / c:.1%} of the ceiling")
    goal = at_least(0.7, of_ceiling=True)
    record("remote_hop", [Figure("RemoteService", r, "items/s", c, "an empty handler", goal)])


if __name__ == "__main__":
    main()
