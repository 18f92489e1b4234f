"""Counters and gauges a node exposes about itself (queue depths, drops, errors)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Counter:
    name: str
    help: str
    _value: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def inc(self, amount: int = 1) -> None:
        with self._lock:
            self._value += amount

    @property
    def value(self) -> int:
        return self._value


@dataclass(frozen=True)
class Gauge:
    name: str
    help: str
    read: Callable[[], float]

    @property
    def value(self) -> float:
        return self.read()


def metric_name(name: str) -> str:
    """``name`` as Prometheus allows it: letters, digits and underscores."""
    return _NOT_ALLOWED.sub("_", name)


_NOT_ALLOWED = re.compile(r"[^a-zA-Z0-9_]")


class Instruments:
    """The registry of one node's counters and gauges, keyed by name (made fit
    for Prometheus: ``remote_sent_total_127.0.0.1:11800`` becomes
    ``remote_sent_total_127_0_0_1_11800``).

    Asking twice for a counter of the same name returns the same counter, so
    components that share a name (workers of one pool) share the figure.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, Counter] = {}
        self._gauges: dict[str, Gauge] = {}

    def counter(self, name: str, help: str) -> Counter:
        name = metric_name(name)
        with self._lock:
            return self._counters.setdefault(name, Counter(name, help))

    def gauge(self, name: str, help: str, read: Callable[[], float]) -> Gauge:
        name = metric_name(name)
        with self._lock:
            gauge = Gauge(name, help, read)
            self._gauges[name] = gauge
            return gauge

    def value(self, name: str) -> float:
        """The current value of the counter or gauge ``name``; KeyError if there is none."""
        name = metric_name(name)
        if name in self._counters:
            return self._counters[name].value
        return self._gauges[name].value

    def render_text(self) -> str:
        """The Prometheus text exposition of every instrument."""
        with self._lock:
            rows = [(c.name, c.help, "counter", float(c.value)) for c in self._counters.values()]
            rows += [(g.name, g.help, "gauge", g.value) for g in self._gauges.values()]
        lines = []
        for name, help_text, kind, value in sorted(rows):
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name} {value:g}"]
        return "\n".join(lines) + "\n"
