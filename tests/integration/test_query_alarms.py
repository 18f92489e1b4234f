"""Alarms asked of a node's query endpoint as SkyWalking's UI asks them, on
both storages: the alarms of ``tests/alarm_records.py`` stored in the node's
storage as the alarm rules store them (a firing, then its recovery under the
same uuid), found by window, scope, keyword, tag and page."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests import alarm_records
from tests.integration.helpers import eventually
from tests.integration.test_query_traces import ask, minute
from tests.unit.test_query_schema import CLIENT_QUERIES

NAMES = """query($d: Duration!, $s: Scope, $k: String, $t: [AlarmTag], $p: Pagination!) {
    getAlarm(duration: $d, scope: $s, keyword: $k, tags: $t, paging: $p) { msgs { name } } }"""
TAGS = """query($d: Duration!, $k: String!) {
    keys: queryAlarmTagAutocompleteKeys(duration: $d)
    values: queryAlarmTagAutocompleteValues(tagKey: $k, duration: $d) }"""
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
