"""Percentiles from latency sketches, held to the exact value at each rank
over random distributions, and merges held to the unmerged answer."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from skyoap.model import sketch
from skyoap.model.checks import Refused
from skyoap.model.metrics import Downsampling, EndpointMetrics, rank_at
from tests.unit.test_meter_checks import LIMITS

Draw = Callable[[np.random.Generator, int], np.ndarray]

DISTRIBUTIONS: dict[str, Draw] = {
    "lognormal": lambda rng, n: rng.lognormal(math.log(40), 1.5, n),
    "bimodal": lambda rng, n: np.where(rng.random(n) < 0.8, rng.normal(8, 2, n), rng.normal(1200, 150, n)),
    "constant": lambda rng, n: np.full(n, 299.0),
    "heavy-tailed": lambda rng, n: (rng.pareto(1.1, n) + 1) * 5,
    "uniform to an hour": lambda rng, n: rng.uniform(0, 3_600_000, n),
    "zeros and ones": lambda rng, n: rng.integers(0, 2, n).astype(float),
}
SIZES = (1, 2, 3, 10, 99, 1_000, 100_000, 1_000_000)


def latencies(name: str, n: int, seed: int) -> np.ndarray:
    drawn = DISTRIBUTIONS[name](np.random.default_rng(seed), n)
    return np.clip(np.round(drawn), 0, 2**40).astype(np.int64)


def within_one_percent(estimate: float, exact: float) -> bool:
    return abs(estimate - exact) <= 0.01 * exact


@pytest.mark.parametrize("name", DISTRIBUTIONS)
@pytest.mark.parametrize("n", SIZES)
def test_every_rank_is_within_one_percent_of_the_exact_value_there(name: str, n: int) -> None:
    values = latencies(name, n, seed=n)
    held = sketch.of_latencies(values.tolist())
    ordered = np.sort(values)
    ranks = sorted({rank_at(p, n) for p in range(1, 101)} | {1, n})
    wrong = [
        (rank, int(ordered[rank - 1]), sketch.value_at(held, rank))
        for rank in ranks
        if not within_one_percent(sketch.value_at(held, rank), int(ordered[rank - 1]))
    ]
    assert wrong == []
    assert sketch.value_at(held, n + 1) == 0
    assert sketch.problem(held, n) is None


def test_below_100_ms_every_latency_comes_back_exact_and_a_bucket_is_what_it_holds() -> None:
    assert [sketch.VALUES[sketch.bucket_of(ms)] for ms in range(100)] == list(range(100))
    worst = max(abs(sketch.VALUES[sketch.bucket_of(ms)] - ms) / ms for ms in range(100, 200_000))
    assert worst <= 0.01
    # Bounds of the table of buckets looked up, and past it, agree with the computation.
    assert [sketch.bucket_of(ms) for ms in (0, -5, 1)] == [0, 0, 1]
    assert sketch.bucket_of(2**16 - 1) <= sketch.bucket_of(2**16) <= sketch.bucket_of(2**16 + 1)
    assert sketch.bucket_of(2**63 - 1) == sketch.MAX_BUCKET


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_a_merge_holds_what_the_values_together_hold_wherever_they_met(name: str) -> None:
    values = latencies(name, 20_000, seed=7)
    whole = sketch.of_latencies(values.tolist())
    rng = np.random.default_rng(3)
    receivers = rng.integers(0, 10, len(values))
    minutes = rng.integers(0, 60, len(values))
    # Ten receivers' L1 values of sixty minutes each: merged per minute (L2), then into the hour.
    rows = [
        EndpointMetrics(
            time_bucket=202612071200 + minute, service="shop", endpoint="/", calls=len(part),
            latency_sum_ms=int(part.sum()), histogram=sketch.of_latencies(part.tolist()),
        )
        for minute in range(60)
        for receiver in range(10)
        if len(part := values[(minutes == minute) & (receivers == receiver)])
    ]  # fmt: skip
    by_minute: dict[int, list[EndpointMetrics]] = {}
    for row in rows:
        by_minute.setdefault(row.time_bucket, []).append(row)
    minute_rows = [EndpointMetrics.combine_all(group) for group in by_minute.values()]
    hour = EndpointMetrics.combine_all([m.downsampled(Downsampling.HOUR) for m in minute_rows])
    day = hour.downsampled(Downsampling.DAY)
    assert hour.histogram == day.histogram == whole
    assert sketch.merged(reversed([r.histogram for r in rows])) == whole
    assert [day.percentile(p) for p in range(1, 100)] == [
        sketch.value_at(whole, rank_at(p, len(values))) for p in range(1, 100)
    ]
    stored = EndpointMetrics.from_row(day.to_row())
    assert stored == day


def test_many_sketches_answer_each_rank_as_each_sketch_does() -> None:
    rng = np.random.default_rng(11)
    sketches = [sketch.of_latencies(latencies(name, int(n), seed)) for seed, name in enumerate(DISTRIBUTIONS)
                for n in rng.integers(0, 500, 5)]  # fmt: skip
    sketches.insert(3, ())
    totals = np.array([sum(c for _, c in sketch.pairs(s)) for s in sketches], np.int64)
    many = sketch.Many(sketches)
    for p in (1, 50, 75, 99, 100):
        ranks = rank_at(p, totals)
        assert many.values_at(ranks).tolist() == [
            sketch.value_at(s, r) for s, r in zip(sketches, ranks.tolist(), strict=True)
        ]


def test_a_fixed_bucket_histogram_of_an_earlier_release_reads_as_its_lower_bounds() -> None:
    earlier = [0] * 29
    earlier[6], earlier[14], earlier[28] = 4, 2, 1  # 10 ms, 200 ms and 60 s
    row = {"time_bucket": 202612071200, "service": "shop", "endpoint": "/", "calls": 7, "histogram": earlier}
    read = EndpointMetrics.from_row(row)
    assert read.histogram == sketch.of_latencies([10] * 4 + [200] * 2 + [60_000])
    assert [read.percentile(p) for p in (50, 75, 90, 99)] == [10, 199, 60_179, 60_179]
    assert sketch.value_at(sketch.of_stored(earlier), 7) == 60_179


@pytest.mark.parametrize(
    ("histogram", "calls", "wrong"),
    [
        ((5, 1, 7), 1, "has 3 numbers, not (bucket, count) pairs"),
        ((9, 1, 5, 1), 2, "has the bucket 5 after 9: buckets ascend from 0 to 4368"),
        ((9, 1, 9, 1), 2, "has the bucket 9 after 9: buckets ascend from 0 to 4368"),
        ((4369, 1), 1, "has the bucket 4369 after -1: buckets ascend from 0 to 4368"),
        ((9, 0), 0, "counts 0 in its bucket 9: a bucket it holds has values"),
        ((9, 2), 3, "holds 2 values for 3 calls"),
        ((), 1, "holds 0 values for 1 calls"),
    ],
)
def test_a_sketch_that_holds_no_calls_it_claims_is_refused_saying_why(
    histogram: tuple[int, ...], calls: int, wrong: str
) -> None:
    row = EndpointMetrics(
        time_bucket=202612071200, service="shop", endpoint="/", calls=calls, histogram=histogram
    )
    with pytest.raises(Refused) as refused:
        row.check(LIMITS, 1_796_644_800_000)
    assert str(refused.value) == f"endpoint_metrics 'shop /' at 202612071200: its latency sketch {wrong}"
