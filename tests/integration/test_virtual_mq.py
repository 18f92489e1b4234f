"""Message queues as SkyWalking's UI reads them, on both storages: ``shop``
produces messages to a Kafka broker at ``kafka:9092`` (topic ``orders``),
which ``billing`` consumes, 40 ms after each was produced, as SkyWalking's
agents report them (spans of the MQ layer, the consumer's reference naming
the broker's address). The broker is a service of the VIRTUAL_MQ layer, its
topic an endpoint of it, and it stands between the two in the topology."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Browser

from skyoap.proto.skywalking import common_pb2, tracing_pb2
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.browser import VIEWPORT, open_page
from tests.integration.helpers import eventually
from tests.integration.telemetry_data import collect, span
from tests.integration.test_query_agents import b64
from tests.integration.test_query_traces import ask, minute
from tests.integration.test_virtual_layers import UI_SERVICES

MESSAGES = 3
KAFKA_PRODUCER, KAFKA_CONSUMER = 40, 41
"""SkyWalking's ids of the components, whose server is Kafka."""
BROKER = "kafka:9092"
UI_ENDPOINTS = """query queryEndpoints(
    $serviceId: ID!, $keyword: String!, $duration: Duration, $limit: Int!) {
  pods: findEndpoint(serviceId: $serviceId, keyword: $keyword, limit: $limit, duration: $duration) {
    id value: name label: name } }"""
UI_ENDPOINT = """query queryEndpoint($endpointId: ID!) {
  endpoint: getEndpointInfo(endpointId: $endpointId) { id value: name label: name serviceId serviceName } }"""
UI_TOPOLOGY = """query queryData($duration: Duration!) {
    topology: getGlobalTopology(duration: $duration) {
        nodes { id name type isReal layers } calls { id source detectPoints target } } }"""


def messages(now: int) -> list[tracing_pb2.SegmentObject]:
    def tag(key: str, value: str) -> common_pb2.KeyStringValuePair:
        return common_pb2.KeyStringValuePair(key=key, value=value)

    segments = []
    for n in range(MESSAGES):
        produce = span(
            0,
            -1,
            tracing_pb2.Exit,
            now,
            2,
            False,
            operationName="Kafka/orders/Producer",
            peer=BROKER,
            spanLayer=tracing_pb2.MQ,
            componentId=KAFKA_PRODUCER,
            tags=[tag("mq.topic", "orders")],
        )
        ref = tracing_pb2.SegmentReference(
            refType=tracing_pb2.CrossProcess,
            traceId=f"m{n}",
            parentTraceSegmentId=f"p{n}",
            parentSpanId=0,
            parentService="shop",
            parentServiceInstance="shop-1",
            parentEndpoint="Kafka/orders/Producer",
            networkAddressUsedAtPeer=BROKER,
        )
        consume = span(
            0,
            -1,
            tracing_pb2.Entry,
            now + 40,
            5,
            False,
            operationName="Kafka/orders/Consumer",
            refs=[ref],
            spanLayer=tracing_pb2.MQ,
            componentId=KAFKA_CONSUMER,
            tags=[tag("mq.topic", "orders"), tag("transmission.latency", "40")],
        )
        segments += [
            tracing_pb2.SegmentObject(traceId=f"m{n}", traceSegmentId=f"p{n}", service="shop",
                                      serviceInstance="shop-1", spans=[produce]),
            tracing_pb2.SegmentObject(traceId=f"m{n}", traceSegmentId=f"c{n}", service="billing",
                                      serviceInstance="billing-1", spans=[consume]),
        ]  # fmt: skip
    return segments


def test_a_broker_is_a_service_its_topics_endpoints(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node]
) -> None:
    node = start_node(node_config.with_options(metrics_persist_interval_s=0.5, metrics_l1_flush_period_s=0.2))
    url = node.query_url
    assert url is not None
    now = int(time.time() * 1000) - 60_000
    collect(node.address, messages(now))
    window = {"start": minute(now - 60_000), "end": minute(now + 60_000), "step": "MINUTE"}
    broker = b64(BROKER) + ".0"

    def data(query: str, **variables: Any) -> Any:
        answer = ask(url, query, variables)
        assert "errors" not in answer, answer
        return answer["data"]

    def expression(text: str, **entity: Any) -> Any:
        query = """query ($e: String!, $n: Entity!, $d: Duration!) {
            r: execExpression(expression: $e, entity: $n, duration: $d) { results { values { value } } } }"""
        return data(query, e=text, n=entity, d=window)["r"]["results"][0]["values"][0]["value"]

    queue = {"serviceName": BROKER, "normal": False}
    eventually(lambda: expression("sum(mq_service_consume_cpm)", **queue) == str(MESSAGES))
    services = [
        {"id": broker, "value": BROKER, "label": BROKER, "group": "", "layers": ["VIRTUAL_MQ"],
         "normal": False, "shortName": BROKER},
    ]  # fmt: skip
    # Listed by its day's rows, which are written on their own.
    eventually(lambda: data(UI_SERVICES, layer="VIRTUAL_MQ")["services"] == services)
    topics = [{"id": f"{broker}_{b64('orders')}", "value": "orders", "label": "orders"}]
    asked = {"serviceId": broker, "keyword": "", "limit": 20, "duration": window}
    eventually(lambda: data(UI_ENDPOINTS, **asked)["pods"] == topics)
    # The topic's page asks for it by its id.
    info = data(UI_ENDPOINT, endpointId=topics[0]["id"])["endpoint"]
    assert info == {**topics[0], "serviceId": broker, "serviceName": BROKER}
    assert expression("avg(mq_service_consume_latency)", **queue) == "40"
    assert expression("sum(mq_service_produce_cpm)", **queue) == str(MESSAGES)
    assert expression("avg(mq_service_consume_sla)/100", **queue) == "100"
    topic = {**queue, "endpointName": "orders"}
    eventually(lambda: expression("sum(mq_endpoint_consume_cpm)", **topic) == str(MESSAGES))
    assert expression("avg(mq_endpoint_consume_latency)", **topic) == "40"
    # The broker stands between producer and consumer, a node of its layer typed by what serves it.
    shop, billing = b64("shop") + ".1", b64("billing") + ".1"
    expected = {
        "nodes": [
            {
                "id": billing,
                "name": "billing",
                "type": "kafka-consumer",
                "isReal": True,
                "layers": ["GENERAL"],
            },
            {"id": broker, "name": BROKER, "type": "Kafka", "isReal": False, "layers": ["VIRTUAL_MQ"]},
            {"id": shop, "name": "shop", "type": None, "isReal": True, "layers": ["GENERAL"]},
        ],
        "calls": [
            {"id": f"{broker}-{billing}", "source": broker, "detectPoints": ["SERVER"], "target": billing},
            {"id": f"{shop}-{broker}", "source": shop, "detectPoints": ["CLIENT"], "target": broker},
        ],
    }

    def topology() -> Any:
        found = data(UI_TOPOLOGY, duration=window)["topology"]
        return {
            "nodes": sorted(found["nodes"], key=lambda n: n["name"]),
            "calls": sorted(found["calls"], key=lambda c: c["id"]),
        }

    eventually(lambda: topology() == expected)


@pytest.mark.parametrize("node_config", ["embedded"], indirect=True)
def test_the_web_ui_lists_the_broker(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node], browser: Browser
) -> None:
    node = start_node(node_config.with_options(metrics_persist_interval_s=0.5, metrics_l1_flush_period_s=0.2))
    assert node.ui_url is not None
    now = int(time.time() * 1000)
    now -= now % 60_000 + 30_000  # the middle of the minute before: every message in one minute
    collect(node.address, messages(now))
    url = node.query_url
    assert url is not None
    window = {"start": minute(now - 60_000), "end": minute(now + 60_000), "step": "MINUTE"}
    produced = """query ($d: Duration!) { r: execExpression(expression: "sum(mq_service_produce_cpm)",
        entity: {serviceName: "kafka:9092", normal: false}, duration: $d) {
            results { values { value } } } }"""

    def ready() -> bool:
        listed = ask(url, UI_SERVICES, {"layer": "VIRTUAL_MQ"})["data"]["services"]
        values = ask(url, produced, {"d": window})["data"]["r"]["results"]
        return bool(listed) and bool(values) and values[0]["values"][0]["value"] == str(MESSAGES)

    eventually(ready)
    page = browser.new_page(viewport=VIEWPORT)
    try:
        open_page(page, f"{node.ui_url}#/called?last=15", "called")
        row = page.locator("table.called.mq_service tbody tr")
        # Its messages: consumed and produced per minute, 40 ms in transit, all consumed.
        assert [row.nth(0).locator("td").nth(i).text_content() for i in range(5)] == [
            BROKER, str(MESSAGES), "40", "100", str(MESSAGES),
        ]  # fmt: skip
    finally:
        page.close()
