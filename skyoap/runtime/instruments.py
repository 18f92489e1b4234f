"""A node's self-metrics, through ``prometheus_client``: one registry per node,
series named ``skyoap_…`` with labels for what varies (queue, pool, worker,
target, reason, topic, level), counters ending ``_total`` and latencies as
histograms in seconds. docs/operations.md lists every series."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Each counter would also get a ``…_created`` series with its creation time,
# which says nothing an operator acts on and doubles what is scraped.
prometheus_client.disable_created_metrics()

LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""From a bulk write of a few rows on loopback to a persistence round that
waited out a slow storage."""

F = TypeVar("F", Counter, Gauge, Histogram)


class Instruments:
    """The registry of one node's series. Asking twice for a series of the same
    name returns the same one, so components that share a name (the workers of
    one stage) each take their labelled child of one family."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._lock = threading.Lock()
        self._families: dict[str, Counter | Gauge | Histogram] = {}

    def _family(self, kind: type[F], name: str, help: str, labels: Sequence[str], **extra: Any) -> F:
        if not name.startswith("skyoap_"):
            raise ValueError(f"series {name!r}: every series of a node is named skyoap_…")
        with self._lock:
            family = self._families.get(name)
            if family is None:
                family = kind(name, help, labels, registry=self.registry, **extra)
                self._families[name] = family
            if not isinstance(family, kind) or tuple(family._labelnames) != tuple(labels):
                raise ValueError(f"series {name} is declared twice, differently")
            return family

    def counter(self, name: str, help: str, labels: Sequence[str] = ()) -> Counter:
        """``name`` ends with ``_total``."""
        if not name.endswith("_total"):
            raise ValueError(f"counter {name!r}: a counter's name ends with _total")
        return self._family(Counter, name, help, labels)

    def gauge(self, name: str, help: str, labels: Sequence[str] = ()) -> Gauge:
        """Read when scraped through ``set_function`` on the family or a child."""
        return self._family(Gauge, name, help, labels)

    def histogram(self, name: str, help: str, labels: Sequence[str] = ()) -> Histogram:
        """``name`` ends with ``_seconds``; the buckets are ``LATENCY_BUCKETS_S``."""
        if not name.endswith("_seconds"):
            raise ValueError(f"histogram {name!r}: a latency's name ends with _seconds")
        return self._family(Histogram, name, help, labels, buckets=LATENCY_BUCKETS_S)

    def value(self, name: str, **labels: str) -> float:
        """The current value of one sample (``skyoap_worker_received_total``,
        ``worker="segment_records"``): 0 for labels never counted, KeyError
        for a series never declared."""
        value = self.registry.get_sample_value(name, labels)
        if value is not None:
            return value
        if name in self._families:
            return 0.0  # a labelled child that was never touched
        raise KeyError(f"no series {name}")

    def exposition(self, names: Iterable[str] = ()) -> bytes:
        """The Prometheus text exposition of every series, or of the families
        ``names`` (sample names: ``skyoap_worker_stored_total``) alone, as a
        scrape that asks for ``name[]`` gets them."""
        names = set(names)
        registry = self.registry.restricted_registry(names) if names else self.registry
        return prometheus_client.generate_latest(registry)
