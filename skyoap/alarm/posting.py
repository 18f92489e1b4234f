"""One POST of an alarm notice to a hook, bounded in time, in memory and in
where it goes:

- the whole exchange (connecting, TLS, sending, the answer's status line and
  headers) ends by one deadline: every wait on the socket waits only what is
  left of it, so a hook that answers a byte at a time cannot stretch a send
  past its timeout (a timeout per read would let it);
- of the answer's body, nothing is read when the hook took the notice, and at
  most ``ANSWER_BYTES`` otherwise, for the log; its headers are bounded by
  ``http.client`` (100 lines of 64 KiB);
- a redirect is not followed: the hook's headers (an ``Authorization`` secret)
  would go wherever the answer points. It is a failure that no resend mends.

No proxy from the environment is used: hooks are reached directly."""

from __future__ import annotations

import enum
import functools
import http.client
import io
import socket
import ssl
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

ANSWER_BYTES = 64 * 1024
"""What is read at most of the body of an answer that is not a 2xx."""
_SHOWN_CHARS = 200
"""What of such a body goes into the log."""


class Answer(enum.Enum):
    """How a send ended."""

    TAKEN = "taken"
    """A 2xx."""
    FAILED = "failed"
    """Down, reset, past the deadline, a 5xx or a 429: a later try may be taken."""
    REFUSED = "refused"
    """A 4xx (but 429), or a request that cannot be made: the same again is refused again."""
    REDIRECTED = "redirected"
    """A 3xx: not followed."""


@dataclass(frozen=True)
class Posted:
    answer: Answer
    why: str = ""
    """For a send not taken: what happened, naming the hook by its scheme and
    host only (a hook's path or query may be its secret, as Slack's is)."""


def where(url: str) -> str:
    """``url`` as logs may show it: scheme and host, no path or query."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}" if parts.netloc else "a URL with no host"


def post(url: str, body: bytes, headers: Mapping[str, str], timeout_s: float) -> Posted:
    """POSTs ``body`` (JSON) to ``url`` with ``headers``, all of it within ``timeout_s``."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return Posted(Answer.REFUSED, f"{url[:60]!r} is not an http or https URL")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as e:  # a port that is not a number
        return Posted(Answer.REFUSED, f"{where(url)}: {e}")
    deadline = _Deadline(time.monotonic() + timeout_s, timeout_s)
    tls = _tls() if parts.scheme == "https" else None
    connection = _Connection(parts.hostname, port, tls, deadline)
    path = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
    try:
        connection.request("POST", path, body, {"Content-Type": "application/json", **headers})
        with connection.getresponse() as answer:
            return _judged(answer, where(url))
    except TimeoutError:
        return Posted(Answer.FAILED, f"{where(url)}: no whole answer within {timeout_s:g} s")
    except (OSError, http.client.HTTPException) as e:  # refused, reset, TLS, an answer that is not HTTP
        return Posted(Answer.FAILED, f"{where(url)}: {e!r}")
    except ValueError as e:  # a header the settings gave that HTTP cannot carry
        return Posted(Answer.REFUSED, f"{where(url)}: {e}")
    finally:
        connection.close()


def _judged(answer: http.client.HTTPResponse, hook: str) -> Posted:
    status = answer.status
    if 200 <= status < 300:
        return Posted(Answer.TAKEN)
    if 300 <= status < 400:
        to = where(answer.getheader("Location") or "")
        return Posted(Answer.REDIRECTED, f"{hook} answered {status} to {to}: redirects are not followed")
    said = _said(answer)
    if status >= 500 or status == 429:
        return Posted(Answer.FAILED, f"{hook} answered {status}{said}")
    return Posted(Answer.REFUSED, f"{hook} answered {status}{said}")


def _said(answer: http.client.HTTPResponse) -> str:
    """The start of the answer's body, to say why the hook did not take it."""
    try:
        text = answer.read(ANSWER_BYTES).decode(errors="replace")
    except (OSError, http.client.HTTPException):
        return ""
    shown = " ".join(text.split())[:_SHOWN_CHARS]
    return f": {shown}" if shown else ""


@functools.cache
def _tls() -> ssl.SSLContext:
    return ssl.create_default_context()


@dataclass(frozen=True)
class _Deadline:
    ends_at: float
    timeout_s: float

    def left(self) -> float:
        """What is left of it, in seconds; TimeoutError once it has passed."""
        left = self.ends_at - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no whole answer within {self.timeout_s:g} s")
        return left


class _Connection(http.client.HTTPConnection):
    """``http.client``'s connection over a socket whose every wait ends by the
    deadline, with TLS when given a context."""

    def __init__(self, host: str, port: int, tls: ssl.SSLContext | None, deadline: _Deadline) -> None:
        super().__init__(host, port)
        self._tls, self._deadline = tls, deadline

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self._deadline.left())
        try:
            if self._tls is not None:  # the handshake is one call, its waits bounded by the timeout set
                sock.settimeout(self._deadline.left())
                sock = self._tls.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise
        # http.client only calls sendall, makefile and close on it.
        self.sock = _Bounded(sock, self._deadline)


class _Bounded:
    """A connected socket whose each wait is given what is left of the deadline.
    Like a socket, it closes once the connection and its answer's reader are
    both closed: ``http.client`` hands the socket to the answer when the
    hook closes the connection after it."""

    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        self._sock, self._deadline = sock, deadline
        self._readers = 0
        self._closing = False

    def _armed(self) -> socket.socket:
        self._sock.settimeout(self._deadline.left())
        return self._sock

    def sendall(self, data: bytes) -> None:
        self._armed().sendall(data)  # sendall's timeout is for the whole of it

    def recv_into(self, buffer: WriteableBuffer) -> int:
        return self._armed().recv_into(buffer)

    def makefile(self, mode: str) -> io.BufferedReader:
        self._readers += 1
        return io.BufferedReader(_Reads(self))

    def close(self) -> None:
        self._closing = True
        self._close_when_unused()

    def reader_closed(self) -> None:
        self._readers -= 1
        self._close_when_unused()

    def _close_when_unused(self) -> None:
        if self._closing and self._readers <= 0:
            self._sock.close()


class _Reads(io.RawIOBase):
    def __init__(self, bounded: _Bounded) -> None:
        super().__init__()
        self._bounded = bounded

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        return self._bounded.recv_into(buffer)

    def close(self) -> None:
        if not self.closed:
            self._bounded.reader_closed()
        super().close()
