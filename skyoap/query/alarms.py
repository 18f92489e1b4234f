"""Alarms: those the rules raised in a Duration (``getAlarm``), and the tags
they carry (``queryAlarmTagAutocompleteKeys`` and ``...Values``).

A firing is stored as an ``AlarmRecord`` with ``recovery_time`` 0, and its
recovery stores the same record again with it set: one row per firing,
found by its minute (``time_bucket``) as SkyWalking finds it by its second."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any

from skyoap.model.records import AlarmRecord
from skyoap.query.context import QueryContext
from skyoap.query.paging import Page, Window
from skyoap.storage.api import RecordSearch

MAX_TAG_VALUES = 100
"""The most values ``queryAlarmTagAutocompleteValues`` answers."""

MAX_TAGS_READ = 10_000
"""The most distinct ``key=value`` tags read for ``queryAlarmTagAutocompleteKeys``."""


class AlarmScope(enum.Enum):
    """The protocol's ``Scope`` values an alarm is raised for, by SkyWalking's
    scope ids (what ``AlarmRecord.scope`` holds)."""

    Service = 1
    ServiceInstance = 2
    Endpoint = 3
    ServiceRelation = 4
    ServiceInstanceRelation = 5
    EndpointRelation = 6


SCOPE_NAMES = {scope.value: scope.name for scope in AlarmScope}
"""Each scope id's name; an id not among them is answered as a null scope."""


def get_alarm(
    context: QueryContext,
    duration: Mapping[str, Any],
    paging: Mapping[str, Any],
    scope: str | None = None,
    keyword: str | None = None,
    tags: Iterable[Mapping[str, Any] | None] | None = None,
) -> dict[str, Any]:
    """The alarms raised in ``duration`` that match, the newest first."""
    search = alarm_search(duration, paging, scope, keyword, tags)
    if search is None:
        return {"msgs": []}
    return {"msgs": [alarm_answer(r) for r in context.records.search(AlarmRecord, search)]}


def alarm_search(
    duration: Mapping[str, Any],
    paging: Mapping[str, Any],
    scope: str | None = None,
    keyword: str | None = None,
    tags: Iterable[Mapping[str, Any] | None] | None = None,
) -> RecordSearch | None:
    """The search of ``getAlarm``'s arguments; None when no alarm can match:
    a scope no alarm is raised for (``All``, whose id is 0 in SkyWalking,
    and the process scopes), which SkyWalking answers with no alarm too.
    ValueError for arguments that cannot be answered."""
    window, page = Window.of(duration), Page.of(paging)
    terms = tag_terms(tags or ())
    if scope is not None and scope not in AlarmScope.__members__:
        return None
    equal: dict[str, str | int | bool] = {}
    if scope is not None:
        equal["scope"] = AlarmScope[scope].value
    words = (keyword or "").strip()
    return RecordSearch(
        first_bucket=window.first_bucket,
        last_bucket=window.last_bucket,
        equal=equal,
        tags=terms,
        contains={"message": [words]} if words else {},
        order_by="start_time",
        descending=True,
        offset=page.offset,
        limit=page.limit,
    )


def tag_terms(tags: Iterable[Mapping[str, Any] | None]) -> tuple[str, ...]:
    """Each ``AlarmTag`` as stored: ``key=value``."""
    terms = []
    for tag in tags:
        if tag is None:
            continue
        if tag.get("value") is None:
            raise ValueError(
                f"alarm tag {tag['key']!r} has no value: alarms are searched by a key and its value "
                "(queryAlarmTagAutocompleteValues lists a key's values)"
            )
        terms.append(f"{tag['key']}={tag['value']}")
    return tuple(terms)


def alarm_answer(record: AlarmRecord) -> dict[str, Any]:
    """An ``AlarmMessage`` of the protocol. skyoap records no events and no
    metrics of the firing: those lists are empty."""
    pairs = sorted((key, value) for key, _, value in (tag.partition("=") for tag in record.tags))
    return {
        "startTime": record.start_time,
        "recoveryTime": record.recovery_time or None,
        "scope": SCOPE_NAMES.get(record.scope),
        "id": record.id0,
        "name": record.name,
        "message": record.message,
        "events": [],
        "tags": [{"key": k, "value": v} for k, v in pairs],
        "snapshot": {"expression": record.expression, "metrics": []},
    }


def tag_keys(context: QueryContext, duration: Mapping[str, Any]) -> list[str]:
    """The keys of the tags of the alarms raised in ``duration``."""
    window = Window.of(duration)
    stored = context.records.tag_values(AlarmRecord, window.first_bucket, window.last_bucket, MAX_TAGS_READ)
    return sorted({tag.partition("=")[0] for tag in stored})


def tag_values(context: QueryContext, tagKey: str, duration: Mapping[str, Any]) -> list[str]:
    """The values of ``tagKey`` among the alarms raised in ``duration``, at most ``MAX_TAG_VALUES``."""
    window = Window.of(duration)
    prefix = f"{tagKey}="
    stored = context.records.tag_values(
        AlarmRecord, window.first_bucket, window.last_bucket, MAX_TAG_VALUES, prefix
    )
    return [tag[len(prefix) :] for tag in stored]
