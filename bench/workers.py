"""Segments per second into Elasticsearch through a node of one worker
process, then of two (``skyoap node --workers 2``), in the same run, beside
the storage ceiling: the same segment documents written straight to
Elasticsearch with the bulk helper and nothing else running.

One worker is the standalone node of ``bench/telemetry.py``. Two are members
of a Redis cluster, so each sends the other its share of L1 results over the
internal port. The kernel hands each new connection to one worker, so the
load opens ``--streams`` connections, enough to spread over both. The node,
Elasticsearch and the load share the machine's cores; the CPU each used per
segment is printed beside the figures.

    .venv/bin/python -m bench.workers [--segments 40000] [--streams 16]
"""

from __future__ import annotations

import argparse
import secrets

from bench.cpu import Usage, measuring
from bench.registration import stop
from bench.results import Figure, record
from bench.telemetry import load, send, start_node, storage_ceiling, until_written, warm
from skyoap.deploy.servers import ElasticsearchServer, RedisServer

CLUSTER = ("--cluster", "redis", "--internal-port", "0")


def run(
    es: ElasticsearchServer,
    rs: RedisServer,
    workers: int,
    segments: list[bytes],
    warmup: list[bytes],
    args: argparse.Namespace,
) -> Usage:
    """What one node of ``workers`` processes used to store ``segments``."""
    assert es.proc is not None
    options = ("--workers", str(workers), *CLUSTER) if workers > 1 else ()
    env = {"SKYOAP_CLUSTER_SECRET": secrets.token_urlsafe(16)} if workers > 1 else None
    node, address, admin, _ = start_node(es.url, rs.url, args.persist_interval_s, *options, env=env)
    try:
        warm(address, admin, warmup, args.streams)
        usage = Usage()
        with measuring(usage, es.proc.pid, node.pid):
            send(address, segments, args.streams)
            until_written(admin, len(warmup) + len(segments))
        return usage
    finally:
        stop(node)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--segments", type=int, default=40_000)
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--persist-interval-s", type=float, default=3.0)
    args = parser.parse_args()

    segments, warmup = load(args.segments)
    es, rs = ElasticsearchServer().start(), RedisServer().start()
    try:
        assert es.proc is not None
        ceiling_usage = Usage()
        ceiling = storage_ceiling(es.url, segments, es.proc.pid, ceiling_usage)
        usages = {workers: run(es, rs, workers, segments, warmup, args) for workers in (1, 2)}
    finally:
        es.stop()
        rs.stop()

    rates = {workers: args.segments / usage.wall_s for workers, usage in usages.items()}
    print(f"storage ceiling (bulk helper):  {ceiling:8.0f} segments/s")
    print(f"  CPU: {ceiling_usage.line(args.segments, 'document')}")
    for workers, usage in usages.items():
        print(f"node of {workers} worker(s):         {rates[workers]:8.0f} segments/s = "
              f"{rates[workers] / ceiling:.1%} of the ceiling")  # fmt: skip
        print(f"  CPU: {usage.line(args.segments, 'segment')}")
    print(f"2 workers take {rates[2] / rates[1]:.2f} times what 1 takes")
    ceiling_is = "Elasticsearch's bulk alone"
    record("workers", [
        Figure("segments into Elasticsearch, 1 worker", rates[1], "segments/s", ceiling, ceiling_is),
        Figure("the same, 2 workers", rates[2], "segments/s", ceiling, ceiling_is),
        Figure("the node's CPU per segment, 1 worker", usages[1].node_s / args.segments * 1e6, "µs"),
        Figure("the node's CPU per segment, 2 workers", usages[2].node_s / args.segments * 1e6, "µs"),
    ])  # fmt: skip


if __name__ == "__main__":
    main()
