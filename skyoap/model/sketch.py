"""Latency distributions that merge exactly and answer every percentile
within 1%: counts per logarithmic bucket, in the manner of DDSketch.

Bucket ``k >= 1`` holds the latencies ``v`` with ``GAMMA**(k-2) < v <=
GAMMA**(k-1)``, where ``GAMMA = (1 + ALPHA) / (1 - ALPHA)``, and stands for
``2 * GAMMA**(k-1) / (GAMMA + 1)``: within ``ALPHA`` of every value it holds.
Bucket 0 holds 0 (and what a clock set back makes less). Latencies are whole
milliseconds, and so is what a bucket stands for: with ``ALPHA = 0.005`` the
rounding adds at most 0.5 ms, within 0.5% from 100 ms up, and below 100 ms a
bucket is narrower than a millisecond, so those values come back exact.

Merging adds the counts of equal buckets, so it loses nothing: a
distribution has the same counts whether its values met in one receiver or
ten, in a minute or in the hour and day it rolls into.

A sketch is stored and sent as the ``(bucket, count)`` pairs of the buckets
that hold values, by ascending bucket, flattened: ``(k0, c0, k1, c1, ...)``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

ALPHA = 0.005
"""The largest relative error of what a bucket stands for."""
GAMMA = (1 + ALPHA) / (1 - ALPHA)
_LOG_GAMMA = math.log(GAMMA)

Sketch = tuple[int, ...]
"""``(bucket, count)`` pairs by ascending bucket, flattened; () when empty."""


def _bucket(ms: int) -> int:
    return 0 if ms <= 0 else math.ceil(math.log(ms) / _LOG_GAMMA) + 1


_TABLE_MS = 1 << 16
_BUCKETS = tuple(_bucket(ms) for ms in range(_TABLE_MS))
"""The bucket of every latency under a minute, looked up rather than
computed: every span measured takes one."""

MAX_BUCKET = _bucket(2**63 - 1)
"""The bucket of the longest latency an int64 holds."""


def bucket_of(ms: int) -> int:
    """The bucket holding a latency of ``ms``."""
    return _BUCKETS[ms] if 0 <= ms < _TABLE_MS else _bucket(ms)


VALUES = tuple(0 if k == 0 else round(2 * GAMMA ** (k - 1) / (GAMMA + 1)) for k in range(MAX_BUCKET + 1))
"""What each bucket stands for, in whole ms."""


def of_counts(counts: Mapping[int, int]) -> Sketch:
    """The sketch of ``counts`` (values by bucket, each above 0)."""
    return tuple(itertools.chain.from_iterable(sorted(counts.items())))


def of_latencies(latencies: Iterable[int]) -> Sketch:
    """The sketch of ``latencies`` (ms)."""
    counts: dict[int, int] = {}
    for ms in latencies:
        bucket = bucket_of(ms)
        counts[bucket] = counts.get(bucket, 0) + 1
    return of_counts(counts)


def pairs(sketch: Sketch) -> Iterable[tuple[int, int]]:
    """Its ``(bucket, count)`` pairs."""
    it = iter(sketch)
    return zip(it, it, strict=True)


def merged(sketches: Iterable[Sketch]) -> Sketch:
    """One sketch of the values of all of ``sketches``."""
    counts: dict[int, int] = {}
    for sketch in sketches:
        for bucket, count in pairs(sketch):
            counts[bucket] = counts.get(bucket, 0) + count
    return of_counts(counts)


def value_at(sketch: Sketch, rank: int) -> int:
    """The latency of rank ``rank`` (1 the least), within 1%; 0 when the
    sketch holds fewer values."""
    seen = 0
    for bucket, count in pairs(sketch):
        seen += count
        if seen >= rank:
            return VALUES[bucket]
    return 0


def problem(sketch: Sketch, total: int) -> str | None:
    """What makes ``sketch`` not one of ``total`` values, if anything."""
    if len(sketch) % 2:
        return f"has {len(sketch)} numbers, not (bucket, count) pairs"
    last = -1
    counted = 0
    for bucket, count in pairs(sketch):
        if not last < bucket <= MAX_BUCKET:
            return f"has the bucket {bucket} after {last}: buckets ascend from 0 to {MAX_BUCKET}"
        if count <= 0:
            return f"counts {count} in its bucket {bucket}: a bucket it holds has values"
        last = bucket
        counted += count
    if counted != total:
        return f"holds {counted} values for {total} calls"
    return None


EARLIER_BOUNDS_MS = (0, 1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, 150, 200, 300, 500, 700,
                     1000, 1500, 2000, 3000, 5000, 7000, 10_000, 15_000, 20_000, 30_000, 60_000)  # fmt: skip
"""The lower bounds of the fixed buckets earlier releases stored: a row
of theirs holds a count for each (an odd number of them, which no sketch
has)."""


def of_stored(histogram: Sequence[int]) -> Sketch:
    """The sketch a stored histogram holds: a fixed-bucket one of an
    earlier release reads as each bucket's calls at its lower bound, which
    is what that release reported."""
    if len(histogram) != len(EARLIER_BOUNDS_MS):
        return tuple(histogram)
    counts: dict[int, int] = {}
    for bound, count in zip(EARLIER_BOUNDS_MS, histogram, strict=True):
        if count:
            bucket = bucket_of(bound)
            counts[bucket] = counts.get(bucket, 0) + count
    return of_counts(counts)


class Many:
    """Many sketches laid out as arrays, to answer a rank of each at once
    (as readers of many rows do, every rank of every row of a minute).
    Their counts must add up to less than 2**56, where int64 sums are exact."""

    def __init__(self, sketches: Sequence[Sketch]) -> None:
        import numpy as np  # only the readers of many rows need it

        lengths = np.fromiter((len(s) // 2 for s in sketches), np.intp, len(sketches))
        flat = np.fromiter(itertools.chain.from_iterable(sketches), np.int64, 2 * int(lengths.sum()))
        self.buckets = flat[0::2]
        self._running = np.cumsum(flat[1::2])
        self._row = np.repeat(np.arange(len(sketches)), lengths)
        starts = np.cumsum(lengths) - lengths
        self._before = np.concatenate(([0], self._running))[starts]
        self._rows = len(sketches)

    def values_at(self, ranks: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """``value_at`` of each sketch, at the rank in ``ranks`` of its row."""
        import numpy as np

        row = self._row
        reached = np.flatnonzero(self._running - self._before[row] >= ranks[row])
        found, first = np.unique(row[reached], return_index=True)
        values = np.zeros(self._rows)
        values[found] = np.asarray(VALUES, np.float64)[self.buckets[reached[first]]]
        return values
