"""Alarms asked of a node's query endpoint as SkyWalking's UI asks them, on
both storages: the alarms of ``tests/alarm_records.py`` stored in the node's
storage as the alarm rules store them (a firing, then its recovery under the
same uuid), found by window, scope, keyword, tag and page (``getAlarm``),
and by entity, layer and rule (``queryAlarms``); and the record searches
those filters become, on each storage."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from skyoap.model.records import AlarmRecord
from skyoap.storage.api import RecordSearch
from skyoap.storage.select import OpenStorage
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests import alarm_records
from tests.alarm_records import SHOP, SHOP_BUY, STOCK
from tests.integration.helpers import eventually
from tests.integration.test_query_traces import ask, minute
from tests.unit.test_query_schema import CLIENT_QUERIES

NAMES = """query($d: Duration!, $s: Scope, $k: String, $t: [AlarmTag], $p: Pagination!) {
    getAlarm(duration: $d, scope: $s, keyword: $k, tags: $t, paging: $p) { msgs { name } } }"""
TAGS = """query($d: Duration!, $k: String!) {
    keys: queryAlarmTagAutocompleteKeys(duration: $d)
    values: queryAlarmTagAutocompleteValues(tagKey: $k, duration: $d) }"""
CONDITION = """query($c: AlarmQueryCondition!) { queryAlarms(condition: $c) { msgs { name } } }"""
PAGE = {"pageNum": 1, "pageSize": 20}


def test_alarms_are_answered_as_the_ui_asks(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node]
) -> None:
    node = start_node(node_config)
    url = node.query_url
    assert url is not None and node.storage is not None
    t0 = int(time.time() * 1000) // 60_000 * 60_000 - 5 * 60_000
    alarm_records.store(node.storage.records, t0)

    def window(first: int, last: int) -> dict[str, str]:
        return {"start": minute(t0 + first * 60_000), "end": minute(t0 + last * 60_000), "step": "MINUTE"}

    shown = window(0, 4)
    # Elasticsearch shows what was written at its next refresh.
    expected = {"data": {"getAlarm": {"items": alarm_records.ui_answer(t0)}}}
    eventually(lambda: ask(url, CLIENT_QUERIES["ui alarms"], {"duration": shown, "paging": PAGE}) == expected)

    def names(**variables: Any) -> list[str]:
        answer = ask(url, NAMES, {"d": shown, "p": PAGE, **variables})
        assert "errors" not in answer, answer
        return [m["name"] for m in answer["data"]["getAlarm"]["msgs"]]

    assert names() == ["shop to stock", "/buy in shop", "inst of shop", "shop"]
    assert names(d=window(1, 10)) == ["stock", "shop to stock", "/buy in shop", "inst of shop"]
    assert names(d=window(11, 20)) == []
    assert names(s="Service") == ["shop"]
    assert names(s="EndpointRelation") == []
    assert names(s="All") == []
    assert names(k="success rate") == ["inst of shop"]
    assert names(k="response time of") == ["shop to stock", "/buy in shop", "shop"]
    assert names(t=[{"key": "level", "value": "WARNING"}]) == ["/buy in shop", "shop"]
    assert names(t=[{"key": "level", "value": "WARNING"}, {"key": "team", "value": "shop"}]) == ["shop"]
    assert names(p={"pageNum": 2, "pageSize": 3}) == ["shop"]
    assert names(p={"pageNum": 2, "pageSize": 2}) == ["inst of shop", "shop"]

    assert ask(url, TAGS, {"d": shown, "k": "level"}) == {
        "data": {"keys": ["level", "team"], "values": ["CRITICAL", "WARNING"]}
    }
    assert ask(url, TAGS, {"d": window(0, 10), "k": "team"}) == {
        "data": {"keys": ["level", "team"], "values": ["shop", "stock"]}
    }
    answer = ask(url, NAMES, {"d": shown, "p": PAGE, "t": [{"key": "level"}]})
    assert answer == {
        "data": {"getAlarm": None},
        "errors": [
            {
                "message": "alarm tag 'level' has no value: alarms are searched by a key and its value "
                "(queryAlarmTagAutocompleteValues lists a key's values)",
                "locations": [{"line": 2, "column": 5}],
                "path": ["getAlarm"],
            }
        ],
    }


def test_query_alarms_filters_by_entity_layer_and_rule(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node]
) -> None:
    node = start_node(node_config)
    url = node.query_url
    assert url is not None and node.storage is not None
    t0 = int(time.time() * 1000) // 60_000 * 60_000 - 11 * 60_000
    alarm_records.store(node.storage.records, t0)
    every = {"start": minute(t0), "end": minute(t0 + 10 * 60_000), "step": "MINUTE"}

    def names(**condition: Any) -> list[str]:
        answer = ask(url, CONDITION, {"c": {"duration": every, "paging": PAGE, **condition}})
        assert "errors" not in answer, answer
        return [m["name"] for m in answer["data"]["queryAlarms"]["msgs"]]

    # Elasticsearch shows what was written at its next refresh.
    eventually(lambda: names() == ["stock", "shop to stock", "/buy in shop", "inst of shop", "shop"])
    shop, stock = {"scope": "Service", "serviceName": "shop"}, {"serviceName": "stock", "normal": True}
    relation = {"scope": "ServiceRelation", "serviceName": "shop", "destServiceName": "stock"}
    assert names(entities=[stock]) == ["stock", "shop to stock"]
    assert names(entities=[shop]) == ["shop to stock", "shop"]
    assert names(entities=[relation]) == ["shop to stock"]
    assert names(entities=[{**relation, "serviceName": "stock", "destServiceName": "shop"}]) == []
    assert names(entities=[relation, {"serviceName": "shop", "endpointName": "/buy"}]) == [
        "shop to stock",
        "/buy in shop",
    ]
    assert names(ruleNames=["service_resp_time_rule", "instance_sla_rule"]) == [
        "stock",
        "inst of shop",
        "shop",
    ]
    assert names(layer="GENERAL", ruleNames=["service_resp_time_rule"]) == ["stock", "shop"]
    assert names(layer="K8S_SERVICE") == []
    both = [shop, stock]
    assert names(entities=both, ruleNames=["service_resp_time_rule"]) == ["stock", "shop"]
    assert names(entities=both, keyword="calls from", layer="GENERAL") == ["shop to stock"]
    assert names(entities=both, tags=[{"key": "team", "value": "stock"}]) == ["stock"]
    assert names(entities=both, paging={"pageNum": 1, "pageSize": 2}) == ["stock", "shop to stock"]
    assert names(entities=both, paging={"pageNum": 2, "pageSize": 2}) == ["shop"]

    answer = ask(url, CONDITION, {"c": {"duration": every, "paging": PAGE, "entities": [{"scope": "All"}]}})
    assert answer == {
        "data": {"queryAlarms": None},
        "errors": [
            {
                "message": "queryAlarms entities[0] is of scope All, which alarms are never raised for: they "
                "are raised for Service, ServiceInstance, Endpoint, ServiceRelation, "
                "ServiceInstanceRelation, EndpointRelation",
                "locations": [{"line": 1, "column": 35}],
                "path": ["queryAlarms"],
            }
        ],
    }


def test_a_record_search_matches_one_of_several_values_and_alternatives(storage: OpenStorage) -> None:
    storage.records.install([AlarmRecord])
    t0 = 1_795_514_400_000  # 2026-11-24 10:00 UTC
    alarm_records.store(storage.records, t0)
    minutes = RecordSearch(  # the firings: a recovery is a record of its own
        first_bucket=202611241000, last_bucket=202611241010, equal={"recovery_time": 0}, order_by="start_time"
    )

    def uuids(**filters: Any) -> list[str]:
        return [r.uuid for r in storage.records.search(AlarmRecord, dataclasses.replace(minutes, **filters))]

    every = ["stock-resp", "shop-stock-resp", "shop-buy-resp", "shop-inst-sla", "shop-resp"]
    eventually(lambda: uuids() == every)
    assert uuids(one_of={"rule_name": ("service_resp_time_rule", "instance_sla_rule")}) == [
        "stock-resp",
        "shop-inst-sla",
        "shop-resp",
    ]
    assert uuids(one_of={"scope": (3, 4), "service": ("shop",)}) == ["shop-stock-resp", "shop-buy-resp"]
    assert uuids(one_of={"rule_name": ()}) == []
    assert uuids(any_of=({"id0": (STOCK,)}, {"id1": (STOCK,)})) == ["stock-resp", "shop-stock-resp"]
    relation = {"id0": (SHOP,), "id1": (STOCK, SHOP_BUY)}
    assert uuids(any_of=(relation, {"id0": (SHOP_BUY,)})) == ["shop-stock-resp", "shop-buy-resp"]
    assert uuids(any_of=({"id0": ()}, {"id0": (SHOP_BUY,)})) == ["shop-buy-resp"]
    assert uuids(any_of=({"id0": (STOCK, SHOP)},), one_of={"scope": (1,)}) == ["stock-resp", "shop-resp"]
    assert uuids(any_of=({"id1": (SHOP,)},)) == []
    assert uuids(any_of=({"id0": (SHOP,)},), offset=1, limit=1) == ["shop-resp"]
