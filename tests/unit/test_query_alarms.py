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
from skyoap.query.context import QueryContext, TimesToLive
from skyoap.query.resolvers import resolvers
from skyoap.storage.api import RecordSearch
from skyoap.storage.config import StorageConfig, StorageKind
from skyoap.storage.select import OpenStorage, open_storage
from tests import alarm_records
from tests.alarm_records import SHOP
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
    context = QueryContext(storage.inventory, storage.metrics, storage.records, TimesToLive(3, 1, 7, 90, 7))
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
        equal={"scope": 3},
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
