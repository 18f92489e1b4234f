"""A reading of a node's self-metrics in Prometheus's text format: its own
(``Instruments.exposition``) or another node's, from its admin ``/metrics``."""

from __future__ import annotations

import urllib.parse
import urllib.request
from collections.abc import Iterable

from prometheus_client.parser import text_string_to_metric_families


class Scrape:
    """One reading of a node's /metrics."""

    def __init__(self, text: str) -> None:
        self._values = {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def value(self, name: str, **labels: str) -> float:
        """The sample ``name`` with exactly ``labels``; 0 when the node has none (yet)."""
        return self._values.get((name, frozenset(labels.items())), 0.0)

    def total(self, name: str, **labels: str) -> float:
        """The sum of the samples ``name`` whose labels include ``labels``."""
        want = set(labels.items())
        return sum(v for (n, ls), v in self._values.items() if n == name and want <= ls)

    def quantile(self, histogram: str, q: float) -> float | None:
        """The upper bound of the bucket that holds the ``q`` quantile of
        ``histogram`` over all its series; None before anything was observed."""
        buckets: dict[float, float] = {}
        for (n, ls), v in self._values.items():
            if n == f"{histogram}_bucket":
                le = float(dict(ls)["le"])
                buckets[le] = buckets.get(le, 0.0) + v
        count = buckets.get(float("inf"), 0.0)
        if not count:
            return None
        return next(le for le in sorted(buckets) if buckets[le] >= q * count)


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""Nodes are read directly, whatever proxy the environment names."""


def read_metrics(admin: str, timeout_s: float = 10.0, names: Iterable[str] = ()) -> Scrape:
    """The /metrics of the node whose admin endpoint is ``admin`` (host:port),
    every family or those of the sample ``names``; ``timeout_s`` bounds each
    socket operation of the read."""
    query = urllib.parse.urlencode([("name[]", n) for n in names])
    with _DIRECT.open(f"http://{admin}/metrics{'?' if query else ''}{query}", timeout=timeout_s) as r:
        return Scrape(r.read().decode())
