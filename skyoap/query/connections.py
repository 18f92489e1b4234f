"""The query port's connections, accepted here rather than by aiohttp so
that no client can hold more of them than its share: at most ``max_total``
at once and ``max_per_peer`` from one address, counted from their accept
(a TLS handshake under way included). One past a bound is answered 503 at
once (closed, over TLS) and counted. A connection must send its first
request's head within ``header_timeout_s`` (a TLS handshake within as long);
after that aiohttp closes it once idle for its keep-alive timeout, so a
connection that sends nothing whole is never held for longer than either.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import errno
import json
import logging
import socket
import ssl
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from skyoap.runtime.ratelimit import RateLimitedLog

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

ACCEPT_PAUSE_S = 0.1
"""How long accepting pauses when the process has no descriptor left."""
HEAD_END = b"\r\n\r\n"


class Dropped(enum.Enum):
    """Why a connection was closed before it was served."""

    CONNECTIONS = "connections"
    """``max_total`` connections were open."""
    PEER_CONNECTIONS = "peer_connections"
    """``max_per_peer`` connections from its address were open."""
    HEADER_TIMEOUT = "header_timeout"
    """Its first request's head (or its TLS handshake) did not come whole in time."""


@dataclass(frozen=True)
class ConnectionLimits:
    max_total: int
    max_per_peer: int
    header_timeout_s: float


class _Tracked(asyncio.Protocol):
    """aiohttp's protocol for one connection, seen through: whether its
    first head came in time, and when it ends (its count is released)."""

    def __init__(self, inner: asyncio.Protocol, listener: Listener, peer: str) -> None:
        self._inner, self._listener, self._peer = inner, listener, peer
        self._transport: asyncio.BaseTransport | None = None
        self._late: asyncio.TimerHandle | None = None
        self._tail = b""
        self._released = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        loop = asyncio.get_running_loop()
        self._late = loop.call_later(self._listener.limits.header_timeout_s, self._head_late)
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._late is not None:
            if HEAD_END in self._tail + data[: len(HEAD_END)] or HEAD_END in data:
                self._late.cancel()
                self._late = None
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
            self._listener.left(self._peer)

    def _head_late(self) -> None:
        self._late = None
        self._listener.dropped(Dropped.HEADER_TIMEOUT)
        if isinstance(self._transport, asyncio.Transport):
            self._transport.abort()


class Listener:
    """Accepts the connections of ``sock`` on the running loop and hands each
    within the bounds to a protocol from ``factory`` (aiohttp's server)."""

    def __init__(
        self,
        sock: socket.socket,
        limits: ConnectionLimits,
        factory: Callable[[], asyncio.Protocol],
        tls: ssl.SSLContext | None,
        dropped: Callable[[Dropped], None],
    ) -> None:
        self._sock, self.limits, self._factory, self._tls = sock, limits, factory, tls
        self.dropped = dropped
        self._peers: Counter[str] = Counter()
        self._connecting: set[asyncio.Task[None]] = set()
        self.open = 0
        self._refusal = {
            reason: _busy(message)
            for reason, message in (
                (Dropped.CONNECTIONS, f"the node holds {limits.max_total} query connections at once "
                 "(--query-max-connections) and all are taken; try again shortly"),
                (Dropped.PEER_CONNECTIONS, f"the node holds at most {limits.max_per_peer} query connections "
                 "from one address (--query-max-connections-per-peer); close some, or reuse them"),
            )
        }  # fmt: skip

    async def serve(self) -> None:
        """Accepts until cancelled."""
        loop = asyncio.get_running_loop()
        self._sock.setblocking(False)
        while True:
            try:
                conn, address = await loop.sock_accept(self._sock)
            except OSError as e:
                if e.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    _limited.warning("accept", "the query port failed to accept a connection: %s", e)
                    continue
                _limited.warning("descriptors", "the query port cannot accept: %s; it pauses", e.strerror)
                await asyncio.sleep(ACCEPT_PAUSE_S)
                continue
            peer = str(address[0])
            if self.open >= self.limits.max_total:
                self._refuse(conn, Dropped.CONNECTIONS)
            elif self._peers[peer] >= self.limits.max_per_peer:
                self._refuse(conn, Dropped.PEER_CONNECTIONS)
            else:
                self.open += 1
                self._peers[peer] += 1
                task = loop.create_task(self._connect(conn, peer), name="query-connection")
                self._connecting.add(task)  # the loop keeps only a weak reference
                task.add_done_callback(self._connecting.discard)

    async def _connect(self, conn: socket.socket, peer: str) -> None:
        tracked = _Tracked(self._factory(), self, peer)
        loop = asyncio.get_running_loop()
        try:
            await loop.connect_accepted_socket(
                lambda: tracked, conn, ssl=self._tls, ssl_handshake_timeout=self._handshake_timeout()
            )
        except (OSError, ssl.SSLError, TimeoutError, ConnectionError) as e:
            if isinstance(e, TimeoutError):
                self.dropped(Dropped.HEADER_TIMEOUT)
            conn.close()
            tracked.release()

    def _handshake_timeout(self) -> float | None:
        return self.limits.header_timeout_s if self._tls is not None else None

    def _refuse(self, conn: socket.socket, reason: Dropped) -> None:
        self.dropped(reason)
        if self._tls is None:  # over TLS there is no HTTP before a handshake
            with contextlib.suppress(OSError):
                conn.send(self._refusal[reason])
        conn.close()

    def left(self, peer: str) -> None:
        self.open -= 1
        self._peers[peer] -= 1
        if not self._peers[peer]:
            del self._peers[peer]


def _busy(message: str) -> bytes:
    body = json.dumps({"errors": [{"message": message}]}).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
        f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body
