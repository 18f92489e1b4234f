"""SkyWalking's PromQL service read by Prometheus's own client, ``promtool``
(Debian's), over what SkyWalking's Python agent reported (``workload``:
shop takes 5 calls, one failing, and calls stock 4 times), on both storages:
calls per minute summed over the window are the calls made, the failed
share is the failed call, percentiles come by rank, and the services are
listed as Grafana's variables list them. Every query of the Grafana
dashboards in ``docs/grafana`` is answered. The port is behind the query
endpoint's credentials."""

from __future__ import annotations

import base64
import datetime
import json
import re
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.helpers import eventually
from tests.integration.test_query_agents import ROOT, Workload, workload  # noqa: F401 (a fixture)

PROMTOOL = ROOT / ".tools" / "promtool"
DASHBOARDS = sorted((ROOT / "docs" / "grafana").glob("*.json"))
SHOP = "service='shop', layer='GENERAL'"


def promtool(*args: str) -> Any:
    """``promtool query -o json ARGS``'s answer; promtool's words if it fails."""
    assert PROMTOOL.exists(), "run deploy/install.sh: it unpacks Debian's promtool into .tools"
    done = subprocess.run(
        [str(PROMTOOL), "query", "-o", "json", *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def seconds(minute_text: str) -> int:
    """A Duration's minute (``2026-11-28 1005``) in seconds since the epoch."""
    return int(
        datetime.datetime.strptime(minute_text, "%Y-%m-%d %H%M").replace(tzinfo=datetime.UTC).timestamp()
    )


def test_promtool_reads_what_the_python_agent_reported(workload: Workload) -> None:  # noqa: F811
    w = workload
    url = w.node.promql_url
    assert url is not None
    start, end = seconds(w.minutes["start"]), seconds(w.minutes["end"])
    window = f"{(end - start) // 60 + 1}m"

    def total(service: str) -> str | None:
        summed = f"sum_over_time(service_cpm{{service='{service}', layer='GENERAL'}}[{window}])"
        found = promtool("instant", f"--time={end}", url, summed)  # none until the minutes are stored
        return str(found[0]["value"][1]) if found else None

    eventually(lambda: total("shop") == "5", timeout_s=60)
    eventually(lambda: total("stock") == "4", timeout_s=60)
    # Each minute's failed calls, from its load and success rate: the one /buy-fail.
    failed = f"service_cpm{{{SHOP}}} * (10000 - service_sla{{{SHOP}}}) / 10000"
    (series,) = promtool("range", f"--start={start}", f"--end={end}", "--step=60s", url, failed)
    assert round(sum(float(v) for _, v in series["values"])) == 1
    # The percentiles, one series per rank, with SkyWalking's labels.
    ranks = promtool(
        "instant",
        f"--time={end}",
        url,
        f"max_over_time(service_percentile{{{SHOP}, p='50,75,90,95,99'}}[{window}])",
    )
    assert sorted(r["metric"]["p"] for r in ranks) == ["50", "75", "90", "95", "99"]
    assert all(r["metric"]["service"] == "shop" and float(r["value"][1]) > 0 for r in ranks)
    # The services, as Grafana's variables list them.
    listed = promtool("series", "--match=service_traffic{layer='GENERAL'}", url)
    assert listed == [
        {"__name__": "service_traffic", "layer": "GENERAL", "scope": "Service", "service": name}
        for name in ("shop", "stock")
    ]
    assert promtool("labels", "--match=service_traffic{layer='GENERAL'}", url, "service") == ["shop", "stock"]
    endpoints = promtool(
        "labels", "--match=endpoint_traffic{layer='GENERAL', service='shop'}", url, "endpoint"
    )
    assert endpoints == ["/buy", "/buy-fail"]
    dashboards_answer(url, start, end)


def dashboards_answer(url: str, start: int, end: int) -> None:
    """Every variable and panel query of the shipped dashboards, over the
    workload's window, with shop and stock for its services: each variable
    lists the value chosen, and each panel draws at least one series with a
    value. The endpoint relation's panels are asked for /reserve's, which
    the endpoint variable does not list: SkyWalking's Python agent names the
    caller's endpoint by its exit span, so shop's /buy has no relation."""
    chosen = {"layer": "GENERAL", "dest_layer": "GENERAL", "service": "shop", "dest_service": "stock",
              "service_instance": "shop-1", "dest_service_instance": "stock-1", "endpoint": "/buy",
              "dest_endpoint": "/reserve", "endpoint_keyword": "", "endpoint_limit": "20"}  # fmt: skip

    assert [d.name for d in DASHBOARDS] == ["general-relation.json", "general-service.json"]
    empty = []
    for dashboard in DASHBOARDS:
        board = json.loads(dashboard.read_text())
        values = {**chosen, "endpoint": "/reserve"} if dashboard.name == "general-relation.json" else chosen

        def chose(text: str) -> str:
            return re.sub(r"\$(\w+)", lambda m: values[m.group(1)], text)  # noqa: B023 (used at once)

        for variable in board["templating"]["list"]:
            if variable["type"] == "query":
                match = re.fullmatch(r"label_values\((.*), (\w+)\)", chose(variable["query"]["query"]))
                assert match is not None, variable
                listed = promtool(
                    "labels", f"--start={start}", f"--end={end}", f"--match={match[1]}", url, match[2]
                )
                assert chosen[variable["name"]] in listed, (dashboard.name, variable["name"], listed)
        for panel in board["panels"]:
            for target in panel.get("targets", []):
                expr = chose(target["expr"])
                drawn = promtool("range", f"--start={start}", f"--end={end}", "--step=60s", url, expr)
                if not any(v != "NaN" for series in drawn for _, v in series["values"]):
                    empty.append((dashboard.name, panel["title"], expr))
    assert empty == []


def ask(url: str, authorization: str | None) -> tuple[int, Any]:
    headers = {"Authorization": authorization} if authorization else {}
    query = urllib.parse.urlencode({"query": "1 + 1"})
    request = urllib.request.Request(f"{url}/api/v1/query", data=query.encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.mark.parametrize("node_config", ["embedded"], indirect=True)
def test_the_promql_port_takes_the_query_endpoints_credentials(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node]
) -> None:
    """As Grafana's Prometheus data source sends them: basic or bearer."""
    config = node_config.with_options(promql_port=0, query_username="grafana", query_password="s3cret",
                                      query_token="t0ken")  # fmt: skip
    url = start_node(config).promql_url
    assert url is not None
    basic = "Basic " + base64.b64encode(b"grafana:s3cret").decode()
    for good in (basic, "Bearer t0ken"):
        status, body = ask(url, good)
        assert (status, body["data"]["result"][1]) == (200, "2")
    for wrong in (None, "Bearer wrong", "Basic " + base64.b64encode(b"grafana:nope").decode()):
        assert ask(url, wrong)[0] == 401
