"""The query endpoint: SkyWalking's query protocol as its OAP serves it,
``POST /graphql`` with a JSON body ``{query, variables, operationName}``,
answered ``{data, errors}`` with status 200 even when ``errors`` is there
(SkyWalking's UI shows their messages; on another status it shows only the
status line).

aiohttp's server, on one event loop of its own thread, reads requests and
writes answers; queries run on the ``Execution``'s threads. What the
protocol leaves to HTTP is answered with a status and a JSON body
``{"errors": [{"message": ...}]}`` saying what was wrong: a method other than
POST (405), credentials missing or wrong (401, with a challenge), a body
past ``max_body_bytes`` (413, read no further) or not whole within the
query deadline (408), a body that is not a JSON object with a ``query``
string (400), every thread busy and the waiting room full (503).

``GET /status/...`` answers the pages SkyWalking's UI reads beside GraphQL
(``status.py``), under the same credentials.

With a PromQL port, the same server answers Prometheus's query API there
(``promql/api.py``): over the same TLS, credentials, connection bounds,
threads and deadline.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import json
import logging
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Mapping

from aiohttp import hdrs, web
from aiohttp.typedefs import LooseHeaders
from multidict import CIMultiDict

from skyoap.edge.tls import HttpsTls
from skyoap.query.auth import HttpAuth
from skyoap.query.connections import ConnectionLimits, Dropped, Listener
from skyoap.query.execution import Busy, Execution, QueryRequest
from skyoap.query.promql.api import PREFIX as PROMQL_PREFIX
from skyoap.query.promql.api import PromQLApi, failure
from skyoap.query.status import Page, StatusPage
from skyoap.query.ui.files import UI_HEADERS, ui_files
from skyoap.runtime.instruments import Instruments

log = logging.getLogger(__name__)

PATH = "/graphql"
START_WAIT_S = 30.0
DEFAULT_LIMITS = ConnectionLimits(max_total=256, max_per_peer=64, header_timeout_s=10.0)
CANCEL_WAIT_S = 1.0
"""How long requests still under way after the grace of a close get once cancelled."""


class Refused(enum.Enum):
    """Why a request was answered without running a query."""

    METHOD = "method"
    """Not a POST (405)."""
    AUTH = "auth"
    """Credentials missing or wrong (401)."""
    TOO_LARGE = "too_large"
    """A body past ``--query-max-body-bytes`` (413)."""
    TIMEOUT = "timeout"
    """A body not whole within the query deadline (408)."""
    BAD_REQUEST = "bad_request"
    """Not a JSON object with a ``query`` string (400)."""
    BUSY = "busy"
    """Every thread running a query and as many waiting as may (503)."""
    CLOSING = "closing"
    """The node is stopping (503)."""


class _Series:
    """The endpoint's self-metrics."""

    def __init__(self, instruments: Instruments, execution: Execution) -> None:
        self.served = instruments.counter(
            "skyoap_query_served_total", "queries answered, by outcome", ["outcome"]
        )
        self.seconds = instruments.histogram(
            "skyoap_query_seconds", "one query, from its request's arrival to its answer"
        )
        self.refused = instruments.counter(
            "skyoap_query_refused_total",
            "requests to the query endpoint answered without running",
            ["reason"],
        )
        instruments.gauge("skyoap_query_pending", "queries running or waiting for a thread").set_function(
            lambda: execution.pending
        )
        self.connections = instruments.gauge("skyoap_query_connections", "connections open to the query port")
        self.most_connections = instruments.gauge(
            "skyoap_query_connections_limit", "most connections the query port holds at once"
        )


EVERY_ANSWER_HEADERS = {
    # For browsers that ignore CSP's frame-ancestors, and for the 401 a
    # browser turns into a login prompt: no page of this port in a frame.
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
}


async def _harden(_: web.Request, response: web.StreamResponse) -> None:
    response.headers.update(EVERY_ANSWER_HEADERS)


def _ui_file(file: Page) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The handler of one of the web UI's files (``ui/files.py``)."""

    async def answer(_: web.Request) -> web.Response:
        return web.Response(
            body=file.body, content_type=file.content_type, charset="utf-8", headers=UI_HEADERS
        )

    return answer


def _errors(message: str) -> bytes:
    return json.dumps({"errors": [{"message": message}]}, ensure_ascii=False, separators=(",", ":")).encode()


class QueryServer:
    """Bound on construction (``port`` 0 picks a free one, read back from
    ``port``); ``start`` serves, ``close`` stops taking connections, lets
    the queries under way finish within its grace and cancels what is left.
    Owns its ``Execution``: starts it and closes it."""

    def __init__(
        self,
        host: str,
        port: int,
        execution: Execution,
        instruments: Instruments,
        max_body_bytes: int,
        tls: HttpsTls | None = None,
        auth: HttpAuth | None = None,
        status: Mapping[str, StatusPage] | None = None,
        limits: ConnectionLimits = DEFAULT_LIMITS,
        idle_timeout_s: float = 60.0,
        promql: tuple[int, PromQLApi] | None = None,
    ) -> None:
        """``promql``: the port of the PromQL service and its endpoints."""
        self._sock = _listen(host, port, "queries")
        address = self._sock.getsockname()
        self.host, self.port = str(address[0]), int(address[1])
        self._promql = promql[1] if promql else None
        self._promql_sock = _listen(host, promql[0], "PromQL queries") if promql else None
        self.promql_port = int(self._promql_sock.getsockname()[1]) if self._promql_sock else None
        self.scheme = "https" if tls is not None else "http"
        self._execution = execution
        self._series = _Series(instruments, execution)
        self._max_body_bytes = max_body_bytes
        self._limits, self._idle_timeout_s = limits, idle_timeout_s
        self._tls = tls
        self._auth = auth
        self._status = dict(status or {})
        self._guarded: set[web.AbstractRoute] = set()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._closing = False
        self._closed = False
        self._grace_s = 0.0
        self._in_flight = 0
        self._idle: asyncio.Event | None = None

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{PATH}"

    def start(self) -> None:
        """Serves from now on; on failure, releases the port and the threads."""
        self._execution.start()
        self._thread = threading.Thread(target=self._serve, name="query-http", daemon=True)
        self._thread.start()
        started = self._ready.wait(START_WAIT_S)
        if started and self._failure is None:
            return
        self.close(0)
        if self._failure is not None:
            raise RuntimeError(f"the query endpoint did not start: {self._failure}") from self._failure
        raise RuntimeError(f"the query endpoint did not start within {START_WAIT_S:g} s")

    def _serve(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as e:
            self._failure = e
            log.exception("the query endpoint stopped")
        finally:
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop, self._idle = asyncio.Event(), asyncio.Event()
        self._idle.set()
        runner = await self._runner(self._app())
        assert runner.server is not None
        runners = [runner]
        tls = self._tls.context if self._tls else None
        listener = Listener(self._sock, self._limits, runner.server, tls, self._dropped)
        listeners = [listener]
        if self._promql_sock is not None:
            runners.append(await self._runner(self._promql_app()))
            assert runners[-1].server is not None
            listeners.append(
                Listener(self._promql_sock, self._limits, runners[-1].server, tls, self._dropped)
            )
        self._series.connections.set_function(lambda: sum(one.open for one in listeners))
        self._series.most_connections.set(self._limits.max_total)
        accepting = [asyncio.create_task(one.serve(), name="query-accept") for one in listeners]
        try:
            self._ready.set()
            await self._stop.wait()
            for task in accepting:
                task.cancel()
            await asyncio.wait(accepting)
            self._close_sockets()  # no new connection from here on: refused, not left waiting
            await self._drain()
        finally:
            for task in accepting:
                task.cancel()
            for one in runners:
                await one.cleanup()  # closes the connections; what is under way is cancelled

    async def _drain(self) -> None:
        """Waits up to the grace of ``close`` for the queries under way to answer."""
        assert self._idle is not None
        if not self._in_flight:
            return
        try:
            await asyncio.wait_for(self._idle.wait(), self._grace_s)
        except TimeoutError:
            log.warning("%d queries still under way when the query endpoint closed", self._in_flight)

    def _app(self) -> web.Application:
        # aiohttp refuses a body past client_max_size (tests/unit/test_query_endpoint.py holds it to that).
        app = web.Application(client_max_size=self._max_body_bytes, middlewares=[self._welcome])
        app.on_response_prepare.append(_harden)
        self._guard(app.router.add_post(PATH, self._graphql))
        app.router.add_route("*", PATH, self._not_post)
        for path, page in self._status.items():
            self._guard(
                app.router.add_get(path, functools.partial(self._status_page, page), allow_head=False)
            )
        files = ui_files()
        for name, file in files.items():
            self._guard(app.router.add_get(f"/ui/{name}", _ui_file(file), allow_head=False))
        self._guard(app.router.add_get("/", _ui_file(files["index.html"]), allow_head=False))
        app.router.add_route("*", "/{path:.*}", self._elsewhere)
        return app

    async def _runner(self, app: web.Application) -> web.AppRunner:
        runner = web.AppRunner(
            app,
            handle_signals=False,
            access_log=None,
            shutdown_timeout=CANCEL_WAIT_S,
            keepalive_timeout=self._idle_timeout_s,
        )
        await runner.setup()
        return runner

    def _promql_app(self) -> web.Application:
        app = web.Application(client_max_size=self._max_body_bytes, middlewares=[self._welcome])
        app.on_response_prepare.append(_harden)
        self._guard(app.router.add_route("*", PROMQL_PREFIX + "{path:.*}", self._promql_answer))
        app.router.add_route("*", "/{path:.*}", _not_promql)
        return app

    async def _promql_answer(self, request: web.Request) -> web.Response:
        """One request of Prometheus's query API: its parameters from the
        query string and a form-encoded body, answered on a query thread."""
        assert self._promql is not None
        if request.method not in (hdrs.METH_GET, hdrs.METH_POST):
            return _prometheus_error(
                405, "bad_data", f"{request.path} answers GET and POST, not {request.method}"
            )
        params: dict[str, list[str]] = {}
        try:
            async with asyncio.timeout(self._execution.deadline_s):
                form = await request.post() if request.method == hdrs.METH_POST else {}
        except TimeoutError:
            return _prometheus_error(408, "bad_data", "the request's body did not come whole in time")
        except web.HTTPRequestEntityTooLarge:
            return _prometheus_error(413, "bad_data", f"the body is larger than {self._max_body_bytes} bytes")
        for source in (request.query, form):
            for key, value in source.items():
                params.setdefault(key, []).append(str(value))
        try:
            future = self._execution.submit_call(functools.partial(self._promql.answer, request.path, params))
        except Busy as e:
            return _prometheus_error(503, "unavailable", str(e))
        except RuntimeError:
            return _prometheus_error(
                503, "unavailable", "the node is stopping; ask another node or try again"
            )
        waiting = asyncio.wrap_future(future)
        done, _ = await asyncio.wait([waiting], timeout=self._execution.deadline_s)
        try:
            reply = waiting.result() if done else None
        except Exception as e:  # the node's failure, not the query's
            log.exception("a PromQL query failed to run")
            return _prometheus_error(500, "internal", f"the node failed to run the query: {e!r}")
        if reply is None:
            return _prometheus_error(
                503,
                "timeout",
                f"the query did not finish within {self._execution.deadline_s:g} s (--query-deadline-s)",
            )
        return web.Response(status=reply.status, body=reply.body, content_type="application/json")

    def _close_sockets(self) -> None:
        self._sock.close()
        if self._promql_sock is not None:
            self._promql_sock.close()

    def _guard(self, route: web.AbstractRoute) -> None:
        """Serves ``route`` only while the node takes queries, and to the
        endpoint's credentials: the UI's files too, since a browser asks for
        them once it is challenged and sends them on with every query."""
        self._guarded.add(route)

    @web.middleware
    async def _welcome(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.match_info.route in self._guarded:
            refused = self._unwelcome(request)
            if refused is not None:
                return refused
        return await handler(request)

    async def _elsewhere(self, request: web.Request) -> web.Response:
        message = (
            f"{request.path} is not served here: this port answers SkyWalking's query protocol at POST {PATH}"
        )
        return web.Response(status=404, body=_errors(message), content_type="application/json")

    async def _not_post(self, request: web.Request) -> web.Response:
        message = (
            f"{PATH} answers POST only, with a JSON body {{query, variables, operationName}} "
            f"(SkyWalking's query protocol), not {request.method}"
        )
        return self._refuse(Refused.METHOD, 405, message, {hdrs.ALLOW: hdrs.METH_POST})

    async def _status_page(self, page: StatusPage, request: web.Request) -> web.Response:
        as_json = "application/json" in request.headers.get(hdrs.ACCEPT, "")
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._execution.deadline_s):
                answer = await loop.run_in_executor(None, page, as_json)
        except TimeoutError:
            message = f"{request.path} was not answered within {self._execution.deadline_s:g} s"
            return self._refuse(Refused.TIMEOUT, 503, message)
        return web.Response(body=answer.body, content_type=answer.content_type)

    def _unwelcome(self, request: web.Request) -> web.Response | None:
        """The answer to a request this node will not serve now (stopping, credentials)."""
        if self._closing:
            return self._refuse(Refused.CLOSING, 503, "the node is stopping; ask another node or try again")
        if self._auth is not None:
            why = self._auth.refusal(request.headers.get(hdrs.AUTHORIZATION))
            if why is not None:
                challenges = CIMultiDict((hdrs.WWW_AUTHENTICATE, c) for c in self._auth.challenges)
                return self._refuse(Refused.AUTH, 401, why, challenges)
        return None

    async def _graphql(self, request: web.Request) -> web.Response:
        arrived = time.monotonic()
        asked = await self._read(request)
        if isinstance(asked, web.Response):
            return asked
        try:
            future = self._execution.submit(asked)
        except Busy as e:
            return self._refuse(Refused.BUSY, 503, str(e), {hdrs.RETRY_AFTER: "1"})
        except RuntimeError:
            return self._refuse(Refused.CLOSING, 503, "the node is stopping; ask another node or try again")
        assert self._idle is not None
        self._in_flight += 1
        self._idle.clear()
        try:
            waiting = asyncio.wrap_future(future)
            done, _ = await asyncio.wait([waiting], timeout=self._execution.deadline_s)
            answer = waiting.result() if done else self._execution.late
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                self._idle.set()
        self._series.served.labels(answer.outcome.value).inc()
        self._series.seconds.observe(time.monotonic() - arrived)
        return web.Response(body=answer.body, content_type="application/json")

    async def _read(self, request: web.Request) -> web.Response | QueryRequest:
        """The query a request asks for, or the answer to one that runs none."""
        try:
            async with asyncio.timeout(self._execution.deadline_s):
                body = await request.read()
        except TimeoutError:
            message = f"the request's body did not come whole within {self._execution.deadline_s:g} s"
            return self._refuse(Refused.TIMEOUT, 408, message)
        except web.HTTPRequestEntityTooLarge:
            message = (
                f"the request's body is larger than the {self._max_body_bytes} bytes this node reads "
                "(--query-max-body-bytes); send a smaller query"
            )
            return self._refuse(Refused.TOO_LARGE, 413, message)
        parsed = parse_request(body)
        if isinstance(parsed, str):
            return self._refuse(Refused.BAD_REQUEST, 400, parsed)
        return parsed

    def _dropped(self, reason: Dropped) -> None:
        self._series.refused.labels(reason.value).inc()

    def _refuse(
        self, reason: Refused, status: int, message: str, headers: LooseHeaders | None = None
    ) -> web.Response:
        self._series.refused.labels(reason.value).inc()
        return web.Response(
            status=status, body=_errors(message), content_type="application/json", headers=headers
        )

    def close(self, timeout_s: float = 5.0) -> None:
        """Stops taking connections, lets the queries under way answer within
        ``timeout_s``, cancels what is left, then closes the execution;
        idempotent."""
        if self._closed:
            return
        self._closed = True
        self._closing = True
        self._grace_s = timeout_s
        loop, stop, thread = self._loop, self._stop, self._thread
        if loop is not None and stop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(stop.set)
            thread.join(timeout_s + 2 * CANCEL_WAIT_S + 1)
            if thread.is_alive():
                log.warning("the query endpoint's thread did not stop in time")
        self._execution.close(timeout_s)
        self._close_sockets()


def _listen(host: str, port: int, what: str) -> socket.socket:
    try:
        return socket.create_server((host, port), backlog=128)
    except OSError as e:
        raise OSError(f"cannot listen on {host}:{port} for {what}: {e.strerror}") from None


def _prometheus_error(status: int, error_type: str, error: str) -> web.Response:
    return web.Response(
        status=status, body=failure(status, error_type, error).body, content_type="application/json"
    )


async def _not_promql(request: web.Request) -> web.Response:
    return _prometheus_error(
        404,
        "not_found",
        f"{request.path} is not served here: this port answers Prometheus's query API at {PROMQL_PREFIX}",
    )


BODY = '{"query": "...", "variables": {...}, "operationName": "..."}'
"""What a request's body holds (``variables`` and ``operationName`` optional)."""


def parse_request(body: bytes) -> QueryRequest | str:
    """The query a body asks for, or what is wrong with the body."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError) as e:
        return f"the body is not JSON ({e}): send {BODY}"
    if not isinstance(document, dict):
        return f"the body is a JSON {_json_type(document)}, not an object: send {BODY}"
    query = document.get("query")
    if query is None:
        return f'the body has no "query": send {BODY}'
    if not isinstance(query, str):
        return f'"query" must be a string holding the GraphQL query, not a JSON {_json_type(query)}'
    variables = document.get("variables")
    if variables is not None and not isinstance(variables, dict):
        return (
            f'"variables" must be a JSON object of the query\'s variables, not a JSON {_json_type(variables)}'
        )
    operation = document.get("operationName")
    if operation is not None and not isinstance(operation, str):
        return f'"operationName" must be a string, not a JSON {_json_type(operation)}'
    return QueryRequest(query, variables, operation)


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return "string" if isinstance(value, str) else "null"
