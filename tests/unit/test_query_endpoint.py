"""The query endpoint's options, credentials and request bodies, and its
HTTP server in-process on a loopback port: refusing past its bounds, and
closing with queries under way."""

from __future__ import annotations

import base64
import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from skyoap.edge.auth import HttpAuth
from skyoap.query.binder import Binder
from skyoap.query.execution import Execution, QueryRequest
from skyoap.query.schema import load_schema
from skyoap.query.server import BODY, QueryServer, parse_request
from skyoap.runtime.admission import Admission
from skyoap.runtime.instruments import Instruments
from skyoap.wiring.config import NodeConfig
from tests.integration.helpers import eventually
from tests.unit.test_query_execution import Gate


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"query_port": -2}, "--query-port must be -1 (off), 0 (a free port) or a port, not -2"),
        ({"query_threads": 0}, "--query-threads must be at least 1, not 0"),
        ({"query_max_waiting": -1}, "--query-max-waiting must be 0 or more, not -1"),
        ({"query_deadline_s": 0.0}, "--query-deadline-s must be above 0, not 0"),
        ({"query_max_body_bytes": 0}, "--query-max-body-bytes must be at least 1, not 0"),
        ({"query_max_depth": 0}, "--query-max-depth must be at least 1, not 0"),
        ({"query_tls_cert": "c.pem"},
         "--query-tls-cert and --query-tls-key go together: give both or neither"),
        ({"query_username": "ui"}, "--query-username and --query-password go together: give both or neither"),
        ({"query_username": "u:i", "query_password": "p"},
         "--query-username may not hold ':': basic auth ends the user name at the first one"),
        ({"query_token": "a b"},
         "--query-token must be printable ASCII without spaces: it travels in an HTTP header"),
        ({"query_token": "same", "auth_token": "same"},
         "--query-token must differ from --auth-token and --cluster-secret: whoever holds what agents or "
         "nodes send must not be able to read every query answer"),
    ],
)  # fmt: skip
def test_query_options_that_cannot_work_are_refused_naming_the_option(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError) as refused:
        NodeConfig().with_options(**options).check()
    assert str(refused.value) == message


def test_the_query_endpoint_is_on_by_default_on_skywalkings_port_and_off_with_minus_one() -> None:
    assert (NodeConfig().query.port, NodeConfig().query.enabled) == (12800, True)
    assert NodeConfig().with_options(query_port=-1).query.enabled is False


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


NOT_ASCII = "the Authorization header holds bytes other than printable ASCII: no credentials do"
WRONG_USER = "the user or password is not the one this node requires (--query-username, --query-password)"


@pytest.mark.parametrize(
    ("header", "refusal"),
    [
        (None, "this node's query endpoint requires credentials: send HTTP basic auth (SkyWalking's CLI: "
         "--username and --password)"),
        (basic("ui", "secret"), None),
        ("basic " + basic("ui", "secret").split()[1], None),
        (basic("ui", "secret "), WRONG_USER),
        (basic("UI", "secret"), WRONG_USER),
        ("Basic dWk=", "the basic auth credentials are not base64 of 'user:password'"),
        ("Basic ***", "the basic auth credentials are not base64 of 'user:password'"),
        ("Bearer secret", "this node takes Basic authorization on its query endpoint, not Bearer"),
        ("Basic dWk6c2VjcmV0\udcff", NOT_ASCII),
    ],
)  # fmt: skip
def test_basic_auth_takes_its_user_and_password_only(header: str | None, refusal: str | None) -> None:
    auth = HttpAuth("ui", "secret")
    assert auth.refusal(header) == refusal
    assert auth.challenges == ['Basic realm="skyoap"']


def test_a_bearer_token_alone_is_asked_for_alone() -> None:
    auth = HttpAuth(token="t0ken")
    assert auth.refusal("Bearer t0ken") is None
    assert (
        auth.refusal("Bearer t0ken2") == "the bearer token is not the one this node requires (--query-token)"
    )
    assert auth.refusal(basic("t0ken", "t0ken")) == (
        "this node takes Bearer authorization on its query endpoint, not Basic"
    )
    assert auth.refusal("") == (
        "this node's query endpoint requires credentials: send the header 'Authorization: Bearer TOKEN'"
    )
    assert auth.refusal("Bearer \udcff\udcfe") == auth.refusal("Bearer t0ken\x00") == NOT_ASCII
    assert auth.challenges == ['Bearer realm="skyoap"']


@pytest.mark.parametrize(
    ("body", "asked"),
    [
        (b'{"query": "{ version }"}', QueryRequest("{ version }")),
        (b'{"query": "q", "variables": null, "operationName": null}', QueryRequest("q")),
        (b'{"query": "q", "variables": {"a": 1}, "operationName": "o"}', QueryRequest("q", {"a": 1}, "o")),
        (b"", f"the body is not JSON (Expecting value: line 1 column 1 (char 0)): send {BODY}"),
        (b"\xff", f"the body is not JSON ('utf-8' codec can't decode byte 0xff in position 0: invalid start "
         f"byte): send {BODY}"),
        (b"null", f"the body is a JSON null, not an object: send {BODY}"),
        (b'"{ version }"', f"the body is a JSON string, not an object: send {BODY}"),
        (b"{}", f'the body has no "query": send {BODY}'),
        (b'{"query": 1}', '"query" must be a string holding the GraphQL query, not a JSON number'),
        (b'{"query": "q", "variables": "{}"}',
         "\"variables\" must be a JSON object of the query's variables, not a JSON string"),
        (b'{"query": "q", "operationName": true}', '"operationName" must be a string, not a JSON boolean'),
        (b"[" * 100_000, "the body is not JSON (maximum recursion depth exceeded while decoding a JSON "
         f"array from a unicode string): send {BODY}"),
    ],
)  # fmt: skip
def test_a_body_is_a_json_object_with_a_query_string(body: bytes, asked: QueryRequest | str) -> None:
    assert parse_request(body) == asked


class Endpoint:
    def __init__(self, binder: Binder, **options: Any) -> None:
        threads, max_waiting = options.pop("threads", 1), options.pop("max_waiting", 0)
        settings = {"deadline_s": 30.0, "max_depth": 15, **options}
        self.execution = Execution(binder, None, **settings)
        self.instruments = Instruments()
        admission = Admission(threads, max_waiting, settings["deadline_s"])
        self.server = QueryServer("127.0.0.1", 0, admission, self.execution, self.instruments, 10_000)
        self.server.start()

    def post(self, query: str) -> tuple[int, Any, Any]:
        request = urllib.request.Request(self.server.url, data=json.dumps({"query": query}).encode())
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return answer.status, json.load(answer), answer.headers
        except urllib.error.HTTPError as refused:
            return refused.code, json.load(refused), refused.headers


@pytest.fixture
def gate() -> Iterator[Gate]:
    gate = Gate()
    yield gate
    gate.open.set()


def in_background(endpoint: Endpoint, query: str) -> tuple[threading.Thread, list[Any]]:
    answers: list[Any] = []
    thread = threading.Thread(target=lambda: answers.append(endpoint.post(query)), name="test-client")
    thread.start()
    return thread, answers


def test_a_query_past_the_bound_is_answered_503_and_the_next_one_runs(gate: Gate) -> None:
    binder = Binder(load_schema()).query("version", gate)
    endpoint = Endpoint(binder.query("checkHealth", lambda context: {"score": 0}))
    try:
        client, answers = in_background(endpoint, "{ version }")
        assert gate.inside.acquire(timeout=60)
        status, body, headers = endpoint.post("{ checkHealth { score } }")
        assert (status, headers["Retry-After"]) == (503, "1")
        assert body == {
            "errors": [
                {
                    "message": "the node runs 1 queries at once and 0 more may wait, and all of them are "
                    "taken (--query-threads, --query-max-waiting); try again shortly"
                }
            ]
        }
        gate.open.set()
        client.join(60)
        assert answers[0][:2] == (200, {"data": {"version": "through"}})
        assert endpoint.post("{ checkHealth { score } }")[:2] == (
            200,
            {"data": {"checkHealth": {"score": 0}}},
        )
        assert endpoint.instruments.value("skyoap_query_refused_total", reason="busy") == 1
        assert endpoint.instruments.value("skyoap_query_served_total", outcome="answered") == 2
    finally:
        endpoint.server.close(5)


def test_a_query_past_its_deadline_is_answered_at_it_and_the_node_answers_on() -> None:
    slow = Gate(until_deadline=True)
    binder = Binder(load_schema()).query("version", slow).query("checkHealth", lambda context: {"score": 0})
    endpoint = Endpoint(binder, threads=2, deadline_s=0.5)
    try:
        status, body, _ = endpoint.post("{ version }")
        assert status == 200
        assert body["data"] is None
        assert body["errors"][0]["message"].startswith(
            "the query did not finish within its deadline of 0.5 s"
        )
        assert endpoint.post("{ checkHealth { score } }")[:2] == (
            200,
            {"data": {"checkHealth": {"score": 0}}},
        )
        assert endpoint.instruments.value("skyoap_query_served_total", outcome="deadline") == 1
    finally:
        endpoint.server.close(5)


def refuses_connections(server: QueryServer) -> bool:
    try:
        socket.create_connection((server.host, server.port), timeout=5).close()
    except (ConnectionRefusedError, ConnectionResetError):  # reset: queued as the socket closed
        return True
    return False


def test_a_body_of_the_bound_is_read_and_one_byte_more_is_refused() -> None:
    endpoint = Endpoint(Binder(load_schema()).query("version", lambda context: None))
    try:
        padding = 10_000 - len(json.dumps({"query": "{ version }"}))
        assert endpoint.post("{ version }" + " " * padding)[:2] == (200, {"data": {"version": None}})
        status, body, _ = endpoint.post("{ version }" + " " * (padding + 1))
        assert (status, body) == (
            413,
            {
                "errors": [
                    {
                        "message": "the request's body is larger than the 10000 bytes this node reads "
                        "(--query-max-body-bytes); send a smaller query"
                    }
                ]
            },
        )
    finally:
        endpoint.server.close(5)


def test_closing_takes_no_new_connection_and_lets_a_query_under_way_answer(gate: Gate) -> None:
    endpoint = Endpoint(Binder(load_schema()).query("version", gate))
    client, answers = in_background(endpoint, "{ version }")
    assert gate.inside.acquire(timeout=60)
    closing = threading.Thread(target=endpoint.server.close, args=(60,), name="test-close")
    closing.start()
    eventually(lambda: refuses_connections(endpoint.server))
    gate.open.set()
    client.join(60)
    closing.join(60)
    assert answers == [(200, {"data": {"version": "through"}}, answers[0][2])]
    assert not closing.is_alive()
    endpoint.server.close(5)  # idempotent


def test_closing_cancels_a_query_that_outlasts_the_grace(gate: Gate) -> None:
    endpoint = Endpoint(Binder(load_schema()).query("version", gate))
    client, answers = in_background_raw(endpoint)
    assert gate.inside.acquire(timeout=60)
    endpoint.server.close(0.1)
    client.join(60)
    assert answers == ["dropped"]


def in_background_raw(endpoint: Endpoint) -> tuple[threading.Thread, list[str]]:
    answers: list[str] = []

    def ask() -> None:
        try:
            endpoint.post("{ version }")
            answers.append("answered")
        except OSError:  # the connection closed unanswered
            answers.append("dropped")

    thread = threading.Thread(target=ask, name="test-client")
    thread.start()
    return thread, answers
