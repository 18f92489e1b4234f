"""What keeps a node's gRPC server answering however its clients behave: a
bound on the calls served at once, and idle client streams closed.

The server has a thread for each call it serves, and a few more
(``RESERVE_THREADS``) for what the bound does not count: health checks,
reflection, and the answer RESOURCE_EXHAUSTED to a call past the bound. So
clients that open streams and send nothing hold at most ``max_calls``
threads, and only until ``stream_idle_s`` passes without a message.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc

RESERVE_THREADS = 8


class _Stream:
    __slots__ = ("context", "last")

    def __init__(self, context: grpc.ServicerContext) -> None:
        self.context = context
        self.last = time.monotonic()
        """When its last message came; set by the call's thread alone, read by the reaper."""


class CallLimits:
    def __init__(self, max_calls: int, stream_idle_s: float) -> None:
        self.max_calls = max_calls
        self.stream_idle_s = stream_idle_s
        self._lock = threading.Lock()
        self._calls = 0
        self._streams: set[_Stream] = set()
        self._stopping = threading.Event()
        self._reaper: threading.Thread | None = None

    @property
    def threads(self) -> int:
        """The server's threads: one for each call it serves, and the reserve."""
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

    def watched(self, requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
        """The requests of a client stream, which is cancelled once
        ``stream_idle_s`` passes without one coming."""
        stream = _Stream(context)
        with self._lock:
            self._streams.add(stream)
        try:
            for request in requests:
                stream.last = time.monotonic()
                yield request
        finally:
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
        while not self._stopping.wait(min(1.0, self.stream_idle_s / 4)):
            cutoff = time.monotonic() - self.stream_idle_s
            with self._lock:
                idle = [s.context for s in self._streams if s.last < cutoff]
            for context in idle:
                context.cancel()
