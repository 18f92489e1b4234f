"""Admission: work that reads storage with blocking clients (a query of any
protocol), run on a bounded pool of threads under a deadline.

At most ``threads`` run at once and ``max_waiting`` more wait for a thread;
one past them is refused at once (``Busy``) rather than queued without end.
Each must be done within ``deadline_s`` of its admission, waiting included:
its thread runs under that deadline (``runtime/deadline.py``), so storage
reads made for it wait at most what is left, and work still running past it
is answered as late (its future holds None). Work admitted without a
deadline (``deadline_s`` None: the admin port's scrapes, which must be
answered however long the reads they make take) runs until it is done."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent import futures
from typing import TypeVar

from skyoap.runtime import deadline

log = logging.getLogger(__name__)

T = TypeVar("T")


class Busy(Exception):
    """Every thread is taken and as many wait as may."""


class Admission:
    def __init__(self, threads: int, max_waiting: int, deadline_s: float | None, name: str = "query") -> None:
        self.threads = threads
        self.max_pending = threads + max_waiting
        self.deadline_s = deadline_s
        self._name = name
        self._lock = threading.Lock()
        self._pending = 0
        self._pool: futures.ThreadPoolExecutor | None = None

    @property
    def pending(self) -> int:
        """Work running or waiting for a thread."""
        with self._lock:
            return self._pending

    def start(self) -> None:
        self._pool = futures.ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix=self._name)

    def submit(self, work: Callable[[], T]) -> futures.Future[T | None]:
        """Runs ``work`` on a thread of the pool under the deadline; the future
        holds None if the deadline passed first (while it waited or ran), and
        the exception it raised before the deadline. Raises ``Busy`` past the
        bound, and RuntimeError once closed."""
        pool = self._pool
        if pool is None:
            raise RuntimeError(f"the {self._name} threads are not running")
        ends_at = None if self.deadline_s is None else time.monotonic() + self.deadline_s
        with self._lock:
            if self._pending >= self.max_pending:
                raise Busy(
                    f"the node runs {self.threads} queries at once and {self.max_pending - self.threads} "
                    "more may wait, and all of them are taken (--query-threads, --query-max-waiting); "
                    "try again shortly"
                )
            self._pending += 1
        try:
            future = pool.submit(_run, work, ends_at)
        except RuntimeError:  # closed meanwhile
            self._leave()
            raise
        future.add_done_callback(lambda _: self._leave())
        return future

    def _leave(self) -> None:
        with self._lock:
            self._pending -= 1

    def close(self, timeout_s: float) -> None:
        """Drops the work still waiting for a thread and lets what runs end
        within ``timeout_s`` (each stops by its deadline); idempotent."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        pool.shutdown(wait=False, cancel_futures=True)
        joiner = threading.Thread(target=pool.shutdown, name=f"{self._name}-shutdown", daemon=True)
        joiner.start()
        joiner.join(timeout_s)
        if joiner.is_alive():
            log.warning("%s work still running %g s after it was closed", self._name, timeout_s)


def _run(work: Callable[[], T], ends_at: float | None) -> T | None:
    if ends_at is None:
        return work()
    left = ends_at - time.monotonic()
    if left <= 0:  # it waited out its deadline for a thread
        return None
    with deadline.call():
        deadline.start(left)
        try:
            done = work()
        except Exception:
            if deadline.remaining(1.0) > 0:
                raise
            return None  # a read that gave up at the deadline
        return done if deadline.remaining(1.0) > 0 else None
