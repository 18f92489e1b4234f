"""``skyoap profile``: trace profiling tasks created, listed, and their
analysis printed, through the query side's own functions over a storage."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TextIO

from skyoap.deploy.tables import table, utc_ms
from skyoap.query import profiling
from skyoap.query.context import QueryContext
from skyoap.vocabulary import ids


def create(
    context: QueryContext, service: str, endpoint: str, settings: Mapping[str, int], out: TextIO
) -> int:
    """Creates a task starting now; prints its id, or why none was made (and returns 1)."""
    request = {
        "serviceId": ids.service_id(service, True),
        "endpointName": endpoint,
        "startTime": None,
        **settings,
    }
    made = profiling.create_profile_task(context, request)
    if made["errorReason"]:
        out.write(f"no task: {made['errorReason']}\n")
        return 1
    out.write(f"{made['id']}\n")
    return 0


def print_tasks(context: QueryContext, service: str | None, out: TextIO) -> None:
    tasks = profiling.profile_task_list(context, ids.service_id(service, True) if service else None)
    rows = [
        [
            t["id"], t["serviceName"], t["endpointName"], utc_ms(t["startTime"]), t["duration"],
            t["minDurationThreshold"], t["dumpPeriod"], t["maxSamplingCount"],
            ", ".join(f"{g['instanceName']} {g['operationType']}" for g in t["logs"]) or "-",
        ]
        for t in tasks
    ]  # fmt: skip
    headers = ["id", "service", "endpoint", "start (UTC)", "minutes", "min ms", "period ms", "samples", "log"]
    out.write(table(headers, rows) + "\n")


def print_analysis(context: QueryContext, task_id: str, out: TextIO) -> None:
    """Each profiled segment of the task and the stack trees of its whole time."""
    for segment in profiling.profile_task_segments(context, task_id):
        spans = [s for s in segment["spans"] if s["profiled"]]
        if not spans:
            continue
        window = {"start": min(s["startTime"] for s in spans), "end": max(s["endTime"] for s in spans)}
        analysis = profiling.segments_profile_analyze(
            context, [{"segmentId": spans[0]["segmentId"], "timeRange": window}]
        )
        out.write(
            f"segment {spans[0]['segmentId']} of trace {segment['traceId']}, {segment['instanceName']}, "
            f"{', '.join(segment['endpointNames'])}, {segment['duration']} ms\n"
        )
        rows = [row for tree in analysis["trees"] for row in _rows(tree["elements"])]
        out.write(table(["ms", "self ms", "dumps", "code"], rows) + "\n\n")


def _rows(elements: list[dict[str, Any]]) -> list[list[object]]:
    """The tree's frames depth first, each indented under its parent."""
    children: dict[str, list[dict[str, Any]]] = {}
    for e in elements:
        children.setdefault(e["parentId"], []).append(e)
    rows: list[list[object]] = []
    stack = [(e, 0) for e in reversed(children.get("0", []))]
    while stack:
        e, depth = stack.pop()
        rows.append(
            [e["duration"], e["durationChildExcluded"], e["count"], "  " * depth + e["codeSignature"]]
        )
        stack.extend((child, depth + 1) for child in reversed(children.get(e["id"], [])))
    return rows
