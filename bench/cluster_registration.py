"""Registration throughput of clusters: 1, 2 and 3 receivers in front of 1 and
2 aggregators, every node its own process, on one Elasticsearch and one Redis.

    .venv/bin/python -m bench.cluster_registration [--names 10000] [--selector forever-first]

Each layout is a fresh cluster; the load is the registration benchmark's
(threads of agents asking in batches of 100, spread over the receivers,
re-asking every 0.25 s), after a warm-up.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from bench.registration import UNBOUNDED, register_new
from bench.results import Figure, record
from skyoap.deploy.cluster import LocalCluster
from skyoap.deploy.servers import ElasticsearchServer, RedisServer
from skyoap.runtime.scrape import read_metrics


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--names", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--selector", default="forever-first", help="the nodes' --inventory-selector")
    args = parser.parse_args()
    print(f"# {os.cpu_count()} cores; {args.names} new names per layout; inventory selector {args.selector}")
    layouts = [(r, a) for a in (1, 2) for r in (1, 2, 3)]
    results: dict[tuple[int, int], list[str]] = {layout: [] for layout in layouts}
    rates: list[float] = []
    es, rs = ElasticsearchServer().start(), RedisServer().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            # Forward, then backward: Elasticsearch keeps warming up over the run,
            # which would otherwise favour whichever layout comes last.
            for n, (receivers, aggregators) in enumerate([*layouts, *reversed(layouts)]):
                cluster = LocalCluster.create(
                    Path(tmp) / f"run{n}", rs.url, es.url,
                    ["--log-level", "WARNING", "--inventory-selector", args.selector, *UNBOUNDED],
                )  # fmt: skip
                try:
                    aggs = [cluster.add("aggregator") for _ in range(aggregators)]
                    recv = [cluster.add("receiver") for _ in range(receivers)]
                    addresses = [r.address for r in recv]
                    register_new(addresses, [f"warm-{i}" for i in range(2000)], args.threads, 100, 0.25)
                    names = [f"name-{i}" for i in range(args.names)]
                    result = register_new(addresses, names, args.threads, 100, 0.25)
                    writes = [
                        int(
                            read_metrics(a.admin).value(
                                "skyoap_worker_stored_total", worker="service_inventory_l2", op="insert"
                            )
                        )
                        for a in aggs
                    ]
                finally:
                    cluster.down()
                results[(receivers, aggregators)].append(f"{result.ids_per_s:.0f} ids/s {writes}")
                rates.append(result.ids_per_s)
    finally:
        es.stop()
        rs.stop()
    print("layout                      forward pass, backward pass (names each aggregator persisted)")
    for (receivers, aggregators), runs in results.items():
        print(f"{receivers} receivers, {aggregators} aggregators:  {';  '.join(runs)}")
    record("cluster_registration", [
        Figure("new names, the slowest of 12 passes (1-3 receivers, 1-2 aggregators)", min(rates), "ids/s"),
        Figure("new names, the fastest pass", max(rates), "ids/s"),
    ])  # fmt: skip


if __name__ == "__main__":
    main()
