"""Samples through the meter system: what a node spends per sample it
scrapes from Prometheus exporters, runs through the rules and stores,
beside what parsing the exposition text alone costs in the same run.

Twenty hosts serve what Debian's node exporter served of this machine
(about a thousand samples each), on loopback addresses of their own; a
node on the embedded storage scrapes each every second for
``--seconds``, through the shipped rules (23 metrics a host) into its
storage. The ceiling is the CPU this process spends reading the same text
into samples, as the node's scrape does before the rules, per sample.

    .venv/bin/python -m bench.meters [--seconds 60] [--hosts 20]
"""

from __future__ import annotations

import argparse
import http.server
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.cpu import cpu_seconds
from bench.registration import spawn, stop
from bench.results import Figure, at_most, record
from skyoap.deploy.servers import ExporterServer
from skyoap.receiver.prometheus import Target, samples_of
from skyoap.runtime.scrape import read_metrics

SCRAPED = "skyoap_scrape_samples_total"
GOAL = 2.0
"""Of parsing alone: the rules and the pipeline may cost as much again."""


class _Static(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


def hosts(text: str, count: int) -> list[http.server.ThreadingHTTPServer]:
    """``count`` servers of ``text``, on 127.0.0.2, 127.0.0.3, …"""
    _Static.body = text.encode()
    servers = [http.server.ThreadingHTTPServer((f"127.0.0.{i + 2}", 0), _Static) for i in range(count)]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    return servers


def parse_alone(text: str, rounds: int) -> float:
    """CPU seconds per sample of reading ``text`` into samples."""
    target = Target("vm-monitoring", "127.0.0.2:9100", {}, 1.0, 1.0, "http://127.0.0.2:9100/metrics")
    samples = sum(len(f.samples) for f in samples_of(text, target, 0).families.values())
    began = time.process_time()
    for _ in range(rounds):
        samples_of(text, target, int(time.time() * 1000))
    return (time.process_time() - began) / (rounds * samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--hosts", type=int, default=20)
    args = parser.parse_args()
    exporter = ExporterServer("node").start()
    try:
        text = exporter.metrics()
    finally:
        exporter.stop()
    servers = hosts(text, args.hosts)
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "scrape.yaml"
        targets = ", ".join(f"'127.0.0.{i + 2}:{s.server_port}'" for i, s in enumerate(servers))
        config.write_text(
            "scrape_configs:\n  - job_name: vm-monitoring\n    scrape_interval: 1s\n"
            f"    static_configs: [{{targets: [{targets}]}}]\n"
        )
        argv = [
            sys.executable, "-m", "skyoap.deploy.cli", "node", "--log-level", "WARNING",
            "--host", "127.0.0.1", "--port", "0", "--admin-port", "0", "--query-port", "-1",
            "--storage", "embedded", "--embedded-path", f"{tmp}/bench.db", "--scrape-config", str(config),
        ]  # fmt: skip
        node, addresses = spawn(argv, r"listening on (\S+ admin \S+)")
        admin = addresses.split()[2]
        try:
            time.sleep(5)  # every target scraped a few times, the rules' counters warm
            samples0, cpu0, wall0 = _scraped(admin), cpu_seconds(node.pid), time.perf_counter()
            time.sleep(args.seconds)
            samples = _scraped(admin) - samples0
            node_s, wall_s = cpu_seconds(node.pid) - cpu0, time.perf_counter() - wall0
        finally:
            stop(node)
    for s in servers:
        s.shutdown()
    ceiling = parse_alone(text, 50)
    per_sample = node_s / samples
    print(f"{samples / wall_s:,.0f} samples/s scraped; node {node_s / wall_s:.2f} cores")
    print(f"node's CPU per sample: {per_sample * 1e6:.2f} us; parsing alone {ceiling * 1e6:.2f} us")
    cpu = Figure(
        "the node's CPU per sample scraped, through the rules into storage", per_sample * 1e6, "µs",
        ceiling=ceiling * 1e6, ceiling_is="parsing the exposition text alone", goal=at_most(GOAL, True),
    )  # fmt: skip
    rate = Figure("samples a second per core through the rules and the pipeline", 1 / per_sample, "samples/s")
    record("meters", [cpu, rate])


def _scraped(admin: str) -> float:
    return read_metrics(admin, names=[SCRAPED]).total(SCRAPED)


if __name__ == "__main__":
    main()
