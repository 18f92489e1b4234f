"""A background task that runs every so often and survives its own failures."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class Periodic:
    """Calls ``work`` every ``interval_s`` on a named daemon thread, from
    ``start`` until ``close``. An exception is logged (``what`` says what
    failed) and the task goes on at the next interval."""

    def __init__(self, name: str, interval_s: float, work: Callable[[], object], what: str) -> None:
        self.name = name
        self.interval_s = interval_s
        self._work = work
        self._what = what
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._work()
            except Exception as e:
                log.warning("%s failed (%r); trying again in %g s", self._what, e, self.interval_s)

    def close(self, timeout_s: float = 5.0) -> None:
        """Stops the task, waiting up to ``timeout_s`` for a run under way. Idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.warning("%s: a run still under way after %g s", self.name, timeout_s)
