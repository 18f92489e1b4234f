"""What keeps a node's gRPC server answering however its clients behave: a
bound on the calls served at once, and client streams closed when idle or
too old.

The server's main pool has a thread for each call it serves, and a few more
(``RESERVE_THREADS``) for what the bound does not count: the answers
RESOURCE_EXHAUSTED to a call past the bound and UNAUTHENTICATED to a call
without the token, each over in a moment. Every call that can last (our
services' calls and streams, reflection streams) counts against
``max_calls``. Health checks run on a pool of their own (``HEALTH_THREADS``)
that nothing else can take. So clients that open streams and send nothing,
or a message now and then, hold at most ``max_calls`` threads, and only until
``stream_idle_s`` passes without a message or the stream is
``stream_max_age_s`` old.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Generator, Iterator
from typing import Any

import grpc

RESERVE_THREADS = 8
HEALTH_THREADS = 4


class _Stream:
    __slots__ = ("context", "idle_s", "last", "opened")

    def __init__(self, context: grpc.ServicerContext, idle_s: float | None) -> None:
        self.context = context
        self.idle_s = idle_s
        """How long it may go without a message from the client (None: for ever)."""
        self.opened = time.monotonic()
        self.last = self.opened
        """When its last message came; set by the call's thread alone, read by the reaper."""


class CallLimits:
    def __init__(self, max_calls: int, stream_idle_s: float, stream_max_age_s: float = 600.0) -> None:
        self.max_calls = max_calls
        self.stream_idle_s = stream_idle_s
        self.stream_max_age_s = stream_max_age_s
        self._lock = threading.Lock()
        self._calls = 0
        self._streams: set[_Stream] = set()
        self._stopping = threading.Event()
        self._reaper: threading.Thread | None = None

    @property
    def threads(self) -> int:
        """The threads of the server's main pool: one for each call it serves, and the reserve."""
        return self.max_calls + RESERVE_THREADS

    @property
    def calls(self) -> int:
        """The calls being served now."""
        with self._lock:
            return self._calls

    def admit(self, context: grpc.ServicerContext) -> None:
        """Counts a call in; answers RESOURCE_EXHAUSTED past the bound. The
        caller must ``leave`` once the call is done."""
        with self._lock:
            if self._calls < self.max_calls:
                self._calls += 1
                return
        context.abort(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"the node serves at most {self.max_calls} calls at once; try again later",
        )

    def leave(self) -> None:
        with self._lock:
            self._calls -= 1

    def watched(
        self, requests: Iterator[Any], context: grpc.ServicerContext, idle_s: float | None = None
    ) -> Generator[Any, None, None]:
        """The requests of a client stream, which is cancelled once ``idle_s``
        (``stream_idle_s`` unless given) passes without one coming, or once
        it is ``stream_max_age_s`` old."""
        stream = self.hold(context, self.stream_idle_s if idle_s is None else idle_s)
        try:
            for request in requests:
                stream.last = time.monotonic()
                yield request
        finally:
            self.release(stream)

    def hold(self, context: grpc.ServicerContext, idle_s: float | None = None) -> _Stream:
        """Registers a stream to be cancelled once ``stream_max_age_s`` old (and,
        with ``idle_s``, once that long without a message); ``release`` it when it ends."""
        stream = _Stream(context, idle_s)
        with self._lock:
            self._streams.add(stream)
        return stream

    def release(self, stream: _Stream) -> None:
        with self._lock:
            self._streams.discard(stream)

    def start(self) -> None:
        self._reaper = threading.Thread(target=self._reap, name="grpc-idle-streams", daemon=True)
        self._reaper.start()

    def close(self) -> None:
        self._stopping.set()
        if self._reaper is not None:
            self._reaper.join(5)

    def _reap(self) -> None:
        # Often enough for the shortest wait given (a health check's request).
        period = min(0.25, self.stream_idle_s / 4, self.stream_max_age_s / 4)
        while not self._stopping.wait(period):
            now = time.monotonic()
            age_cutoff = now - self.stream_max_age_s
            with self._lock:
                over = [
                    s
                    for s in self._streams
                    if s.opened < age_cutoff or (s.idle_s is not None and now - s.last > s.idle_s)
                ]
                # Cancelled once: its call may take a moment to end and release it.
                self._streams.difference_update(over)
            for stream in over:
                stream.context.cancel()
