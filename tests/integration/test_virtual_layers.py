"""The databases and caches services call, as SkyWalking's UI and CLI read
them, on both storages, measured from SkyWalking's own Python agent: its
service ``stock`` answers ``GET /report`` three times (``agent_app.py``),
each querying a real PostgreSQL once quickly and once for 250 ms (past the
200 ms after which a statement is slow), and a real Redis four times: a
small write and read, then a write of 20 MB and a read of 100,000 keys.
SkyWalking's agent times a Redis command's sending alone, so the node
takes a cache call as slow past 1 ms here: the large ones are the slowest."""

from __future__ import annotations

import functools
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser

from skyoap.deploy.servers import PostgresServer, RedisServer
from skyoap.runtime import clock
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.browser import VIEWPORT, open_page
from tests.integration.helpers import eventually
from tests.integration.test_query_agents import (
    AGENT_PYTHON,
    Workload,
    away_from_midnight,
    b64,
    get,
    minute_text,
    passes,
    start_app,
)
from tests.integration.test_ui_browser import cells, window

REPORTS = 3
SLOW_STATEMENT = "SELECT pg_sleep(0.25)"

# What SkyWalking's UI (booster-ui) asks: a layer's services, a service by id,
# an expression (its RespFields); and its CLI (swctl): records, databases.
UI_SERVICES = """query queryServices($layer: String!) {
  services: listServices(layer: $layer) { id value: name label: name group layers normal shortName } }"""
UI_SERVICE = """query queryService($serviceId: String!) {
  service: getService(serviceId: $serviceId) { id value: name label: name group layers normal } }"""
UI_EXPRESSION = """query queryData($expression: String!, $entity: Entity!, $duration: Duration!) {
  result: execExpression(expression: $expression, entity: $entity, duration: $duration) {
    type results { values { name: id value refId: traceID } } } }"""
CLI_RECORDS = """query ($condition: RecordCondition!, $duration: Duration!) {
    result: readRecords(condition: $condition, duration: $duration) { name id value refId } }"""
CLI_SAMPLED = """query ($condition:TopNCondition!, $duration: Duration!) {
    result: readSampledRecords(condition: $condition, duration: $duration) { name id value refId } }"""
CLI_FIND_SERVICE = """query ($serviceName: String!) {
    result: findService(serviceName: $serviceName) { id name group shortName layers normal } }"""
CLI_DATABASES = (
    """query ($duration: Duration!) { result: getAllDatabases(duration: $duration) { id name type } }"""
)


@dataclass
class Called(Workload):
    database: str
    """``host:port`` of the PostgreSQL stock queried."""
    traces: list[str]


@pytest.fixture
def called(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node], redis_server: RedisServer
) -> Iterator[Called]:
    assert AGENT_PYTHON.exists(), (
        "run deploy/install.sh: it installs SkyWalking's Python agent in .venv-agent"
    )
    postgres = PostgresServer().start()
    try:
        fast = {"metrics_persist_interval_s": 0.5, "metrics_l1_flush_period_s": 0.2}
        slow = {"slow_cache_read_threshold": "default:1", "slow_cache_write_threshold": "default:1"}
        node = start_node(node_config.with_options(**fast, **slow))
        host, _, port = redis_server.url.removeprefix("redis://").partition("/")[0].rpartition(":")
        away_from_midnight()
        started = clock.now_ms()
        stock, stock_port = start_app(
            "stock", node, REDIS_HOST=host, REDIS_PORT=port, DATABASE_DSN=postgres.dsn
        )
        try:
            for _ in range(REPORTS):
                assert get(f"http://127.0.0.1:{stock_port}/report") == 200
        finally:
            assert stock.stdin is not None and stock.stderr is not None
            stock.stdin.close()
            assert stock.wait(60) == 0, stock.stderr.read()[-4000:]
        minutes = {"start": minute_text(started, -1), "end": minute_text(clock.now_ms(), 1), "step": "MINUTE"}
        w = Called(node, f"{host}:{port}", stock_port, minutes, {}, f"127.0.0.1:{postgres.port}", [])
        yield w
    finally:
        postgres.stop()


def test_databases_and_caches_are_services_of_their_layers(called: Called) -> None:
    w = called
    database, cache = b64(w.database) + ".0", b64(w.redis) + ".0"
    eventually(lambda: w.single("sum(database_access_cpm)", w.minutes, serviceName=w.database, normal=False)
               == str(2 * REPORTS), timeout_s=60)  # fmt: skip
    for check in (listed, measured, sampled):
        eventually(functools.partial(passes, check, w), timeout_s=60)
    assert w.ask(UI_SERVICE, serviceId=database)["service"] == {
        "id": database, "value": w.database, "label": w.database, "group": "", "layers": ["VIRTUAL_DATABASE"],
        "normal": False,
    }  # fmt: skip
    assert w.ask(UI_SERVICE, serviceId=cache)["service"]["layers"] == ["VIRTUAL_CACHE"]
    # The CLI finds every service by its name before it asks for its records.
    found = w.ask(CLI_FIND_SERVICE, serviceName=w.database)["result"]
    assert found == {"id": database, "name": w.database, "group": "", "shortName": w.database,
                     "layers": ["VIRTUAL_DATABASE"], "normal": False}  # fmt: skip
    assert w.ask(CLI_DATABASES, duration=w.minutes)["result"] == [
        {"id": database, "name": w.database, "type": "PostgreSQL"}
    ]
    layers = w.ask("query { layers: listLayers }")["layers"]
    assert layers == ["GENERAL", "VIRTUAL_DATABASE", "VIRTUAL_CACHE"]


def listed(w: Called) -> None:
    def service(name: str, layer: str) -> dict[str, Any]:
        return {"id": b64(name) + ".0", "value": name, "label": name, "group": "", "layers": [layer],
                "normal": False, "shortName": name}  # fmt: skip

    assert w.ask(UI_SERVICES, layer="VIRTUAL_DATABASE")["services"] == [
        service(w.database, "VIRTUAL_DATABASE")
    ]
    assert w.ask(UI_SERVICES, layer="VIRTUAL_CACHE")["services"] == [service(w.redis, "VIRTUAL_CACHE")]


def measured(w: Called) -> None:
    """Every call counted: per minute summed over the window, the calls."""
    calls = {
        ("database_access", w.database): 2 * REPORTS,
        ("cache_access", w.redis): 4 * REPORTS,
        ("cache_read", w.redis): 2 * REPORTS,
        ("cache_write", w.redis): 2 * REPORTS,
    }
    for (prefix, name), n in calls.items():
        assert w.single(f"sum({prefix}_cpm)", w.minutes, serviceName=name, normal=False) == str(n), prefix
        assert w.single(f"avg({prefix}_sla)/100", w.minutes, serviceName=name, normal=False) == "100", prefix


def sampled(w: Called) -> None:
    """The slow statement of each report, the slowest first, with its trace;
    as the UI draws its top list and as the CLI lists records."""
    entity = {"serviceName": w.database, "normal": False}
    result = w.ask(UI_EXPRESSION, expression="top_n(top_n_database_statement,10,des)", entity=entity,
                   duration=w.minutes)["result"]  # fmt: skip
    assert result["type"] == "RECORD_LIST"
    (values,) = [r["values"] for r in result["results"]]
    assert [v["name"] for v in values] == [SLOW_STATEMENT] * REPORTS
    assert all(250 <= int(v["value"]) < 1000 for v in values)
    latencies = [int(v["value"]) for v in values]
    assert latencies == sorted(latencies, reverse=True)
    traces = {v["refId"] for v in values}
    assert len(traces) == REPORTS
    condition = {"name": "top_n_database_statement", "parentEntity": entity, "topN": 10, "order": "DES"}
    records = w.ask(CLI_RECORDS, condition=condition, duration=w.minutes)["result"]
    assert [(r["name"], r["value"], r["refId"]) for r in records] == [
        (v["name"], v["value"], v["refId"]) for v in values
    ]
    # The calling service's list holds the same statements.
    mine = {"name": "top_n_service_database_statement", "parentService": "stock", "normal": True, "topN": 1,
            "order": "ASC"}  # fmt: skip
    (fastest,) = w.ask(CLI_SAMPLED, condition=mine, duration=w.minutes)["result"]
    assert (fastest["name"], fastest["value"]) == (SLOW_STATEMENT, str(min(latencies)))
    # The cache's slowest reads and writes: the large one of each report.
    cache = {"serviceName": w.redis, "normal": False}
    for metric, command in (("top_n_cache_read_command", "MGET key-000000"),
                            ("top_n_cache_write_command", "SET big")):  # fmt: skip
        expression = f"top_n({metric},{REPORTS},des)"
        result = w.ask(UI_EXPRESSION, expression=expression, entity=cache, duration=w.minutes)
        (values,) = [r["values"] for r in result["result"]["results"]]
        assert [v["name"] for v in values] == [command] * REPORTS, metric
        assert {v["refId"] for v in values} == traces


@pytest.mark.parametrize("node_config", ["embedded"], indirect=True)
def test_the_web_ui_shows_the_databases_caches_and_slow_statements(
    called: Called, browser: Browser, shots: Path
) -> None:
    w = called
    eventually(functools.partial(passes, sampled, w), timeout_s=60)
    assert w.node.ui_url is not None
    page = browser.new_page(viewport=VIEWPORT)
    try:
        open_page(page, f"{w.node.ui_url}#/called?{window(w)}", "called")
        rows = page.locator("table.called.database_access tbody tr")
        assert [rows.nth(0).locator("td").nth(i).text_content() for i in (0, 3)] == [w.database, "100"]
        assert cells(page, "table.called.cache_access tbody tr", "data-name") == [w.redis]
        statements = page.locator("table.slow.database_access tbody tr")
        assert statements.count() == REPORTS
        assert set(statements.locator("code").all_text_contents()) == {SLOW_STATEMENT}
        commands = page.locator("table.slow.cache_access tbody tr code").all_text_contents()
        assert {"MGET key-000000", "SET big"} <= set(commands)
        page.screenshot(path=shots / "called.png", full_page=True)
        # The calling service's own page lists the same statements, each linking to its trace.
        stock = urllib.parse.quote(b64("stock") + ".1", safe="")
        open_page(page, f"{w.node.ui_url}#/service?id={stock}&{window(w)}", "service")
        links = page.locator("table.slow tbody tr a")
        assert links.count() == REPORTS
        assert all(
            (links.nth(i).get_attribute("href") or "").startswith("#/traces?trace=") for i in range(REPORTS)
        )
    finally:
        page.close()
