"""MQE evaluated as SkyWalking's ``execExpression`` evaluates it, over an
in-memory ``MetricReader`` holding skyoap's own metric rows: every operation
on known series (with minutes of no data), labeled metrics, top lists, the
dashboards' real expressions, value formatting, and the errors a user gets."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import pytest

from skyoap.model import sketch
from skyoap.model.metrics import (
    EndpointMetrics,
    MeterMetrics,
    Metrics,
    ServiceInstanceMetrics,
    ServiceMetrics,
    ServiceRelationMetrics,
    merge_into,
)
from skyoap.mqe.evaluator import execute
from skyoap.mqe.reader import LabeledValues, LabelSelector, Ranked, Sample, TopNCondition
from skyoap.mqe.results import (
    ExpressionResult,
    ExpressionResultType,
    KeyValue,
    Metadata,
    MQEValue,
    MQEValues,
    Owner,
    format_value,
)
from skyoap.mqe.syntax import Order
from skyoap.vocabulary import catalogue
from skyoap.vocabulary.catalogue import ENTITY_COLUMNS, MetricDef, MetricsType
from skyoap.vocabulary.duration import Duration, Step
from skyoap.vocabulary.entity import Entity, Scope
from skyoap.vocabulary.ids import endpoint_id, instance_id, service_id

SINGLE = ExpressionResultType.SINGLE_VALUE
SERIES = ExpressionResultType.TIME_SERIES_VALUES
SORTED = ExpressionResultType.SORTED_LIST

T = [1_795_287_600_000 + 60_000 * i for i in range(5)]
"""The epoch ms of 2026-11-21 19:00 … 19:04 UTC, the ids of the points of FIVE_MINUTES."""
FIVE_MINUTES = Duration("2026-11-21 1900", "2026-11-21 1904", Step.MINUTE)
MINUTE = 202611211900

SHOP = Entity(service_name="shop", normal=True)
SHOP_1 = Entity(service_name="shop", normal=True, service_instance_name="shop-1")
SHOP_TO_CART = Entity(service_name="shop", normal=True, dest_service_name="cart", dest_normal=True)
EVERYONE = Entity()


def calls(
    model: type[Metrics], minute: int, latencies: Mapping[int, int], errors: int = 0, **names: object
) -> Metrics:
    """A row of ``model`` counting ``latencies`` (ms → how many calls took it)."""
    histogram = sketch.of_latencies(ms for ms, n in latencies.items() for _ in range(n))
    return model(  # type: ignore[call-arg]
        time_bucket=MINUTE + minute,
        calls=sum(latencies.values()),
        errors=errors,
        latency_sum_ms=sum(ms * n for ms, n in latencies.items()),
        histogram=histogram,
        **names,
    )


def meter(minute: int, name: str, labels: str, value: float, instance: str = "shop-1") -> MeterMetrics:
    return MeterMetrics(
        time_bucket=MINUTE + minute, service="shop", instance=instance, name=name, labels=labels, samples=2,
        value_sum=2 * value, last_value=value, last_time=T[0] + 60_000 * minute,
    )  # fmt: skip


ROWS: list[Metrics] = [
    # shop, per minute: cpm 10, -, 20, 5, 15; resp_time 100, -, 280, 30, 40; sla 10000, -, 9000, 0, 10000;
    # apdex 10000, -, 8500, 0, 10000. Its p50 is 100, -, 200, 30, 30 and its p95 100, -, 1000, 30, 30.
    calls(ServiceMetrics, 0, {100: 10}, service="shop", apdex_satisfied=10),
    calls(
        ServiceMetrics,
        2,
        {200: 18, 1000: 2},
        errors=2,
        service="shop",
        apdex_satisfied=16,
        apdex_tolerating=2,
    ),
    calls(ServiceMetrics, 3, {30: 5}, errors=5, service="shop"),
    calls(ServiceMetrics, 4, {40: 15}, service="shop", apdex_satisfied=15),
    calls(ServiceMetrics, 0, {10: 4}, service="cart", apdex_satisfied=4),  # cpm 4, -, -, -, 6: mean 5
    calls(ServiceMetrics, 4, {10: 6}, service="cart", apdex_satisfied=6),
    calls(ServiceMetrics, 1, {5: 30}, service="mysql:3306"),  # a database its callers saw: mean cpm 30
    calls(ServiceInstanceMetrics, 0, {100: 10}, service="shop", instance="shop-1"),  # mean cpm 10
    calls(ServiceInstanceMetrics, 2, {100: 10}, service="shop", instance="shop-1"),
    calls(ServiceInstanceMetrics, 2, {100: 10}, service="shop", instance="shop-2"),  # mean cpm 7.5
    calls(ServiceInstanceMetrics, 3, {100: 5}, service="shop", instance="shop-2"),
    calls(ServiceInstanceMetrics, 0, {10: 5}, service="cart", instance="cart-1"),  # mean cpm 5
    calls(EndpointMetrics, 0, {100: 8}, service="shop", endpoint="GET:/songs"),
    calls(EndpointMetrics, 0, {100: 9}, service="cart", endpoint="POST:/cart"),
    calls(ServiceRelationMetrics, 0, {100: 3}, source="shop", dest="cart", detect_point="server"),
    calls(ServiceRelationMetrics, 0, {100: 4}, source="shop", dest="cart", detect_point="client"),
    # A labeled meter of shop-1 (by pool and metric_type) and an unlabeled one.
    meter(0, "thread_pool", "metric_type=core,pool=grpc", 4),
    meter(3, "thread_pool", "metric_type=core,pool=grpc", 8),
    meter(0, "thread_pool", "metric_type=core,pool=http", 10),
    meter(2, "thread_pool", "metric_type=core,pool=http", 20),
    meter(1, "thread_pool", "metric_type=max,pool=grpc", 100),
    *(meter(m, "thread_pool", "metric_type=max,pool=http", 50) for m in (0, 2, 4)),
    meter(0, "jvm_cpu", "", 0.5),
    meter(4, "jvm_cpu", "", 0.25),
]
LAYERS = {"shop": "GENERAL", "cart": "GENERAL", "mysql:3306": "VIRTUAL_DATABASE"}
VIRTUAL = {"mysql:3306"}


class MemoryReader:
    """A MetricReader over rows held in memory: each method merges the rows
    of a metric's model into the Duration's buckets, as storage would."""

    def __init__(self, rows: Iterable[Metrics]) -> None:
        self.sampled: dict[tuple[str, str], list[Sample]] = {}
        self.rows = list(rows)
        self.reads: list[str] = []

    def _merged(self, metric: MetricDef, where: Mapping[str, str], step: Step) -> list[Metrics]:
        level = step.downsampling()
        matching = [
            r.downsampled(level)
            for r in self.rows
            if type(r) is metric.model and all(getattr(r, c) == v for c, v in where.items())
        ]
        merged: dict[str, Metrics] = {}
        merge_into(merged, matching)
        return list(merged.values())

    def values(
        self, metric: MetricDef, entity: Entity, duration: Duration, selector: LabelSelector
    ) -> Sequence[LabeledValues]:
        self.reads.append(metric.name)
        buckets = [p.bucket for p in duration.points()]
        rows = [
            r for r in self._merged(metric, metric.rows_of(entity), duration.step) if r.time_bucket in buckets
        ]
        if metric.type is MetricsType.REGULAR_VALUE:
            return [_values(rows, buckets, metric.column, ())]
        if metric.label_columns:  # percentiles
            p = catalogue.PERCENTILE_LABEL
            return [
                _values(rows, buckets, c, (KeyValue(p, v),)) for v, c in metric.label_columns.items() if rows
            ]
        groups: dict[str, list[Metrics]] = {}
        for r in rows:
            assert isinstance(r, MeterMetrics)
            groups.setdefault(r.labels, []).append(r)
        return [_values(rs, buckets, metric.column, _labels(text)) for text, rs in groups.items()]

    def samples(
        self, metric: MetricDef, service: str, duration: Duration, limit: int, order: Order
    ) -> Sequence[Sample]:
        self.reads.append(f"samples {metric.name} of {service}")
        found = sorted(self.sampled.get((metric.name, service), ()), key=lambda r: r.latency)
        return (found[::-1] if order is Order.DES else found)[:limit]

    def top(self, metric: MetricDef, duration: Duration, condition: TopNCondition) -> Sequence[Ranked]:
        assert metric.model is not None
        self.reads.append(f"top {metric.name}")
        where = dict(metric.where)
        if condition.parent_service is not None:
            where["service"] = condition.parent_service
        first, last = duration.start_bucket, duration.end_bucket
        rows = [r for r in self._merged(metric, where, duration.step) if first <= r.time_bucket <= last]
        by_entity: dict[tuple[str, ...], list[float]] = {}
        for r in rows:
            if all((LAYERS.get(r.service) == a.value) == a.equal for a in condition.attributes):  # type: ignore[attr-defined]
                names = tuple(getattr(r, c) for c, _ in ENTITY_COLUMNS[metric.model])
                by_entity.setdefault(names, []).append(r.derived()[metric.column])
        means = sorted(((sum(vs) / len(vs), names) for names, vs in by_entity.items()), reverse=True)
        if condition.order is Order.ASC:
            means.reverse()
        return [_ranked(metric.scope, mean, names) for mean, names in means[: condition.limit]]

    def meter(self, name: str) -> MetricDef | None:
        found = [r for r in self.rows if isinstance(r, MeterMetrics) and r.name == name]
        return catalogue.meter(name, labeled=any(r.labels for r in found)) if found else None


def _values(
    rows: list[Metrics], buckets: list[int], column: str, labels: tuple[KeyValue, ...]
) -> LabeledValues:
    at = {r.time_bucket: float(r.derived()[column]) for r in rows}
    return LabeledValues(labels, tuple(at.get(b) for b in buckets))


def _labels(text: str) -> tuple[KeyValue, ...]:
    return tuple(KeyValue(*pair.split("=", 1)) for pair in text.split(",") if pair)


def _ranked(scope: Scope, mean: float, names: tuple[str, ...]) -> Ranked:
    return Ranked(
        value=mean,
        service=names[0],
        normal=names[0] not in VIRTUAL,
        instance=names[1] if scope is Scope.SERVICE_INSTANCE else None,
        endpoint=names[1] if scope is Scope.ENDPOINT else None,
    )


def run(expression: str, entity: Entity = SHOP, duration: Duration = FIVE_MINUTES) -> ExpressionResult:
    return execute(expression, entity, duration, MemoryReader(ROWS))


def series(*values: str | None, labels: Iterable[tuple[str, str]] = (), ids: Sequence[int] = T) -> MQEValues:
    points = tuple(MQEValue(str(i), v) for i, v in zip(ids, values, strict=True))
    return MQEValues(Metadata(tuple(KeyValue(k, v) for k, v in labels)), points)


def single(value: str | None, at: int | None = None, labels: Iterable[tuple[str, str]] = ()) -> MQEValues:
    point = MQEValue(None if at is None else str(at), value)
    return MQEValues(Metadata(tuple(KeyValue(k, v) for k, v in labels)), (point,))


def error(text: str) -> ExpressionResult:
    return ExpressionResult(ExpressionResultType.UNKNOWN, (), text)


def test_a_metric_is_a_series_of_its_points_with_no_data_as_none() -> None:
    assert run("service_cpm") == ExpressionResult(SERIES, (series("10", None, "20", "5", "15"),))
    assert run("service_resp_time") == ExpressionResult(SERIES, (series("100", None, "280", "30", "40"),))


@pytest.mark.parametrize(
    ("expression", "value"),
    [("1 + 2 * 3", "7"), ("(1 + 2) * 3", "9"), ("8 / 4 / 2", "1"), ("2 - 5", "-3"), ("7 % 4", "3"),
     ("1 / 3", "0.333"), ("2.5 * 2", "5"), ("1 / 0", None), ("0 / 0", None), ("3 > 2", "1"), ("3 == 2", "0"),
     ("3 != bool 2", "1")],
)  # fmt: skip
def test_scalars_and_precedence(expression: str, value: str | None) -> None:
    assert run(expression) == ExpressionResult(SINGLE, (single(value),))


def test_a_series_with_a_scalar_applies_it_to_each_point() -> None:
    assert run("service_sla / 100") == ExpressionResult(SERIES, (series("100", None, "90", "0", "100"),))
    assert run("10000 - service_sla") == ExpressionResult(SERIES, (series("0", None, "1000", "10000", "0"),))
    assert run("service_cpm / 0") == ExpressionResult(SERIES, (series(None, None, None, None, None),))
    # A single value with no data (the mean of nothing) leaves no data at any point.
    assert run("service_cpm / avg(service_mq_consume_count)") == ExpressionResult(
        SERIES, (series(*[None] * 5),)
    )


@pytest.mark.parametrize(
    ("aggregation", "value", "at"),
    [("avg", "12.5", None), ("count", "4", None), ("sum", "50", None), ("max", "20", T[2]),
     ("min", "5", T[3]), ("latest", "15", T[4])],
)  # fmt: skip
def test_aggregations_leave_out_points_with_no_data(aggregation: str, value: str, at: int | None) -> None:
    assert run(f"{aggregation}(service_cpm)") == ExpressionResult(SINGLE, (single(value, at),))


def test_two_single_values_give_a_value_of_no_one_time() -> None:
    assert run("max(service_cpm) * 2") == ExpressionResult(SINGLE, (single("40"),))
    assert run("max(service_cpm) * service_cpm") == ExpressionResult(
        SERIES, (series("200", None, "400", "100", "300"),)
    )


@pytest.mark.parametrize(
    ("aggregation", "value"),
    [("avg", None), ("count", "0"), ("sum", "0"), ("max", None), ("min", None), ("latest", None)],
)
def test_aggregations_of_no_data(aggregation: str, value: str | None) -> None:
    idle = Entity(service_name="idle", normal=True)
    assert run(f"{aggregation}(service_cpm)", idle) == ExpressionResult(SINGLE, (single(value),))


def test_latest_needs_a_time_series() -> None:
    assert run("latest(top_n(service_cpm, 2, des))") == error(
        "latest needs a time series: [top_n(service_cpm, 2, des)] gives SORTED_LIST."
    )
    assert run("latest(avg(service_cpm))") == error(
        "latest needs a time series: [avg(service_cpm)] gives SINGLE_VALUE."
    )


def test_math_functions_per_point() -> None:
    assert run("abs(service_cpm - 12)") == ExpressionResult(SERIES, (series("2", None, "8", "7", "3"),))
    assert run("ceil(service_cpm / 4)") == ExpressionResult(SERIES, (series("3", None, "5", "2", "4"),))
    assert run("floor(service_cpm / 4)") == ExpressionResult(SERIES, (series("2", None, "5", "1", "3"),))
    assert run("round(service_cpm / 3, 1)") == ExpressionResult(
        SERIES, (series("3.3", None, "6.7", "1.7", "5"),)
    )
    # Half away from zero, from the shortest decimal of the double (0.125, 2.675 as written).
    rounded = [
        run(f"round({x}, {n})").results[0].values[0].value
        for x, n in [("2.5", 0), ("0.125", 2), ("2.675", 2)]
    ]
    assert rounded == ["3", "0.13", "2.68"]


def test_increase_and_rate_read_the_steps_before_the_start() -> None:
    last_three = Duration("2026-11-21 1902", "2026-11-21 1904", Step.MINUTE)
    # cpm 10, -, 20, 5, 15: at 19:02 20 - 10, at 19:03 5 - nothing, at 19:04 15 - 20.
    assert run("increase(service_cpm, 2)", duration=last_three) == ExpressionResult(
        SERIES, (series("10", None, "-5", ids=T[2:]),)
    )
    assert run("rate(service_cpm, 2)", duration=last_three) == ExpressionResult(
        SERIES, (series("0.083", None, "-0.042", ids=T[2:]),)
    )
    assert run("increase(service_cpm, 0)") == error("The trend range must be greater than 0.")


def test_comparisons_give_1_or_0_per_point() -> None:
    assert run("service_cpm > 10") == ExpressionResult(SERIES, (series("0", None, "1", "0", "1"),))
    assert run("service_cpm >= bool 10") == ExpressionResult(SERIES, (series("1", None, "1", "0", "1"),))
    assert run("service_cpm == service_cpm") == ExpressionResult(SERIES, (series("1", None, "1", "1", "1"),))


def test_and_or_combine_comparisons() -> None:
    # cpm > 12: 0, -, 1, 0, 1; resp_time > 50: 1, -, 1, 0, 0.
    assert run("service_cpm > 12 || service_resp_time > 50") == ExpressionResult(
        SERIES, (series("1", None, "1", "0", "1"),)
    )
    assert run("(service_cpm > 12) && (service_resp_time > 50)") == ExpressionResult(
        SERIES, (series("0", None, "1", "0", "0"),)
    )
    assert run("service_cpm && service_cpm > 1") == error(
        "Bool operation: the left operand [service_cpm] is not a comparison; && and || combine comparisons "
        "(a > b, a == b, …)."
    )
    assert run("service_cpm > 1 || (service_cpm > 1) * 1") == error(
        "Bool operation: the right operand [(service_cpm > 1) * 1] is not a comparison; && and || combine "
        "comparisons (a > b, a == b, …)."
    )


def test_lists_combine_only_with_single_values() -> None:
    assert run("top_n(service_cpm, 10, des) + service_cpm") == error(
        "Unsupported binary operation: SORTED_LIST and TIME_SERIES_VALUES do not combine; a list combines "
        "only with a single value, and a time series with a time series or a single value."
    )
    assert run("top_n(service_cpm, 1, des) > top_n(service_cpm, 1, asc)").error == (
        "Unsupported compare operation: SORTED_LIST and SORTED_LIST do not combine; a list combines only "
        "with a single value, and a time series with a time series or a single value."
    )


PERCENTILES = ("50", "75", "90", "95", "99")
P50 = ("100", None, "199", "30", "40")
P95 = ("100", None, "997", "30", "40")
"""Within 1% of 200 and 1,000 ms (what the sketch's buckets stand for there); exact below 100 ms."""


def test_a_labeled_metric_is_one_series_per_selected_label_value() -> None:
    assert run("service_percentile{p='50,95'}") == ExpressionResult(
        SERIES, (series(*P50, labels=[("p", "50")]), series(*P95, labels=[("p", "95")]))
    )
    every = run("service_percentile")
    assert [r.metric.labels for r in every.results] == [
        (KeyValue("p", p),) for p in ("50", "75", "90", "95", "99")
    ]
    assert run("service_percentile{p=' 95 , ', p='50'}") == run("service_percentile{p='50,95'}")
    assert run("service_percentile{q='1'}") == ExpressionResult(SERIES, ())
    assert run("service_cpm{p='1'}") == run("service_cpm")  # a selector on an unlabeled metric is ignored


def test_relabels_as_the_dashboards_write_it() -> None:
    result = run(
        "relabels(service_percentile{p='50,75,90,95,99'},p='50,75,90,95,99',percentile='P50,P75,P90,P95,P99')"
    )
    assert result.type is SERIES
    assert [r.metric.labels for r in result.results] == [
        (KeyValue("percentile", f"P{p}"),) for p in ("50", "75", "90", "95", "99")
    ]
    assert result.results[0] == series(*P50, labels=[("percentile", "P50")])
    assert result.results[3] == series(*P95, labels=[("percentile", "P95")])
    renamed = run("relabels(service_percentile{p='50,95'}, p='95', p='P95')")
    assert [r.metric.labels for r in renamed.results] == [(KeyValue("p", "50"),), (KeyValue("p", "P95"),)]


def test_relabels_needs_labels_and_as_many_values_as_it_replaces() -> None:
    assert run("relabels(service_cpm, p='50', q='1')") == error(
        "The result of expression [service_cpm] is not a labeled result."
    )
    assert run("relabels(service_percentile, p='50,75', q='1')") == error(
        "relabels: label [p] lists 2 values and [q] 1; the n-th value of one replaces the n-th of the other."
    )


def test_a_labeled_series_with_an_unlabeled_one() -> None:
    # resp_time 100, -, 280, 30, 40
    assert run("service_percentile{p='50,95'} - service_resp_time") == ExpressionResult(
        SERIES,
        (
            series("0", None, "-81", "0", "0", labels=[("p", "50")]),
            series("0", None, "717", "0", "0", labels=[("p", "95")]),
        ),
    )
    assert run("service_resp_time - service_percentile{p='50'}") == ExpressionResult(
        SERIES, (series("0", None, "81", "0", "0", labels=[("p", "50")]),)
    )


def test_two_labeled_operands_pair_equal_label_sets() -> None:
    # avg of p50 is 92.25, of p95 291.75.
    assert run("service_percentile{p='50,95'} - avg(service_percentile{p='50,95'})") == ExpressionResult(
        SERIES,
        (
            series("7.75", None, "106.75", "-62.25", "-52.25", labels=[("p", "50")]),
            series("-191.75", None, "705.25", "-261.75", "-251.75", labels=[("p", "95")]),
        ),
    )
    assert run("service_percentile{p='50,95'} + service_percentile{p='50'}") == ExpressionResult(
        SERIES,
        (
            series("200", None, "398", "60", "80", labels=[("p", "50")]),
            series(None, None, None, None, None, labels=[("p", "95")]),
        ),
    )
    assert run("avg(service_percentile{p='50,95'})") == ExpressionResult(
        SINGLE, (single("92.25", labels=[("p", "50")]), single("291.75", labels=[("p", "95")]))
    )


# thread_pool of shop-1, by (metric_type, pool): core/grpc 4, -, -, 8, -; core/http 10, -, 20, -, -;
# max/grpc -, 100, -, -, -; max/http 50, -, 50, -, 50.
CORE_GRPC = series("4", None, None, "8", None, labels=[("metric_type", "core"), ("pool", "grpc")])
CORE_HTTP = series("10", None, "20", None, None, labels=[("metric_type", "core"), ("pool", "http")])
MAX_GRPC = series(None, "100", None, None, None, labels=[("metric_type", "max"), ("pool", "grpc")])
MAX_HTTP = series("50", None, "50", None, "50", labels=[("metric_type", "max"), ("pool", "http")])


def test_an_agents_meters_by_name() -> None:
    assert run("thread_pool", SHOP_1) == ExpressionResult(SERIES, (CORE_GRPC, CORE_HTTP, MAX_GRPC, MAX_HTTP))
    assert run("thread_pool{pool='http'}", SHOP_1) == ExpressionResult(SERIES, (CORE_HTTP, MAX_HTTP))
    assert run("jvm_cpu * 100", SHOP_1) == ExpressionResult(SERIES, (series("50", None, None, None, "25"),))
    assert run("jvm_cpu", SHOP) == error(
        "Metric: [jvm_cpu] is of scope ServiceInstance: the entity needs serviceInstanceName."
    )


def test_aggregate_labels() -> None:
    assert run("aggregate_labels(thread_pool, sum(pool))", SHOP_1) == ExpressionResult(
        SERIES,
        (
            series("4", "100", None, "8", None, labels=[("pool", "grpc")]),
            series("60", None, "70", None, "50", labels=[("pool", "http")]),
        ),
    )
    assert run("aggregate_labels(thread_pool, avg(metric_type, nope))", SHOP_1) == ExpressionResult(
        SERIES,
        (
            series("7", None, "20", "8", None, labels=[("metric_type", "core")]),
            series("50", "100", "50", None, "50", labels=[("metric_type", "max")]),
        ),
    )
    everything = run("aggregate_labels(thread_pool, max)", SHOP_1)
    assert everything == ExpressionResult(SERIES, (series("50", "100", "50", "8", "50"),))
    assert run("relabels(aggregate_labels(thread_pool, min), pool='http', p='h')", SHOP_1) == error(
        "The result of expression [aggregate_labels(thread_pool, min)] is not a labeled result."
    )
    assert run("aggregate_labels(service_cpm, sum)") == error(
        "The result of expression [service_cpm] is not a labeled result."
    )


def test_sort_values_picks_the_first_label_groups_by_an_aggregation() -> None:
    # avg: core/grpc 6, core/http 15, max/grpc 100, max/http 50; sum: 12, 30, 100, 150.
    assert run("sort_values(thread_pool, 2, des, avg)", SHOP_1) == ExpressionResult(
        SERIES, (MAX_GRPC, MAX_HTTP)
    )
    assert run("sort_values(thread_pool, 3, asc, )", SHOP_1) == ExpressionResult(
        SERIES, (CORE_GRPC, CORE_HTTP, MAX_HTTP)
    )
    assert run("sort_values(thread_pool, 1, des, sum)", SHOP_1) == ExpressionResult(SERIES, (MAX_HTTP,))
    assert run("sort_values(service_cpm, 1, asc, avg)") == run("service_cpm")  # unlabeled: as it is


def test_sort_label_values() -> None:
    assert run("sort_label_values(thread_pool, des, pool, metric_type)", SHOP_1) == ExpressionResult(
        SERIES, (MAX_HTTP, CORE_HTTP, MAX_GRPC, CORE_GRPC)
    )
    assert run("sort_label_values(thread_pool, asc, pool, pool)", SHOP_1) == ExpressionResult(
        SERIES, (CORE_GRPC, MAX_GRPC, CORE_HTTP, MAX_HTTP)
    )
    descending = run("sort_label_values(service_percentile, des, p)")
    assert [r.metric.labels[0].value for r in descending.results] == ["99", "95", "90", "75", "50"]


def owner(service: str, normal: bool, instance: str | None = None, endpoint: str | None = None) -> Owner:
    scope = Scope.SERVICE_INSTANCE if instance else Scope.ENDPOINT if endpoint else Scope.SERVICE
    return Owner(
        scope=scope,
        service_id=service_id(service, normal),
        service_name=service,
        normal=normal,
        service_instance_id=instance_id(service, normal, instance) if instance else None,
        service_instance_name=instance,
        endpoint_id=endpoint_id(service, normal, endpoint) if endpoint else None,
        endpoint_name=endpoint,
    )


def ranked(*entries: tuple[str, str, Owner]) -> ExpressionResult:
    return ExpressionResult(
        SORTED, (MQEValues(Metadata(), tuple(MQEValue(n, v, None, o) for n, v, o in entries)),)
    )


def test_top_n_of_services_everywhere() -> None:
    assert run("top_n(service_cpm, 10, des)", EVERYONE) == ranked(
        ("mysql:3306", "30", owner("mysql:3306", False)), ("shop", "12.5", owner("shop", True)),
        ("cart", "5", owner("cart", True)),
    )  # fmt: skip
    assert run("top_n(service_cpm, 2, asc)", EVERYONE) == ranked(
        ("cart", "5", owner("cart", True)), ("shop", "12.5", owner("shop", True))
    )
    assert owner("shop", True).service_id == "c2hvcA==.1"  # SkyWalking's id: base64 of the name, .1 if normal


def test_top_n_of_instances_names_their_service_when_everywhere() -> None:
    assert run("top_n(service_instance_cpm, 2, des)", EVERYONE) == ranked(
        ("shop - shop-1", "10", owner("shop", True, "shop-1")),
        ("shop - shop-2", "7.5", owner("shop", True, "shop-2")),
    )
    assert run("top_n(service_instance_cpm, 10, des)", SHOP) == ranked(
        ("shop-1", "10", owner("shop", True, "shop-1")), ("shop-2", "7.5", owner("shop", True, "shop-2"))
    )
    assert run("top_n(endpoint_cpm, 10, des)", EVERYONE) == ranked(
        ("cart - POST:/cart", "9", owner("cart", True, endpoint="POST:/cart")),
        ("shop - GET:/songs", "8", owner("shop", True, endpoint="GET:/songs")),
    )
    assert owner("shop", True, "shop-1").service_instance_id == "c2hvcA==.1_c2hvcC0x"


def test_top_n_attribute_filters() -> None:
    general = run("top_n(service_cpm, 10, des, attr0='GENERAL')", EVERYONE)
    assert [(v.id, v.value) for v in general.results[0].values] == [("shop", "12.5"), ("cart", "5")]
    virtual = run("top_n(service_cpm, 10, des, attr0!='GENERAL')", EVERYONE)
    assert [(v.id, v.value) for v in virtual.results[0].values] == [("mysql:3306", "30")]
    # The service metrics have no attr1: none holds 'x', every one differs from it.
    assert run("top_n(service_cpm, 10, des, attr1='x')", EVERYONE) == ExpressionResult(
        SORTED, (MQEValues(Metadata(), ()),)
    )
    assert run("top_n(service_cpm, 10, des, attr1!='x')", EVERYONE) == run(
        "top_n(service_cpm, 10, des)", EVERYONE
    )
    assert (
        run("top_n(service_cpm, 10, des, attr0='GENERAL')/100", EVERYONE).results[0].values[0].value
        == "0.125"
    )


def test_what_top_n_cannot_rank() -> None:
    assert run("top_n(service_percentile, 10, des)") == error(
        "Metric: [service_percentile] is labeled value, does not support top_n query."
    )
    assert run("top_n(service_cpm, 0, des)") == error("TopN value must be > 0.")
    assert run("top_n(service_relation_server_cpm, 10, des)") == error(
        "top_n ranks services, instances and endpoints; [service_relation_server_cpm] is a metric of scope "
        "ServiceRelation."
    )
    assert run("top_n(nothing_cpm, 10, des)") == error("Metric: [nothing_cpm] does not exist.")


def test_top_n_of_merges_top_lists() -> None:
    merged = run(
        "top_n_of(top_n(service_cpm, 1, asc), top_n(service_instance_cpm, 2, des), 2, des)", EVERYONE
    )
    assert [(v.id, v.value) for v in merged.results[0].values] == [
        ("shop - shop-1", "10"),
        ("shop - shop-2", "7.5"),
    ]
    assert merged.type is SORTED
    mixed = "top_n_of(top_n(service_cpm, 1, asc), top_n(top_n_service_database_statement, 2, des), 2, des)"
    assert run(mixed) == error("top_n_of merges top lists of one type, not RECORD_LIST and SORTED_LIST.")


def test_relation_metrics_by_the_side_that_saw_the_calls() -> None:
    assert run("service_relation_server_cpm", SHOP_TO_CART) == ExpressionResult(
        SERIES, (series("3", *[None] * 4),)
    )
    assert run("service_relation_client_cpm", SHOP_TO_CART) == ExpressionResult(
        SERIES, (series("4", *[None] * 4),)
    )
    assert run("service_relation_client_cpm") == error(
        "Metric: [service_relation_client_cpm] is of scope ServiceRelation: the entity needs destServiceName."
    )


def test_metrics_skyoap_does_not_measure_have_no_data() -> None:
    reader = MemoryReader(ROWS)
    assert execute("service_mq_consume_count", SHOP, FIVE_MINUTES, reader) == ExpressionResult(
        SERIES, (series(None, None, None, None, None),)
    )
    assert reader.reads == []


def test_a_record_list_is_a_services_slowest_samples_with_their_traces() -> None:
    reader = MemoryReader(ROWS)
    reader.sampled[("top_n_service_database_statement", "shop")] = [
        Sample("SELECT 1", 250, "t1"), Sample("SELECT 2", 900, "t2"), Sample("SELECT 3", 400, "t3"),
    ]  # fmt: skip

    def record(statement: str, latency: str, trace: str) -> MQEValue:
        return MQEValue(statement, latency, trace)

    assert execute("top_n(top_n_service_database_statement, 2, des)", SHOP, FIVE_MINUTES, reader) == (
        ExpressionResult(
            ExpressionResultType.RECORD_LIST,
            (MQEValues(Metadata(), (record("SELECT 2", "900", "t2"), record("SELECT 3", "400", "t3"))),),
        )
    )
    assert reader.reads == ["samples top_n_service_database_statement of shop"]
    fastest = execute("top_n(top_n_service_database_statement, 1, asc)", SHOP, FIVE_MINUTES, reader)
    assert fastest.results[0].values == (record("SELECT 1", "250", "t1"),)
    # A record list is a service's: of no service, it is empty.
    assert execute("top_n(top_n_service_database_statement, 2, des)", Entity(), FIVE_MINUTES, reader) == (
        ExpressionResult(ExpressionResultType.RECORD_LIST, (MQEValues(Metadata(), ()),))
    )
    assert run("top_n_service_database_statement") == error(
        "Metric: [top_n_service_database_statement] is topN record, need top_n function for query."
    )


def test_view_as_seq_and_is_present() -> None:
    idle = Entity(service_name="idle", normal=True)
    assert run("view_as_seq(not_existing, service_cpm)") == run("service_cpm")
    assert run("view_as_seq(service_sla, service_cpm)", idle) == run(
        "service_sla", idle
    )  # no data: the first
    assert run("view_as_seq(not_existing, nor_this)") == error("Metric: [not_existing] does not exist.")
    assert run("is_present(not_existing, service_cpm)") == ExpressionResult(SINGLE, (single("1"),))
    assert run("is_present(not_existing, service_cpm)", idle) == ExpressionResult(SINGLE, (single("0"),))


def test_baseline_is_not_predicted() -> None:
    assert run("baseline(service_resp_time, upper)") == error(
        "baseline(service_resp_time, upper) needs the baseline SkyWalking's AI pipeline predicts for "
        "[service_resp_time]; skyoap predicts no baselines."
    )
    assert run("baseline(nothing, value)") == error("Metric: [nothing] does not exist.")


def test_what_a_user_can_get_wrong() -> None:
    assert run("service_cmp") == error("Metric: [service_cmp] does not exist.")
    assert run("avg(service_cmp) / 100") == error("Metric: [service_cmp] does not exist.")
    assert run("service_cpm", EVERYONE) == error(
        "Metric: [service_cpm] is of scope Service: the entity needs serviceName."
    )
    assert run("avg(service_cpm") == error(
        "syntax error at line 1, column 16 (offset 15): the end of the expression where MQE expects ')'"
    )
    nine_hours = Duration("2026-11-21 1900", "2026-11-22 0400", Step.MINUTE)
    assert run("service_cpm", duration=nine_hours) == error(
        "Duration data error, the range between the start time and the end time can't exceed 500 minutes"
    )
    assert run("1 + 1", duration=nine_hours) == ExpressionResult(SINGLE, (single("2"),))  # no metric read
    seconds = Duration("2026-11-21 190000", "2026-11-21 190010", Step.SECOND)
    assert run("service_cpm", duration=seconds).error == (
        "skyoap keeps metrics per minute, hour and day: the smallest step for metrics is MINUTE, not SECOND"
    )


def test_hours_are_read_from_the_minutes_merged() -> None:
    hour = Duration("2026-11-21 19", "2026-11-21 19", Step.HOUR)
    # 50 calls in the hour: 50 / 60 per minute; 7 of them failed.
    assert run("service_cpm", duration=hour) == ExpressionResult(SERIES, (series("0.833", ids=[T[0]]),))
    assert run("service_sla / 100", duration=hour) == ExpressionResult(SERIES, (series("86", ids=[T[0]]),))


# The GENERAL dashboards' expressions (SkyWalking 10.4's templates) on shop.
DASHBOARDS: list[tuple[str, Entity, ExpressionResult]] = [
    ("avg(service_cpm)", SHOP, ExpressionResult(SINGLE, (single("12.5"),))),
    ("avg(service_sla)/100", SHOP, ExpressionResult(SINGLE, (single("72.5"),))),
    ("avg(service_sla/100)", SHOP, ExpressionResult(SINGLE, (single("72.5"),))),
    ("avg(service_resp_time)", SHOP, ExpressionResult(SINGLE, (single("112.5"),))),
    # 0.7125 is a little above half way as a double: 0.713.
    ("avg(service_apdex)/10000", SHOP, ExpressionResult(SINGLE, (single("0.713"),))),
    ("service_apdex/10000", SHOP, ExpressionResult(SERIES, (series("1", None, "0.85", "0", "1"),))),
    ("service_cpm", SHOP, ExpressionResult(SERIES, (series("10", None, "20", "5", "15"),))),
    (
        "(avg(service_sla) < 9500) * (avg(service_cpm) > 1) == 1",
        SHOP,
        ExpressionResult(SINGLE, (single("1"),)),
    ),
    (
        "top_n(service_cpm,10,des,attr0='GENERAL')",
        EVERYONE,
        ranked(("shop", "12.5", owner("shop", True)), ("cart", "5", owner("cart", True))),
    ),
    (
        "top_n(service_sla,10,asc,attr0='GENERAL')/100",
        EVERYONE,
        ranked(("shop", "72.5", owner("shop", True)), ("cart", "100", owner("cart", True))),
    ),
    (
        "top_n(service_instance_cpm,10,des)",
        SHOP,
        ranked(
            ("shop-1", "10", owner("shop", True, "shop-1")), ("shop-2", "7.5", owner("shop", True, "shop-2"))
        ),
    ),
    (
        "top_n(endpoint_cpm,10,des)",
        SHOP,
        ranked(("GET:/songs", "8", owner("shop", True, endpoint="GET:/songs"))),
    ),
    (
        "relabels(service_percentile{p='50,75,90,95,99'},p='50,75,90,95,99',percentile='50,75,90,95,99')",
        SHOP,
        ExpressionResult(
            SERIES,
            tuple(
                series(*v, labels=[("percentile", p)])
                for p, v in zip(PERCENTILES, (P50, P50, P50, P95, P95), strict=True)
            ),
        ),
    ),
    (
        "top_n(service_apdex,10,asc,attr0='GENERAL')/10000",
        EVERYONE,
        ranked(("shop", "0.713", owner("shop", True)), ("cart", "1", owner("cart", True))),
    ),
    ("avg(service_relation_server_resp_time)", SHOP_TO_CART, ExpressionResult(SINGLE, (single("100"),))),
    ("avg(service_relation_client_cpm)", SHOP_TO_CART, ExpressionResult(SINGLE, (single("4"),))),
    (
        "relabels(service_relation_server_percentile,p='50,75,90,95,99',p='P50,P75,P90,P95,P99')",
        SHOP_TO_CART,
        ExpressionResult(
            SERIES, tuple(series("100", *[None] * 4, labels=[("p", f"P{p}")]) for p in PERCENTILES)
        ),
    ),
    (
        "avg(endpoint_sla/100)",
        Entity(service_name="shop", endpoint_name="GET:/songs"),
        ExpressionResult(SINGLE, (single("100"),)),
    ),
    ("avg(service_instance_cpm)", SHOP_1, ExpressionResult(SINGLE, (single("10"),))),
    ("service_instance_sla/100", SHOP_1, ExpressionResult(SERIES, (series("100", None, "100", None, None),))),
]


@pytest.mark.parametrize(("expression", "entity", "result"), DASHBOARDS, ids=[e for e, _, _ in DASHBOARDS])
def test_the_dashboards_expressions(expression: str, entity: Entity, result: ExpressionResult) -> None:
    assert run(expression, entity) == result


@pytest.mark.parametrize(
    ("value", "text"),
    [(1500.0, "1500"), (99.5, "99.5"), (1 / 3, "0.333"), (2 / 3, "0.667"), (0.1 + 0.2, "0.3"), (-2.5, "-2.5"),
     (0.0005, "0.001"), (0.0025, "0.003"), (1.0005, "1"), (0.1235, "0.123"), (12345678.9, "12345678.9"),
     (1e23, "100000000000000000000000"), (-0.0001, "-0"), (5e-324, "0"), (float("inf"), None),
     (float("nan"), None)],
)  # fmt: skip
def test_values_are_formatted_as_skywalking_formats_them(value: float, text: str | None) -> None:
    assert format_value(value) == text
