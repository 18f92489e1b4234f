"""A reading of a node's self-metrics in Prometheus's text format: its own
(``Instruments.exposition``) or another node's, from its admin ``/metrics``;
and the readings of a node's worker processes as one, each sample labelled
with its process."""

from __future__ import annotations

import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping

from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

PROCESS = "process"
"""The label that names a node's worker process (``skyoap node --workers``)
on each of its samples."""


class Scrape:
    """One reading of a node's /metrics."""

    def __init__(self, text: str) -> None:
        self._values = {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }
        self._node: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        for (name, labels), value in self._values.items():
            key = (name, frozenset(label for label in labels if label[0] != PROCESS))
            self._node[key] = self._node.get(key, 0.0) + value

    def value(self, name: str, **labels: str) -> float:
        """The sample ``name`` with exactly ``labels``; of a node of several
        worker processes, the sum of theirs unless ``labels`` names a
        ``process``; 0 when the node has none (yet)."""
        values = self._values if PROCESS in labels else self._node
        return values.get((name, frozenset(labels.items())), 0.0)

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


def exposition(own: Collector, processes: Mapping[str, str]) -> bytes:
    """The Prometheus text of ``own``'s series (a registry, restricted to
    what a scrape asked for) and of several processes' (process -> its
    exposition), each of the latter's samples labelled with its ``PROCESS``;
    a family of both is one family."""
    families = {family.name: family for family in own.collect()}
    for process, text in processes.items():
        for family in text_string_to_metric_families(text):
            merged = families.setdefault(
                family.name, Metric(family.name, family.documentation, family.type, family.unit)
            )
            merged.samples += [s._replace(labels={**s.labels, PROCESS: process}) for s in family.samples]
    return generate_latest(_Families(list(families.values())))


class _Families(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""Nodes are read directly, whatever proxy the environment names."""


def read_text(admin: str, timeout_s: float = 10.0, names: Iterable[str] = ()) -> str:
    """The /metrics text of the node (or worker process) whose admin endpoint
    is ``admin`` (host:port), every family or those of the sample ``names``;
    ``timeout_s`` bounds each socket operation of the read."""
    query = urllib.parse.urlencode([("name[]", n) for n in names])
    with _DIRECT.open(f"http://{admin}/metrics{'?' if query else ''}{query}", timeout=timeout_s) as r:
        return str(r.read().decode())


def read_metrics(admin: str, timeout_s: float = 10.0, names: Iterable[str] = ()) -> Scrape:
    """The /metrics of the node whose admin endpoint is ``admin`` (host:port),
    every family or those of the sample ``names``; ``timeout_s`` bounds each
    socket operation of the read."""
    return Scrape(read_text(admin, timeout_s, names))
