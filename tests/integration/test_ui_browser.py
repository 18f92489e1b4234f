"""The web UI in a real browser (Debian's Chromium, headless), over a known
workload from SkyWalking's own Python agent (``test_query_agents``: shop
takes four ``/buy``, each calling stock, which calls Redis, and one
``/buy-fail``), and two alarms of shop stored in the node's storage as the
alarm rules store them (``tests/alarm_records.py``: shop's, firing, and its
instance's, recovered). Every page is opened by a link that names its window
(the workload's minutes), as a shared link would, and saves a screenshot."""

from __future__ import annotations

import datetime
import functools
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page

from skyoap.consumer.client import Consumer
from skyoap.proto.skywalking import event_pb2
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests import alarm_records
from tests.certs import TestCa
from tests.integration.browser import VIEWPORT, open_page, redrawn
from tests.integration.helpers import eventually
from tests.integration.test_events import event, send
from tests.integration.test_query_agents import (
    SHOP,
    STOCK,
    Workload,
    metrics,
    passes,
    topology,
    traces_and_logs,
    workload,
)
from tests.integration.test_query_traces import QUERY_TRACES

__all__ = ["workload"]  # a fixture of this module's tests


def figure(value: str | None) -> str:
    """A value as the UI shows it (``dom.js``'s ``figure``)."""
    if value is None:
        return "\N{EN DASH}"
    v = round(float(value), 2)
    return str(int(v)) if v.is_integer() else str(v)


def window(w: Workload) -> str:
    """The URL parameters of a range window over the workload's minutes."""

    def local(text: str) -> str:
        return datetime.datetime.strptime(text, "%Y-%m-%d %H%M").strftime("%Y-%m-%dT%H:%M")

    return f"last=range&from={local(w.minutes['start'])}&to={local(w.minutes['end'])}"


@pytest.fixture
def alarmed(workload: Workload) -> int:
    """Stores shop's alarm (firing) and its instance's (recovered) from the
    first minute of the workload's window; returns that minute (ms)."""
    assert workload.node.storage is not None
    start = datetime.datetime.strptime(workload.minutes["start"], "%Y-%m-%d %H%M").replace(
        tzinfo=datetime.UTC
    )
    t0 = int(start.timestamp() * 1000)
    alarm_records.store(workload.node.storage.records, t0, ["shop-resp", "shop-inst-sla"])
    return t0


@pytest.fixture
def evented(workload: Workload, alarmed: int) -> int:
    """Reports two events in the window's first minute: shop deployed at
    0:20, still under way (an Error), and its instance ``inst`` (the one
    alarmed) upgraded from 0:30 to 0:50; returns that minute (ms)."""
    t0 = alarmed
    deploy = event("deploy", start=t0 + 20_000, name="Deploy", type=event_pb2.Error, message="Deploy 7")
    deploy.source.serviceInstance = ""
    upgrade = event("up", start=t0 + 30_000, end=t0 + 50_000, message="Upgrade to 1.1")
    upgrade.source.serviceInstance = "inst"
    send(workload.node.address, [deploy, upgrade])
    return t0


def shown_time(ms: int) -> str:
    """A time as the UI shows it (``dom.js``'s ``time``)."""
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


def cells(page: Page, selector: str, attribute: str) -> list[str]:
    return [
        page.locator(selector).nth(i).get_attribute(attribute) or ""
        for i in range(page.locator(selector).count())
    ]


@pytest.mark.parametrize("node_config", ["embedded"], indirect=True)
def test_the_ui_shows_what_the_python_agent_reported(
    workload: Workload, evented: int, browser: Browser, shots: Path, node_config: NodeConfig
) -> None:
    w = workload
    for check in (metrics, topology, traces_and_logs):
        eventually(functools.partial(passes, check, w), timeout_s=60)
    assert w.node.ui_url is not None
    base, when = w.node.ui_url, window(w)
    page = browser.new_page(viewport=VIEWPORT)
    try:
        services(page, base, when, w, shots)
        graph(page, base, when, w, shots)
        dashboard(page, w, evented, shots)
        traces(page, base, when, w, shots)
        logs(page, base, when, shots)
        alarms(page, base, when, evented, shots)
        cluster(page, base, w, node_config, shots)
    finally:
        page.close()


def services(page: Page, base: str, when: str, w: Workload, shots: Path) -> None:
    open_page(page, f"{base}#/services?{when}", "services")
    assert cells(page, "table.services tbody tr", "data-service") == ["shop", "stock"]
    for name in ("shop", "stock"):
        load = w.single("avg(service_cpm)", w.minutes, serviceName=name, normal=True)
        row = page.locator(f"table.services tr[data-service='{name}']")
        assert row.locator("td[data-column='cpm']").text_content() == figure(load)
        points = row.locator("svg.sparkline").get_attribute("data-points") or ""
        assert sum(float(p) for p in points.split(",") if p) == {"shop": 5, "stock": 4}[name]
    page.screenshot(path=shots / "services.png", full_page=True)
    # Sorted by success rate: stock's calls all succeeded, one of shop's five failed.
    page.locator("table.services th", has_text="Success (%)").click()
    assert cells(page, "table.services tbody tr", "data-service") == ["stock", "shop"]
    page.fill("input[type=search]", "sho")
    assert cells(page, "table.services tbody tr:visible", "data-service") == ["shop"]
    # The link keeps the filter and the order.
    redrawn(page, "services", page.reload)
    assert "q=sho" in page.url and "sort=sla" in page.url
    assert cells(page, "table.services tbody tr", "data-service") == ["stock", "shop"]
    assert cells(page, "table.services tbody tr:visible", "data-service") == ["shop"]


def graph(page: Page, base: str, when: str, w: Workload, shots: Path) -> None:
    open_page(page, f"{base}#/topology?{when}", "topology")
    assert sorted(cells(page, "svg.topology g.node", "data-node")) == sorted(
        ["User", "shop", "stock", w.redis]
    )
    assert sorted(cells(page, "svg.topology g.node.virtual", "data-node")) == sorted(["User", w.redis])
    types = dict(zip(cells(page, "svg.topology g.node", "data-node"),
                     cells(page, "svg.topology g.node", "data-type"), strict=True))  # fmt: skip
    assert types == {"User": "USER", "shop": "Python", "stock": "Python", w.redis: "Redis"}
    edges = dict(zip(cells(page, "svg.topology line.edge", "data-call"),
                     cells(page, "svg.topology line.edge", "data-sides"), strict=True))  # fmt: skip
    assert edges == {"User → shop": "SERVER", "shop → stock": "CLIENT,SERVER", f"stock → {w.redis}": "CLIENT"}
    page.locator("line.edge[data-call='shop → stock']").dispatch_event("click")
    sides = page.locator("aside.panel tr")
    assert [sides.nth(i).locator("th").first.text_content() for i in range(1, sides.count())] == [
        "caller's side",
        "callee's side",
    ]
    relation = {"serviceName": "shop", "normal": True, "destServiceName": "stock", "destNormal": True}
    for i, side in ((1, "client"), (2, "server")):
        cpm = w.single(f"avg(service_relation_{side}_cpm)", w.minutes, **relation)
        assert sides.nth(i).locator("td").first.text_content() == figure(cpm)
    page.screenshot(path=shots / "topology.png")
    redrawn(page, "service", lambda: page.locator("g.node[data-node='shop']").dispatch_event("click"))
    assert f"#/service?id={urllib.parse.quote(SHOP, safe='')}" in page.url


def dashboard(page: Page, w: Workload, t0: int, shots: Path) -> None:
    assert page.locator("main h1").text_content() == "shop"
    assert cells(page, "table.instances tbody tr", "data-name") == ["shop-1"]
    assert sorted(cells(page, "table.endpoints tbody tr", "data-name")) == ["/buy", "/buy-fail"]
    assert cells(page, "table.relations tbody tr", "data-call") == ["shop → stock", "User → shop"]
    assert page.locator("figure svg.chart").count() == 5
    # The events of the window, the latest first, each marked on every chart.
    rows = page.locator("table.events tbody tr")
    assert cells(page, "table.events tbody tr", "data-uuid") == ["up", "deploy"]
    assert [rows.nth(i).locator("td").all_text_contents() for i in range(rows.count())] == [
        [shown_time(t0 + 30_000), shown_time(t0 + 50_000), "Upgrade", "inst", "Upgrade to 1.1"],
        [shown_time(t0 + 20_000), "lasting", "Deploy", "the service", "Deploy 7"],
    ]
    assert cells(page, "svg.chart line.mark", "data-label") == ["Upgrade", "Deploy"] * 5
    assert page.locator("svg.chart line.mark.error").count() == 5
    page.screenshot(path=shots / "service.png", full_page=True)
    # An endpoint's page: who called it (users: no traced service) and whom it called.
    redrawn(page, "endpoint", lambda: page.locator("table.endpoints a", has_text="/buy-fail").click())
    assert page.locator("main h1").text_content() == "/buy-fail of shop"
    assert cells(page, "table.dependencies tbody tr", "data-endpoint") == ["User User"]
    assert page.locator("main p.empty").text_content() == "None in the window."  # it called nobody
    # stock's /reserve was called by shop, in what SkyWalking's Python agent
    # names the endpoint it called from: the exit span's operation.
    assert w.node.ui_url is not None
    stock = urllib.parse.quote(STOCK, safe="")
    open_page(page, f"{w.node.ui_url}#/endpoint?service={stock}&name=%2Freserve&{window(w)}", "endpoint")
    assert cells(page, "table.dependencies tbody tr", "data-endpoint") == ["shop /reserve"]
    page.screenshot(path=shots / "endpoint.png", full_page=True)


def traces(page: Page, base: str, when: str, w: Workload, shots: Path) -> None:
    condition = {"queryDuration": w.minutes, "traceState": "ALL", "queryOrder": "BY_START_TIME",
                 "paging": {"pageNum": 1, "pageSize": 20}}  # fmt: skip
    listed = w.ask(QUERY_TRACES, condition=condition)["data"]["traces"]
    failing = next(t["traceIds"][0] for t in listed if t["isError"])
    bought = next(t["traceIds"][0] for t in listed if t["endpointNames"] == ["/reserve"])
    open_page(page, f"{base}#/traces?{when}&tags=http.status_code%3D500", "traces")
    assert cells(page, "ol.trace-list li", "data-trace") == [failing]
    open_page(page, f"{base}#/traces?{when}&service={SHOP}&trace={bought}", "traces")
    assert len(page.locator("ol.trace-list li").all()) == 5
    spans = page.locator(".waterfall .span")
    assert [
        (spans.nth(i).get_attribute("data-service"), spans.nth(i).locator(".label").text_content())
        for i in range(spans.count())
    ] == [
        ("shop", "shop  /buy"),
        ("shop", "shop  /reserve"),
        ("stock", "stock  /reserve"),
        ("stock", "stock  Redis/INCRBY"),
    ]
    spans.nth(3).click()
    facts = page.locator(".span-detail dd")
    assert [facts.nth(i).text_content() for i in (0, 3, 4, 6)] == ["stock", "Exit", w.redis, "Cache"]
    page.screenshot(path=shots / "trace.png", full_page=True)
    open_page(page, f"{base}#/traces?{when}&trace={failing}", "traces")
    (line,) = page.locator("ul.trace-logs li").all()
    assert "buying failed" in (line.text_content() or "")


def logs(page: Page, base: str, when: str, shots: Path) -> None:
    open_page(page, f"{base}#/logs?{when}&words=buying%20failed", "logs")
    rows = page.locator("table.logs tbody tr")
    assert rows.count() == 1
    assert [rows.locator("td").nth(i).text_content() for i in (1, 3)] == ["shop", "/buy-fail"]
    assert "buying failed" in (rows.locator("pre").text_content() or "")
    assert "level=WARNING" in (rows.locator("td.tags").text_content() or "").split()
    page.screenshot(path=shots / "logs.png", full_page=True)
    open_page(page, f"{base}#/logs?{when}&words=buying&tags=level%3DWARNING", "logs")
    assert page.locator("table.logs tbody tr").count() == 1
    open_page(page, f"{base}#/logs?{when}&words=buying&tags=level%3DINFO", "logs")
    assert page.locator("table.logs tbody tr").count() == 0
    open_page(page, f"{base}#/logs?{when}&words=buying&without=failed", "logs")
    assert page.locator("table.logs tbody tr").count() == 0


def alarms(page: Page, base: str, when: str, t0: int, shots: Path) -> None:
    open_page(page, f"{base}#/alarms?{when}", "alarms")
    rows = page.locator("table.alarms tbody tr")
    assert cells(page, "table.alarms tbody tr", "data-name") == ["inst of shop", "shop"]
    texts = [[rows.nth(i).locator("td").nth(c).text_content() for c in range(6)] for i in range(rows.count())]
    assert texts == [
        [shown_time(t0 + 70_000), shown_time(t0 + 190_000), "instance", "inst of shop",
         "avg(service_instance_sla) < 8000", "Success rate of instance inst of shop is lower than 80%"],
        [shown_time(t0 + 10_000), "firing", "service", "shop", "avg(service_resp_time) > 1000",
         "Response time of service shop is more than 1000ms in 2 minutes of last 10 minutes"],
    ]  # fmt: skip
    assert [rows.nth(i).locator("span.tag").all_text_contents() for i in range(rows.count())] == [
        ["level=CRITICAL"],
        ["level=WARNING", "team=shop"],
    ]
    # Beside each alarm, the events of its instance, or of its service.
    assert [rows.nth(i).locator("span.event").all_text_contents() for i in range(rows.count())] == [
        ["Upgrade"],
        ["Deploy"],
    ]
    assert (
        rows.nth(1).locator("a").get_attribute("href") == f"#/service?id={urllib.parse.quote(SHOP, safe='')}"
    )
    page.screenshot(path=shots / "alarms.png", full_page=True)
    page.fill("input[name=keyword]", "success rate")
    redrawn(page, "alarms", lambda: page.locator("form.search button").click())
    assert "keyword=success+rate" in page.url
    assert cells(page, "table.alarms tbody tr", "data-name") == ["inst of shop"]
    open_page(page, f"{base}#/alarms?{when}&scope=Service&tags=team%3Dshop", "alarms")
    assert cells(page, "table.alarms tbody tr", "data-name") == ["shop"]


def cluster(page: Page, base: str, w: Workload, config: NodeConfig, shots: Path) -> None:
    assert w.node.storage is not None
    ends = {b.partition: b.end for b in w.node.storage.topics.bounds("segment")}
    assert sum(ends.values()) == 9  # shop's five segments and stock's four
    reader = Consumer.open(config.storage, "segment-readers", member_id="reader", enable_auto_commit=False)
    try:
        reader.subscribe(["segment"])
        eventually(lambda: reader.poll(0.1) is not None and len(reader.assignment()) == len(ends))
        open_page(page, f"{base}#/cluster", "cluster")
    finally:
        reader.close()
    assert cells(page, "table.nodes tbody tr", "data-node") == [w.node.name]
    group = page.locator("section.group[data-group='segment-readers']")
    assert group.locator("h3").text_content() == "segment-readers: 9 records behind"
    page.screenshot(path=shots / "cluster.png", full_page=True)


@pytest.mark.parametrize("node_config", ["embedded"], indirect=True)
def test_the_ui_works_through_tls_and_basic_auth(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node], browser: Browser, tmp_path: Path
) -> None:
    cert, key = TestCa(tmp_path).issue("localhost")
    node = start_node(
        node_config.with_options(
            query_tls_cert=str(cert), query_tls_key=str(key), query_username="ui", query_password="secret"
        )
    )
    assert node.ui_url is not None and node.ui_url.startswith("https://")
    allowed = browser.new_context(
        ignore_https_errors=True, http_credentials={"username": "ui", "password": "secret"}
    )
    try:
        page = allowed.new_page()
        open_page(page, f"{node.ui_url}#/services", "services")
        assert page.locator("main p").last.text_content() == "No service has reported yet."
    finally:
        allowed.close()


LAYOUT_100 = """async () => {
  const { layout } = await import("/ui/layout.js");
  const { canvasSize } = await import("/ui/topology.js");
  // 100 services, each called by one before it (a tree, two callees each),
  // a few calling a second one, and 20 databases: 120 nodes.
  const nodes = [...Array(120).keys()].map((i) => ({ id: String(i) }));
  const edges = [];
  for (let i = 1; i < 100; i++) {
    edges.push({ source: String(Math.floor((i - 1) / 2)), target: String(i) });
    if (i % 3 === 0) edges.push({ source: String(i), target: String(100 + (i % 20)) });
    if (i % 5 === 0) edges.push({ source: String(i), target: String((i * 31) % 100) });
  }
  const { width, height } = canvasSize(nodes.length);
  const pos = layout(nodes, edges, width, height);
  let closest = Infinity;
  for (let i = 0; i < pos.length; i++) {
    for (let j = i + 1; j < pos.length; j++) {
      closest = Math.min(closest, Math.hypot(pos[i].x - pos[j].x, pos[i].y - pos[j].y));
    }
  }
  return closest;
}"""


@pytest.mark.parametrize("node_config", ["embedded"], indirect=True)
def test_a_topology_of_a_hundred_services_is_laid_out_without_nodes_overlapping(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node], browser: Browser
) -> None:
    node = start_node(node_config)
    page = browser.new_page(viewport=VIEWPORT)
    try:
        open_page(page, f"{node.ui_url}#/services", "services")
        found = page.evaluate(LAYOUT_100)
    finally:
        page.close()
    # A node is a circle of radius 14 with its name under it: at least two radii apart.
    assert found >= 28
