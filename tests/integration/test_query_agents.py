"""What SkyWalking's UI and CLI read of a known workload that SkyWalking's own
Python agent reported, on both storages, asked over HTTP with the queries
they send.

The workload (``agent_app.py``): ``shop`` takes four ``GET /buy``, each
reserving at ``stock``, which counts in Redis (a peer nobody reports
from), and one ``GET /buy-fail``, which fails. So shop served 5 calls, one
failed; stock served 4; shop called stock 4 times and stock called Redis 4
times."""

from __future__ import annotations

import datetime
import functools
import json
import os
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from skyoap.deploy.servers import RedisServer
from skyoap.runtime import clock
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.helpers import eventually
from tests.integration.test_query_endpoint import ask
from tests.integration.test_query_traces import QUERY_LOGS, QUERY_TRACE, QUERY_TRACES

ROOT = Path(__file__).resolve().parents[2]
AGENT_PYTHON = ROOT / ".venv-agent" / "bin" / "python"
APP = Path(__file__).with_name("agent_app.py")


def b64(text: str) -> str:
    import base64

    return base64.b64encode(text.encode()).decode()


SHOP, STOCK = b64("shop") + ".1", b64("stock") + ".1"


@dataclass
class Workload:
    node: Node
    redis: str
    """``host:port`` of the Redis stock calls."""
    stock_port: int
    minutes: dict[str, Any]
    """A MINUTE Duration holding every call."""
    day: dict[str, Any]
    """The DAY Duration of the calls."""

    def ask(self, query: str, **variables: Any) -> Any:
        assert self.node.query_url is not None
        reply = ask(self.node.query_url, query, variables)
        assert reply.status == 200, reply.body
        assert "errors" not in reply.body, reply.body["errors"]
        return reply.body["data"]

    def expression(self, expression: str, duration: dict[str, Any], **entity: Any) -> dict[str, Any]:
        query = """query($e: String!, $entity: Entity!, $d: Duration!) {
            result: execExpression(expression: $e, entity: $entity, duration: $d) {
                type error
                results { metric { labels { key value } } values { id value owner { serviceName } } }
            }
        }"""
        result: dict[str, Any] = self.ask(query, e=expression, entity=entity, d=duration)["result"]
        assert result["error"] is None, result["error"]
        return result

    def single(self, expression: str, duration: dict[str, Any], **entity: Any) -> str | None:
        """The value of an expression of one value."""
        result = self.expression(expression, duration, **entity)
        assert result["type"] == "SINGLE_VALUE", result
        value: str | None = result["results"][0]["values"][0]["value"]
        return value


def start_app(name: str, node: Node, **env: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [str(AGENT_PYTHON), str(APP)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "SW_AGENT_NAME": name,
            "SW_AGENT_INSTANCE_NAME": f"{name}-1",
            "SW_AGENT_COLLECTOR_BACKEND_SERVICES": node.address,
            "SW_AGENT_METER_REPORTER_PERIOD": "1",
            **env,
        },
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.strip().isdigit():
        proc.kill()
        raise AssertionError(f"{name} did not start: {line!r} {proc.communicate()[1][-4000:]}")
    return proc, int(line)


def get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=60) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as e:
        return e.code


def minute_text(ms: int, shift: int) -> str:
    t = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC) + datetime.timedelta(minutes=shift)
    return t.strftime("%Y-%m-%d %H%M")


def away_from_midnight() -> None:
    """Waits, if need be, until the workload cannot straddle two UTC days."""
    now = datetime.datetime.now(datetime.UTC)
    left = (
        datetime.datetime.combine(now.date(), datetime.time(), datetime.UTC) + datetime.timedelta(days=1)
    ) - now
    if left < datetime.timedelta(minutes=2):
        time.sleep(left.total_seconds() + 1)


@pytest.fixture
def workload(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node], redis_server: RedisServer
) -> Iterator[Workload]:
    assert AGENT_PYTHON.exists(), (
        "run deploy/install.sh: it installs SkyWalking's Python agent in .venv-agent"
    )
    node = start_node(
        node_config.with_options(
            metrics_persist_interval_s=0.5, metrics_l1_flush_period_s=0.2, alias_refresh_s=0.5, promql_port=0
        )
    )
    host, _, port = redis_server.url.removeprefix("redis://").partition("/")[0].rpartition(":")
    away_from_midnight()
    started = clock.now_ms()
    stock, stock_port = start_app("stock", node, REDIS_HOST=host, REDIS_PORT=port)
    shop, shop_port = start_app("shop", node, STOCK_URL=f"http://127.0.0.1:{stock_port}")
    assert shop.stdin is not None
    try:
        buy = f"http://127.0.0.1:{shop_port}/buy"
        for _ in range(4):
            answered: list[int] = []
            call = threading.Thread(target=lambda done=answered: done.append(get(buy)))
            call.start()
            # stock's entry span names the address shop called: once the node
            # has learned it, shop's side of the call counts for stock.
            eventually(lambda: node.instruments.value("skyoap_aliases") >= 1, timeout_s=60)
            shop.stdin.write("go\n")
            shop.stdin.flush()
            call.join(60)
            assert answered == [200]
        assert get(f"http://127.0.0.1:{shop_port}/buy-fail") == 500
        ended = clock.now_ms()
    finally:
        for proc in (shop, stock):
            assert proc.stdin is not None
            proc.stdin.close()
        for proc in (shop, stock):
            assert proc.stderr is not None
            errors = proc.stderr.read()
            assert proc.wait(60) == 0, errors[-4000:]
    day = datetime.datetime.fromtimestamp(started / 1000, datetime.UTC).strftime("%Y-%m-%d")
    yield Workload(
        node,
        f"{host}:{port}",
        stock_port,
        {"start": minute_text(started, -1), "end": minute_text(ended, 1), "step": "MINUTE"},
        {"start": day, "end": day, "step": "DAY"},
    )


def test_the_ui_and_cli_read_what_the_python_agent_reported(workload: Workload) -> None:
    # Every call is measured: the sums of calls per minute are the calls.
    w = workload
    eventually(
        lambda: w.single("sum(service_cpm)", w.minutes, serviceName="shop", normal=True) == "5", timeout_s=60
    )
    eventually(
        lambda: w.single("sum(service_cpm)", w.minutes, serviceName="stock", normal=True) == "4", timeout_s=60
    )
    # Each level and model is written on its own: wait for all of them.
    checks: list[Callable[[Workload], None]] = [metadata, metrics, topology, traces_and_logs]
    for check in checks:
        eventually(functools.partial(passes, check, w), timeout_s=60)
    ui_start(w)


W = TypeVar("W", bound=Workload)


def passes(check: Callable[[W], None], w: W) -> bool:
    check(w)
    return True


def metadata(w: Workload) -> None:

    services = w.ask("""query { layers: listLayers services: listServices(layer: "GENERAL") {
        id value: name label: name group layers normal shortName
    } }""")
    assert services == {
        "layers": ["GENERAL", "VIRTUAL_CACHE"],  # stock calls Redis
        "services": [
            {"id": SHOP, "value": "shop", "label": "shop", "group": "", "layers": ["GENERAL"],
             "normal": True, "shortName": "shop"},
            {"id": STOCK, "value": "stock", "label": "stock", "group": "", "layers": ["GENERAL"],
             "normal": True, "shortName": "stock"},
        ],
    }  # fmt: skip
    instances = w.ask(
        """query($serviceId: ID!, $duration: Duration!) {
            pods: listInstances(duration: $duration, serviceId: $serviceId) {
                id value: name language instanceUUID
            }
        }""",
        serviceId=SHOP,
        duration=w.minutes,
    )
    assert instances == {
        "pods": [
            {
                "id": f"{SHOP}_{b64('shop-1')}",
                "value": "shop-1",
                "language": "PYTHON",
                "instanceUUID": "shop-1",
            }
        ]
    }
    endpoints = w.ask(
        """query($serviceId: ID!, $keyword: String!, $duration: Duration, $limit: Int!) {
            pods: findEndpoint(serviceId: $serviceId, keyword: $keyword, limit: $limit, duration: $duration) {
                id value: name
            }
        }""",
        serviceId=SHOP,
        keyword="",
        limit=20,
        duration=w.minutes,
    )
    assert endpoints == {
        "pods": [
            {"id": f"{SHOP}_{b64('/buy')}", "value": "/buy"},
            {"id": f"{SHOP}_{b64('/buy-fail')}", "value": "/buy-fail"},
        ]
    }


def metrics(w: Workload) -> None:
    """As the service dashboard reads them."""
    shop = {"serviceName": "shop", "normal": True}
    assert w.single("avg(service_sla)/100", w.day, **shop) == "80"
    assert w.single("avg(service_sla)/100", w.day, serviceName="stock", normal=True) == "100"
    series = w.expression("service_cpm", w.minutes, **shop)
    assert series["type"] == "TIME_SERIES_VALUES"
    assert sum(float(v["value"] or 0) for v in series["results"][0]["values"]) == 5
    top = w.expression("top_n(service_sla,10,asc,attr0='GENERAL')", w.day)  # the root dashboard's: no entity
    assert [(v["owner"]["serviceName"], v["value"]) for v in top["results"][0]["values"]] == [
        ("shop", "8000"),
        ("stock", "10000"),
    ]
    endpoints_top = w.expression("top_n(endpoint_sla,10,asc)/100", w.day, **shop)
    assert [v["value"] for v in endpoints_top["results"][0]["values"]] == ["0", "100"]
    # Both sides of shop's calls to stock, and stock's to Redis as only stock saw them.
    relation = {**shop, "destServiceName": "stock", "destNormal": True}
    assert w.single("sum(service_relation_client_cpm)", w.minutes, **relation) == "4"
    assert w.single("sum(service_relation_server_cpm)", w.minutes, **relation) == "4"
    to_redis = {"serviceName": "stock", "normal": True, "destServiceName": w.redis, "destNormal": False}
    assert w.single("sum(service_relation_client_cpm)", w.minutes, **to_redis) == "4"

    # What SkyWalking's CLI reads for `swctl metrics linear`.
    values = w.ask(
        """query($condition: MetricsCondition!, $duration: Duration!) {
            readMetricsValues(condition: $condition, duration: $duration) {
                values { values { value isEmptyValue } }
            }
        }""",
        condition={"name": "service_cpm", "entity": {"serviceName": "stock", "normal": True}},
        duration=w.minutes,
    )["readMetricsValues"]["values"]["values"]
    assert sum(v["value"] for v in values) == 4
    assert {v["isEmptyValue"] for v in values} == {True, False}


def topology(w: Workload) -> None:
    """One edge per pair of services that called, with the sides that saw it
    and the agent's components on each (``General``, SkyWalking's
    ``Python``, for http.server and urllib; ``Redis``), asked as ``swctl
    dependency global`` asks it."""
    query = """query ($layer: String, $duration: Duration!) {
        result: getGlobalTopology(duration: $duration, layer: $layer) {
            nodes { id name type isReal layers }
            calls { id source detectPoints target sourceComponents targetComponents }
        }
    }"""
    user, redis = b64("User") + ".0", b64(w.redis) + ".0"
    found = w.ask(query, duration=w.minutes)["result"]
    nodes: list[dict[str, Any]] = [
        {"id": user, "name": "User", "type": "USER", "isReal": False, "layers": ["UNDEFINED"]},
        {"id": SHOP, "name": "shop", "type": "Python", "isReal": True, "layers": ["GENERAL"]},
        {"id": STOCK, "name": "stock", "type": "Python", "isReal": True, "layers": ["GENERAL"]},
        {"id": redis, "name": w.redis, "type": "Redis", "isReal": False, "layers": ["VIRTUAL_CACHE"]},
    ]

    def call(source: str, target: str, sides: list[str], client: list[str], server: list[str]) -> Any:
        return {"id": f"{source}-{target}", "source": source, "target": target, "detectPoints": sides,
                "sourceComponents": client, "targetComponents": server}  # fmt: skip

    calls = [
        call(user, SHOP, ["SERVER"], [], ["Python"]),
        call(SHOP, STOCK, ["CLIENT", "SERVER"], ["Python"], ["Python"]),
        call(STOCK, redis, ["CLIENT"], ["Redis"], []),
    ]
    assert sorted(found["nodes"], key=lambda n: n["name"]) == sorted(nodes, key=lambda n: n["name"])
    assert sorted(found["calls"], key=lambda c: c["id"]) == sorted(calls, key=lambda c: c["id"])


def traces_and_logs(w: Workload) -> None:
    """The trace list, a trace across both services, a search by tag, a trace's logs."""
    page = {"pageNum": 1, "pageSize": 20}
    condition = {
        "queryDuration": w.minutes,
        "traceState": "ALL",
        "queryOrder": "BY_START_TIME",
        "paging": page,
    }
    listed = w.ask(QUERY_TRACES, condition={**condition, "serviceId": SHOP})["data"]["traces"]
    assert sorted((t["endpointNames"], t["isError"]) for t in listed) == [
        (["/buy"], False), (["/buy"], False), (["/buy"], False), (["/buy"], False), (["/buy-fail"], True),
    ]  # fmt: skip
    failed = w.ask(
        QUERY_TRACES, condition={**condition, "tags": [{"key": "http.status_code", "value": "500"}]}
    )
    ((failing,),) = [t["traceIds"] for t in failed["data"]["traces"]]
    assert failing in {t["traceIds"][0] for t in listed if t["isError"]}
    bought = next(t["traceIds"][0] for t in listed if not t["isError"])
    spans = w.ask(QUERY_TRACE, traceId=bought)["trace"]["spans"]
    # An entry span's peer is the caller's own address: its port is any.
    assert [(s["serviceCode"], s["endpointName"], s["type"], s["layer"]) for s in spans] == [
        ("shop", "/buy", "Entry", "Http"),
        ("shop", "/reserve", "Exit", "Http"),
        ("stock", "/reserve", "Entry", "Http"),
        ("stock", "Redis/INCRBY", "Exit", "Cache"),  # redis-py sends INCR as INCRBY 1
    ]
    assert [s["peer"] for s in spans if s["type"] == "Exit"] == [f"127.0.0.1:{w.stock_port}", w.redis]
    assert {s["traceId"] for s in spans} == {bought}
    logs = w.ask(QUERY_LOGS, condition={"relatedTrace": {"traceId": failing}, "paging": page})
    ((log,),) = [logs["queryLogs"]["logs"]]
    assert (log["serviceName"], log["endpointName"], log["traceId"]) == ("shop", "/buy-fail", failing)
    assert "buying failed" in log["content"]
    by_words = {"queryDuration": w.minutes, "paging": page}
    found = w.ask(QUERY_LOGS, condition={**by_words, "keywordsOfContent": ["Buying FAILED"]})
    assert [x["traceId"] for x in found["queryLogs"]["logs"]] == [failing]
    found = w.ask(QUERY_LOGS, condition={**by_words, "keywordsOfContent": ["buying", "succeeded"]})
    assert found["queryLogs"]["logs"] == []
    found = w.ask(QUERY_LOGS, condition={**by_words, "excludingKeywordsOfContent": ["failed"]})
    assert found["queryLogs"]["logs"] == []
    # The agent tags a line with its level, logger and thread; the level is searchable.
    assert {t["key"] for t in log["tags"]} >= {"level", "logger", "thread"}
    found = w.ask(QUERY_LOGS, condition={**by_words, "tags": [{"key": "level", "value": "WARNING"}]})
    assert [x["traceId"] for x in found["queryLogs"]["logs"]] == [failing]
    found = w.ask(QUERY_LOGS, condition={**by_words, "tags": [{"key": "thread", "value": "MainThread"}]})
    assert found["queryLogs"]["logs"] == []
    completed = w.ask(
        """query ($d: Duration!) { keys: queryLogTagAutocompleteKeys(duration: $d)
        values: queryLogTagAutocompleteValues(tagKey: "level", duration: $d) }""",
        d=w.minutes,
    )
    assert completed == {"keys": ["level"], "values": ["WARNING"]}


def ui_start(w: Workload) -> None:
    """The menu, dashboards and status pages SkyWalking's UI reads at start-up."""
    start = w.ask("""query {
        menu: getMenuItems { title layer activate subItems { title layer activate } }
        ttl: getMetricsTTL { minute hour day coldMinute }
        templates: getAllTemplates { id configuration }
        support: hasQueryTracesV2Support
    }""")
    assert start["menu"] == [
        {"title": "General Service", "layer": "", "activate": True,
         "subItems": [{"title": "Services", "layer": "GENERAL", "activate": True},
                      {"title": "Virtual Database", "layer": "VIRTUAL_DATABASE", "activate": False},
                      {"title": "Virtual Cache", "layer": "VIRTUAL_CACHE", "activate": True},
                      {"title": "Virtual MQ", "layer": "VIRTUAL_MQ", "activate": False}]},
        {"title": "Infrastructure", "layer": "", "activate": False,
         "subItems": [{"title": "Linux", "layer": "OS_LINUX", "activate": False}]},
        {"title": "Database", "layer": "", "activate": False,
         "subItems": [{"title": "MySQL", "layer": "MYSQL", "activate": False},
                      {"title": "PostgreSQL", "layer": "POSTGRESQL", "activate": False},
                      {"title": "Redis", "layer": "REDIS", "activate": False}]},
    ]  # fmt: skip
    assert start["ttl"] == {"minute": 1, "hour": 7, "day": 90, "coldMinute": -1}
    assert start["support"] is False
    root = [json.loads(t["configuration"]) for t in start["templates"] if t["id"] == "General-Root"]
    assert [(r["layer"], r["entity"], r["isRoot"]) for r in root] == [("GENERAL", "All", True)]
    assert w.node.query_url is not None
    base = w.node.query_url.removesuffix("/graphql")
    with urllib.request.urlopen(f"{base}/status/config/ttl") as page:
        assert page.read().decode().splitlines()[:4] == [
            "metrics.minute=1", "metrics.hour=7", "metrics.day=90", "records.normal=3",
        ]  # fmt: skip
    # The settings page's configuration dump, as the UI asks for it.
    asked = urllib.request.Request(f"{base}/debugging/config/dump", headers={"Accept": "application/json"})
    with urllib.request.urlopen(asked) as page:
        shown = json.loads(page.read())
    assert (shown["storage.storage"], shown["server.max_message_bytes"]) == (
        w.node.config.storage.kind.value, str(w.node.config.server.max_message_bytes),
    )  # fmt: skip
    with urllib.request.urlopen(f"{base}/status/cluster/nodes") as page:
        host, _, port = w.node.address.rpartition(":")
        assert json.loads(page.read()) == {"nodes": [{"host": host, "port": int(port), "self": True}]}
