"""Alarms as the query endpoint answers them, over a real embedded storage:
what SkyWalking's UI asks (``getAlarm``) filtered by scope, keyword, tag,
window and page, a recovered alarm's recovery time, the tags offered for
completion, and what input that cannot be answered gets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import graphql
import pytest

from skyoap.model.records import RECORD_TYPES, AlarmRecord
from skyoap.query import alarms
from skyoap.query.context import QueryContext
from skyoap.query.resolvers import resolvers
from skyoap.storage.api import RecordSearch
from skyoap.storage.config import StorageConfig, StorageKind
from skyoap.storage.select import OpenStorage, open_storage
from skyoap.vocabulary import ids
from skyoap.vocabulary.ttl import TimesToLive
from tests import alarm_records
from tests.alarm_records import SHOP, SHOP_INST, STOCK
from tests.unit.test_query_schema import CLIENT_QUERIES

T0 = 1_795_514_400_000
"""2026-11-24 10:00 UTC."""
MINUTE = 202611241000
DURATION = {"start": "2026-11-24 1000", "end": "2026-11-24 1004", "step": "MINUTE"}
PAGE = {"pageNum": 1, "pageSize": 20}
NAMES = """query($d: Duration!, $s: Scope, $k: String, $t: [AlarmTag], $p: Pagination!) {
    getAlarm(duration: $d, scope: $s, keyword: $k, tags: $t, paging: $p) { msgs { name } } }"""


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[OpenStorage]:
    opened = open_storage(StorageConfig(kind=StorageKind.EMBEDDED, embedded_path=str(tmp_path / "s.db")))
    opened.records.install(RECORD_TYPES)
    alarm_records.store(opened.records, T0)
    yield opened
    opened.close()


def ask(storage: OpenStorage, query: str, **variables: Any) -> tuple[Any, list[str]]:
    context = QueryContext(
        storage.inventory, storage.metrics, storage.records, TimesToLive(3, 1, 7, 90, 7, 7)
    )
    binder = resolvers()
    result = graphql.graphql_sync(
        binder.schema, query, variable_values=variables, context_value=context, field_resolver=binder.resolve
    )
    return result.data, [e.message for e in result.errors or []]


def names(storage: OpenStorage, duration: dict[str, str] = DURATION, **arguments: Any) -> list[str]:
    variables = {"d": duration, "p": PAGE, **arguments}
    data, errors = ask(storage, NAMES, **variables)
    assert errors == []
    return [m["name"] for m in data["getAlarm"]["msgs"]]


def test_the_alarms_of_the_window_come_newest_first_as_the_ui_asks(storage: OpenStorage) -> None:
    data, errors = ask(storage, CLIENT_QUERIES["ui alarms"], duration=DURATION, paging=PAGE)
    assert errors == []
    assert data == {"getAlarm": {"items": alarm_records.ui_answer(T0)}}


def test_alarms_are_found_by_the_minute_they_fired_in(storage: OpenStorage) -> None:
    shop = ["shop to stock", "/buy in shop", "inst of shop", "shop"]
    assert names(storage) == shop
    later = {"start": "2026-11-24 1001", "end": "2026-11-24 1010", "step": "MINUTE"}
    assert names(storage, later) == ["stock", "shop to stock", "/buy in shop", "inst of shop"]
    # The instance's alarm recovered at 10:03: it is found by its firing's minute alone.
    assert names(storage, {**DURATION, "start": "2026-11-24 1002"}) == ["shop to stock", "/buy in shop"]
    assert names(storage, {"start": "2026-11-24 10", "end": "2026-11-24 10", "step": "HOUR"}) == [
        "stock",
        *shop,
    ]
    assert names(storage, {"start": "2026-11-24 1011", "end": "2026-11-24 1100", "step": "MINUTE"}) == []


def test_alarms_are_found_by_scope_keyword_and_tags(storage: OpenStorage) -> None:
    assert names(storage, s="Service") == ["shop"]
    assert names(storage, s="ServiceInstance") == ["inst of shop"]
    assert names(storage, s="EndpointRelation") == []
    # Alarms are raised for no other scope: SkyWalking answers none, as here.
    assert names(storage, s="All") == []
    assert names(storage, s="Process") == []
    assert names(storage, k="success RATE") == ["inst of shop"]
    assert names(storage, k="response time of") == ["shop to stock", "/buy in shop", "shop"]
    assert names(storage, k=" ") == names(storage)
    assert names(storage, k="response", s="Endpoint") == ["/buy in shop"]
    assert names(storage, t=[{"key": "level", "value": "WARNING"}]) == ["/buy in shop", "shop"]
    both = [{"key": "level", "value": "WARNING"}, {"key": "team", "value": "shop"}]
    assert names(storage, t=both) == ["shop"]
    assert names(storage, t=[{"key": "team", "value": "stock"}]) == []


def test_alarms_are_paged(storage: OpenStorage) -> None:
    assert names(storage, p={"pageNum": 1, "pageSize": 3}) == [
        "shop to stock",
        "/buy in shop",
        "inst of shop",
    ]
    assert names(storage, p={"pageNum": 2, "pageSize": 3}) == ["shop"]
    assert names(storage, p={"pageNum": 2, "pageSize": 2}) == ["inst of shop", "shop"]
    assert names(storage, p={"pageNum": 3, "pageSize": 2}) == []


def test_a_relations_id_is_its_source_and_its_tags_come_sorted(storage: OpenStorage) -> None:
    data, _ = ask(storage, NAMES.replace("{ name }", "{ id scope tags { key value } }"), d=DURATION, p=PAGE)
    relation, *_, service = data["getAlarm"]["msgs"]
    assert relation == {"id": SHOP, "scope": "ServiceRelation", "tags": []}
    assert service["tags"] == [{"key": "level", "value": "WARNING"}, {"key": "team", "value": "shop"}]


def test_tag_completion_answers_the_tags_of_the_window(storage: OpenStorage) -> None:
    query = """query($d: Duration!, $k: String!) {
        keys: queryAlarmTagAutocompleteKeys(duration: $d)
        values: queryAlarmTagAutocompleteValues(tagKey: $k, duration: $d) }"""
    assert ask(storage, query, d=DURATION, k="level") == (
        {"keys": ["level", "team"], "values": ["CRITICAL", "WARNING"]},
        [],
    )
    later = {"start": "2026-11-24 1010", "end": "2026-11-24 1010", "step": "MINUTE"}
    assert ask(storage, query, d=later, k="team") == ({"keys": ["level", "team"], "values": ["stock"]}, [])
    assert ask(storage, query, d=DURATION, k="lev") == ({"keys": ["level", "team"], "values": []}, [])
    empty = {"start": "2026-11-24 1005", "end": "2026-11-24 1009", "step": "MINUTE"}
    assert ask(storage, query, d=empty, k="level") == ({"keys": [], "values": []}, [])


def test_the_arguments_become_one_storage_search() -> None:
    search = alarms.alarm_search(
        DURATION,
        {"pageNum": 2, "pageSize": 15},
        "Endpoint",
        " slow ",
        [{"key": "level", "value": "WARNING"}, None],
    )
    assert search == RecordSearch(
        first_bucket=MINUTE,
        last_bucket=MINUTE + 4,
        equal={"recovery_time": 0, "scope": 3},
        tags=("level=WARNING",),
        contains={"message": ["slow"]},
        order_by="start_time",
        descending=True,
        offset=15,
        limit=15,
    )
    assert alarms.alarm_search(DURATION, PAGE, "All") is None


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        (
            {"t": [{"key": "level"}]},
            "alarm tag 'level' has no value: alarms are searched by a key and its value "
            "(queryAlarmTagAutocompleteValues lists a key's values)",
        ),
        ({"p": {"pageNum": 0, "pageSize": 20}}, "paging.pageNum counts from 1, not 0"),
        ({"p": {"pageSize": 1001}}, "paging.pageSize must be 1 to 1000, not 1001"),
        (
            {"d": {**DURATION, "end": "2026-11-24"}},
            "Duration end '2026-11-24' is not a time of step MINUTE: it is written yyyy-MM-dd HHmm, "
            "e.g. '2026-11-21 1905'",
        ),
        (
            {"s": "Everything"},
            "Variable '$s' has invalid value: Value 'Everything' does not exist in 'Scope' enum.",
        ),
    ],
)
def test_arguments_that_cannot_be_answered_say_why(
    storage: OpenStorage, arguments: dict[str, Any], error: str
) -> None:
    data, errors = ask(storage, NAMES, **{"d": DURATION, "p": PAGE, **arguments})
    assert data in (None, {"getAlarm": None})
    assert errors == [error]


WIDE = {"start": "2026-11-24 1000", "end": "2026-11-24 1010", "step": "MINUTE"}
"""Minutes 0 to 10: every alarm of ``tests/alarm_records.py``."""
CONDITION = """query($c: AlarmQueryCondition!) { queryAlarms(condition: $c) { msgs { name } } }"""
EVERY = ["stock", "shop to stock", "/buy in shop", "inst of shop", "shop"]
SHOP_SERVICE = {"scope": "Service", "serviceName": "shop", "normal": True}
STOCK_SERVICE = {"serviceName": "stock"}
SHOP_INSTANCE = {"serviceName": "shop", "serviceInstanceName": "inst"}
BUY_ENDPOINT = {"serviceName": "shop", "endpointName": "/buy"}
SHOP_TO_STOCK = {"scope": "ServiceRelation", "serviceName": "shop", "destServiceName": "stock"}
RESP_RULE = "service_resp_time_rule"


def found(storage: OpenStorage, **condition: Any) -> list[str]:
    """The names of the alarms ``queryAlarms`` answers for ``condition`` (over
    minutes 0 to 10, one page of 20 unless given)."""
    data, errors = ask(storage, CONDITION, c={"duration": WIDE, "paging": PAGE, **condition})
    assert errors == []
    return [m["name"] for m in data["queryAlarms"]["msgs"]]


def without_owners(metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The values of ``metrics`` as the UI asks for them: without their owner."""

    def asked(result: dict[str, Any]) -> dict[str, Any]:
        return {**result, "values": [{k: v[k] for k in ("id", "value", "traceID")} for v in result["values"]]}

    return [{**m, "results": [asked(r) for r in m["results"]]} for m in metrics]


def test_query_alarms_answers_as_get_alarm_does_what_skywalking_11s_ui_asks(storage: OpenStorage) -> None:
    query = CLIENT_QUERIES["horizon ui alarms"]
    data, errors = ask(storage, query, condition={"duration": DURATION, "paging": PAGE})
    assert errors == []
    selected = ("message", "startTime", "recoveryTime", "scope", "name", "tags")
    expected = [
        {
            "id": ui["key"],
            **{k: ui[k] for k in selected},
            "snapshot": {**ui["snapshot"], "metrics": without_owners(ui["snapshot"]["metrics"])},
        }
        for ui in alarm_records.ui_answer(T0)
    ]
    assert data == {"queryAlarms": {"msgs": expected}}
    assert found(storage) == EVERY
    assert found(storage, entities=[], ruleNames=[], layer=None, keyword=None, tags=[]) == EVERY


def test_an_entity_matches_the_alarms_where_it_is_either_end(storage: OpenStorage) -> None:
    # stock raised an alarm of its own (id0) and is the destination of shop's calls (id1).
    assert found(storage, entities=[STOCK_SERVICE]) == ["stock", "shop to stock"]
    assert found(storage, entities=[{**STOCK_SERVICE, "scope": "Service"}]) == ["stock", "shop to stock"]
    # shop is the relation's source (id0), and raised an alarm of its own.
    assert found(storage, entities=[SHOP_SERVICE]) == ["shop to stock", "shop"]
    assert found(storage, entities=[SHOP_INSTANCE]) == ["inst of shop"]
    assert found(storage, entities=[{**BUY_ENDPOINT, "scope": "Endpoint"}]) == ["/buy in shop"]
    # Alarms are raised for services that report: one known only from its callers has none.
    assert found(storage, entities=[{**STOCK_SERVICE, "normal": False}]) == []
    assert found(storage, entities=[{"serviceName": "cart"}]) == []


def test_a_relation_matches_exactly_its_source_and_destination(storage: OpenStorage) -> None:
    assert found(storage, entities=[SHOP_TO_STOCK]) == ["shop to stock"]
    # Without a scope, the names given say which.
    assert found(storage, entities=[{"serviceName": "shop", "destServiceName": "stock"}]) == ["shop to stock"]
    assert found(storage, entities=[{"serviceName": "stock", "destServiceName": "shop"}]) == []
    assert found(storage, entities=[{"serviceName": "shop", "destServiceName": "cart"}]) == []
    instances = {**SHOP_INSTANCE, "destServiceName": "stock", "destServiceInstanceName": "inst"}
    assert found(storage, entities=[instances]) == []


def test_entities_rule_names_and_layer_each_match_any_of_their_values(storage: OpenStorage) -> None:
    stock_or_inst = [STOCK_SERVICE, SHOP_INSTANCE]
    assert found(storage, entities=stock_or_inst) == ["stock", "shop to stock", "inst of shop"]
    assert found(storage, entities=[SHOP_TO_STOCK, BUY_ENDPOINT, SHOP_TO_STOCK]) == [
        "shop to stock",
        "/buy in shop",
    ]
    assert found(storage, ruleNames=[RESP_RULE]) == ["stock", "shop"]
    assert found(storage, ruleNames=[RESP_RULE, "instance_sla_rule"]) == ["stock", "inst of shop", "shop"]
    assert found(storage, ruleNames=["service_resp_time"]) == []
    # Every service skyoap knows is in the GENERAL layer; it keeps no other.
    assert found(storage, layer="GENERAL") == EVERY
    assert found(storage, layer="") == EVERY
    assert found(storage, layer="K8S_SERVICE") == []
    assert found(storage, layer="general") == []


def test_every_filter_of_a_condition_holds(storage: OpenStorage) -> None:
    both = [SHOP_SERVICE, STOCK_SERVICE]
    assert found(storage, entities=both) == ["stock", "shop to stock", "shop"]
    assert found(storage, entities=both, ruleNames=[RESP_RULE]) == ["stock", "shop"]
    assert found(storage, entities=both, ruleNames=[RESP_RULE], layer="GENERAL") == ["stock", "shop"]
    assert found(storage, entities=both, ruleNames=[RESP_RULE], layer="K8S_SERVICE") == []
    assert found(storage, entities=both, keyword="calls from") == ["shop to stock"]
    assert found(storage, entities=both, tags=[{"key": "team", "value": "stock"}]) == ["stock"]
    assert found(storage, entities=[SHOP_SERVICE], tags=[{"key": "team", "value": "stock"}]) == []
    assert found(storage, entities=both, duration=DURATION) == ["shop to stock", "shop"]
    assert found(storage, entities=[STOCK_SERVICE], ruleNames=["instance_sla_rule"]) == []


def test_query_alarms_is_paged_each_alarm_once(storage: OpenStorage) -> None:
    # shop to stock matches both entities: it is one alarm, on one page.
    both = [SHOP_SERVICE, STOCK_SERVICE]
    assert found(storage, entities=both, paging={"pageNum": 1, "pageSize": 2}) == ["stock", "shop to stock"]
    assert found(storage, entities=both, paging={"pageNum": 2, "pageSize": 2}) == ["shop"]
    assert found(storage, entities=both, paging={"pageNum": 3, "pageSize": 2}) == []
    assert found(storage, paging={"pageNum": 2, "pageSize": 3}) == ["inst of shop", "shop"]


def test_a_condition_becomes_one_storage_search() -> None:
    condition = {
        "duration": DURATION,
        "paging": {"pageNum": 2, "pageSize": 15},
        "entities": [
            SHOP_SERVICE,
            {**SHOP_INSTANCE, "scope": "ServiceInstance"},
            {"serviceName": "shop"},
            SHOP_TO_STOCK,
            {"serviceName": "shop", "destServiceName": "cart", "destNormal": False},
            {"serviceName": "stock", "destServiceName": "shop"},
        ],
        "layer": "GENERAL",
        "ruleNames": [RESP_RULE, "instance_sla_rule"],
        "keyword": " slow ",
        "tags": [{"key": "level", "value": "WARNING"}],
    }
    assert alarms.condition_search(condition) == RecordSearch(
        first_bucket=MINUTE,
        last_bucket=MINUTE + 4,
        equal={"recovery_time": 0},
        one_of={"rule_name": (RESP_RULE, "instance_sla_rule")},
        any_of=(
            {"id0": (SHOP, SHOP_INST)},
            {"id1": (SHOP, SHOP_INST)},
            {"id0": (SHOP,), "id1": (STOCK, ids.service_id("cart", False))},
            {"id0": (STOCK,), "id1": (SHOP,)},
        ),
        tags=("level=WARNING",),
        contains={"message": ["slow"]},
        order_by="start_time",
        descending=True,
        offset=15,
        limit=15,
    )
    assert alarms.condition_search({**condition, "layer": "MESH"}) is None
    unfiltered = {"duration": DURATION, "paging": PAGE, "entities": [], "ruleNames": []}
    assert alarms.condition_search(unfiltered) == alarms.alarm_search(DURATION, PAGE)


def never_raised(index: int, scope: str) -> str:
    return (
        f"queryAlarms entities[{index}] is of scope {scope}, which alarms are never raised for: they are "
        "raised for Service, ServiceInstance, Endpoint, ServiceRelation, ServiceInstanceRelation, "
        "EndpointRelation"
    )


@pytest.mark.parametrize(
    ("condition", "error"),
    [
        (
            {"entities": [SHOP_SERVICE] * 101},
            "queryAlarms filters by at most 100 entities, not 101: split them over several queries",
        ),
        (
            {"ruleNames": [RESP_RULE] * 1001},
            "queryAlarms filters by at most 1000 ruleNames, not 1001: split them over several queries",
        ),
        ({"entities": [SHOP_SERVICE, {"scope": "All"}]}, never_raised(1, "All")),
        ({"entities": [{"scope": "Process", "serviceName": "shop"}]}, never_raised(0, "Process")),
        ({"entities": [{**SHOP_INSTANCE, "processName": "p"}]}, never_raised(0, "Process")),
        (
            {"entities": [{"serviceName": "a", "destServiceName": "b", "destProcessName": "p"}]},
            never_raised(0, "ProcessRelation"),
        ),
        (
            {"entities": [{"normal": True}]},
            "queryAlarms entities[0] names nothing: give its serviceName, and the other names of its scope",
        ),
        (
            {"entities": [{"scope": "ServiceInstance", "serviceName": "shop"}]},
            "queryAlarms entities[0] is of scope ServiceInstance: give its serviceInstanceName too",
        ),
        (
            {"entities": [{**SHOP_TO_STOCK, "scope": "EndpointRelation"}], "layer": "MESH"},
            "queryAlarms entities[0] is of scope EndpointRelation: give its endpointName, "
            "destEndpointName too",
        ),
        (
            {"tags": [{"key": "level"}]},
            "alarm tag 'level' has no value: alarms are searched by a key and its value "
            "(queryAlarmTagAutocompleteValues lists a key's values)",
        ),
        ({"paging": {"pageNum": 0, "pageSize": 20}}, "paging.pageNum counts from 1, not 0"),
    ],
)
def test_conditions_that_cannot_be_answered_say_why(
    storage: OpenStorage, condition: dict[str, Any], error: str
) -> None:
    data, errors = ask(storage, CONDITION, c={"duration": WIDE, "paging": PAGE, **condition})
    assert data in (None, {"queryAlarms": None})
    assert errors == [error]


@pytest.mark.parametrize(
    ("search", "error"),
    [
        (
            RecordSearch(one_of={"message": ("slow",)}),
            "alarm has no column message of type string, int, bool to match one of several values",
        ),
        (
            RecordSearch(any_of=({"id0": (SHOP,)}, {"tags": ("level=WARNING",)})),
            "alarm has no column tags of type string, int, bool to match one of several values",
        ),
        (
            RecordSearch(one_of={"rule_name": "service_resp_time_rule"}),
            "a record search takes a column's values as a list, not as one string",
        ),
        (
            RecordSearch(any_of=({"id0": (SHOP,)}, {})),
            "an alternative of a record search names no column: it would match every record",
        ),
    ],
)
def test_a_search_for_one_of_several_values_names_columns_that_hold_them(
    storage: OpenStorage, search: RecordSearch, error: str
) -> None:
    with pytest.raises(ValueError) as raised:
        storage.records.search(AlarmRecord, search)
    assert str(raised.value) == error
