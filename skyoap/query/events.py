"""Events: what agents and tools reported happened to a service, an
instance or an endpoint (``queryEvents``), and the events of each alarm's
entity (an ``AlarmMessage``'s ``events``).

Each report is a record of its own (``EventRecord``); the reports of one
event share its uuid and are answered as one, as SkyWalking merges them:
its earliest start, and the rest of the report that ends it last."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from skyoap.model.records import EventRecord
from skyoap.query.context import QueryContext
from skyoap.query.paging import Page, Window
from skyoap.storage.api import RecordSearch
from skyoap.vocabulary import ids

MAX_REPORTS = 10_000
"""The most reports one query reads, before they are merged into events: as
far as a search reaches (``paging.MAX_DEPTH``)."""

_SOURCE_COLUMNS = {"service": "service", "serviceInstance": "instance", "endpoint": "endpoint"}


def query_events(context: QueryContext, condition: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The events ``condition`` matches, the latest first unless it asks ASC."""
    if condition is None:
        raise ValueError("queryEvents needs a condition with a uuid or a time")
    page = Page.of(condition["paging"])
    events = merged(context.records.search(EventRecord, event_search(condition)))
    events.sort(key=lambda e: (e["timestamp"], e["uuid"]), reverse=condition.get("order") != "ASC")
    return {"events": [event_answer(e) for e in events[page.offset : page.offset + page.limit]]}


def event_search(condition: Mapping[str, Any]) -> RecordSearch:
    """The reports an ``EventQueryCondition`` matches; ValueError for one that cannot be answered."""
    time = condition.get("time")
    if not condition.get("uuid") and not time:
        raise ValueError("an event search needs a uuid or a time: searching every event stored is refused")
    equal: dict[str, str | int | bool] = {}
    for field, column in (("uuid", "uuid"), ("name", "name"), ("type", "type"), ("layer", "layer")):
        if condition.get(field):
            equal[column] = condition[field]
    for field, column in _SOURCE_COLUMNS.items():
        if (condition.get("source") or {}).get(field):
            equal[column] = condition["source"][field]
    if not time:
        return RecordSearch(equal=equal, order_by="timestamp", limit=MAX_REPORTS)
    window = Window.of(time)
    return RecordSearch(
        first_bucket=window.first_bucket,
        last_bucket=window.last_bucket,
        equal=equal,
        at_least={"timestamp": window.start_ms},
        at_most={"timestamp": window.end_ms - 1},
        order_by="timestamp",
        limit=MAX_REPORTS,
    )


def merged(reports: Iterable[EventRecord]) -> list[dict[str, Any]]:
    """One event per uuid: the report that ends it last (or, while none ends
    it, the one that started it last), with the earliest start of them all."""
    events: dict[str, dict[str, Any]] = {}
    for report in sorted(reports, key=lambda r: (r.end_time, r.start_time, r.event_id)):
        held = events.get(report.uuid)
        starts = [t for t in (report.start_time, held["start_time"] if held else 0) if t]
        event = events[report.uuid] = _event(report)
        event["start_time"] = min(starts, default=0)
        event["timestamp"] = event["start_time"] or report.end_time
    return list(events.values())


def _event(report: EventRecord) -> dict[str, Any]:
    return {
        "uuid": report.uuid,
        "service": report.service,
        "instance": report.instance,
        "endpoint": report.endpoint,
        "name": report.name,
        "type": report.type,
        "message": str(report.message),
        "parameters": dict(report.parameters),
        "start_time": report.start_time,
        "end_time": report.end_time,
        "layer": report.layer,
    }


def event_answer(event: Mapping[str, Any]) -> dict[str, Any]:
    """An ``Event`` of the protocol."""
    parameters = event["parameters"]
    return {
        "uuid": event["uuid"],
        "source": {
            "service": event["service"],
            "serviceInstance": event["instance"] or None,
            "endpoint": event["endpoint"] or None,
        },
        "name": event["name"],
        "type": event["type"],
        "message": event["message"],
        "parameters": [{"key": k, "value": parameters[k]} for k in sorted(parameters)],
        "startTime": event["start_time"],
        "endTime": event["end_time"] or None,
        "layer": event["layer"],
    }


def source_id(event: Mapping[str, Any]) -> str:
    """The id of the entity an event happened to, as alarms name it: its
    instance's, else its service's (an endpoint's event is its service's)."""
    if event["instance"]:
        return ids.instance_id(event["service"], True, event["instance"])
    return ids.service_id(event["service"], True)


def by_source(context: QueryContext, time: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The events of ``time``, each answered, by the id of the entity they
    happened to, the latest first."""
    events = merged(context.records.search(EventRecord, event_search({"time": time})))
    events.sort(key=lambda e: (e["timestamp"], e["uuid"]), reverse=True)
    found: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        found.setdefault(source_id(event), []).append(event_answer(event))
    return found
