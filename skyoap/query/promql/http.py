"""Prometheus's query API over HTTP, on the PromQL port: each request's
parameters from its query string and a form-encoded body, answered by
``PromQLApi`` on the query endpoint's threads (``serving.py``), and every
refusal in Prometheus's envelope ``{"status": "error", "errorType",
"error"}``: a method other than GET and POST (405), credentials missing or
wrong (401, from the listener), a body past the bound (413) or not whole in
time (408), every thread busy (503), a query past its deadline (503)."""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import time

from aiohttp import hdrs, web

from skyoap.edge.http import STOPPING, Dropped, Guard, Site
from skyoap.query.promql.api import PREFIX, PromQLApi, Reply, failure
from skyoap.query.serving import Outcome, Refused, Serving
from skyoap.runtime.admission import Busy

log = logging.getLogger(__name__)

_ERROR_TYPES = {401: "unauthorized", 404: "not_found", 500: "internal", 503: "unavailable"}


def envelope(status: int, error: str) -> bytes:
    """Prometheus's envelope of a refusal with ``status``."""
    return failure(status, _ERROR_TYPES.get(status, "bad_data"), error).body


def promql_site(sock: socket.socket, api: PromQLApi, serving: Serving, max_body_bytes: int) -> Site:
    """The PromQL port: ``api``'s endpoints under ``/api/v1/``."""
    handler = functools.partial(_answer, api, serving, max_body_bytes)
    refusals = {
        Dropped.CONNECTIONS: "the node holds as many query connections as it may; try again shortly",
        Dropped.PEER_CONNECTIONS: "the node holds as many query connections from one address as it may",
    }

    def mount(app: web.Application, guard: Guard) -> None:
        guard(app.router.add_route("*", PREFIX + "{path:.*}", handler))
        app.router.add_route("*", "/{path:.*}", _elsewhere)

    return Site(sock, mount, envelope, max_body_bytes, refusals=refusals)


def _error(status: int, error_type: str, error: str) -> web.Response:
    return web.Response(
        status=status, body=failure(status, error_type, error).body, content_type="application/json"
    )


def _refuse(serving: Serving, reason: Refused, status: int, error_type: str, error: str) -> web.Response:
    serving.refused(reason.value)
    return _error(status, error_type, error)


async def _answer(
    api: PromQLApi, serving: Serving, max_body_bytes: int, request: web.Request
) -> web.Response:
    """One request of Prometheus's query API."""
    arrived = time.monotonic()
    if request.method not in (hdrs.METH_GET, hdrs.METH_POST):
        error = f"{request.path} answers GET and POST, not {request.method}"
        return _refuse(serving, Refused.METHOD, 405, "bad_data", error)
    params: dict[str, list[str]] = {}
    try:
        async with asyncio.timeout(serving.deadline_s):
            form = await request.post() if request.method == hdrs.METH_POST else {}
    except TimeoutError:
        return _refuse(
            serving, Refused.TIMEOUT, 408, "bad_data", "the request's body did not come whole in time"
        )
    except web.HTTPRequestEntityTooLarge:
        error = f"the body is larger than {max_body_bytes} bytes"
        return _refuse(serving, Refused.TOO_LARGE, 413, "bad_data", error)
    for source in (request.query, form):
        for key, value in source.items():
            params.setdefault(key, []).append(str(value))
    try:
        reply = await serving.run(functools.partial(api.answer, request.path, params))
    except Busy as e:
        return _refuse(serving, Refused.BUSY, 503, "unavailable", str(e))
    except RuntimeError:
        return _refuse(serving, Refused.CLOSING, 503, "unavailable", STOPPING)
    except Exception as e:  # the node's failure, not the query's
        log.exception("a PromQL query failed to run")
        serving.served(Outcome.FAILED, arrived)
        return _error(500, "internal", f"the node failed to run the query: {e!r}")
    if reply is None:
        serving.served(Outcome.DEADLINE, arrived)
        error = f"the query did not finish within {serving.deadline_s:g} s (--query-deadline-s)"
        return _error(503, "timeout", error)
    serving.served(_outcome(reply), arrived)
    return web.Response(status=reply.status, body=reply.body, content_type="application/json")


def _outcome(reply: Reply) -> Outcome:
    if reply.status < 400:
        return Outcome.ANSWERED
    return Outcome.INVALID if reply.status < 500 else Outcome.FAILED


async def _elsewhere(request: web.Request) -> web.Response:
    error = f"{request.path} is not served here: this port answers Prometheus's query API at {PREFIX}"
    return _error(404, "not_found", error)
