"""The layer registry: each layer's file declares its part, once."""

from __future__ import annotations

from collections import Counter

from skyoap.layers import CATALOGUE, KNOWN_BY_CALLERS, LAYERS
from skyoap.model.layers import LAYERS as SKYWALKING_LAYERS
from skyoap.model.metrics import CacheAccessMetrics, DatabaseAccessMetrics, MQAccessMetrics
from skyoap.model.spans import SpanLayer
from skyoap.query.ui.dashboards import dashboards
from skyoap.receiver.virtual import SPAN_LAYERS


def test_the_layers_are_skywalking_s_in_the_order_of_its_menu() -> None:
    names = [layer.name for layer in LAYERS]
    assert names == ["GENERAL", "VIRTUAL_DATABASE", "VIRTUAL_CACHE", "VIRTUAL_MQ"]
    assert set(names) <= SKYWALKING_LAYERS


def test_each_metric_is_declared_by_one_layer_and_the_catalogue_holds_them_all() -> None:
    declared = Counter(d.name for layer in LAYERS for d in layer.metrics)
    assert [name for name, times in declared.items() if times > 1] == []
    assert set(CATALOGUE) == set(declared)
    assert len(CATALOGUE) == 71
    of = {d.name: layer.name for layer in LAYERS for d in layer.metrics}
    some = ("service_cpm", "database_access_cpm", "cache_read_sla", "mq_endpoint_consume_latency")
    assert [of[name] for name in some] == ["GENERAL", "VIRTUAL_DATABASE", "VIRTUAL_CACHE", "VIRTUAL_MQ"]


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
    assert len(ids) == len(set(ids)) == 14
    roots = [d["id"] for d in dashboards() if d["configuration"]["isRoot"]]
    assert roots == ["General-Root", "Virtual-Database-Root", "Virtual-Cache-Root", "Virtual-MQ-Root"]
