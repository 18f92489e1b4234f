"""The query endpoint: SkyWalking's query protocol as its OAP serves it,
``POST /graphql`` with a JSON body ``{query, variables, operationName}``,
answered ``{data, errors}`` with status 200 even when ``errors`` is there
(SkyWalking's UI shows their messages; on another status it shows only the
status line).

It runs on the node's HTTP listener (``edge/http.py``: connection bounds,
TLS, credentials, the drain at close); queries run on the endpoint's
threads (``serving.py``). What the protocol leaves to HTTP is answered with
a status and a JSON body ``{"errors": [{"message": ...}]}`` saying what was
wrong: a method other than POST (405), credentials missing or wrong (401,
with a challenge), a body past ``max_body_bytes`` (413, read no further)
or not whole within the query deadline (408), a body that is not a JSON
object with a ``query`` string (400), every thread busy and the waiting
room full (503).

``GET /status/...`` answers the pages SkyWalking's UI reads beside GraphQL
(``status.py``), and ``GET /`` and ``/ui/...`` skyoap's web UI
(``ui/files.py``), under the same credentials.

With a PromQL port, the same listener answers Prometheus's query API there
(``promql/http.py``): over the same TLS, credentials, connection bounds,
threads and deadline, in Prometheus's envelope.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Awaitable, Callable, Mapping

from aiohttp import hdrs, web
from aiohttp.typedefs import LooseHeaders

from skyoap.edge.auth import HttpAuth
from skyoap.edge.http import STOPPING, ConnectionLimits, Dropped, Guard, HttpServer, Site, Unwelcome, listen
from skyoap.edge.tls import HttpsTls
from skyoap.query.execution import Execution, QueryRequest
from skyoap.query.promql.api import PromQLApi
from skyoap.query.promql.http import promql_site
from skyoap.query.serving import Refused, Serving
from skyoap.query.status import Page, StatusPage
from skyoap.query.ui.files import UI_HEADERS, ui_files
from skyoap.runtime.admission import Admission, Busy
from skyoap.runtime.instruments import Instruments

PATH = "/graphql"
DEFAULT_LIMITS = ConnectionLimits(max_total=256, max_per_peer=64, header_timeout_s=10.0)


def errors(_: int, message: str) -> bytes:
    """The GraphQL envelope of a refusal."""
    return json.dumps({"errors": [{"message": message}]}, ensure_ascii=False, separators=(",", ":")).encode()


def _ui_file(file: Page) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The handler of one of the web UI's files (``ui/files.py``)."""

    async def answer(_: web.Request) -> web.Response:
        return web.Response(
            body=file.body, content_type=file.content_type, charset="utf-8", headers=UI_HEADERS
        )

    return answer


def _refusals(limits: ConnectionLimits) -> dict[Dropped, str]:
    return {
        Dropped.CONNECTIONS: f"the node holds {limits.max_total} query connections at once "
        "(--query-max-connections) and all are taken; try again shortly",
        Dropped.PEER_CONNECTIONS: f"the node holds at most {limits.max_per_peer} query connections "
        "from one address (--query-max-connections-per-peer); close some, or reuse them",
    }


class QueryServer:
    """Bound on construction (``port`` 0 picks a free one, read back from
    ``port``); ``start`` serves, ``close`` stops taking connections, lets
    the queries under way finish within its grace and cancels what is left.
    Owns its ``admission``: starts it and closes it."""

    def __init__(
        self,
        host: str,
        port: int,
        admission: Admission,
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
        sock = listen(host, port, "queries")
        address = sock.getsockname()
        self.host, self.port = str(address[0]), int(address[1])
        self.scheme = "https" if tls is not None else "http"
        self._execution = execution
        self._serving = Serving(admission, instruments)
        self._max_body_bytes = max_body_bytes
        self._status = dict(status or {})
        refusals = _refusals(limits)
        sites = [Site(sock, self._mount, errors, max_body_bytes, refusals=refusals)]
        self.promql_port: int | None = None
        if promql is not None:
            site = promql_site(
                listen(host, promql[0], "PromQL queries"), promql[1], self._serving, max_body_bytes
            )
            sites.append(site)
            self.promql_port = int(site.sock.getsockname()[1])
        self._http = HttpServer(
            "query",
            sites,
            limits,
            self._dropped,
            self._refused,
            tls.context if tls else None,
            auth,
            idle_timeout_s,
        )
        instruments.gauge("skyoap_query_connections", "connections open to the query port").set_function(
            lambda: self._http.open
        )
        instruments.gauge(
            "skyoap_query_connections_limit", "most connections the query port holds at once"
        ).set(limits.max_total)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{PATH}"

    def start(self) -> None:
        """Serves from now on; on failure, releases the ports and the threads."""
        self._serving.admission.start()
        try:
            self._http.start()
        except BaseException:
            self._serving.admission.close(0)
            raise

    def close(self, timeout_s: float = 5.0) -> None:
        """Stops taking connections, lets the queries under way answer within
        ``timeout_s``, cancels what is left, then closes the admission; idempotent."""
        self._http.close(timeout_s)
        self._serving.admission.close(timeout_s)

    def _dropped(self, reason: Dropped) -> None:
        self._serving.refused(reason.value)

    def _refused(self, reason: Unwelcome) -> None:
        self._serving.refused(reason.value)

    def _mount(self, app: web.Application, guard: Guard) -> None:
        guard(app.router.add_post(PATH, self._graphql))
        app.router.add_route("*", PATH, self._not_post)
        for path, page in self._status.items():
            guard(app.router.add_get(path, functools.partial(self._status_page, page), allow_head=False))
        files = ui_files()
        for name, file in files.items():
            guard(app.router.add_get(f"/ui/{name}", _ui_file(file), allow_head=False))
        guard(app.router.add_get("/", _ui_file(files["index.html"]), allow_head=False))
        app.router.add_route("*", "/{path:.*}", self._elsewhere)

    async def _elsewhere(self, request: web.Request) -> web.Response:
        message = (
            f"{request.path} is not served here: this port answers SkyWalking's query protocol at POST {PATH}"
        )
        return web.Response(status=404, body=errors(404, message), content_type="application/json")

    async def _not_post(self, request: web.Request) -> web.Response:
        message = (
            f"{PATH} answers POST only, with a JSON body {{query, variables, operationName}} "
            f"(SkyWalking's query protocol), not {request.method}"
        )
        return self._refuse(Refused.METHOD, 405, message, {hdrs.ALLOW: hdrs.METH_POST})

    async def _status_page(self, page: StatusPage, request: web.Request) -> web.Response:
        as_json = "application/json" in request.headers.get(hdrs.ACCEPT, "")
        loop = asyncio.get_running_loop()
        deadline_s = self._serving.deadline_s
        try:
            async with asyncio.timeout(deadline_s):
                answer = await loop.run_in_executor(None, page, as_json)
        except TimeoutError:
            message = f"{request.path} was not answered within {deadline_s:g} s"
            return self._refuse(Refused.TIMEOUT, 503, message)
        return web.Response(body=answer.body, content_type=answer.content_type)

    async def _graphql(self, request: web.Request) -> web.Response:
        arrived = time.monotonic()
        asked = await self._read(request)
        if isinstance(asked, web.Response):
            return asked
        try:
            answer = await self._serving.run(functools.partial(self._execution.answer, asked))
        except Busy as e:
            return self._refuse(Refused.BUSY, 503, str(e), {hdrs.RETRY_AFTER: "1"})
        except RuntimeError:
            return self._refuse(Refused.CLOSING, 503, STOPPING)
        answered = answer or self._execution.late
        self._serving.served(answered.outcome, arrived)
        return web.Response(body=answered.body, content_type="application/json")

    async def _read(self, request: web.Request) -> web.Response | QueryRequest:
        """The query a request asks for, or the answer to one that runs none."""
        deadline_s = self._serving.deadline_s
        try:
            async with asyncio.timeout(deadline_s):
                body = await request.read()
        except TimeoutError:
            message = f"the request's body did not come whole within {deadline_s:g} s"
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

    def _refuse(
        self, reason: Refused, status: int, message: str, headers: LooseHeaders | None = None
    ) -> web.Response:
        self._serving.refused(reason.value)
        return web.Response(
            status=status, body=errors(status, message), content_type="application/json", headers=headers
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
