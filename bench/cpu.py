"""Where a benchmark's cores go: the CPU time each process used over a span of
wall time, read from ``/proc`` (Linux)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass


def cpu_seconds(pid: int) -> float:
    """CPU time (user and system) used so far by process ``pid`` and every
    process under it (Elasticsearch's launcher starts a JVM)."""
    stats: dict[int, tuple[int, int]] = {}  # pid -> (parent, clock ticks used)
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        stats[int(entry)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    ticks, todo = 0, [pid]
    while todo:
        p = todo.pop()
        ticks += stats.get(p, (0, 0))[1]
        todo += [c for c, (parent, _) in stats.items() if parent == p]
    return ticks / os.sysconf("SC_CLK_TCK")


@dataclass
class Usage:
    """CPU seconds of the node, Elasticsearch and this process over a span of wall time."""

    wall_s: float = 0.0
    node_s: float = 0.0
    es_s: float = 0.0
    load_s: float = 0.0

    def line(self, items: int, what: str) -> str:
        def part(name: str, seconds: float) -> str:
            return f"{name} {seconds / self.wall_s:.2f} cores ({seconds / items * 1e6:.0f} us/{what})"

        parts = [("node", self.node_s), ("Elasticsearch", self.es_s), ("load", self.load_s)]
        return ", ".join(part(n, s) for n, s in parts if s)


@contextlib.contextmanager
def measuring(usage: Usage, es_pid: int | None = None, node_pid: int | None = None) -> Iterator[None]:
    """Fills ``usage`` with what the processes used while the block ran
    (this one always; Elasticsearch and the node when given)."""

    def now() -> tuple[float, ...]:
        used = [cpu_seconds(p) if p is not None else 0.0 for p in (node_pid, es_pid)]
        return time.perf_counter(), *used, time.process_time()

    began = now()
    yield
    usage.wall_s, usage.node_s, usage.es_s, usage.load_s = (b - a for a, b in zip(began, now(), strict=True))
