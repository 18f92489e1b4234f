"""Trace profiling tasks, as SkyWalking's: a user asks that the requests of
one endpoint of a service be profiled for some minutes; the service's agents
poll for tasks, dump the thread stack of each matching request that runs past
a threshold, every dump period, for at most a number of requests, and send
the dumps (``ProfileSnapshotRecord``). A task keeps a log, per instance, of
when its agent was told of it and when it finished.

Tasks are kept in the storage's shared state, one document per service
(``storage/profiling.py``), so that every node serves and answers the same.
The bounds are SkyWalking's (``ProfileConstants``) and skyoap's own: a
document holds at most ``MAX_TASKS`` tasks and each task ``MAX_LOGS`` log
lines, so that a poll and a write stay small."""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Any

MIN_MINUTES = 1
MAX_MINUTES = 15
MIN_DUMP_PERIOD_MS = 10
MAX_SAMPLING_COUNT = 9
"""SkyWalking's agents take fewer than 10 requests per task."""

MAX_TASKS = 100
"""The most tasks a service keeps within the records' time to live."""
MAX_LOGS = 1000
"""The most log lines a task keeps: of 500 instances, each told and finished."""
MAX_FRAMES = 1000
"""The deepest stack a dump is taken with (SkyWalking's Python agent dumps 500 frames)."""
MAX_STACK_BYTES = 256 * 1024


class Operation(enum.Enum):
    """What a log line says happened to a task on an instance."""

    NOTIFIED = "NOTIFIED"
    """Its agent was given the task."""
    EXECUTION_FINISHED = "EXECUTION_FINISHED"
    """Its agent said the task is over."""


@dataclass(frozen=True)
class TaskLog:
    instance: str
    operation: Operation
    time: int
    """Milliseconds since the epoch."""


@dataclass(frozen=True)
class ProfileTask:
    id: str
    service: str
    endpoint: str
    start_time: int
    """Milliseconds since the epoch."""
    minutes: int
    min_duration_ms: int
    """How long a request runs before its thread is dumped."""
    dump_period_ms: int
    max_sampling_count: int
    """The most requests an instance profiles."""
    create_time: int
    logs: tuple[TaskLog, ...] = ()

    @property
    def end_time(self) -> int:
        return self.start_time + self.minutes * 60_000

    @property
    def max_dumps(self) -> int:
        """The most dumps one request can have: one each period for the whole task."""
        return self.minutes * 60_000 // self.dump_period_ms + 1

    def logged(self, instance: str, operation: Operation) -> bool:
        return any(g.instance == instance and g.operation is operation for g in self.logs)

    def with_log(self, log: TaskLog) -> ProfileTask:
        """The task with ``log`` added, unless that instance logged that already or the task's log is full."""
        if self.logged(log.instance, log.operation) or len(self.logs) >= MAX_LOGS:
            return self
        return replace(self, logs=(*self.logs, log))

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "service": self.service,
            "endpoint": self.endpoint,
            "start_time": self.start_time,
            "minutes": self.minutes,
            "min_duration_ms": self.min_duration_ms,
            "dump_period_ms": self.dump_period_ms,
            "max_sampling_count": self.max_sampling_count,
            "create_time": self.create_time,
            "logs": [[g.instance, g.operation.value, g.time] for g in self.logs],
        }

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> ProfileTask:
        logs = tuple(TaskLog(i, Operation(o), t) for i, o, t in value["logs"])
        return cls(**{**value, "logs": logs})


def check(minutes: int, min_duration_ms: int, dump_period_ms: int, max_sampling_count: int) -> str | None:
    """What makes a task's settings ones agents cannot run; None if nothing."""
    if not MIN_MINUTES <= minutes <= MAX_MINUTES:
        return f"the duration must be {MIN_MINUTES} to {MAX_MINUTES} minutes, not {minutes}"
    if min_duration_ms < 0:
        return f"the minimum duration threshold must be at least 0 ms, not {min_duration_ms}"
    if dump_period_ms < MIN_DUMP_PERIOD_MS:
        return f"the dump period must be at least {MIN_DUMP_PERIOD_MS} ms, not {dump_period_ms}"
    if not 1 <= max_sampling_count <= MAX_SAMPLING_COUNT:
        return f"the maximum sampling count must be 1 to {MAX_SAMPLING_COUNT}, not {max_sampling_count}"
    return None
