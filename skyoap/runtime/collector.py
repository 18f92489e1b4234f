"""Python's cyclic garbage collector in a node's process.

A node builds a few tuples and lists for every span it takes, and reference
counting frees nearly all of them once their chunk is handed on; few take
part in a cycle. At the collector's default thresholds (a young collection
every 700 container allocations, an older one every tenth of those) a node
under load collects every few segments and scans what it holds again and
again: under the telemetry benchmark that cost about a tenth of the node's
CPU per segment (``docs/benchmarks-history.md``). A young collection every
50,000 allocations still runs several times a second under load."""

from __future__ import annotations

import gc

THRESHOLDS = (50_000, 20, 100)
"""Container allocations (less deallocations) between young collections;
young collections between middle ones; middle ones between full ones (which
Python runs only once a quarter of what survived is new)."""


def tune_collector() -> None:
    """Sets the collector's thresholds for a node's process."""
    gc.set_threshold(*THRESHOLDS)
