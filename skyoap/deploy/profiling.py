"""``skyoap profile``: trace profiling tasks created, listed, and their
analysis printed, through the query side's own functions over a storage
(``query/profiling.py``: the same the GraphQL resolvers call)."""

from __future__ import annotations

from typing import Any, TextIO

from skyoap.deploy.tables import table, utc_ms
from skyoap.query import profiling
from skyoap.query.context import QueryContext
from skyoap.query.profiling import TaskSettings
from skyoap.storage.select import OpenStorage


def create(
    storage: OpenStorage, records_days: int, service: str, endpoint: str, settings: TaskSettings, out: TextIO
) -> int:
    """Creates a task starting now; prints its id, or why none was made (and returns 1)."""
    try:
        task = profiling.create_task(storage.state, records_days, service, endpoint, None, settings)
    except profiling.TaskRefused as e:
        out.write(f"no task: {e}\n")
        return 1
    out.write(f"{task.id}\n")
    return 0


def print_tasks(storage: OpenStorage, service: str | None, out: TextIO) -> None:
    rows = [
        [
            t.id, t.service, t.endpoint, utc_ms(t.start_time), t.minutes, t.min_duration_ms, t.dump_period_ms,
            t.max_sampling_count, ", ".join(f"{g.instance} {g.operation.value}" for g in t.logs) or "-",
        ]
        for t in profiling.tasks_of(storage.state, service)
    ]  # fmt: skip
    headers = ["id", "service", "endpoint", "start (UTC)", "minutes", "min ms", "period ms", "samples", "log"]
    out.write(table(headers, rows) + "\n")


def print_analysis(context: QueryContext, task_id: str, out: TextIO) -> None:
    """Each profiled segment of the task and the stack trees of its whole time."""
    for segment in profiling.profile_task_segments(context, task_id):
        spans = [s for s in segment["spans"] if s["profiled"]]
        if not spans:
            continue
        window = (spans[0]["segmentId"], min(s["startTime"] for s in spans), max(s["endTime"] for s in spans))
        analysis = profiling.analyze(context.records, [window])
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
