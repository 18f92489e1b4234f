"""A rule's expression over stored minute metrics: its scope, the entities
with rows in a window, and whether it held for each, minute by minute."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path

import pytest

from skyoap.alarm.evaluation import RuleError, entities, entity_name, held, period_ending, watched
from skyoap.alarm.settings import Rule, parse_settings
from skyoap.model.metrics import (
    METRICS_TYPES,
    DatabaseAccessMetrics,
    Downsampling,
    EndpointMetrics,
    ServiceMetrics,
)
from skyoap.model.records import RECORD_TYPES
from skyoap.mqe.stored import StoredMetrics
from skyoap.storage.api import MetricsWrite
from skyoap.storage.config import StorageConfig, StorageKind
from skyoap.storage.select import OpenStorage, open_storage
from skyoap.vocabulary.alarm_identity import entity_ids
from skyoap.vocabulary.entity import Entity, Scope
from tests.unit.test_query_reads import calls

START = datetime.datetime(2026, 11, 24, 10, 0, tzinfo=datetime.UTC)
FIRST = int(START.timestamp()) // 60  # minutes since the epoch


def bucket(minute: int) -> int:
    return int(datetime.datetime.fromtimestamp(minute * 60, datetime.UTC).strftime("%Y%m%d%H%M"))


def rule(expression: str, period: int = 3) -> Rule:
    return Rule("r_rule", expression, period, period, 0, "{name} is failing")


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[OpenStorage]:
    opened = open_storage(StorageConfig(kind=StorageKind.EMBEDDED, embedded_path=str(tmp_path / "a.db")))
    opened.metrics.install(METRICS_TYPES)
    opened.records.install(RECORD_TYPES)
    # shop: minutes 0-5, failing (errors) in minutes 2, 3 and 4; stock: minutes 0-1, never failing.
    shop = [ServiceMetrics(time_bucket=bucket(FIRST + m), service="shop",
                           **calls(10, errors=5 if m in (2, 3, 4) else 0)) for m in range(6)]  # fmt: skip
    stock = [ServiceMetrics(time_bucket=bucket(FIRST + m), service="stock", **calls(4)) for m in range(2)]
    opened.metrics.put(ServiceMetrics, Downsampling.MINUTE, [MetricsWrite(None, r, {}) for r in shop + stock])
    endpoint = EndpointMetrics(time_bucket=bucket(FIRST), service="shop", endpoint="/buy", **calls(1))
    opened.metrics.put(EndpointMetrics, Downsampling.MINUTE, [MetricsWrite(None, endpoint, {})])
    yield opened
    opened.close()


def test_the_expression_held_in_the_minutes_its_period_saw_enough_failures(storage: OpenStorage) -> None:
    w = watched(rule("sum(service_sla < 9000) >= 2"))
    shop = Entity(service_name="shop", normal=True)
    minutes = [
        held(w, shop, period_ending(FIRST + m, 3), StoredMetrics(storage.metrics, {})) for m in range(8)
    ]
    # Failing minutes 2, 3 and 4: two of them in the 3 minutes up to minutes 3, 4 and 5.
    assert minutes == [False, False, False, True, True, True, False, False]


def test_an_older_rule_with_a_threshold_per_percentile_holds_when_any_does(storage: OpenStorage) -> None:
    """shop's calls take 10 ms: its p90 is over 5 ms, its p95 not over 1000 ms."""
    settings = parse_settings(
        "rules:\n  p_rule:\n    metrics-name: service_percentile\n    op: '>'\n"
        "    threshold: -,-,5,1000,-\n    period: 1\n    message: slow\n"
    )
    shop = Entity(service_name="shop", normal=True)
    w = watched(settings.rules[0])
    minutes = [
        held(w, shop, period_ending(FIRST + m, 1), StoredMetrics(storage.metrics, {})) for m in range(7)
    ]
    assert minutes == [True] * 6 + [False]  # shop has rows in minutes 0 to 5


def test_the_entities_are_those_with_rows_in_the_window(storage: OpenStorage) -> None:
    w = watched(rule("sum(service_sla < 9000) >= 2"))
    assert [e.service_name for e in entities(storage.metrics, w, period_ending(FIRST + 1, 2))] == [
        "shop",
        "stock",
    ]
    assert [e.service_name for e in entities(storage.metrics, w, period_ending(FIRST + 5, 3))] == ["shop"]
    (buy,) = entities(storage.metrics, watched(rule("avg(endpoint_sla) < 9000")), period_ending(FIRST, 1))
    assert (entity_name(Scope.ENDPOINT, buy), entity_ids(Scope.ENDPOINT, buy)) == (
        "/buy in shop",
        ("c2hvcA==.1_L2J1eQ==", ""),
    )


def test_a_database_is_a_service_that_does_not_report(storage: OpenStorage) -> None:
    """Its alarms name it by the id its pages have (``.0``)."""
    called = DatabaseAccessMetrics(time_bucket=bucket(FIRST), service="db:5432", **calls(3))
    storage.metrics.put(DatabaseAccessMetrics, Downsampling.MINUTE, [MetricsWrite(None, called, {})])
    w = watched(rule("avg(database_access_resp_time) > 5"))
    (database,) = entities(storage.metrics, w, period_ending(FIRST, 1))
    assert database == Entity(service_name="db:5432", normal=False)
    assert (entity_name(Scope.SERVICE, database), entity_ids(Scope.SERVICE, database)) == (
        "db:5432",
        ("ZGI6NTQzMg==.0", ""),
    )
    assert held(w, database, period_ending(FIRST, 1), StoredMetrics(storage.metrics, {})) is True


def test_names_and_ids_of_a_relation_are_both_ends() -> None:
    e = Entity(service_name="shop", dest_service_name="stock")
    assert entity_name(Scope.SERVICE_RELATION, e) == "shop to stock"
    assert entity_ids(Scope.SERVICE_RELATION, e) == ("c2hvcA==.1", "c3RvY2s=.1")


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("sum(service_nope > 1) >= 1", "there is no metric service_nope"),
        ("avg(service_sla) > 1 && avg(endpoint_sla) > 1",
         "its metrics are of several scopes \\(Endpoint, Service\\): a rule watches one kind of entity"),
        ("1 > 0", "the expression reads no metric"),
    ],
)  # fmt: skip
def test_a_rule_no_entity_can_be_watched_by_says_why(expression: str, message: str) -> None:
    with pytest.raises(RuleError, match="^" + message):
        watched(rule(expression))
