"""PromQL's port served through the query endpoint's admission: each query
counted as GraphQL's are, waited for by the close's grace, and every refusal
in Prometheus's envelope, 401 included."""

from __future__ import annotations

import base64
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from skyoap.edge.auth import HttpAuth
from skyoap.query.binder import Binder
from skyoap.query.context import QueryContext
from skyoap.query.execution import Execution
from skyoap.query.promql.api import Params, PromQLApi, Reply, failure, success
from skyoap.query.schema import load_schema
from skyoap.query.server import QueryServer
from skyoap.runtime.admission import Admission
from skyoap.runtime.instruments import Instruments


class Api(PromQLApi):
    """Answers ``/api/v1/query?query=up`` once ``open`` is set; any other query is bad data."""

    def __init__(self) -> None:
        super().__init__(QueryContext(None, None, None, None))  # type: ignore[arg-type]
        self.open = threading.Event()
        self.inside = threading.Event()

    def answer(self, path: str, params: Params) -> Reply:
        if params.get("query") != ["up"]:
            return failure(400, "bad_data", "parse error: only up is known here")
        self.inside.set()
        self.open.wait(60)
        return success({"resultType": "vector", "result": []})


class Port:
    def __init__(self, auth: HttpAuth | None = None) -> None:
        self.api = Api()
        self.instruments = Instruments()
        execution = Execution(Binder(load_schema()), None, deadline_s=30.0, max_depth=15)
        self.server = QueryServer(
            "127.0.0.1", 0, Admission(2, 0, 30.0), execution, self.instruments, 10_000, auth=auth,
            promql=(0, self.api),
        )  # fmt: skip
        self.server.start()

    def get(self, query: str, authorization: str | None = None) -> tuple[int, Any, dict[str, str]]:
        url = f"http://127.0.0.1:{self.server.promql_port}/api/v1/query?query={query}"
        request = urllib.request.Request(
            url, headers={"Authorization": authorization} if authorization else {}
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return answer.status, json.load(answer), dict(answer.headers)
        except urllib.error.HTTPError as refused:
            return refused.code, json.load(refused), dict(refused.headers)

    def served(self, outcome: str) -> float:
        return self.instruments.value("skyoap_query_served_total", outcome=outcome)


@pytest.fixture
def port() -> Iterator[Port]:
    opened = Port()
    yield opened
    opened.api.open.set()
    opened.server.close(5)


def test_promql_queries_are_counted_as_every_query_is(port: Port) -> None:
    port.api.open.set()
    assert port.get("up")[:2] == (200, {"status": "success", "data": {"resultType": "vector", "result": []}})
    assert port.get("down")[:2] == (
        400,
        {"status": "error", "errorType": "bad_data", "error": "parse error: only up is known here"},
    )
    assert (port.served("answered"), port.served("invalid")) == (1, 1)


def test_closing_waits_for_a_promql_query_under_way(port: Port) -> None:
    answers: list[Any] = []
    client = threading.Thread(target=lambda: answers.append(port.get("up")[:2]), name="test-client")
    client.start()
    assert port.api.inside.wait(60)
    closing = threading.Thread(target=port.server.close, args=(60,), name="test-close")
    closing.start()
    closing.join(0.5)
    assert closing.is_alive()  # the grace waits for the query
    port.api.open.set()
    client.join(60)
    closing.join(60)
    assert answers == [(200, {"status": "success", "data": {"resultType": "vector", "result": []}})]
    assert port.served("answered") == 1


def test_credentials_missing_are_refused_in_prometheus_s_envelope() -> None:
    port = Port(HttpAuth("grafana", "secret"))
    try:
        port.api.open.set()
        status, body, headers = port.get("up")
        assert (status, headers["WWW-Authenticate"]) == (401, 'Basic realm="skyoap"')
        assert body == {
            "status": "error",
            "errorType": "unauthorized",
            "error": "this node's query endpoint requires credentials: send HTTP basic auth "
            "(SkyWalking's CLI: --username and --password)",
        }
        good = "Basic " + base64.b64encode(b"grafana:secret").decode()
        assert port.get("up", good)[0] == 200
        assert port.instruments.value("skyoap_query_refused_total", reason="auth") == 1
    finally:
        port.server.close(5)
