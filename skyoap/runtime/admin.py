"""The HTTP admin endpoint of a node or a consumer: /metrics (Prometheus text) and /healthz.

Whoever reaches the port cannot tie it up: one thread reads the heads of
requests from every connection at once and drops a connection whose head has
not come whole within ``REQUEST_TIMEOUT_S``; at most ``MAX_PENDING``
connections are read at once (a new one past it drops the oldest); complete
requests are answered by ``WORKERS`` threads from a queue of at most
``MAX_QUEUED`` (past it a request is dropped), each answer written within
``REQUEST_TIMEOUT_S``. Every drop is counted
(``skyoap_admin_dropped_total{reason}``).
"""

from __future__ import annotations

import contextlib
import enum
import io
import logging
import queue
import selectors
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler
from typing import Any, cast

from skyoap.runtime.instruments import Instruments

log = logging.getLogger(__name__)

WORKERS = 2
MAX_PENDING = 64
MAX_QUEUED = 16
MAX_HEAD_BYTES = 8192
REQUEST_TIMEOUT_S = 5.0
MOST_CONNECTIONS = MAX_PENDING + MAX_QUEUED + WORKERS
"""The most connections the port holds at once."""

Health = Callable[[], tuple[bool, str]]
"""Whether the process serves, and a text that says so (or why not)."""


class Dropped(enum.Enum):
    TIMEOUT = "timeout"
    """The request's head did not come whole in time."""
    CROWDED = "crowded"
    """``MAX_PENDING`` other connections were being read."""
    QUEUE_FULL = "queue_full"
    """``MAX_QUEUED`` requests were waiting for a worker."""
    TOO_LARGE = "too_large"
    """The head was longer than ``MAX_HEAD_BYTES``."""


class _Pending:
    __slots__ = ("address", "head", "opened", "sock")

    def __init__(self, sock: socket.socket, address: Any) -> None:
        self.sock = sock
        self.address = address
        self.head = b""
        self.opened = time.monotonic()


def _handler(exposition: Callable[[Iterable[str]], bytes], health: Health) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def setup(self) -> None:
            # The head was read whole already; GET carries no body.
            head, self.connection = self.request
            self.connection.settimeout(REQUEST_TIMEOUT_S)
            self.rfile = io.BytesIO(head)
            self.wfile = self.connection.makefile("wb")

        def finish(self) -> None:
            with contextlib.suppress(OSError):  # the client went away, or read too slowly
                self.wfile.close()

        def do_GET(self) -> None:
            path, _, query = self.path.partition("?")
            if path == "/metrics":
                body, status = exposition(urllib.parse.parse_qs(query).get("name[]", [])), 200
            elif path == "/healthz":
                serving, text = health()
                body, status = f"{text}\n".encode(), 200 if serving else 503
            else:
                body, status = b"try /metrics or /healthz\n", 404
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


def _serving() -> tuple[bool, str]:
    return True, "ok"


class AdminServer:
    def __init__(
        self,
        host: str,
        port: int,
        instruments: Instruments,
        health: Health = _serving,
        exposition: Callable[[Iterable[str]], bytes] | None = None,
    ) -> None:
        """``/metrics`` answers ``exposition(names)``, the families of the
        ``name[]`` a scrape asks for (every one when it asks for none), of
        ``instruments``' series by default; ``/healthz`` answers ``health()``'s text, 200 while the
        process serves and 503 while it does not."""
        self._handler = _handler(exposition or instruments.exposition, health)
        self._dropped = instruments.counter(
            "skyoap_admin_dropped_total",
            "connections to the admin HTTP port dropped unanswered",
            ["reason"],
        )
        self._listener = socket.create_server((host, port), backlog=128)  # bound now: the port is known
        self._listener.setblocking(False)
        address = self._listener.getsockname()
        self.host, self.port = str(address[0]), int(address[1])
        self._requests: queue.Queue[tuple[socket.socket, bytes, Any]] = queue.Queue(MAX_QUEUED)
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self._threads = [threading.Thread(target=self._read, name="admin-http", daemon=True)]
        self._threads += [
            threading.Thread(target=self._answer, name=f"admin-http-{i}", daemon=True) for i in range(WORKERS)
        ]
        for thread in self._threads:
            thread.start()

    def close(self, timeout_s: float = 5.0) -> None:
        """Stops serving; idempotent."""
        threads, self._threads = self._threads, []
        self._stopping.set()
        deadline = time.monotonic() + timeout_s
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._listener.close()

    def _drop(self, sock: socket.socket, reason: Dropped) -> None:
        self._dropped.labels(reason.value).inc()
        sock.close()

    def _read(self) -> None:
        """Reads the heads of requests, every connection at once, and queues whole ones."""
        pending: dict[socket.socket, _Pending] = {}  # oldest first
        with selectors.DefaultSelector() as selector:
            selector.register(self._listener, selectors.EVENT_READ)
            while not self._stopping.is_set():
                try:
                    for key, _ in selector.select(timeout=0.25):
                        if key.fileobj is self._listener:
                            self._accept(selector, pending)
                        elif key.fileobj in pending:  # not dropped by an accept of this round
                            self._receive(selector, pending, key.data)
                    self._expire(selector, pending)
                except Exception:
                    log.exception("the admin HTTP server failed to read a request; it goes on")
            for waiting in pending.values():
                waiting.sock.close()

    def _accept(self, selector: selectors.BaseSelector, pending: dict[socket.socket, _Pending]) -> None:
        while True:
            try:
                sock, address = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            sock.setblocking(False)
            if len(pending) >= MAX_PENDING:
                oldest = next(iter(pending.values()))
                self._forget(selector, pending, oldest)
                self._drop(oldest.sock, Dropped.CROWDED)
            pending[sock] = _Pending(sock, address)
            selector.register(sock, selectors.EVENT_READ, pending[sock])

    def _receive(
        self, selector: selectors.BaseSelector, pending: dict[socket.socket, _Pending], waiting: _Pending
    ) -> None:
        try:
            data = waiting.sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the client went away
            self._forget(selector, pending, waiting)
            waiting.sock.close()
            return
        waiting.head += data
        if b"\r\n\r\n" in waiting.head:
            self._forget(selector, pending, waiting)
            try:
                self._requests.put_nowait((waiting.sock, waiting.head, waiting.address))
            except queue.Full:
                self._drop(waiting.sock, Dropped.QUEUE_FULL)
        elif len(waiting.head) > MAX_HEAD_BYTES:
            self._forget(selector, pending, waiting)
            self._drop(waiting.sock, Dropped.TOO_LARGE)

    def _expire(self, selector: selectors.BaseSelector, pending: dict[socket.socket, _Pending]) -> None:
        cutoff = time.monotonic() - REQUEST_TIMEOUT_S
        late = [w for w in pending.values() if w.opened < cutoff]
        for waiting in late:
            self._forget(selector, pending, waiting)
            self._drop(waiting.sock, Dropped.TIMEOUT)

    @staticmethod
    def _forget(
        selector: selectors.BaseSelector, pending: dict[socket.socket, _Pending], waiting: _Pending
    ) -> None:
        selector.unregister(waiting.sock)
        del pending[waiting.sock]

    def _answer(self) -> None:
        while not self._stopping.is_set():
            try:
                sock, head, address = self._requests.get(timeout=0.25)
            except queue.Empty:
                continue
            try:
                sock.setblocking(True)
                self._handler((head, sock), address, cast(Any, self))
            except Exception as e:  # a client that reads too slowly, or went away
                log.debug("an admin HTTP request ended unanswered: %r", e)
            finally:
                sock.close()
