"""Work handed to a background thread of its own, so that the thread that has
it (a refresh, a request) does not wait on it."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class BackgroundJobs:
    """One named thread that runs the jobs submitted to it, in order. A job that
    raises is logged and the next one runs."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._jobs: queue.SimpleQueue[tuple[str, Callable[[], None]] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def submit(self, what: str, job: Callable[[], None]) -> None:
        """Queues ``job``; ``what`` names it in the log should it fail."""
        self._jobs.put((what, job))

    def _run(self) -> None:
        while (item := self._jobs.get()) is not None:
            what, job = item
            try:
                job()
            except Exception:
                log.exception("%s: %s failed", self.name, what)

    def close(self, timeout_s: float) -> None:
        """Runs the jobs already queued, for up to ``timeout_s``, then stops. Idempotent."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._jobs.put(None)
        thread.join(timeout_s)
        if thread.is_alive():
            log.warning(
                "%s: jobs still running after %g s; left to finish on their own", self.name, timeout_s
            )
