"""The profiling tasks a receiver serves to the agents that poll it: each
service's tasks read from the shared state (``storage/profiling.py``) at
most every ``refresh_s``, so that a task created on any node reaches the
agents of its service within that time, whichever receiver they poll, and a
poll costs a storage read only now and then."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

from skyoap.model.profiling import Operation, ProfileTask, TaskLog
from skyoap.runtime import clock
from skyoap.storage import profiling
from skyoap.storage.api import StateStore
from skyoap.vocabulary import ids

REFRESH_S = 5.0


class ProfileTasks:
    """The tasks of the services polled lately, at most ``size`` services held."""

    def __init__(self, state: StateStore, refresh_s: float = REFRESH_S, size: int = 10_000) -> None:
        self._state = state
        self._refresh_s = refresh_s
        self._size = size
        self._held: OrderedDict[str, tuple[float, list[ProfileTask]]] = OrderedDict()
        self._lock = threading.Lock()

    def of(self, service: str) -> list[ProfileTask]:
        """The service's tasks, as read at most ``refresh_s`` ago (StorageError if they cannot be read)."""
        with self._lock:
            held = self._held.get(service)
        if held is not None and time.monotonic() - held[0] < self._refresh_s:
            return held[1]
        return self._hold(service, profiling.tasks(self._state, service))

    def _hold(self, service: str, tasks: list[ProfileTask]) -> list[ProfileTask]:
        with self._lock:
            self._held[service] = (time.monotonic(), tasks)
            self._held.move_to_end(service)
            while len(self._held) > self._size:
                self._held.popitem(last=False)
        return tasks

    def task(self, task_id: str) -> ProfileTask | None:
        service = ids.profile_task_service(task_id)
        if service is None:
            return None
        return next((t for t in self.of(service) if t.id == task_id), None)

    def log(self, task: ProfileTask, instance: str, operation: Operation) -> None:
        """Logs that ``operation`` happened on ``instance``, once per instance."""
        line = TaskLog(instance, operation, clock.now_ms())

        def logged(tasks: list[ProfileTask]) -> list[ProfileTask] | None:
            new = [t.with_log(line) if t.id == task.id else t for t in tasks]
            return None if new == tasks else new

        self._hold(task.service, profiling.change(self._state, task.service, logged))
