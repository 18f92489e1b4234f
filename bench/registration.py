"""Registration throughput and time-to-id, for the embedded and the
Elasticsearch storage, beside a do-nothing gRPC handler as the ceiling.

The node (and the empty server) run as separate processes, as in production;
this process is the load: threads of agents asking with batches of names.

    .venv/bin/python -m bench.registration [--names 20000] [--threads 8] [--batch 100]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import grpc

from bench.cpu import Usage, measuring
from bench.results import Figure, at_least, at_most, pct, record
from skyoap.deploy.servers import ElasticsearchServer, RedisServer
from skyoap.model.inventory import ServiceInventory
from skyoap.proto import register_pb2, register_pb2_grpc
from skyoap.storage.elasticsearch.client import ElasticsearchClient
from skyoap.storage.elasticsearch.inventory import ElasticsearchInventoryDAO

ROOT = Path(__file__).resolve().parents[1]


UNBOUNDED = ["--max-services", "10000000"]
"""Every name the benchmark registers is a new service: none is folded into
``(other)`` by the node's bound on services."""


def spawn(
    argv: Sequence[str], pattern: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT, env=env
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(pattern, line)
    if not match:
        proc.kill()
        raise RuntimeError(f"{argv[2]} did not start: {line!r}")
    return proc, match.group(1)


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    proc.wait(30)


def request(names: Sequence[str]) -> register_pb2.Services:
    return register_pb2.Services(services=[register_pb2.Service(serviceName=n) for n in names])


@dataclass
class NewNames:
    ids_per_s: float
    time_to_id_s: list[float]


def register_new(
    address: str | list[str],
    names: list[str],
    threads: int,
    batch: int,
    poll_s: float,
    rate: float | None = None,
) -> NewNames:
    """Each thread asks for its share of names in batches until every one has an
    id, re-asking for the missing ones every ``poll_s``. With ``rate`` (names per
    second in all), new names are introduced at that pace instead of at once.
    Given several addresses, thread i asks the i-th (round robin)."""
    targets = [address] if isinstance(address, str) else address
    shares = [names[i::threads] for i in range(threads)]
    per_thread_rate = rate / threads if rate else None
    first_asked: dict[str, float] = {}
    got_at: dict[str, float] = {}

    def agent(thread: int) -> None:
        share = shares[thread]
        with grpc.insecure_channel(targets[thread % len(targets)]) as ch:
            stub = register_pb2_grpc.RegisterStub(ch)
            begun = time.perf_counter()
            introduced = 0 if per_thread_rate else len(share)
            missing: list[str] = [] if per_thread_rate else list(share)
            while missing or introduced < len(share):
                if per_thread_rate:
                    due = min(len(share), int((time.perf_counter() - begun) * per_thread_rate) + 1)
                    missing += share[introduced:due]
                    introduced = due
                for start in range(0, len(missing), batch):
                    chunk = missing[start : start + batch]
                    now = time.perf_counter()
                    for n in chunk:
                        first_asked.setdefault(n, now)
                    answer = stub.doServiceRegister(request(chunk), timeout=30)
                    done = time.perf_counter()
                    for kv in answer.services:
                        if kv.value:
                            got_at.setdefault(kv.key, done)
                missing = [n for n in missing if n not in got_at]
                if missing or introduced < len(share):
                    time.sleep(poll_s)

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(agent, range(threads)))
    elapsed = time.perf_counter() - started
    return NewNames(len(names) / elapsed, [got_at[n] - first_asked[n] for n in names])


def ask_known(address: str, names: list[str], threads: int, batch: int, duration_s: float) -> float:
    """Names answered per second when asking again and again for known names."""
    answered = 0
    lock = threading.Lock()
    deadline = time.perf_counter() + duration_s

    def agent(offset: int) -> None:
        nonlocal answered
        requests = [request(names[i : i + batch]) for i in range(offset * batch, len(names), threads * batch)]
        count = 0
        with grpc.insecure_channel(address) as ch:
            stub = register_pb2_grpc.RegisterStub(ch)
            while time.perf_counter() < deadline:
                for r in requests:
                    stub.doServiceRegister(r, timeout=30)
                    count += len(r.services)
        with lock:
            answered += count

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(agent, range(threads)))
    return answered / (time.perf_counter() - started)


def bulk_ceiling(es_url: str, count: int, es_pid: int, usage: Usage) -> float:
    """Rows per second Elasticsearch takes when the same rows are written with
    nothing else in the way: one bulk create per 5000, as L2 writes them; what
    it used fills ``usage``."""
    client = ElasticsearchClient(es_url, f"ceiling{uuid.uuid4().hex[:8]}")
    dao = ElasticsearchInventoryDAO(client)
    dao.install([ServiceInventory])
    rows = [
        ServiceInventory(name=f"ceiling-{i}", sequence=i + 1, register_time=1, heartbeat_time=1)
        for i in range(count)
    ]
    dao.insert(ServiceInventory, rows[:5000])  # warm-up, like the node's
    with measuring(usage, es_pid):
        for start in range(5000, count, 5000):
            dao.insert(ServiceInventory, rows[start : start + 5000])
    client.close()
    return (count - 5000) / usage.wall_s


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--names", type=int, default=20_000, help="new service names to register")
    parser.add_argument("--threads", type=int, default=8, help="concurrent agents")
    parser.add_argument("--batch", type=int, default=100, help="names per call")
    parser.add_argument(
        "--poll-s",
        type=float,
        default=0.25,
        help="pause before asking again for missing ids in the burst (SkyWalking's agents wait 3 s)",
    )
    parser.add_argument(
        "--paced-poll-s",
        type=float,
        default=0.05,
        help="the same in the paced run, which measures time-to-id",
    )
    parser.add_argument("--known-s", type=float, default=10.0, help="seconds of asking for known names")
    parser.add_argument("--warmup", type=int, default=5000, help="names registered before measuring")
    parser.add_argument("--paced-rate", type=float, default=1000.0, help="new names/s of the time-to-id run")
    parser.add_argument("--paced-s", type=float, default=10.0, help="seconds of the time-to-id run")
    args = parser.parse_args()

    print(
        f"# {os.cpu_count()} cores; {args.names} names, {args.threads} threads, {args.batch} names per call"
    )
    empty, empty_address = spawn(
        [sys.executable, "-m", "bench.empty_server", "--answer-names", str(args.batch)], r"listening on (\S+)"
    )
    names = [f"bench-service-{i}" for i in range(args.names)]
    figures: list[Figure] = []
    es, rs = ElasticsearchServer().start(), RedisServer().start()
    try:
        assert es.proc is not None
        ceiling_usage = Usage()
        ceiling_rows = bulk_ceiling(es.url, args.names + 5000, es.proc.pid, ceiling_usage)
        print(f"elasticsearch bulk create alone (storage ceiling): {ceiling_rows:8.0f} rows/s")
        print(f"  CPU: {ceiling_usage.line(args.names, 'row')}")
        with tempfile.TemporaryDirectory() as tmp:
            storages = {
                "embedded": ["--storage", "embedded", "--embedded-path", f"{tmp}/bench.db"],
                "elasticsearch": [
                    "--storage",
                    "elasticsearch",
                    "--es-hosts",
                    es.url,
                    "--redis-url",
                    rs.url,
                    "--es-index-prefix",
                    f"bench{uuid.uuid4().hex[:8]}",
                ],
            }
            for storage, options in storages.items():
                node, address = spawn(
                    [
                        sys.executable,
                        "-m",
                        "skyoap.deploy.cli",
                        "node",
                        "--log-level",
                        "WARNING",
                        "--host",
                        "127.0.0.1",
                        "--port",
                        "0",
                        "--query-port",
                        "-1",
                        *UNBOUNDED,
                        *options,
                    ],
                    r"listening on (\S+)",
                )
                try:
                    warm = [f"warmup-{i}" for i in range(args.warmup)]
                    register_new(address, warm, args.threads, args.batch, args.poll_s)
                    burst_usage = Usage()
                    with measuring(burst_usage, es.proc.pid if storage != "embedded" else None, node.pid):
                        burst = register_new(address, names, args.threads, args.batch, args.poll_s)
                    paced_names = [f"paced-{i}" for i in range(int(args.paced_rate * args.paced_s))]
                    paced = register_new(
                        address, paced_names, args.threads, args.batch, args.paced_poll_s, args.paced_rate
                    )
                    # The ceiling right before, so that both see the machine in the same mood.
                    ceiling_usage, known_usage = Usage(), Usage()
                    with measuring(ceiling_usage, node_pid=empty.pid):
                        ceiling = ask_known(empty_address, names, args.threads, args.batch, args.known_s)
                    with measuring(known_usage, node_pid=node.pid):
                        known = ask_known(address, names, args.threads, args.batch, args.known_s)
                finally:
                    stop(node)
                t = burst.time_to_id_s
                share = (
                    f", {burst.ids_per_s / ceiling_rows:.1%} of the bulk ceiling"
                    if storage != "embedded"
                    else ""
                )
                print(
                    f"{storage:14s} new names, burst of {len(names)}: {burst.ids_per_s:8.0f} ids/s{share}  "
                    f"(time-to-id p50 {pct(t, 50) * 1000:.0f} ms, p99 {pct(t, 99) * 1000:.0f} ms: queueing)"
                )
                print(f"  CPU: {burst_usage.line(len(names), 'id')}")
                t = paced.time_to_id_s
                print(
                    f"{storage:14s} new names at {args.paced_rate:.0f}/s: "
                    f"time-to-id p50 {pct(t, 50) * 1000:6.0f} ms  p99 {pct(t, 99) * 1000:6.0f} ms"
                )
                print(
                    f"{storage:14s} known names: {known:8.0f} names/s answered, empty handler "
                    f"{ceiling:8.0f} names/s: {known / ceiling:6.1%} of the ceiling"
                )
                for usage, rate, server in ((known_usage, known, "node"), (ceiling_usage, ceiling, "empty")):
                    line = usage.line(int(rate * usage.wall_s), "name").replace("node", server, 1)
                    print(f"  CPU: {line}")
                burst_figure = Figure(f"{storage}, new names, a burst", burst.ids_per_s, "ids/s")
                if storage != "embedded":
                    burst_figure = dataclasses.replace(
                        burst_figure, ceiling=ceiling_rows, ceiling_is="Elasticsearch's bulk create alone",
                        goal=at_least(0.5, of_ceiling=True),
                    )  # fmt: skip
                paced_p99 = f"{storage}, time-to-id p99 at {args.paced_rate:.0f} new names/s"
                figures += [
                    burst_figure,
                    Figure(paced_p99, pct(t, 99) * 1000, "ms", goal=at_most(1000)),
                    Figure(f"{storage}, known names", known, "names/s", ceiling, "an empty handler",
                           at_least(0.7, of_ceiling=True)),
                ]  # fmt: skip
        record("registration", figures)
    finally:
        stop(empty)
        es.stop()
        rs.stop()


if __name__ == "__main__":
    main()
