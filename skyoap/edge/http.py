"""The HTTP listener every port a node serves over HTTP runs on (the admin
port, the query port, the PromQL port): aiohttp's server on one event loop
of its own thread. Connections are accepted here rather than by aiohttp so
that no client holds more of them than its share; the guarded routes are
answered only while the node serves and to the credentials it requires; and
what is under way is drained at close.

Connections: at most ``max_total`` at once and ``max_per_peer`` from one
address, counted from their accept (a TLS handshake under way included).
One past a bound is answered 503 at once (closed, over TLS) and counted;
on a port that gives way (``ConnectionLimits.give_way``: the admin port,
which a scraper must always reach), the oldest connection that has not sent
its first request's head yet is closed to make room instead, if there is
one (``CROWDED``). A connection must send its first request's head within
``header_timeout_s`` (a TLS handshake within as long); after that aiohttp
closes it once idle for its keep-alive timeout, so a connection that sends
nothing whole is never held for longer than either.

Each port is a ``Site``: its socket, bound at once (its port is known before
the server starts), the routes it mounts, and how it words a refusal: each
protocol answers in its own envelope.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import errno
import logging
import socket
import ssl
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from aiohttp import hdrs, web
from multidict import CIMultiDict

from skyoap.runtime.ratelimit import RateLimitedLog

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

START_WAIT_S = 30.0
CANCEL_WAIT_S = 1.0
"""How long requests still under way after the grace of a close get once cancelled."""
ACCEPT_PAUSE_S = 0.1
"""How long accepting pauses when the process has no descriptor left."""
HEAD_END = b"\r\n\r\n"
STOPPING = "the node is stopping; ask another node or try again"

EVERY_ANSWER_HEADERS = {
    # For browsers that ignore CSP's frame-ancestors, and for the 401 a
    # browser turns into a login prompt: no page of these ports in a frame.
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
}


class Dropped(enum.Enum):
    """Why a connection was closed before it was served."""

    CONNECTIONS = "connections"
    """``max_total`` connections were open."""
    PEER_CONNECTIONS = "peer_connections"
    """``max_per_peer`` connections from its address were open."""
    HEADER_TIMEOUT = "header_timeout"
    """Its first request's head (or its TLS handshake) did not come whole in time."""
    CROWDED = "crowded"
    """It had not sent its first request's head when a new one needed its room."""


class Unwelcome(enum.Enum):
    """Why the listener answered a request of a guarded route itself."""

    AUTH = "auth"
    """Credentials missing or wrong (401)."""
    CLOSING = "closing"
    """The node is stopping (503)."""


@dataclass(frozen=True)
class ConnectionLimits:
    max_total: int
    max_per_peer: int
    header_timeout_s: float
    give_way: bool = False
    """Past a bound, close the oldest connection still waiting for its first
    request's head to make room, rather than refuse the new one."""


class Credentials(Protocol):
    """Who may ask (``edge/auth.py``'s ``HttpAuth``)."""

    @property
    def challenges(self) -> list[str]:
        """The ``WWW-Authenticate`` values of a 401."""
        ...

    def refusal(self, authorization: str | None) -> str | None:
        """Why a request with this ``Authorization`` header is refused, if it is."""
        ...


Envelope = Callable[[int, str], bytes]
"""A refusal's body (its status and what to say), in the protocol's own form."""
Guard = Callable[[web.AbstractRoute], None]
"""Marks a route as guarded: answered only while the node serves, and to its credentials."""


@dataclass(frozen=True)
class Site:
    """One port: its socket, its routes (``mount(app, guard)``) and its envelope."""

    sock: socket.socket
    mount: Callable[[web.Application, Guard], None]
    envelope: Envelope
    max_body_bytes: int = 1024**2
    content_type: str = "application/json"
    refusals: Mapping[Dropped, str] = field(default_factory=dict)
    """What a connection refused past a bound is told, by why."""

    def answer(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> web.Response:
        body = self.envelope(status, message)
        return web.Response(status=status, body=body, content_type=self.content_type, headers=headers)

    def raw(self, message: str) -> bytes:
        """A whole 503 for a connection refused before HTTP."""
        body = self.envelope(503, message)
        head = (
            f"HTTP/1.1 503 Service Unavailable\r\nContent-Type: {self.content_type}\r\nRetry-After: 1\r\n"
            f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        return head.encode() + body


def listen(host: str, port: int, what: str) -> socket.socket:
    """A socket bound to ``host``:``port`` (0: a free one) for ``what``."""
    try:
        return socket.create_server((host, port), backlog=128)
    except OSError as e:
        raise OSError(f"cannot listen on {host}:{port} for {what}: {e.strerror}") from None


class HttpServer:
    """Serves ``sites`` from ``start`` on; ``close`` stops taking connections,
    lets the requests under way finish within its grace and cancels what is
    left. ``dropped`` and ``refused`` count what the listener turned away."""

    def __init__(
        self,
        name: str,
        sites: Sequence[Site],
        limits: ConnectionLimits,
        dropped: Callable[[Dropped], None],
        refused: Callable[[Unwelcome], None] = lambda _: None,
        tls: ssl.SSLContext | None = None,
        credentials: Credentials | None = None,
        idle_timeout_s: float = 60.0,
    ) -> None:
        self._name = name
        self._sites = list(sites)
        self.limits = limits
        self._dropped, self._refused = dropped, refused
        self._tls, self._credentials = tls, credentials
        self._idle_timeout_s = idle_timeout_s
        self._listeners: list[_Listener] = []
        self._guarded: set[web.AbstractRoute] = set()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._idle: asyncio.Event | None = None
        self._in_flight = 0
        self._grace_s = 0.0
        self.closing = False
        self._closed = False

    @property
    def open(self) -> int:
        """Connections open now."""
        return sum(one.open for one in self._listeners)

    def start(self) -> None:
        """Serves from now on; on failure, releases the ports and the thread."""
        self._thread = threading.Thread(target=self._serve, name=f"{self._name}-http", daemon=True)
        self._thread.start()
        started = self._ready.wait(START_WAIT_S)
        if started and self._failure is None:
            return
        self.close(0)
        if self._failure is not None:
            raise RuntimeError(f"the {self._name} endpoint did not start: {self._failure}") from self._failure
        raise RuntimeError(f"the {self._name} endpoint did not start within {START_WAIT_S:g} s")

    def _serve(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as e:
            self._failure = e
            log.exception("the %s endpoint stopped", self._name)
        finally:
            self._ready.set()

    async def _main(self) -> None:
        self._stop, self._idle = asyncio.Event(), asyncio.Event()
        self._idle.set()
        self._loop = asyncio.get_running_loop()
        runners = []
        try:
            for site in self._sites:
                runner = await self._runner(site)
                runners.append(runner)
                assert runner.server is not None
                self._listeners.append(_Listener(site, self.limits, runner.server, self._tls, self._dropped))
            accepting = [
                asyncio.create_task(one.serve(), name=f"{self._name}-accept") for one in self._listeners
            ]
            self._ready.set()
            await self._stop.wait()
            for task in accepting:
                task.cancel()
            await asyncio.wait(accepting)
            self._close_sockets()  # no new connection from here on: refused, not left waiting
            await self._drain()
        finally:
            for runner in runners:
                await runner.cleanup()  # closes the connections; what is under way is cancelled

    async def _runner(self, site: Site) -> web.AppRunner:
        app = web.Application(client_max_size=site.max_body_bytes, middlewares=[self._welcome(site)])
        app.on_response_prepare.append(_harden)
        site.mount(app, self._guarded.add)
        runner = web.AppRunner(
            app,
            handle_signals=False,
            access_log=None,
            shutdown_timeout=CANCEL_WAIT_S,
            keepalive_timeout=self._idle_timeout_s,
        )
        await runner.setup()
        return runner

    def _welcome(self, site: Site) -> Callable[..., Awaitable[web.StreamResponse]]:
        @web.middleware
        async def welcome(
            request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
        ) -> web.StreamResponse:
            if request.match_info.route in self._guarded:
                refused = self._unwelcome(site, request)
                if refused is not None:
                    return refused
            assert self._idle is not None
            self._in_flight += 1
            self._idle.clear()
            try:
                return await handler(request)
            finally:
                self._in_flight -= 1
                if not self._in_flight:
                    self._idle.set()

        return welcome

    def _unwelcome(self, site: Site, request: web.Request) -> web.Response | None:
        """The answer to a request this node will not serve now (stopping, credentials)."""
        if self.closing:
            self._refused(Unwelcome.CLOSING)
            return site.answer(503, STOPPING)
        if self._credentials is not None:
            why = self._credentials.refusal(request.headers.get(hdrs.AUTHORIZATION))
            if why is not None:
                self._refused(Unwelcome.AUTH)
                challenges = CIMultiDict((hdrs.WWW_AUTHENTICATE, c) for c in self._credentials.challenges)
                return site.answer(401, why, challenges)
        return None

    async def _drain(self) -> None:
        """Waits up to the grace of ``close`` for the requests under way to answer."""
        assert self._idle is not None
        if not self._in_flight:
            return
        try:
            await asyncio.wait_for(self._idle.wait(), self._grace_s)
        except TimeoutError:
            log.warning(
                "%d requests still under way when the %s endpoint closed", self._in_flight, self._name
            )

    def _close_sockets(self) -> None:
        for site in self._sites:
            site.sock.close()

    def close(self, timeout_s: float = 5.0) -> None:
        """Stops taking connections, lets the requests under way answer within
        ``timeout_s`` and cancels what is left; idempotent."""
        if self._closed:
            return
        self._closed = True
        self.closing = True
        self._grace_s = timeout_s
        loop, stop, thread = self._loop, self._stop, self._thread
        if loop is not None and stop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(stop.set)
            thread.join(timeout_s + 2 * CANCEL_WAIT_S + 1)
            if thread.is_alive():
                log.warning("the %s endpoint's thread did not stop in time", self._name)
        self._close_sockets()


async def _harden(_: web.Request, response: web.StreamResponse) -> None:
    response.headers.update(EVERY_ANSWER_HEADERS)


class _Tracked(asyncio.Protocol):
    """aiohttp's protocol for one connection, seen through: whether its
    first head came in time, and when it ends (its count is released)."""

    def __init__(self, inner: asyncio.Protocol, listener: _Listener, peer: str) -> None:
        self._inner, self._listener, self._peer = inner, listener, peer
        self._transport: asyncio.BaseTransport | None = None
        self._late: asyncio.TimerHandle | None = None
        self._tail = b""
        self._released = False
        self._aborted = False
        self.waiting = True
        """Whether its first request's head has yet to come whole."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        if self._aborted:  # given way while its TLS handshake was under way
            self.abort()
        loop = asyncio.get_running_loop()
        self._late = loop.call_later(self._listener.limits.header_timeout_s, self._head_late)
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._late is not None:
            if HEAD_END in self._tail + data[: len(HEAD_END)] or HEAD_END in data:
                self._late.cancel()
                self._late = None
                self.waiting = False
            else:
                self._tail = (self._tail + data)[-(len(HEAD_END) - 1) :]
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._late is not None:
            self._late.cancel()
            self._late = None
        self.release()
        self._inner.connection_lost(exc)

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._listener.left(self)

    def _head_late(self) -> None:
        self._late = None
        self._listener.dropped(Dropped.HEADER_TIMEOUT)
        self.abort()

    def abort(self) -> None:
        self._aborted = True
        if isinstance(self._transport, asyncio.Transport):
            self._transport.abort()


class _Listener:
    """Accepts the connections of a site's socket on the running loop and
    hands each within the bounds to a protocol from ``factory`` (aiohttp's
    server)."""

    def __init__(
        self,
        site: Site,
        limits: ConnectionLimits,
        factory: Callable[[], asyncio.Protocol],
        tls: ssl.SSLContext | None,
        dropped: Callable[[Dropped], None],
    ) -> None:
        self._site, self.limits, self._factory, self._tls = site, limits, factory, tls
        self.dropped = dropped
        self._peers: Counter[str] = Counter()
        self._connections: dict[_Tracked, str] = {}
        """Each connection accepted and its peer, oldest first."""
        self._connecting: set[asyncio.Task[None]] = set()

    @property
    def open(self) -> int:
        return len(self._connections)

    async def serve(self) -> None:
        """Accepts until cancelled."""
        loop = asyncio.get_running_loop()
        sock = self._site.sock
        sock.setblocking(False)
        while True:
            try:
                conn, address = await loop.sock_accept(sock)
            except OSError as e:
                if e.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    _limited.warning("accept", "an HTTP port failed to accept a connection: %s", e)
                    continue
                _limited.warning("descriptors", "an HTTP port cannot accept: %s; it pauses", e.strerror)
                await asyncio.sleep(ACCEPT_PAUSE_S)
                continue
            peer = str(address[0])
            full = self._full(peer)
            if full is not None and not self._made_room(peer):
                self._refuse(conn, full)
                continue
            tracked = _Tracked(self._factory(), self, peer)
            self._connections[tracked] = peer
            self._peers[peer] += 1
            task = loop.create_task(self._connect(conn, tracked), name="http-connection")
            self._connecting.add(task)  # the loop keeps only a weak reference
            task.add_done_callback(self._connecting.discard)

    def _full(self, peer: str) -> Dropped | None:
        if self.open >= self.limits.max_total:
            return Dropped.CONNECTIONS
        if self._peers[peer] >= self.limits.max_per_peer:
            return Dropped.PEER_CONNECTIONS
        return None

    def _made_room(self, peer: str) -> bool:
        """On a port that gives way: closes the oldest connection (of ``peer``,
        if its share is what is full) still waiting for its first head."""
        if not self.limits.give_way:
            return False
        peer_full = self.open < self.limits.max_total
        oldest = next(
            (t for t, of in self._connections.items() if t.waiting and (of == peer or not peer_full)), None
        )
        if oldest is None:
            return False
        oldest.abort()
        oldest.release()  # at once: the new one takes its room
        self.dropped(Dropped.CROWDED)
        return True

    async def _connect(self, conn: socket.socket, tracked: _Tracked) -> None:
        loop = asyncio.get_running_loop()
        timeout = self.limits.header_timeout_s if self._tls is not None else None
        try:
            await loop.connect_accepted_socket(
                lambda: tracked, conn, ssl=self._tls, ssl_handshake_timeout=timeout
            )
        except (OSError, ssl.SSLError, TimeoutError, ConnectionError) as e:
            if isinstance(e, TimeoutError):
                self.dropped(Dropped.HEADER_TIMEOUT)
            conn.close()
            tracked.release()

    def _refuse(self, conn: socket.socket, reason: Dropped) -> None:
        self.dropped(reason)
        message = self._site.refusals.get(reason)
        if self._tls is None and message:  # over TLS there is no HTTP before a handshake
            with contextlib.suppress(OSError):
                conn.send(self._site.raw(message))
        conn.close()

    def left(self, tracked: _Tracked) -> None:
        peer = self._connections.pop(tracked, None)
        if peer is None:
            return
        self._peers[peer] -= 1
        if not self._peers[peer]:
            del self._peers[peer]
