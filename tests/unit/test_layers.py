"""The layer registry: each layer's file declares its part, once."""

from __future__ import annotations

from collections import Counter

from skyoap.layers import CATALOGUE, KNOWN_BY_CALLERS, LAYERS, METERED, RULE_FILES
from skyoap.model.layers import LAYERS as SKYWALKING_LAYERS
from skyoap.model.metrics import (
    CacheAccessMetrics,
    DatabaseAccessMetrics,
    MeterMetrics,
    MQAccessMetrics,
    ServiceMeterMetrics,
)
from skyoap.model.spans import SpanLayer
from skyoap.query.ui.dashboards import dashboards
from skyoap.receiver.virtual import SPAN_LAYERS
from skyoap.vocabulary.catalogue import MetricsType
from skyoap.vocabulary.entity import Scope


def test_the_layers_are_skywalking_s_in_the_order_of_its_menu() -> None:
    names = [layer.name for layer in LAYERS]
    general = ["GENERAL", "VIRTUAL_DATABASE", "VIRTUAL_CACHE", "VIRTUAL_MQ"]
    assert names == [*general, "OS_LINUX", "MYSQL", "POSTGRESQL", "REDIS"]
    assert set(names) <= SKYWALKING_LAYERS


def test_each_metric_is_declared_by_one_layer_and_the_catalogue_holds_them_all() -> None:
    declared = Counter(d.name for layer in LAYERS for d in layer.metrics)
    assert [name for name, times in declared.items() if times > 1] == []
    assert set(CATALOGUE) == set(declared)
    # 68 measured from traces; 9 of the Python agent's runtime, 23 of hosts, 35 of MySQL, 55 of
    # PostgreSQL and 29 of Redis from the meter rules.
    assert len(CATALOGUE) == 68 + 9 + 23 + 35 + 55 + 29
    of = {d.name: layer.name for layer in LAYERS for d in layer.metrics}
    some = ("service_cpm", "database_access_cpm", "cache_read_sla", "mq_endpoint_consume_latency",
            "meter_instance_pvm_gc_time", "meter_vm_cpu_total_percentage", "meter_mysql_qps",
            "meter_pg_instance_locks_count", "meter_redis_uptime")  # fmt: skip
    assert [of[name] for name in some] == [
        "GENERAL", "VIRTUAL_DATABASE", "VIRTUAL_CACHE", "VIRTUAL_MQ",
        "GENERAL", "OS_LINUX", "MYSQL", "POSTGRESQL", "REDIS",
    ]  # fmt: skip


def test_the_services_nobody_reports_from_are_known_by_their_layer_s_metrics() -> None:
    known_by = [(layer, model.MODEL) for layer, model in KNOWN_BY_CALLERS.items()]
    assert known_by == [
        ("VIRTUAL_DATABASE", DatabaseAccessMetrics.MODEL),
        ("VIRTUAL_CACHE", CacheAccessMetrics.MODEL),
        ("VIRTUAL_MQ", MQAccessMetrics.MODEL),
    ]
    measured = set(SPAN_LAYERS)
    assert measured == {SpanLayer.DATABASE, SpanLayer.CACHE, SpanLayer.MQ}


def test_each_layer_s_dashboards_are_of_that_layer_and_named_once() -> None:
    for layer in LAYERS:
        assert {d["configuration"]["layer"] for d in layer.dashboards()} == {layer.name}
    ids = [d["id"] for d in dashboards()]
    assert len(ids) == len(set(ids)) == 25
    roots = [d["id"] for d in dashboards() if d["configuration"]["isRoot"]]
    assert roots == [
        "General-Root", "Virtual-Database-Root", "Virtual-Cache-Root", "Virtual-MQ-Root", "Linux-Root",
        "MySQL-Root", "PostgreSQL-Root", "Redis-Root",
    ]  # fmt: skip


def test_a_layer_of_meters_declares_what_its_rules_make_by_their_scope_and_labels() -> None:
    defs = {d.name: d for d in CATALOGUE.values()}
    host, by_mode = defs["meter_vm_cpu_total_percentage"], defs["meter_vm_cpu_average_used"]
    assert (host.scope, host.type, host.model, host.column, dict(host.where)) == (
        Scope.SERVICE, MetricsType.REGULAR_VALUE, ServiceMeterMetrics, "value_avg",
        {"name": "meter_vm_cpu_total_percentage"},
    )  # fmt: skip
    assert (by_mode.type, by_mode.scope) == (MetricsType.LABELED_VALUE, Scope.SERVICE)
    pg = defs["meter_pg_instance_active_sessions"]
    assert (pg.scope, pg.type, pg.model) == (Scope.SERVICE_INSTANCE, MetricsType.LABELED_VALUE, MeterMetrics)
    assert METERED == ("OS_LINUX", "MYSQL", "POSTGRESQL", "REDIS")
    assert [p.name for p in RULE_FILES] == [
        "python_runtime.yaml", "os_linux.yaml", "mysql_instance.yaml", "mysql_service.yaml",
        "postgresql_instance.yaml", "postgresql_service.yaml", "redis_instance.yaml", "redis_service.yaml",
    ]  # fmt: skip
