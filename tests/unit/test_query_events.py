"""Events as the query endpoint answers them, over a real embedded storage:
the reports of one event merged into one (its earliest start, the rest of
the report that ends it last), found by uuid, source, name, type, layer and
time as SkyWalking's UI and CLI ask, ordered and paged; and the events of an
alarm's entities beside it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skyoap.model.metrics import minute_bucket
from skyoap.model.records import RECORD_TYPES, EventRecord
from skyoap.model.stream import Text
from skyoap.storage.config import StorageConfig, StorageKind
from skyoap.storage.select import OpenStorage, open_storage
from tests import alarm_records
from tests.unit.test_query_alarms import ask

T0 = 1_795_514_400_000
"""2026-11-24 10:00 UTC."""
WINDOW = {"start": "2026-11-24 1000", "end": "2026-11-24 1004", "step": "MINUTE"}
PAGE = {"pageNum": 1, "pageSize": 20}

# What SkyWalking's UI (booster-ui, fetchEvents) and CLI (swctl event list) send.
UI_EVENTS = """query queryEvents($condition: EventQueryCondition) {
  fetchEvents: queryEvents(condition: $condition) {
    events { uuid source { service serviceInstance endpoint } name type message
      parameters { key value } startTime endTime } } }"""
CLI_EVENTS = """query ($condition: EventQueryCondition) {
    result: queryEvents(condition: $condition) {
        events { uuid source { service serviceInstance endpoint } name type message
            parameters { key value } startTime endTime layer } } }"""


def report(uuid: str, start_s: int, end_s: int, **more: Any) -> EventRecord:
    """A report as the receiver stores it, its times in seconds from ``T0`` (0: not given)."""
    start, end = (T0 + start_s * 1000 if start_s else 0), (T0 + end_s * 1000 if end_s else 0)
    fields: dict[str, Any] = {
        "service": "shop", "instance": "", "endpoint": "", "name": "Upgrade", "type": "Normal",
        "message": Text(""), "parameters": {}, "layer": "GENERAL", **more,
    }  # fmt: skip
    return EventRecord(
        time_bucket=minute_bucket(start or end), event_id=f"{uuid}/{start}/{end}", uuid=uuid,
        start_time=start, end_time=end, timestamp=start or end, **fields,
    )  # fmt: skip


REPORTS = [
    # shop's instance is upgraded from 0:20 to 1:40: reported at its start and at its end.
    report("up", 20, 0, instance="inst", message=Text("Upgrading to 1.1"), parameters={"to": "1.1"}),
    report("up", 0, 100, instance="inst", message=Text("Upgraded to 1.1"), parameters={"to": "1.1"}),
    # stock crashed at 2:00 and restarted at 2:30: reported once with both times.
    report("crash", 120, 150, service="stock", name="Crash", type="Error", message=Text("OOM")),
    # A deploy of shop still under way, of another layer.
    report("deploy", 200, 0, name="Deploy", layer="K8S"),
    # An event after the window.
    report("late", 400, 0, service="stock"),
]


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[OpenStorage]:
    opened = open_storage(StorageConfig(kind=StorageKind.EMBEDDED, embedded_path=str(tmp_path / "s.db")))
    opened.records.install(RECORD_TYPES)
    assert opened.records.insert(EventRecord, REPORTS) == {}
    yield opened
    opened.close()


def events(storage: OpenStorage, **condition: Any) -> list[tuple[str, int, int | None]]:
    data, errors = ask(storage, CLI_EVENTS, condition={"paging": PAGE, "time": WINDOW, **condition})
    assert errors == []
    return [(e["uuid"], e["startTime"], e["endTime"]) for e in data["result"]["events"]]


def at(seconds: int) -> int:
    return T0 + seconds * 1000


def test_the_reports_of_an_event_are_answered_as_one_as_the_ui_asks(storage: OpenStorage) -> None:
    condition = {"paging": PAGE, "source": {"service": "shop"}, "time": WINDOW}
    deploy = {
        "uuid": "deploy", "source": {"service": "shop", "serviceInstance": None, "endpoint": None},
        "name": "Deploy", "type": "Normal", "message": "", "parameters": [],
        "startTime": at(200), "endTime": None,
    }  # fmt: skip
    upgrade = {
        "uuid": "up", "source": {"service": "shop", "serviceInstance": "inst", "endpoint": None},
        "name": "Upgrade", "type": "Normal", "message": "Upgraded to 1.1",
        "parameters": [{"key": "to", "value": "1.1"}], "startTime": at(20), "endTime": at(100),
    }  # fmt: skip
    assert ask(storage, UI_EVENTS, condition=condition) == (
        {"fetchEvents": {"events": [deploy, upgrade]}},
        [],
    )


def test_events_are_found_as_the_cli_asks(storage: OpenStorage) -> None:
    every = [("deploy", at(200), None), ("crash", at(120), at(150)), ("up", at(20), at(100))]
    assert events(storage) == every
    # swctl sends every filter it has, empty when not given: an empty one filters nothing.
    empty = {"source": {"service": "", "serviceInstance": "", "endpoint": ""}, "name": "", "layer": ""}
    assert events(storage, **empty) == every
    assert events(storage, order="ASC") == every[::-1]
    assert events(storage, type="Error") == [("crash", at(120), at(150))]
    assert events(storage, layer="K8S") == [("deploy", at(200), None)]
    assert events(storage, name="Upgrade") == [("up", at(20), at(100))]
    assert events(storage, source={"service": "shop", "serviceInstance": "inst"}) == [("up", at(20), at(100))]
    assert events(storage, paging={"pageNum": 2, "pageSize": 2}) == [("up", at(20), at(100))]
    # By uuid alone, whatever its days; a window that ends before the event started finds none.
    assert events(storage, time=None, uuid="late") == [("late", at(400), None)]
    assert events(storage, time={**WINDOW, "end": "2026-11-24 1000"}, uuid="crash") == []


def test_an_event_search_that_cannot_be_answered_says_why(storage: OpenStorage) -> None:
    _, errors = ask(storage, CLI_EVENTS, condition={"paging": PAGE})
    assert errors == ["an event search needs a uuid or a time: searching every event stored is refused"]
    _, errors = ask(storage, CLI_EVENTS)
    assert errors == ["queryEvents needs a condition with a uuid or a time"]
    _, errors = ask(storage, CLI_EVENTS, condition={"paging": {"pageNum": 1, "pageSize": 0}, "uuid": "up"})
    assert errors == ["paging.pageSize must be 1 to 1000, not 0"]


def test_an_alarm_carries_the_events_of_its_service_or_instance(storage: OpenStorage) -> None:
    alarm_records.store(storage.records, T0)
    query = """query($d: Duration!, $p: Pagination!) {
        getAlarm(duration: $d, paging: $p) { msgs { name events { uuid startTime endTime } } } }"""
    data, errors = ask(storage, query, d=WINDOW, p=PAGE)
    assert errors == []
    up = {"uuid": "up", "startTime": at(20), "endTime": at(100)}
    crash = {"uuid": "crash", "startTime": at(120), "endTime": at(150)}
    deploy = {"uuid": "deploy", "startTime": at(200), "endTime": None}
    # An endpoint's alarm has none (SkyWalking matches events by service or instance id);
    # a relation's has those of both its services.
    assert data["getAlarm"]["msgs"] == [
        {"name": "shop to stock", "events": [deploy, crash]},
        {"name": "/buy in shop", "events": []},
        {"name": "inst of shop", "events": [up]},
        {"name": "shop", "events": [deploy]},
    ]
