"""The HTTP admin endpoint of a node or a consumer: /metrics (Prometheus text) and /healthz.

Whoever reaches the port cannot tie it up (``edge/http.py``): a connection
must send its request's head within ``REQUEST_TIMEOUT_S``; at most
``MOST_CONNECTIONS`` are held at once, and the port gives way: a new one
past that closes the oldest still sending its head (``crowded``), so a
scraper always gets in. ``WORKERS`` threads answer, and at most
``MAX_QUEUED`` more requests wait for them (past that, 503); an answer
takes as long as its reads do (the consumer groups' lag is read from
storage), with no deadline of its own: the scraper's timeout bounds it.
Every drop is counted (``skyoap_admin_dropped_total{reason}``).
"""

from __future__ import annotations

import asyncio
import socket
import urllib.parse
from collections.abc import Callable, Iterable

from aiohttp import web

from skyoap.edge.http import ConnectionLimits, Dropped, Guard, HttpServer, Site
from skyoap.runtime.admission import Admission, Busy
from skyoap.runtime.instruments import Instruments

WORKERS = 2
MAX_QUEUED = 16
MAX_PENDING = 64
REQUEST_TIMEOUT_S = 5.0
MOST_CONNECTIONS = MAX_PENDING + MAX_QUEUED + WORKERS
"""The most connections the port holds at once."""
TEXT = "text/plain; version=0.0.4"

Health = Callable[[], tuple[bool, str]]
"""Whether the process serves, and a text that says so (or why not)."""


def _serving() -> tuple[bool, str]:
    return True, "ok"


def _text(_: int, message: str) -> bytes:
    return f"{message}\n".encode()


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
        ``instruments``' series by default; ``/healthz`` answers ``health()``'s
        text, 200 while the process serves and 503 while it does not."""
        self._exposition = exposition or instruments.exposition
        self._health = health
        dropped = instruments.counter(
            "skyoap_admin_dropped_total",
            "connections and requests to the admin HTTP port dropped unanswered",
            ["reason"],
        )
        self._dropped = dropped
        sock = socket.create_server((host, port), backlog=128)  # bound now: the port is known
        address = sock.getsockname()
        self.host, self.port = str(address[0]), int(address[1])
        self._answering = Admission(WORKERS, MAX_QUEUED, None, "admin-http")
        limits = ConnectionLimits(MOST_CONNECTIONS, MOST_CONNECTIONS, REQUEST_TIMEOUT_S, give_way=True)
        site = Site(sock, self._mount, _text, max_body_bytes=1024, content_type="text/plain")
        self._http = HttpServer("admin", [site], limits, self._drop, idle_timeout_s=REQUEST_TIMEOUT_S)

    def _drop(self, reason: Dropped) -> None:
        self._dropped.labels(reason.value).inc()

    def _mount(self, app: web.Application, _: Guard) -> None:
        app.router.add_get("/metrics", self._metrics, allow_head=False)
        app.router.add_get("/healthz", self._healthz, allow_head=False)
        app.router.add_route("*", "/{path:.*}", _elsewhere)

    async def _metrics(self, request: web.Request) -> web.Response:
        names = urllib.parse.parse_qs(request.query_string).get("name[]", [])
        return await self._answer(lambda: (200, self._exposition(names)))

    async def _healthz(self, _: web.Request) -> web.Response:
        def health() -> tuple[int, bytes]:
            serving, text = self._health()
            return 200 if serving else 503, f"{text}\n".encode()

        return await self._answer(health)

    async def _answer(self, work: Callable[[], tuple[int, bytes]]) -> web.Response:
        try:
            future = self._answering.submit(work)
        except (Busy, RuntimeError):
            self._dropped.labels("queue_full").inc()
            return web.Response(status=503, body=b"busy; try again shortly\n", headers={"Content-Type": TEXT})
        answered = await asyncio.wrap_future(future)
        assert answered is not None  # admitted without a deadline
        status, body = answered
        return web.Response(status=status, body=body, headers={"Content-Type": TEXT})

    def start(self) -> None:
        self._answering.start()
        self._http.start()

    def close(self, timeout_s: float = 5.0) -> None:
        """Stops serving; idempotent."""
        self._http.close(timeout_s)
        self._answering.close(timeout_s)


async def _elsewhere(_: web.Request) -> web.Response:
    return web.Response(status=404, body=b"try /metrics or /healthz\n", headers={"Content-Type": TEXT})
