"""Rules evaluated for all the entities of a window at once agree with
``held``, entity by entity, over random metrics in a real embedded storage:
entities missing minutes, relations measured from one side, meters reported
with several labels, and expressions of every shape alarm rules take."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from skyoap.alarm.delivery import Delivery
from skyoap.alarm.evaluation import (
    entities,
    entity_key,
    entity_name,
    entity_of_key,
    held,
    held_all,
    period_ending,
    snapshots,
    watched,
)
from skyoap.alarm.listings import Listings
from skyoap.alarm.messages import Request
from skyoap.alarm.rounds import Alarms, AlarmStorage, Membership
from skyoap.alarm.settings import AlarmSettings, Rule, parse_settings
from skyoap.alarm.states import Course, step
from skyoap.model import sketch
from skyoap.model.metrics import (
    METRICS_TYPES,
    CallMetrics,
    Downsampling,
    EndpointMetrics,
    MeterMetrics,
    Metrics,
    ServiceInstanceMetrics,
    ServiceMetrics,
    ServiceRelationMetrics,
)
from skyoap.model.records import RECORD_TYPES
from skyoap.mqe import vectorized
from skyoap.mqe.parser import parse
from skyoap.mqe.reader import LabelSelector
from skyoap.mqe.stored import StoredMetrics
from skyoap.mqe.vectorized import Frames, supported
from skyoap.runtime.instruments import Instruments
from skyoap.storage.api import MetricsWrite
from skyoap.storage.config import StorageConfig, StorageKind
from skyoap.storage.select import OpenStorage, open_storage
from skyoap.vocabulary.catalogue import MetricDef
from skyoap.vocabulary.duration import Duration
from skyoap.vocabulary.entity import Entity
from tests.unit.test_alarm_evaluation import FIRST, bucket

MINUTES = 8
"""Rows are of minutes FIRST to FIRST + 7; rules are evaluated up to minute 9."""


def random_calls(rng: random.Random) -> dict[str, Any]:
    """Calls of a minute, some with none, some all failing, latencies from
    0 ms to minutes (a long tail)."""
    n = rng.choice([0, 1, 2, 5, 10, 100, rng.randint(0, 3000)])
    latencies = [round(rng.lognormvariate(3, 2)) for _ in range(n)]
    errors = rng.choice([0, 0, n, rng.randint(0, n)])
    return calls_of(latencies, errors)


def random_rows(rng: random.Random) -> Iterator[Metrics]:
    for s in range(30):
        service = f"svc-{s}"
        # Some are measured every minute, some in a few, some only after the window.
        measured = [m for m in range(MINUTES) if rng.random() < rng.choice([1.0, 0.7, 0.3])]
        if s % 10 == 9:
            measured = [MINUTES + 3]
        for m in measured:
            satisfied = rng.randint(0, 5)
            yield ServiceMetrics(time_bucket=bucket(FIRST + m), service=service, **random_calls(rng),
                                 apdex_satisfied=satisfied, apdex_tolerating=rng.randint(0, 5))  # fmt: skip
            if s % 3 == 0:
                yield ServiceInstanceMetrics(
                    time_bucket=bucket(FIRST + m), service=service, instance="i-1", **random_calls(rng)
                )
            for labels in ["", "k=a", "k=b"] if s % 3 == 0 else []:
                if rng.random() < 0.6:
                    samples = rng.randint(1, 4)
                    yield MeterMetrics(
                        time_bucket=bucket(FIRST + m), service=service, instance="i-1",
                        name="meter_instance_pvm_process_cpu_utilization", labels=labels, samples=samples,
                        value_sum=samples * rng.choice([0.0, 0.5, 12.25, 80.0, 99.9]),
                    )  # fmt: skip
            for side in ("client", "server"):
                if rng.random() < 0.6:
                    yield ServiceRelationMetrics(time_bucket=bucket(FIRST + m), source=service,
                                                 dest=f"svc-{(s + 1) % 30}", detect_point=side,
                                                 **random_calls(rng))  # fmt: skip


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenStorage]:
    path = tmp_path_factory.mktemp("vectorized") / "v.db"
    opened = open_storage(StorageConfig(kind=StorageKind.EMBEDDED, embedded_path=str(path)))
    opened.metrics.install(METRICS_TYPES)
    opened.records.install(RECORD_TYPES)  # alarms are recorded
    by_model: dict[type[Metrics], list[MetricsWrite[Metrics]]] = {}
    for row in random_rows(random.Random(11)):
        by_model.setdefault(type(row), []).append(MetricsWrite(None, row, {}))
    for model, rows in by_model.items():
        opened.metrics.put(model, Downsampling.MINUTE, rows)
    yield opened
    opened.close()


SCOPES = {
    "service": (["service_sla", "service_cpm", "service_resp_time", "service_apdex"], "service_percentile"),
    "instance": (
        ["service_instance_sla", "service_instance_resp_time", "meter_instance_pvm_process_cpu_utilization"],
        "service_instance_percentile",
    ),
    "relation": (
        ["service_relation_client_cpm", "service_relation_server_call_sla",
         "service_relation_client_resp_time"],
        "service_relation_server_percentile",
    ),
}  # fmt: skip
NUMBERS = ["0", "1", "2", "3", "50", "100", "1000", "5000", "8000", "9000", "9500", "10000", "0.5", "12.25"]


def random_expression(rng: random.Random, scope: str, depth: int) -> str:
    """An MQE expression over one scope's metrics: mostly what alarm rules
    write, sometimes what the engine refuses."""
    plain, percentile = SCOPES[scope]
    if depth == 0 or rng.random() < 0.2:
        roll = rng.random()
        if roll < 0.45:
            return rng.choice(plain)
        if roll < 0.65:
            ranks = rng.choice(["", "{p='50'}", "{p='50,99'}", "{p='75,90,95'}", "{p='42'}", "{p='99,50'}"])
            return percentile + ranks
        return rng.choice(NUMBERS)
    left, right = random_expression(rng, scope, depth - 1), random_expression(rng, scope, depth - 1)
    roll = rng.random()
    if roll < 0.25:
        return f"({left} {rng.choice(['+', '-', '*', '/', '%'])} {right})"
    if roll < 0.5:
        return f"({left} {rng.choice(['>', '>=', '<', '<=', '==', '!='])} {right})"
    if roll < 0.6:
        return f"({left} {rng.choice(['&&', '||'])} {right})"
    if roll < 0.9:
        return f"{rng.choice(['sum', 'avg', 'max', 'min', 'count', 'latest'])}({left})"
    return f"{rng.choice(['abs', 'ceil', 'floor'])}({left})"


def rule_of(expression: str, period: int) -> Rule:
    return Rule("r_rule", expression, period, period, 0, "{name}")


def rule_shaped(rng: random.Random, scope: str) -> str:
    """A rule as people write them: an aggregate of a comparison compared, or
    two such joined."""
    plain, percentile = SCOPES[scope]

    def condition() -> str:
        metric = rng.choice([*plain, percentile, f"{percentile}{{p='50,75'}}", f"{plain[0]} / 100"])
        op, threshold = rng.choice(["<", ">", ">="]), rng.choice(NUMBERS)
        if rng.random() < 0.5:
            return f"sum({metric} {op} {threshold}) >= {rng.randint(1, 3)}"
        return f"{rng.choice(['avg', 'max', 'min', 'latest'])}({metric}) {op} {threshold}"

    text = condition()
    return f"{text} {rng.choice(['&&', '||'])} {condition()}" if rng.random() < 0.4 else text


def agree(storage: OpenStorage, expression: str, period: int, minute: int) -> tuple[int, int]:
    """Asserts held_all gives what held gives for each entity; returns how
    many entities there were and for how many it held."""
    w = watched(rule_of(expression, period))
    duration = period_ending(minute, period)
    found = entities(storage.metrics, w, duration)
    frames = Frames(storage.metrics)
    assert w.metric.model is not None
    population = frames.population(found, w.metric.model)
    everyone = np.ones(len(found), np.bool_)
    got = held_all(w, population, duration, frames, StoredMetrics(storage.metrics, {}), everyone)
    expected = [held(w, e, duration, StoredMetrics(storage.metrics, {})) for e in found]
    assert got.tolist() == expected, (expression, period, minute)
    return len(found), sum(expected)


@pytest.mark.parametrize("scope", sorted(SCOPES))
def test_random_expressions_hold_for_the_entities_they_hold_for_one_by_one(
    storage: OpenStorage, scope: str
) -> None:
    rng = random.Random(scope)
    evaluated = holding = 0
    for n in range(240):
        text = rule_shaped(rng, scope)
        while n % 2 and "_" not in (text := random_expression(rng, scope, rng.randint(1, 4))):
            pass  # a rule reads a metric
        count, held_for = agree(storage, text, rng.randint(1, 5), FIRST + rng.randint(0, MINUTES + 1))
        evaluated, holding = evaluated + count, holding + held_for
    # The comparison is worth something: the expressions hold for some entities and not for others.
    assert 0.05 < holding / evaluated < 0.6


@pytest.mark.parametrize(
    "expression",
    [
        "sum(service_sla < 9000) >= 2",
        "sum(service_percentile{p='50,75,90,95,99'} > 100) >= 1",
        "sum(service_percentile > 100) >= 1 || avg(service_cpm) > 1000",
        "avg(service_percentile{p='50'} - service_percentile) > 5",  # labels paired, the others no data
        "sum(service_resp_time / (service_cpm - service_cpm) > 1) >= 1",  # x / 0: infinite; 0 / 0: NaN
        "max(service_resp_time / (service_cpm - service_cpm)) > 1",
        "min(0 - service_resp_time / (service_cpm - service_cpm)) < 1",
        "sum(service_resp_time / (service_cpm - service_cpm) - service_resp_time / (0 * service_cpm)) > 1",
        "sum(service_sla / 3) > 10000",  # sums of fractions: exactly as fsum
        "max((service_cpm - service_cpm) * (0 - 1)) == 0",  # -0 and 0
        "ceil(avg(0 - service_apdex / 100000)) == 0",
        "latest(service_sla) > 1 && 1 > 0",
        "latest(avg(service_sla)) > 1",  # refused: latest needs a time series
        "avg(service_sla) > 1 && service_cpm",  # refused: && needs comparisons
        "round(avg(service_sla), 1) > 9000",  # evaluated one by one
        "sum(increase(service_cpm, 1) > 0) >= 1",
        "service_sla > 9000",
        "1 - service_sla < 0",
        "count(service_sla) > 2",
    ],
)  # fmt: skip
def test_hand_picked_expressions_agree_with_held(storage: OpenStorage, expression: str) -> None:
    for period in (1, 3, 10):
        for minute in range(MINUTES + 2):
            agree(storage, expression, period, FIRST + minute)


def test_what_arrays_evaluate_and_what_goes_one_by_one() -> None:
    assert supported(parse("sum(service_percentile{p='50'} > 1000) >= 3 || avg(service_sla) < 8500"))
    assert supported(parse("abs(max(service_cpm) - min(service_cpm)) % 7 == latest(service_cpm)"))
    assert not supported(parse("round(avg(service_sla), 1) > 9000"))
    assert not supported(parse("sum(increase(service_cpm, 2) > 10) >= 1"))
    assert not supported(parse("avg(service_mq_consume_count) > 1"))  # not measured by skyoap


def calls_of(latencies_ms: list[int], errors: int = 0) -> dict[str, Any]:
    histogram = sketch.of_latencies(latencies_ms)
    n = len(latencies_ms)
    return {"calls": n, "errors": errors, "latency_sum_ms": sum(latencies_ms), "histogram": histogram}


@pytest.fixture
def small(tmp_path: Path) -> Iterator[OpenStorage]:
    """shop: minutes 0-2, 2 calls each, minute 1 both failed and slow (2 s);
    stock: minute 2, 4 calls of 10 ms; cart: minute 5 only."""
    opened = open_storage(StorageConfig(kind=StorageKind.EMBEDDED, embedded_path=str(tmp_path / "s.db")))
    opened.metrics.install(METRICS_TYPES)
    rows: list[CallMetrics] = [
        ServiceMetrics(time_bucket=bucket(FIRST), service="shop", **calls_of([10, 20])),
        ServiceMetrics(time_bucket=bucket(FIRST + 1), service="shop", **calls_of([2000, 2000], errors=2)),
        ServiceMetrics(time_bucket=bucket(FIRST + 2), service="shop", **calls_of([10, 20])),
        ServiceMetrics(time_bucket=bucket(FIRST + 2), service="stock", **calls_of([10] * 4)),
        ServiceMetrics(time_bucket=bucket(FIRST + 5), service="cart", **calls_of([10])),
    ]
    opened.metrics.put(ServiceMetrics, Downsampling.MINUTE, [MetricsWrite(None, r, {}) for r in rows])
    yield opened
    opened.close()


def evaluated(
    storage: OpenStorage, expression: str, period: int, minute: int, reader: StoredMetrics | None = None
) -> list[tuple[str, bool]]:
    """Each entity's name and whether the expression held for it, evaluated
    at once for those named ``want`` (all if none)."""
    w = watched(rule_of(expression, period))
    duration = period_ending(FIRST + minute, period)
    found = entities(storage.metrics, w, duration)
    frames = Frames(storage.metrics)
    population = frames.population(found, ServiceMetrics)
    reader = reader or StoredMetrics(storage.metrics, {})
    wanted = np.array([e.service_name != "cart" for e in found])
    got = held_all(w, population, duration, frames, reader, wanted)
    return [(str(e.service_name), bool(h)) for e, h in zip(found, got, strict=True)]


@pytest.mark.parametrize(
    ("expression", "period", "minute", "holding"),
    [
        ("sum(service_sla < 10000) >= 1", 3, 2, ["shop"]),
        ("sum(service_sla < 10000) >= 1", 1, 2, []),
        ("avg(service_sla) < 10000", 3, 2, ["shop"]),  # (10000 + 0 + 10000) / 2 minutes with data
        ("avg(service_cpm) >= 3", 3, 2, ["stock"]),  # one minute of data, of 4 calls
        # cart is listed, having rows from the window's start on, but has none in it.
        ("count(service_cpm) == 0", 3, 2, ["cart"]),
        ("count(service_cpm) == 0", 3, 5, []),
        ("sum(service_percentile{p='50'} >= 2000) >= 1", 3, 2, ["shop"]),
        ("sum(service_percentile{p='50'} >= 2000) >= 1 || latest(service_cpm) == 4", 3, 2, ["shop", "stock"]),
        ("max(service_resp_time) > 1000 && min(service_resp_time) < 1000", 3, 2, ["shop"]),
        ("sum(service_percentile > 10) >= 3", 3, 2, ["shop"]),  # p75 to p99 of 20 ms calls
        ("latest(service_sla) > 1", 1, 2, ["shop", "stock"]),
    ],
)  # fmt: skip
def test_exact_entities_hold(
    small: OpenStorage, expression: str, period: int, minute: int, holding: list[str]
) -> None:
    w = watched(rule_of(expression, period))
    duration = period_ending(FIRST + minute, period)
    found = entities(small.metrics, w, duration)
    frames = Frames(small.metrics)
    population = frames.population(found, ServiceMetrics)
    everyone = np.ones(len(found), np.bool_)
    got = held_all(w, population, duration, frames, StoredMetrics(small.metrics, {}), everyone)
    assert [e.service_name for e, h in zip(found, got, strict=True) if h] == holding
    assert [
        e.service_name for e in found if held(w, e, duration, StoredMetrics(small.metrics, {}))
    ] == holding


class Counting(StoredMetrics):
    """The reader, counting the entities whose values are read."""

    def __init__(self, storage: OpenStorage) -> None:
        super().__init__(storage.metrics, {})
        self.read: list[str] = []

    def values(self, metric: MetricDef, entity: Entity, duration: Duration, selector: LabelSelector) -> Any:
        self.read.append(str(entity.service_name))
        return super().values(metric, entity, duration, selector)


def test_what_is_evaluated_one_by_one_is_so_only_for_the_entities_wanted(small: OpenStorage) -> None:
    reader = Counting(small)
    # round: not evaluated as arrays. cart is not wanted: false, unread.
    got = evaluated(small, "round(avg(service_sla), 0) < 10000", 3, 2, reader)
    assert (got, reader.read) == ([("cart", False), ("shop", True), ("stock", False)], ["shop", "stock"])


def test_a_minute_too_large_to_read_at_once_is_evaluated_one_by_one(
    small: OpenStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vectorized, "MAX_MINUTE_ROWS", 1)
    reader = Counting(small)
    got = evaluated(small, "sum(service_sla < 10000) >= 1", 3, 2, reader)
    assert (got, reader.read) == ([("cart", False), ("shop", True), ("stock", False)], ["shop", "stock"])
    monkeypatch.setattr(vectorized, "MAX_MINUTE_ROWS", 2)  # minute 2 has two rows: read at once
    reader = Counting(small)
    got = evaluated(small, "sum(service_sla < 10000) >= 1", 3, 2, reader)
    assert (got, reader.read) == ([("cart", False), ("shop", True), ("stock", False)], [])


def test_percentiles_of_many_rows_are_each_rows_percentile() -> None:
    rng = random.Random(5)
    rows = [
        ServiceMetrics(time_bucket=bucket(FIRST), service=f"s{i}", **random_calls(rng)) for i in range(500)
    ]
    rows.append(ServiceMetrics(time_bucket=bucket(FIRST), service="none"))  # no histogram at all
    minute = vectorized._Minute(list(rows), np.arange(len(rows)))
    for p in (50, 75, 90, 95, 99):
        assert vectorized._percentile(minute, p).tolist() == [float(r.percentile(p)) for r in rows]


def test_a_sum_the_engine_refuses_is_refused_as_the_engine_refuses_it(storage: OpenStorage) -> None:
    """fsum refuses inf + -inf with ValueError, which is no expression error:
    the round fails, as it does with the engine alone."""
    expression = "sum(service_sla / (service_cpm - service_cpm) * (service_resp_time - 100)) > 1"
    w = watched(rule_of(expression, 5))
    duration = period_ending(FIRST + 5, 5)
    found = entities(storage.metrics, w, duration)
    refused = []
    for e in found:
        try:
            held(w, e, duration, StoredMetrics(storage.metrics, {}))
        except ValueError:
            refused.append(e)
    assert 0 < len(refused) < len(found)
    frames = Frames(storage.metrics)
    population = frames.population(found, ServiceMetrics)
    with pytest.raises(ValueError, match="inf"):
        held_all(
            w, population, duration, frames, StoredMetrics(storage.metrics, {}), np.ones(len(found), bool)
        )
    others = np.array([e not in refused for e in found])
    got = held_all(w, population, duration, frames, StoredMetrics(storage.metrics, {}), others)
    assert got.tolist() == [
        e not in refused and held(w, e, duration, StoredMetrics(storage.metrics, {})) for e in found
    ]


RULES = """
rules:
  sla_rule:
    expression: sum(service_sla < 9000) >= 2
    period: 3
    silence-period: 1
  slow_rule:
    metrics-name: service_percentile
    op: ">"
    threshold: 150
    count: 2
    period: 3
    include-names: [svc-1, svc-2, svc-4, svc-5, svc-7, nowhere]
  busy_rule:
    expression: avg(service_cpm) > 500 || latest(service_resp_time) > 20
    period: 4
    recovery-observation-period: 1
    exclude-names-regex: svc-1.*
  rounded_rule:
    expression: round(avg(service_apdex), 0) < 6000
    period: 1
  relation_rule:
    expression: sum(service_relation_server_call_sla < 10000) >= 1 && max(service_relation_client_cpm) > 5
    period: 5
  instance_rule:
    expression: max(meter_instance_pvm_process_cpu_utilization) > 50
    period: 2
hooks:
  webhook:
    all:
      is-default: true
      urls: [http://fired]
      recovery-urls: [http://recovered]
"""


Notice = tuple[str, str, int, int | None]
"""A notice sent: the rule, the entity's name, its start and its recovery (ms)."""


class Taken(Delivery):
    """A delivery that keeps what it is asked to send."""

    def __init__(self) -> None:
        super().__init__(Instruments())
        self.taken: list[Notice] = []

    def send(self, kind: str, request: Request, settled: Callable[[], None] = lambda: None) -> bool:
        for m in json.loads(request.body):
            self.taken.append((m["ruleName"], m["name"], m["startTime"], m.get("recoveryTime")))
        settled()
        return True


def one_by_one(storage: OpenStorage, settings: AlarmSettings, minutes: range) -> list[Notice]:
    """The notices of the rules over ``minutes``, each entity's expression
    evaluated alone by ``held``, every entity of every rule stepped."""
    courses: dict[tuple[str, str], Course] = {}
    out = []
    for minute in minutes:
        for rule in settings.rules:
            w = watched(rule)
            duration = period_ending(minute, rule.period)
            seen = {}
            for e in entities(storage.metrics, w, duration):
                if rule.covers(entity_name(w.scope, e)):
                    seen[entity_key(w, e)] = e
            reader = StoredMetrics(storage.metrics, {})
            steps = [(k, held(w, e, duration, reader)) for k, e in seen.items()]
            steps += [(k, False) for r, k in list(courses) if r == rule.name and k not in seen]
            for key, is_held in steps:
                course, notice = step(courses.get((rule.name, key), Course()), is_held, minute, rule)
                courses[(rule.name, key)] = course
                if notice is not None:
                    name = entity_name(w.scope, seen.get(key) or entity_of_key(w, key))
                    recovered = (
                        None if notice.recovered_minute is None else (notice.recovered_minute + 1) * 60_000
                    )
                    out.append((rule.name, name, (notice.started_minute + 1) * 60_000, recovered))
    return sorted(out, key=str)


def test_a_round_of_rules_raises_what_evaluating_each_entity_alone_raises(storage: OpenStorage) -> None:
    settings = parse_settings(RULES)
    minutes = range(FIRST, FIRST + MINUTES + 4)  # past the last rows: alarms recover
    delivery = Taken()
    now = [0.0]
    alarms = Alarms(
        lambda: settings, AlarmStorage(storage.metrics, storage.state, storage.records),
        Membership("n1", lambda: ["n1"]), delivery, Instruments(), 0.5, lambda: now[0],
    )  # fmt: skip
    for minute in minutes:
        now[0] = (minute + 1) * 60 + 1.0
        alarms.run_once()
    expected = one_by_one(storage, settings, minutes)
    assert sorted(delivery.taken, key=str) == expected
    rules = {rule for rule, *_ in expected}
    assert rules == {r.name for r in settings.rules}  # every rule fired
    assert any(recovered for *_, recovered in expected) and any(not recovered for *_, recovered in expected)


def test_an_instance_and_an_endpoint_of_the_same_key_keep_their_names(tmp_path: Path) -> None:
    opened = open_storage(StorageConfig(kind=StorageKind.EMBEDDED, embedded_path=str(tmp_path / "k.db")))
    opened.metrics.install(METRICS_TYPES)
    at = bucket(FIRST)
    instance = ServiceInstanceMetrics(time_bucket=at, service="shop", instance="x", **calls_of([10]))
    endpoint = EndpointMetrics(time_bucket=at, service="shop", endpoint="x", **calls_of([10]))
    opened.metrics.put(ServiceInstanceMetrics, Downsampling.MINUTE, [MetricsWrite(None, instance, {})])
    opened.metrics.put(EndpointMetrics, Downsampling.MINUTE, [MetricsWrite(None, endpoint, {})])
    listings = Listings(Frames(opened.metrics), opened.metrics, lambda key: 7, [7])
    named = []
    for expression in ("avg(service_instance_sla) > 1", "avg(endpoint_sla) > 1"):
        listing = listings.of(watched(rule_of(expression, 1)), period_ending(FIRST, 1))
        named.append((listing.keys, listing.names, listing.mine.tolist()))
    assert named == [(["shop\x1fx"], ["x of shop"], [True]), (["shop\x1fx"], ["x in shop"], [True])]
    opened.close()


@pytest.mark.parametrize(
    "expression",
    [
        "sum(service_sla < 9000) >= 2",
        "sum(service_percentile{p='50,75'} > 100) >= 1 || avg(service_cpm) > 1000",
        "avg(service_percentile - service_resp_time) > 5",  # an entity with no rows has no percentiles
        "sum(service_instance_percentile > 100) >= 1 || avg(meter_instance_pvm_process_cpu_utilization) > 50",
        "sum(service_relation_server_call_sla < 9500) >= 1",
        "sum(service_relation_client_cpm > 1) >= 1",  # a side some relations lack
    ],
)  # fmt: skip
def test_snapshots_read_from_the_rounds_arrays_are_those_read_one_by_one(
    storage: OpenStorage, expression: str
) -> None:
    for period in (1, 3):
        for minute in (FIRST, FIRST + 4, FIRST + MINUTES + 1):
            w = watched(rule_of(expression, period))
            duration = period_ending(minute, period)
            found = entities(storage.metrics, w, duration)
            frames = Frames(storage.metrics)
            at_once = snapshots(w, found, duration, StoredMetrics(storage.metrics, {}), frames)
            assert at_once == snapshots(w, found, duration, StoredMetrics(storage.metrics, {}))
            assert len(at_once) == len(found)
