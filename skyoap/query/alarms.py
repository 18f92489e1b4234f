"""Alarms: those the rules raised in a Duration (``getAlarm``, and
SkyWalking 11's ``queryAlarms``, which also filters by entity, layer and
rule), and the tags they carry (``queryAlarmTagAutocompleteKeys`` and
``...Values``).

A firing is stored as an ``AlarmRecord`` with ``recovery_time`` 0, found
by its minute (``time_bucket``) as SkyWalking finds it by its second; its
recovery is a record of its own in the same minute, read to answer the
firing's ``recoveryTime``."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from skyoap.model.records import AlarmRecord
from skyoap.query import events, record_tags
from skyoap.query.context import QueryContext
from skyoap.query.paging import Page, Window
from skyoap.storage.api import RecordSearch
from skyoap.vocabulary.alarm_identity import AlarmScope, entity_ids
from skyoap.vocabulary.entity import GENERAL, Entity, Scope, entity_of

MAX_ENTITIES = 100
"""The most entities one ``queryAlarms`` filters by: each adds its ids to the search."""

MAX_RULE_NAMES = 1000
"""The most rule names one ``queryAlarms`` filters by."""


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
    return _alarms(context, alarm_search(duration, paging, scope, keyword, tags), duration)


def query_alarms(context: QueryContext, condition: Mapping[str, Any]) -> dict[str, Any]:
    """SkyWalking 11's ``queryAlarms``: as ``getAlarm``, filtered by
    ``AlarmQueryCondition`` (``condition_search``)."""
    return _alarms(context, condition_search(condition), condition["duration"])


def _alarms(
    context: QueryContext, search: RecordSearch | None, duration: Mapping[str, Any]
) -> dict[str, Any]:
    """The firings ``search`` finds, each with the time of its recovery, if
    any, and the events of ``duration`` of the entities it names (those of
    services and instances, as SkyWalking matches them)."""
    if search is None:
        return {"msgs": []}
    fired = context.records.search(AlarmRecord, search)
    recoveries = {f"{r.uuid}/recovery" for r in fired}
    recovered = (
        context.records.search(
            AlarmRecord,
            RecordSearch(
                first_bucket=search.first_bucket,
                last_bucket=search.last_bucket,
                one_of={"alarm_id": sorted(recoveries)},
                limit=len(recoveries),
            ),
        )
        if recoveries
        else []
    )
    recovery_times = {r.uuid: r.recovery_time for r in recovered}
    sources = events.by_source(context, duration) if fired else {}
    return {
        "msgs": [
            alarm_answer(r, recovery_times.get(r.uuid, 0), [*sources.get(r.id0, ()), *sources.get(r.id1, ())])
            for r in fired
        ]
    }


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
    search = _window_search(duration, paging, keyword, tags)
    if scope is None:
        return search
    if scope not in AlarmScope.__members__:
        return None
    return dataclasses.replace(search, equal={**search.equal, "scope": AlarmScope[scope].value})


def condition_search(condition: Mapping[str, Any]) -> RecordSearch | None:
    """The search of an ``AlarmQueryCondition``: within a list the values
    are alternatives, across fields each must hold, and a null or empty list
    filters nothing. None when no alarm can match: a layer but GENERAL, the
    one every service skyoap knows is in (``metadata.py``). ValueError for a
    condition that cannot be answered."""
    search = _window_search(
        condition["duration"], condition["paging"], condition.get("keyword"), condition.get("tags")
    )
    alternatives = entity_alternatives(condition.get("entities") or ())
    rule_names = tuple(condition.get("ruleNames") or ())
    if len(rule_names) > MAX_RULE_NAMES:
        raise ValueError(
            f"queryAlarms filters by at most {MAX_RULE_NAMES} ruleNames, not {len(rule_names)}: "
            "split them over several queries"
        )
    if condition.get("layer") not in (None, "", GENERAL):
        return None
    return dataclasses.replace(
        search, one_of={"rule_name": rule_names} if rule_names else {}, any_of=alternatives
    )


def _window_search(
    duration: Mapping[str, Any],
    paging: Mapping[str, Any],
    keyword: str | None,
    tags: Iterable[Mapping[str, Any] | None] | None,
) -> RecordSearch:
    """What ``getAlarm`` and ``queryAlarms`` both filter by: the minutes of
    ``duration``, the words of ``keyword`` and each tag, paged newest first;
    firings only (their recoveries are records too)."""
    window, page = Window.of(duration), Page.of(paging)
    terms = record_tags.searched(tags or (), "alarm", "queryAlarmTagAutocompleteValues")
    words = (keyword or "").strip()
    return RecordSearch(
        first_bucket=window.first_bucket,
        last_bucket=window.last_bucket,
        equal={"recovery_time": 0},
        tags=terms,
        contains={"message": [words]} if words else {},
        order_by="start_time",
        descending=True,
        offset=page.offset,
        limit=page.limit,
    )


def entity_alternatives(entities: Sequence[Mapping[str, Any]]) -> tuple[dict[str, tuple[str, ...]], ...]:
    """The ``any_of`` of a search for the alarms of ``entities``: those where
    an entity is either end (``id0`` or ``id1``: a service is also the
    destination of its callers' relation alarms), and for a relation those
    of exactly its two ends, as SkyWalking 11 matches them. Ids are kept
    together (one alternative per column, one per relation's source) so that
    the search stays one however many entities are given."""
    if len(entities) > MAX_ENTITIES:
        raise ValueError(
            f"queryAlarms filters by at most {MAX_ENTITIES} entities, not {len(entities)}: "
            "split them over several queries"
        )
    either_end: dict[str, None] = {}
    dests: dict[str, dict[str, None]] = {}
    for index, given in enumerate(entities):
        entity = entity_of(given)
        source, dest = entity_ids(alarm_scope(given.get("scope"), entity, index).scope, entity)
        if not dest:
            either_end[source] = None
        else:
            dests.setdefault(source, {})[dest] = None
    ends = tuple(either_end)
    alternatives = [{"id0": ends}, {"id1": ends}] if ends else []
    alternatives += [{"id0": (source,), "id1": tuple(targets)} for source, targets in dests.items()]
    return tuple(alternatives)


def alarm_scope(named: str | None, entity: Entity, index: int) -> AlarmScope:
    """The scope of the ``index``-th entity of a ``queryAlarms``: the one
    ``named``, or the most specific its names fit. ValueError for a scope no
    alarm is raised for, or an entity lacking the names its scope needs."""
    scope = Scope(named) if named is not None else entity.inferred_scope()
    what = f"queryAlarms entities[{index}]"
    if scope is None:
        raise ValueError(f"{what} names nothing: give its serviceName, and the other names of its scope")
    if scope.value not in AlarmScope.__members__:
        raise ValueError(
            f"{what} is of scope {scope.value}, which alarms are never raised for: they are raised for "
            f"{', '.join(AlarmScope.__members__)}"
        )
    missing = entity.missing(scope)
    if missing:
        raise ValueError(f"{what} is of scope {scope.value}: give its {', '.join(missing)} too")
    return AlarmScope[scope.value]


def alarm_answer(
    record: AlarmRecord, recovery_time: int = 0, events: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """An ``AlarmMessage`` of the protocol, of a firing, the time it
    recovered (0: it has not) and the ``events`` of its entities, with the
    values its expression read when it fired."""
    pairs = sorted((key, value) for key, _, value in (tag.partition("=") for tag in record.tags))
    return {
        "startTime": record.start_time,
        "recoveryTime": recovery_time or None,
        "scope": SCOPE_NAMES.get(record.scope),
        "id": record.id0,
        "name": record.name,
        "message": record.message,
        "events": list(events),
        "tags": [{"key": k, "value": v} for k, v in pairs],
        "snapshot": {"expression": record.expression, "metrics": json.loads(record.snapshot or "[]")},
    }


def tag_keys(context: QueryContext, duration: Mapping[str, Any]) -> list[str]:
    return record_tags.tag_keys(context, AlarmRecord, duration)


def tag_values(context: QueryContext, tagKey: str, duration: Mapping[str, Any]) -> list[str]:
    return record_tags.tag_values(context, AlarmRecord, tagKey, duration)
