"""SkyWalking's trace profiling, on the query side: tasks created
(``createProfileTask``) and listed with their logs, the segments their dumps
were taken in, and the analysis of those dumps (``getSegmentsProfileAnalyze``).

The analysis is SkyWalking's: the dumps of each segment in a time range,
their stacks (outermost frame first) merged into trees by code signature,
one tree per outermost frame. A frame's duration is the time its dumps
span: over each run of consecutive dumps (sequence numbers one apart) that
held it, the time from the run's first dump to its last, summed; its count
the dumps that held it. skyoap sums the runs of each segment apart, so that
the dumps of two segments never make one run."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from skyoap.model.profiling import MAX_TASKS, ProfileTask, check
from skyoap.model.records import ProfileSnapshotRecord, SegmentRecord
from skyoap.query.context import QueryContext
from skyoap.query.paging import MAX_DEPTH
from skyoap.query.segment_data import UndecodableSegment, decode_segment
from skyoap.query.traces import span_answer
from skyoap.runtime import clock
from skyoap.storage import profiling
from skyoap.storage.api import RecordDAO, RecordSearch, StateStore
from skyoap.vocabulary import ids

MAX_ANALYZED = MAX_DEPTH - 1
"""The most dumps one analysis reads (SkyWalking's ``maxSizeOfAnalyzeProfileSnapshot`` is
12,000): one search reads at most ``MAX_DEPTH`` records, and the analysis asks one more
than it reads to know whether there are more."""
MAX_SEGMENTS = 1000
"""The most profiled segments a task's list answers."""
DAY_MS = 86_400_000


def _state(context: QueryContext) -> StateStore:
    if context.state is None:
        raise ValueError("this node keeps no profiling tasks: it was started without a shared state")
    return context.state


@dataclass(frozen=True)
class TaskSettings:
    """How a task profiles (SkyWalking's names: ``duration``,
    ``minDurationThreshold``, ``dumpPeriod``, ``maxSamplingCount``)."""

    minutes: int
    min_duration_ms: int
    dump_period_ms: int
    max_sampling_count: int


class TaskRefused(ValueError):
    """Why no task was made."""


def create_task(
    state: StateStore,
    records_days: int,
    service: str,
    endpoint: str,
    start_ms: int | None,
    settings: TaskSettings,
) -> ProfileTask:
    """A new task of the ``endpoint`` of ``service`` (a service that runs an
    agent), starting at ``start_ms`` (None: now), among the tasks kept
    ``records_days``; raises ``TaskRefused`` saying why none was made."""
    endpoint = endpoint.strip()
    s = settings
    problem = (
        "the endpoint name is empty"
        if not endpoint
        else check(s.minutes, s.min_duration_ms, s.dump_period_ms, s.max_sampling_count)
    )
    if problem is not None:
        raise TaskRefused(problem)
    now = clock.now_ms()
    start = start_ms if start_ms and start_ms > 0 else now
    made: list[ProfileTask] = []
    refused: list[str] = []

    def added(tasks: list[ProfileTask]) -> list[ProfileTask] | None:
        kept = [t for t in tasks if t.end_time > now - records_days * DAY_MS]
        # Made after every other task of the service, if only by a millisecond: ids are unique.
        created = max([now, *(t.create_time + 1 for t in kept)])
        task = ProfileTask(
            ids.profile_task_id(service, created), service, endpoint, start, s.minutes,
            s.min_duration_ms, s.dump_period_ms, s.max_sampling_count, created,
        )  # fmt: skip
        made[:], refused[:] = [task], [p for p in (_overlap(kept, task), _full(kept)) if p][:1]
        return None if refused else [*kept, task]

    profiling.change(state, service, added)
    if refused:
        raise TaskRefused(refused[0])
    return made[0]


def tasks_of(state: StateStore, service: str | None = None, endpoint: str | None = None) -> list[ProfileTask]:
    """The tasks of ``service`` (of every service without one), of ``endpoint``
    if given, the latest start first."""
    services = [service] if service else profiling.services(state)
    tasks = [t for s in services for t in profiling.tasks(state, s)]
    if endpoint:
        tasks = [t for t in tasks if t.endpoint == endpoint]
    tasks.sort(key=lambda t: (t.start_time, t.create_time, t.id), reverse=True)
    return tasks


def create_profile_task(
    context: QueryContext, creationRequest: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A new task, or why none was made (``errorReason``)."""
    if creationRequest is None:
        return {"id": None, "errorReason": "createProfileTask needs a creationRequest"}
    r = creationRequest
    service, normal = ids.read_service_id(r["serviceId"])
    if not normal:
        problem = f"{service} runs no agent to profile (it is a database, cache or broker its callers name)"
        return {"id": None, "errorReason": problem}
    settings = TaskSettings(r["duration"], r["minDurationThreshold"], r["dumpPeriod"], r["maxSamplingCount"])
    try:
        task = create_task(
            _state(context),
            context.ttl.records_days,
            service,
            r["endpointName"] or "",
            r.get("startTime"),
            settings,
        )
    except TaskRefused as e:
        return {"id": None, "errorReason": str(e)}
    return {"id": task.id, "errorReason": None}


def _overlap(tasks: Sequence[ProfileTask], new: ProfileTask) -> str | None:
    for t in tasks:
        if t.start_time <= new.end_time and t.end_time >= new.start_time:
            return (
                f"{new.service} has a profiling task from {t.start_time} to {t.end_time} ms already "
                f"({t.id}): an agent runs one task at a time"
            )
    return None


def _full(tasks: Sequence[ProfileTask]) -> str | None:
    if len(tasks) >= MAX_TASKS:
        return f"{tasks[0].service} has {len(tasks)} profiling tasks, the most kept within the records' TTL"
    return None


def profile_task_list(
    context: QueryContext, serviceId: str | None = None, endpointName: str | None = None
) -> list[dict[str, Any]]:
    """The tasks of a service (of every service without one), the latest start first."""
    service = ids.service_name(serviceId) if serviceId else None
    return [_task_answer(t) for t in tasks_of(_state(context), service, endpointName)]


def _task(context: QueryContext, task_id: str) -> ProfileTask:
    service = ids.profile_task_service(task_id)
    found = [t for t in profiling.tasks(_state(context), service) if t.id == task_id] if service else []
    if not found:
        raise ValueError(f"there is no profiling task {task_id[:100]!r}: ids come from getProfileTaskList")
    return found[0]


def _task_answer(task: ProfileTask) -> dict[str, Any]:
    return {
        "id": task.id,
        "serviceId": ids.service_id(task.service, True),
        "serviceName": task.service,
        "endpointName": task.endpoint,
        "startTime": task.start_time,
        "duration": task.minutes,
        "minDurationThreshold": task.min_duration_ms,
        "dumpPeriod": task.dump_period_ms,
        "maxSamplingCount": task.max_sampling_count,
        "logs": _logs(task),
    }


def _logs(task: ProfileTask) -> list[dict[str, Any]]:
    return [
        {
            "id": f"{task.id}/{g.instance}/{g.operation.value}",
            "instanceId": ids.instance_id(task.service, True, g.instance),
            "instanceName": g.instance,
            "operationType": g.operation.value,
            "operationTime": g.time,
        }
        for g in task.logs
    ]


def profile_task_logs(context: QueryContext, taskID: str | None = None) -> list[dict[str, Any]]:
    if not taskID:
        raise ValueError("getProfileTaskLogs needs a taskID")
    return _logs(_task(context, taskID))


def profile_task_segments(context: QueryContext, taskID: str) -> list[dict[str, Any]]:
    """The segments the task's dumps were taken in, newest first, each with
    the spans of its trace's segments on its instance that continue it in
    other threads; the spans of the profiled segment are ``profiled``."""
    task = _task(context, taskID)
    firsts = RecordSearch(equal={"task_id": task.id, "sequence": 0}, order_by="dump_time", limit=MAX_SEGMENTS)
    profiled = {s.segment_id for s in context.records.search(ProfileSnapshotRecord, firsts)}
    if not profiled:
        return []
    found = RecordSearch(one_of={"segment_id": sorted(profiled)}, limit=MAX_SEGMENTS)
    segments = context.records.search(SegmentRecord, found)
    traces = RecordSearch(
        one_of={"trace_id": sorted({s.trace_id for s in segments})}, limit=10 * MAX_SEGMENTS
    )
    of_trace: dict[tuple[str, str], list[SegmentRecord]] = {}
    for s in context.records.search(SegmentRecord, traces):
        of_trace.setdefault((s.trace_id, s.instance), []).append(s)
    segments.sort(key=lambda s: (s.start_time, s.segment_id), reverse=True)
    return [_profiled(s, of_trace.get((s.trace_id, s.instance), [s])) for s in segments]


def _profiled(segment: SegmentRecord, others: Sequence[SegmentRecord]) -> dict[str, Any]:
    """The profiled ``segment`` with the segments of ``others`` that continue it in other threads."""
    decoded = {}
    for record in (segment, *others):
        try:
            decoded[record.segment_id] = decode_segment(record.data)
        except UndecodableSegment:
            continue
    group = [segment.segment_id] if segment.segment_id in decoded else []
    for seg in decoded.values():  # a child names its parent segment in a cross-thread reference
        refs = [r for span in seg.spans for r in span.refs if r.ref_type == 1]
        if seg.segment_id not in group and any(r.parent_segment_id in group for r in refs):
            group.append(seg.segment_id)
    spans = []
    for segment_id in group:
        part = decoded[segment_id]
        for span in part.spans:
            answer = span_answer(part, span, 0)
            answer["refs"] = [r for r in answer["refs"] if r["type"] != "CROSS_PROCESS"]
            spans.append({**answer, "profiled": segment_id == segment.segment_id})
    return {
        "traceId": segment.trace_id,
        "instanceId": ids.instance_id(segment.service, True, segment.instance),
        "instanceName": segment.instance,
        "endpointNames": [segment.endpoint] if segment.endpoint else [],
        "duration": segment.latency_ms,
        "start": str(segment.start_time),
        "spans": spans,
    }


@dataclass
class _Frame:
    signature: str
    dumps: list[tuple[str, int, int]] = field(default_factory=list)
    """(segment, sequence, dump time) of each dump that held the frame."""
    children: dict[str, _Frame] = field(default_factory=dict)

    def duration(self) -> int:
        runs: dict[str, list[tuple[int, int]]] = {}
        for segment, sequence, time in self.dumps:
            runs.setdefault(segment, []).append((sequence, time))
        total = 0
        for dumps in runs.values():
            dumps.sort()
            first = last = dumps[0]
            for dump in dumps[1:]:
                if dump[0] != last[0] + 1:
                    total += last[1] - first[1]
                    first = dump
                last = dump
            total += last[1] - first[1]
        return total


def segments_profile_analyze(context: QueryContext, queries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The stack trees of the dumps the queries ask for, one per outermost frame."""
    windows = [(q["segmentId"], q["timeRange"]["start"], q["timeRange"]["end"]) for q in queries]
    return analyze(context.records, windows)


def analyze(records: RecordDAO, windows: Sequence[tuple[str, int, int]]) -> dict[str, Any]:
    """The stack trees of the dumps of each segment between its two times
    (ms), one tree per outermost frame, and a ``tip`` when not every dump
    was read, or none was."""
    roots: dict[str, _Frame] = {}
    read = 0
    tip = None
    for segment_id, start, end in windows:
        search = RecordSearch(
            equal={"segment_id": segment_id}, at_least={"dump_time": start}, at_most={"dump_time": end},
            order_by="sequence", descending=False, limit=MAX_ANALYZED - read + 1,
        )  # fmt: skip
        dumps = records.search(ProfileSnapshotRecord, search)
        if read + len(dumps) > MAX_ANALYZED:
            tip = f"more dumps than one analysis reads: the first {MAX_ANALYZED} were analyzed"
            dumps = dumps[: MAX_ANALYZED - read]
        read += len(dumps)
        for dump in dumps:
            _add(roots, dump)
    if not read:
        tip = "no thread dumps of these segments in these time ranges"
    return {"tip": tip, "trees": [{"elements": _elements(root)} for root in roots.values()]}


def _add(roots: dict[str, _Frame], dump: ProfileSnapshotRecord) -> None:
    stack = json.loads(str(dump.stack))
    if not stack:
        return
    held = (dump.segment_id, dump.sequence, dump.dump_time)
    frame = roots.setdefault(stack[0], _Frame(stack[0]))
    frame.dumps.append(held)
    for signature in stack[1:]:
        frame = frame.children.setdefault(signature, _Frame(signature))
        frame.dumps.append(held)


def _elements(root: _Frame) -> list[dict[str, Any]]:
    """The tree's frames, each after its parent (breadth first), numbered from 1."""
    numbered: list[tuple[_Frame, int]] = []
    queue = [(root, 0)]
    while queue:
        frame, parent = queue.pop(0)
        numbered.append((frame, parent))
        queue.extend((child, len(numbered)) for child in frame.children.values())
    durations = {id(frame): frame.duration() for frame, _ in numbered}
    return [
        {
            "id": str(number),
            "parentId": str(parent),
            "codeSignature": frame.signature,
            "duration": durations[id(frame)],
            "durationChildExcluded": durations[id(frame)]
            - sum(durations[id(child)] for child in frame.children.values()),
            "count": len(frame.dumps),
        }
        for number, (frame, parent) in enumerate(numbered, 1)
    ]
