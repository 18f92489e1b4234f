"""What ``increase``, ``rate`` and ``irate`` remember of each counter: the
samples of the last window, per rule and series.

A series is a rule's metric, the sample's own name and its labels where
the function is called (after the rule's filters and aggregations), so two
rules never share a window. A counter that goes down was reset (its
process restarted): what it counted before carries on under the new
values, as Prometheus reads counters, so an increase is never negative.

The first sample of a series has nothing to be compared with and gives
nothing; SkyWalking gives 0 there, which reads as "no traffic". A window
not yet full compares with its oldest sample.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections import deque
from dataclasses import dataclass, field

from skyoap.mal.families import Family, Labels, Sample

_DURATION = re.compile(
    r"(?P<sign>[-+]?)P(?:(?P<d>[-+]?\d+)D)?(?:T(?:(?P<h>[-+]?\d+)H)?(?:(?P<m>[-+]?\d+)M)?(?:(?P<s>[-+]?\d+(?:\.\d+)?)S)?)?",
    re.IGNORECASE,
)


def duration_ms(text: str) -> int:
    """An ISO-8601 duration (``PT1M``, ``PT5M``, ``P1D``) in ms; ValueError
    for anything else, or one not above 0."""
    found = _DURATION.fullmatch(text.strip())
    if found is None or not any(found.group(k) for k in "dhms"):
        raise ValueError(f"{text!r} is not an ISO-8601 duration such as 'PT1M'")
    d, h, m, s = (float(found.group(k) or 0) for k in "dhms")
    ms = round(((d * 24 + h) * 60 + m) * 60_000 + s * 1000) * (-1 if found.group("sign") == "-" else 1)
    if ms <= 0:
        raise ValueError(f"{text!r} is not a duration above 0")
    return ms


Series = tuple[str, str, Labels]
"""The rule's metric, the sample's name and its labels."""


@dataclass
class _Counter:
    times: deque[int] = field(default_factory=deque)
    totals: deque[float] = field(default_factory=deque)
    """Each sample's value with what resets took away added back."""
    last: float = 0.0
    carried: float = 0.0


class Counters:
    """The windows of every series a node's rules keep. Samples of a series
    come in time order from one place (a scrape target, a receiver); one
    that is not later than the last is a repeat and gives nothing."""

    def __init__(self, max_series: int = 1_000_000) -> None:
        self._counters: dict[Series, _Counter] = {}
        self._lock = threading.Lock()
        self._max_series = max_series

    def __len__(self) -> int:
        return len(self._counters)

    def increase(self, metric: str, family: Family, window_ms: int, per_second: bool) -> Family:
        """Each sample's increase over the window (per second, with
        ``per_second``): from the latest sample at least ``window_ms`` older,
        or the oldest kept while there is none."""
        return family.with_samples(
            s for s in (self._increase(metric, s, window_ms, per_second) for s in family.samples) if s
        )

    def irate(self, metric: str, family: Family) -> Family:
        """Each sample's rate per second since the sample before it."""
        return family.with_samples(
            s for s in (self._increase(metric, s, 0, True) for s in family.samples) if s
        )

    def _increase(self, metric: str, sample: Sample, window_ms: int, per_second: bool) -> Sample | None:
        with self._lock:
            counter = self._counter((metric, sample.name, sample.labels))
            if counter is None or (counter.times and sample.time_ms <= counter.times[-1]):
                return None
            if counter.times and sample.value < counter.last:
                counter.carried += counter.last  # a reset: counting started again from 0
            counter.last = sample.value
            total = sample.value + counter.carried
            counter.times.append(sample.time_ms)
            counter.totals.append(total)
            # Keep the latest sample at least a window old, and those after it.
            edge = sample.time_ms - window_ms
            i = bisect.bisect_right(counter.times, edge) - 1
            for _ in range(max(i, 0) if window_ms else len(counter.times) - 2):
                counter.times.popleft()
                counter.totals.popleft()
            if len(counter.times) < 2:
                return None
            since_ms = sample.time_ms - counter.times[0]
            increase = total - counter.totals[0]
        return Sample(
            sample.name,
            sample.labels,
            increase / (since_ms / 1000) if per_second else increase,
            sample.time_ms,
        )

    def _counter(self, series: Series) -> _Counter | None:
        counter = self._counters.get(series)
        if counter is None:
            if len(self._counters) >= self._max_series:
                return None
            counter = self._counters[series] = _Counter()
        return counter
