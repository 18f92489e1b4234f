"""Logs: the log lines a condition matches (``queryLogs``), and the tags
they are searched by (``queryLogTagAutocompleteKeys`` and ``...Values``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skyoap.model.records import LogRecord
from skyoap.query import conditions, record_tags
from skyoap.query.context import QueryContext
from skyoap.query.paging import Page, Window
from skyoap.storage.api import RecordSearch
from skyoap.vocabulary import ids
from skyoap.vocabulary.ids import endpoint_names, instance_names, service_name


def supports_keywords(context: QueryContext) -> bool:
    """Log contents are searched by keywords (``keywordsOfContent``)."""
    return True


def query_logs(
    context: QueryContext, condition: Mapping[str, Any] | None = None, debug: bool | None = None
) -> dict[str, Any]:
    """The log lines ``condition`` matches, the newest first unless it asks ASC."""
    if condition is None:
        raise ValueError("queryLogs needs a condition with a queryDuration or a relatedTrace")
    records = context.records.search(LogRecord, log_search(condition))
    return {"logs": [log_answer(r) for r in records], "errorReason": None}


def query_logs_by_name(
    context: QueryContext, condition: Mapping[str, Any] | None = None, debug: bool | None = None
) -> dict[str, Any]:
    """``queryLogs`` of the ids the condition's names have."""
    return query_logs(context, None if condition is None else conditions.with_ids(condition), debug)


MAX_KEYWORDS = 10
"""Keywords one log search takes, wanted and unwanted together."""


def _keywords(condition: Mapping[str, Any], field: str) -> list[str]:
    """The keywords of ``field``, blank ones dropped (they would match every log)."""
    return [k.strip() for k in condition.get(field) or () if k.strip()]


def log_search(condition: Mapping[str, Any]) -> RecordSearch:
    """The search of a ``LogQueryCondition``; ValueError for one that cannot be answered."""
    trace, duration = condition.get("relatedTrace") or {}, condition.get("queryDuration")
    # Empty ids search by nothing, as in SkyWalking (its CLI sends an empty traceId).
    if not trace.get("traceId") and duration is None:
        raise ValueError(
            "a log search needs a queryDuration or a relatedTrace: searching every log stored is refused"
        )
    wanted, unwanted = (
        _keywords(condition, "keywordsOfContent"),
        _keywords(condition, "excludingKeywordsOfContent"),
    )
    if len(wanted) + len(unwanted) > MAX_KEYWORDS:
        raise ValueError(
            f"a log search takes at most {MAX_KEYWORDS} keywords, not {len(wanted) + len(unwanted)}"
        )
    equal: dict[str, str | int | bool] = {}
    if condition.get("serviceId"):
        equal["service"] = service_name(condition["serviceId"])
    if condition.get("serviceInstanceId"):
        equal["service"], equal["instance"] = instance_names(condition["serviceInstanceId"])
    if condition.get("endpointId"):
        equal["service"], equal["endpoint"] = endpoint_names(condition["endpointId"])
    if trace.get("traceId"):
        equal["trace_id"] = trace["traceId"]
    if trace.get("segmentId"):
        equal["segment_id"] = trace["segmentId"]
    if trace.get("spanId") is not None:
        equal["span_id"] = trace["spanId"]
    first = last = None
    at_least: dict[str, int] = {}
    at_most: dict[str, int] = {}
    if duration is not None:
        window = Window.of(duration)
        first, last = window.first_bucket, window.last_bucket
        at_least["timestamp"], at_most["timestamp"] = window.start_ms, window.end_ms - 1
    page = Page.of(condition["paging"])
    return RecordSearch(
        first_bucket=first,
        last_bucket=last,
        equal=equal,
        at_least=at_least,
        at_most=at_most,
        tags=record_tags.searched(condition.get("tags") or (), "log", "queryLogTagAutocompleteValues"),
        contains={"content": wanted},
        lacks={"content": unwanted},
        order_by="timestamp",
        descending=(condition.get("queryOrder") or "DES") == "DES",
        offset=page.offset,
        limit=page.limit,
    )


def log_answer(record: LogRecord) -> dict[str, Any]:
    """A ``Log`` of the protocol. Services that send logs run an agent: their ids end in .1."""
    service, instance, endpoint = record.service, record.instance, record.endpoint
    return {
        "serviceName": service,
        "serviceId": ids.service_id(service, True),
        "serviceInstanceName": instance or None,
        "serviceInstanceId": ids.instance_id(service, True, instance) if instance else None,
        "endpointName": endpoint or None,
        "endpointId": ids.endpoint_id(service, True, endpoint) if endpoint else None,
        "traceId": record.trace_id or None,
        "timestamp": record.timestamp,
        "contentType": record.content_type.upper(),
        "content": record.content,
        "tags": [{"key": k, "value": record.tags[k]} for k in sorted(record.tags)],
    }


def tag_keys(context: QueryContext, duration: Mapping[str, Any]) -> list[str]:
    return record_tags.tag_keys(context, LogRecord, duration)


def tag_values(context: QueryContext, tagKey: str, duration: Mapping[str, Any]) -> list[str]:
    return record_tags.tag_values(context, LogRecord, tagKey, duration)
