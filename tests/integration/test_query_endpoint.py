"""The query endpoint of a real `skyoap node` process, asked over HTTP as
SkyWalking's UI and CLI ask: what they send at start-up answered exactly,
every kind of bad request answered with its status and what was wrong (and
the node answering on after each), credentials, and HTTPS with a
certificate replaced while the node runs."""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import Any

import graphql
import pytest

from skyoap.runtime import clock
from skyoap.runtime.scrape import read_metrics
from tests.certs import TestCa
from tests.integration.helpers import cpu_s, eventually, rss_mb
from tests.unit.test_query_schema import QUERY_FIELDS

ROOT = Path(__file__).resolve().parents[2]
VERSION = "10.4.0-skyoap-" + tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
BODY = '{"query": "...", "variables": {...}, "operationName": "..."}'


@dataclass
class NodeProcess:
    proc: subprocess.Popen[str]
    query_url: str
    admin: str


@dataclass
class Reply:
    status: int
    body: Any
    headers: Message


def start_node(tmp_path: Path, *args: str, env: Mapping[str, str] | None = None) -> NodeProcess:
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "skyoap.deploy.cli", "node", "--host", "127.0.0.1", "--port", "0",
            "--admin-port", "0", "--query-host", "127.0.0.1", "--query-port", "0",
            "--embedded-path", str(tmp_path / "s.db"), *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.fullmatch(r"skyoap node listening on \S+ admin (\S+) internal - query (\S+)\n", line)
    if not match:
        proc.kill()
        raise AssertionError(
            f"unexpected first line {line!r}; stderr: {proc.stderr.read() if proc.stderr else ''}"
        )
    return NodeProcess(proc, match.group(2), match.group(1))


def stop(node: NodeProcess) -> None:
    node.proc.send_signal(signal.SIGTERM)
    assert node.proc.wait(60) == 0


@pytest.fixture
def node(tmp_path: Path) -> Iterator[NodeProcess]:
    started = start_node(tmp_path, "--query-max-body-bytes", "2000", "--query-max-depth", "6")
    yield started
    stop(started)


def post(
    url: str,
    body: bytes | None,
    method: str = "POST",
    headers: Mapping[str, str] | None = None,
    context: ssl.SSLContext | None = None,
) -> Reply:
    request = urllib.request.Request(
        url, data=body, method=method, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=60, context=context) as answer:
            return Reply(answer.status, json.load(answer), answer.headers)
    except urllib.error.HTTPError as refused:
        return Reply(refused.code, json.load(refused), refused.headers)


def ask(url: str, query: str, variables: dict[str, Any] | None = None, **options: Any) -> Reply:
    return post(url, json.dumps({"query": query, "variables": variables}).encode(), **options)


def answered(url: str, **options: Any) -> bool:
    """Whether the node answers a good query (as it must after any bad one)."""
    reply = ask(url, "query version { version }", **options)
    return reply.status == 200 and reply.body == {"data": {"version": VERSION}}


UI_MENU = """query menuItems { getMenuItems { title icon layer activate description documentLink i18nKey
    subItems { title icon layer activate description documentLink i18nKey } } }"""


def test_what_skywalkings_ui_and_cli_ask_at_start_up_is_answered_exactly(node: NodeProcess) -> None:
    url = node.query_url
    # SkyWalking's UI: main.ts, then its navigation bar.
    # The menu's layer is not active until a service reports.
    services_item = {
        "title": "Services", "icon": None, "layer": "GENERAL", "activate": False,
        "description": "Services that report through SkyWalking's or OpenTelemetry's agents.",
        "documentLink": None, "i18nKey": "general_service_services",
    }  # fmt: skip
    databases_item = {
        **services_item, "title": "Virtual Database", "layer": "VIRTUAL_DATABASE",
        "description": "Databases services call, known from their spans.",
        "i18nKey": "general_service_virtual_database",
    }  # fmt: skip
    caches_item = {
        **services_item, "title": "Virtual Cache", "layer": "VIRTUAL_CACHE",
        "description": "Caches services call, known from their spans.",
        "i18nKey": "general_service_virtual_cache",
    }  # fmt: skip
    queues_item = {
        **services_item, "title": "Virtual MQ", "layer": "VIRTUAL_MQ",
        "description": "Message brokers services use, known from their spans.",
        "i18nKey": "general_service_virtual_mq",
    }  # fmt: skip
    items = [services_item, databases_item, caches_item, queues_item]

    def group(title: str, key: str, leaves: list[dict[str, Any]]) -> dict[str, Any]:
        return {"title": title, "icon": key, "layer": "", "activate": False, "description": None,
                "documentLink": None, "i18nKey": key, "subItems": leaves}  # fmt: skip

    def leaf(title: str, layer: str, key: str, description: str) -> dict[str, Any]:
        return {**services_item, "title": title, "layer": layer, "i18nKey": key, "description": description}

    linux = leaf("Linux", "OS_LINUX", "infrastructure_linux", "Hosts, from what their node exporter serves.")
    databases = [
        leaf(title, layer, f"database_{layer.lower()}", f"{what}, from what their exporter serves.")
        for title, layer, what in (
            ("MySQL", "MYSQL", "MySQL and MariaDB servers"),
            ("PostgreSQL", "POSTGRESQL", "PostgreSQL servers"),
            ("Redis", "REDIS", "Redis servers"),
        )
    ]  # fmt: skip
    menu = [
        group("General Service", "general_service", items),
        group("Infrastructure", "infrastructure", [linux]),
        group("Database", "database", databases),
    ]
    assert ask(url, UI_MENU).body == {"data": {"getMenuItems": menu}}
    before = clock.now_ms()
    time = ask(url, "query queryOAPTimeInfo { getTimeInfo { timezone currentTimestamp } }").body
    assert time["data"]["getTimeInfo"]["timezone"] == "+0000"
    assert before <= time["data"]["getTimeInfo"]["currentTimestamp"] <= clock.now_ms()
    assert ask(url, "query version { version }").body == {"data": {"version": VERSION}}
    assert ask(url, "query MetricsTTL { getMetricsTTL { minute hour day } }").body == {
        "data": {"getMetricsTTL": {"minute": 1, "hour": 7, "day": 90}}
    }
    assert ask(url, "query queryHasQueryTracesV2Support { hasQueryTracesV2Support }").body == {
        "data": {"hasQueryTracesV2Support": False}
    }
    templates = ask(url, "query templates { getAllTemplates { id, configuration, } }").body
    assert [t["id"] for t in templates["data"]["getAllTemplates"]] == [
        "General-Root", "General-Service", "General-Instance", "General-Endpoint",
        "General-Service-Relation", "General-Instance-Relation", "General-Endpoint-Relation",
        "Virtual-Database-Root", "Virtual-Database-Service", "Virtual-Cache-Root", "Virtual-Cache-Service",
        "Virtual-MQ-Root", "Virtual-MQ-Service", "Virtual-MQ-Endpoint", "Linux-Root", "Linux-Service",
        "MySQL-Root", "MySQL-Service", "MySQL-Instance", "PostgreSQL-Root", "PostgreSQL-Service",
        "PostgreSQL-Instance", "Redis-Root", "Redis-Service", "Redis-Instance",
    ]  # fmt: skip
    assert ask(url, "query listLayer { layers: listLayers }").body == {"data": {"layers": []}}
    # SkyWalking's CLI, before every command, and to pick the queries it sends.
    cli_time = ask(url, "query { result: getTimeInfo { timezone, currentTimestamp } }").body
    assert cli_time["data"]["result"]["timezone"] == "+0000"
    assert ask(url, "query { result: version }").body == {"data": {"result": VERSION}}
    assert ask(url, "query { checkHealth { score details } }").body == {
        "data": {"checkHealth": {"score": 0, "details": ""}}
    }
    services = ask(
        url, "query ($layer: String) { listServices(layer: $layer) { id name } }", {"layer": "GENERAL"}
    )
    assert (services.status, services.body) == (200, {"data": {"listServices": []}})


def test_introspection_lists_the_root_fields(node: NodeProcess) -> None:
    every = '{ __type(name: "Query") { name kind fields(includeDeprecated: true) { name } } }'
    query = ask(node.query_url, every).body["data"]["__type"]
    assert (query["name"], query["kind"]) == ("Query", "OBJECT")
    assert {f["name"] for f in query["fields"]} == QUERY_FIELDS
    # As in SkyWalking 11, whose clients look for queryAlarms this way.
    current = ask(node.query_url, '{ __type(name: "Query") { fields { name } } }').body["data"]["__type"]
    assert {f["name"] for f in current["fields"]} == QUERY_FIELDS - {"getAlarm"}
    roots = ask(node.query_url, "{ __schema { queryType { name } mutationType { name } } }").body
    assert roots == {
        "data": {"__schema": {"queryType": {"name": "Query"}, "mutationType": {"name": "Mutation"}}}
    }


def graphql_error(message: str, line: int, column: int) -> dict[str, Any]:
    return {"data": None, "errors": [{"message": message, "locations": [{"line": line, "column": column}]}]}


def test_each_bad_request_is_answered_with_what_was_wrong_and_the_node_answers_on(node: NodeProcess) -> None:
    url = node.query_url
    too_deep = "{ getMenuItems { subItems { subItems { subItems { subItems { subItems { title } } } } } } }"
    answers_200 = [
        ("{ version", graphql_error("Syntax Error: Expected Name, found <EOF>.", 1, 10)),
        ("{ nope }", graphql_error("Cannot query field 'nope' on type 'Query'.", 1, 3)),
        (
            too_deep,
            graphql_error(
                "the query nests its fields more than 6 levels deep, more than this node answers "
                "(--query-max-depth 6); ask for fewer levels at once",
                1,
                1,
            ),
        ),
    ]
    for query, expected in answers_200:
        reply = ask(url, query)
        assert (reply.status, reply.body) == (200, expected)
        assert answered(url)
    typed = ask(url, "query ($layer: String) { listServices(layer: $layer) { id } }", {"layer": 1})
    assert (typed.status, typed.body) == (
        200,
        graphql_error(
            "Variable '$layer' has invalid value: String cannot represent a non string value: 1", 1, 8
        ),
    )
    assert answered(url)

    refused = [
        (post(url, b"{ version }"), 400, f"the body is not JSON (Expecting property name enclosed in double "
         f"quotes: line 1 column 3 (char 2)): send {BODY}"),
        (post(url, b'{"variables": {}}'), 400, f'the body has no "query": send {BODY}'),
        (post(url, b'[{"query": "{ version }"}]'), 400,
         f"the body is a JSON array, not an object: send {BODY}"),
        (post(url, b'{"query": "{ version }", "variables": [1]}'), 400,
         "\"variables\" must be a JSON object of the query's variables, not a JSON array"),
        (post(url, json.dumps({"query": "{ version }" + " " * 2000}).encode()), 413,
         "the request's body is larger than the 2000 bytes this node reads (--query-max-body-bytes); "
         "send a smaller query"),
        (post(url, None, method="GET"), 405,
         "/graphql answers POST only, with a JSON body {query, variables, operationName} "
         "(SkyWalking's query protocol), not GET"),
        (post(url.removesuffix("graphql") + "query", b"{}"), 404,
         "/query is not served here: this port answers SkyWalking's query protocol at POST /graphql"),
    ]  # fmt: skip
    for reply, status, message in refused:
        assert (reply.status, reply.body) == (status, {"errors": [{"message": message}]})
        assert answered(url)
    assert post(url, None, method="PUT").headers["Allow"] == "POST"

    metrics = read_metrics(node.admin)
    # Every answered() above, the three refused before running and the variable, the 200s.
    assert metrics.value("skyoap_query_served_total", outcome="answered") == 11
    assert metrics.value("skyoap_query_served_total", outcome="invalid") == 4
    assert metrics.value("skyoap_query_refused_total", reason="bad_request") == 4
    assert metrics.value("skyoap_query_refused_total", reason="too_large") == 1
    assert metrics.value("skyoap_query_refused_total", reason="method") == 2
    assert metrics.value("skyoap_query_seconds_count") == 15


def test_a_query_past_its_deadline_is_answered_saying_so(tmp_path: Path) -> None:
    node = start_node(tmp_path, "--query-deadline-s", "0.001")
    try:
        # The whole introspection of the schema takes far longer than a millisecond.
        for _ in range(2):
            reply = post(node.query_url, json.dumps({"query": INTROSPECTION}).encode())
            assert (reply.status, reply.body) == (
                200,
                {
                    "data": None,
                    "errors": [
                        {
                            "message": "the query did not finish within its deadline of 0.001 s "
                            "(--query-deadline-s): ask for less at once (a shorter duration, fewer "
                            "entities or fields), or try again when the node is less busy"
                        }
                    ],
                },
            )
        assert read_metrics(node.admin).value("skyoap_query_served_total", outcome="deadline") == 2
    finally:
        stop(node)


INTROSPECTION = graphql.get_introspection_query()

CREDENTIALS = {
    "SKYOAP_QUERY_USERNAME": "ui",
    "SKYOAP_QUERY_PASSWORD": "pa55:word",
    "SKYOAP_QUERY_TOKEN": "t0ken",
}


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_with_credentials_set_only_a_request_carrying_them_is_answered(tmp_path: Path) -> None:
    node = start_node(tmp_path, env=CREDENTIALS)
    url = node.query_url
    try:
        missing = ask(url, "{ version }")
        assert (missing.status, missing.body) == (
            401,
            {
                "errors": [
                    {
                        "message": "this node's query endpoint requires credentials: send HTTP basic auth "
                        "(SkyWalking's CLI: --username and --password) or the header "
                        "'Authorization: Bearer TOKEN'"
                    }
                ]
            },
        )
        assert missing.headers.get_all("WWW-Authenticate") == [
            'Basic realm="skyoap"',
            'Bearer realm="skyoap"',
        ]
        wrong = [
            (basic("ui", "guess"), "the user or password is not the one this node requires "
             "(--query-username, --query-password)"),
            (basic("admin", "pa55:word"), "the user or password is not the one this node requires "
             "(--query-username, --query-password)"),
            ({"Authorization": "Bearer guess"},
             "the bearer token is not the one this node requires (--query-token)"),
            ({"Authorization": "Digest x"}, "this node takes Basic or Bearer authorization on its query "
             "endpoint, not Digest"),
        ]  # fmt: skip
        for headers, message in wrong:
            reply = ask(url, "{ version }", headers=headers)
            assert (reply.status, reply.body) == (401, {"errors": [{"message": message}]})
        assert raw_authorization(url, b"Bearer \xff\xfe") == (
            401,
            {
                "errors": [
                    {
                        "message": "the Authorization header holds bytes other than printable ASCII: "
                        "no credentials do"
                    }
                ]
            },
        )
        assert answered(url, headers=basic("ui", "pa55:word"))
        assert answered(url, headers={"Authorization": "Bearer t0ken"})
        metrics = read_metrics(node.admin)
        assert metrics.value("skyoap_query_refused_total", reason="auth") == 6
        assert metrics.value("skyoap_query_served_total", outcome="answered") == 2
    finally:
        stop(node)


def raw_authorization(url: str, value: bytes) -> tuple[int, Any]:
    """The answer to ``{ version }`` with an Authorization header of bytes no
    HTTP library of ours would send."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
    try:
        body = b'{"query": "{ version }"}'
        connection.putrequest("POST", parts.path)
        connection.putheader("Authorization", value)
        connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        answer = connection.getresponse()
        return answer.status, json.load(answer)
    finally:
        connection.close()


def https(ca: TestCa) -> ssl.SSLContext:
    """A client trusting ``ca`` only, as the UI's server or Grafana would be set up."""
    return ssl.create_default_context(cafile=str(ca.path))


def refused_handshake(url: str, context: ssl.SSLContext) -> bool:
    try:
        post(url, b'{"query": "{ version }"}', context=context)
    except urllib.error.URLError as e:
        return isinstance(e.reason, ssl.SSLCertVerificationError)
    return False


def test_https_serves_a_certificate_replaced_on_disk_without_a_restart(tmp_path: Path) -> None:
    first, second = TestCa(tmp_path / "ca1", "first CA"), TestCa(tmp_path / "ca2", "second CA")
    cert, key = first.issue("query.skyoap", "server")
    node = start_node(tmp_path, "--query-tls-cert", str(cert), "--query-tls-key", str(key))
    url = node.query_url
    try:
        assert url.startswith("https://127.0.0.1:")
        assert answered(url, context=https(first))
        with pytest.raises((OSError, http.client.HTTPException)):  # plaintext gets no answer
            post(url.replace("https://", "http://"), b'{"query": "{ version }"}')

        # The operator renews the certificate in place, from another CA.
        new_cert, new_key = second.issue("query.skyoap", "renewed")
        cert.write_bytes(new_cert.read_bytes())
        key.write_bytes(new_key.read_bytes())
        eventually(lambda: answered(url, context=https(second)))
        assert refused_handshake(url, https(first))

        # Caught halfway through a replacement (a new certificate, the old key),
        # the node keeps serving the last good pair.
        third = TestCa(tmp_path / "ca3", "third CA")
        cert.write_bytes(third.issue("query.skyoap", "half")[0].read_bytes())
        assert answered(url, context=https(second))
        assert refused_handshake(url, https(third))
    finally:
        stop(node)


ENTITY = '{serviceName: "shop", normal: true}'
PAGING = "paging: {pageNum: 1, pageSize: 10}"
SEARCHES = {
    "queryBasicTraces": "query ($d: Duration!) { queryBasicTraces(condition: {queryDuration: $d, "
    f"traceState: ALL, queryOrder: BY_START_TIME, {PAGING}}}) {{ traces {{ segmentId }} }} }}",
    "queryLogs": f"query ($d: Duration!) {{ queryLogs(condition: {{queryDuration: $d, {PAGING}}}) "
    "{ logs { content } } }",
    "getAlarm": f"query ($d: Duration!) {{ getAlarm(duration: $d, {PAGING}) {{ msgs {{ id }} }} }}",
    "queryTraceTagAutocompleteKeys": "query ($d: Duration!) { queryTraceTagAutocompleteKeys(duration: $d) }",
}


def field_error(reply: Reply) -> str:
    assert reply.status == 200
    (error,) = reply.body["errors"]
    return str(error["message"])


def test_what_a_client_can_cause_is_answered_with_what_was_wrong(tmp_path: Path) -> None:
    """Record searches over any window answer (the UI's half hour by the
    SECOND, ten years, the calendar's last minute and day); too many tags,
    an expression's range past its bounds or the calendar's start, and an
    expression too long are each answered with what was wrong, none with
    Python's own words; and the node answers on."""
    node = start_node(tmp_path)
    try:
        asked_wrongly(node.query_url)
    finally:
        stop(node)


def asked_wrongly(url: str) -> None:
    for name, query in SEARCHES.items():
        for window in (
            # Searches span any window: SkyWalking's UI asks the last half
            # hour by the SECOND, past the 500 steps a metric reads.
            {"start": "2016-11-27 0000", "end": "2026-11-27 0000", "step": "MINUTE"},
            {"start": "2026-11-27 000000", "end": "2026-11-27 003000", "step": "SECOND"},
            {"start": "9999-12-31 2350", "end": "9999-12-31 2359", "step": "MINUTE"},
            {"start": "9999-12-31", "end": "9999-12-31", "step": "DAY"},
        ):
            reply = ask(url, query, {"d": window})
            assert (reply.status, "errors" in reply.body) == (200, False), (name, reply.body)
    tags = ", ".join(f'{{key: "k{i}", value: "v"}}' for i in range(21))
    traced = ask(
        url,
        "query ($d: Duration!) { queryBasicTraces(condition: {queryDuration: $d, traceState: ALL, "
        f"queryOrder: BY_START_TIME, tags: [{tags}], {PAGING}}}) {{ traces {{ segmentId }} }} }}",
        {"d": {"start": "2026-11-27 0000", "end": "2026-11-27 0010", "step": "MINUTE"}},
    )
    assert field_error(traced) == "a search filters by at most 20 tags, not 21"

    def expression(text: str, start: str) -> Any:
        reply = ask(
            url,
            f"query ($e: String!, $d: Duration!) {{ execExpression(expression: $e, entity: {ENTITY}, "
            "duration: $d) { type error } }",
            {"e": text, "d": {"start": start, "end": start, "step": "MINUTE"}},
        )
        assert reply.status == 200
        return reply.body["data"]["execExpression"]

    assert expression("increase(service_cpm, 2147483647)", "2026-11-27 0000") == {
        "type": "UNKNOWN",
        "error": "a range of 2147483647 minutes reaches back further than the 500 steps one read may span",
    }
    assert expression("increase(service_cpm, 2)", "0001-01-01 0001") == {
        "type": "UNKNOWN",
        "error": "Duration start '0001-01-01 0001' less 2 minutes is before the year 1",
    }
    assert expression("service_cpm" + " " * 5000, "2026-11-27 0000") == {
        "type": "UNKNOWN",
        "error": "the expression has 5011 characters, more than the 4096 this node reads",
    }
    assert answered(url)


def test_a_query_answered_late_stops_using_the_cpu(tmp_path: Path) -> None:
    """1,000 introspections of the schema's types take some 10 s of CPU to
    answer; with a deadline of 1 s the answer says so, and from then on the
    node is idle (before the execution went on to the end, unseen)."""
    node = start_node(tmp_path, "--query-deadline-s", "1", "--query-max-answer-bytes", "1000000000")
    try:
        types = " ".join(f"a{i}: __schema {{ types {{ name fields {{ name }} }} }}" for i in range(1000))
        reply = ask(node.query_url, "{ " + types + " }")
        answered_at = cpu_s(node.proc.pid)
        assert field_error(reply).startswith("the query did not finish within its deadline of 1 s")
        eventually(lambda: answered(node.query_url), timeout_s=30)
        time.sleep(3)
        used = cpu_s(node.proc.pid) - answered_at
        print(f"CPU after the late answer: {used:.2f} s in 3 s")
        assert used < 1.0
    finally:
        stop(node)


def test_an_answer_past_its_bound_stops_being_built(tmp_path: Path) -> None:
    """2,400 aliases of every dashboard template (SkyWalking's own, some 90
    KB each) would be an answer of about 200 MB: refused at 16 MiB, saying
    so, with the node's memory as it was; 3,000 are refused before they are
    validated, 9,000 as they are read."""
    node = start_node(tmp_path)
    try:
        before = rss_mb(node.proc.pid)
        many = " ".join(f"t{i}: getAllTemplates {{ configuration }}" for i in range(2400))
        assert field_error(ask(node.query_url, "{ " + many + " }")) == (
            "the answer would be larger than the 16777216 bytes this node sends (--query-max-answer-bytes): "
            "ask for less at once (fewer fields or entities, a smaller page)"
        )
        grown = rss_mb(node.proc.pid) - before
        too_many = " ".join(f"t{i}: getAllTemplates {{ configuration }}" for i in range(3000))
        assert field_error(ask(node.query_url, "{ " + too_many + " }")) == (
            "the query asks for more than 5000 fields, more than this node answers at once "
            "(--query-max-fields 5000); split it over several requests"
        )
        longer = " ".join(f"t{i}: getAllTemplates {{ configuration }}" for i in range(9000))
        assert field_error(ask(node.query_url, "{ " + longer + " }")) == (
            "the query has more than 50000 tokens, more than this node reads (--query-max-tokens 50000); "
            "split it over several requests"
        )
        print(f"RSS {before:.0f} MB before, {before + grown:.0f} MB after the refused answer")
        assert grown < 64
        assert answered(node.query_url)
    finally:
        stop(node)
