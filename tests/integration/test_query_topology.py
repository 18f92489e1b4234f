"""The topology queries of a real node, on each storage, asked over HTTP as
SkyWalking's UI asks them: service A calls service B at ``b-host:8080``
(B's entry spans name that address) and a database, ``mysql:3306``, nobody
reports from. The call to B is one edge measured from both sides; the
database is a virtual node."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from typing import Any

from skyoap.model.metrics import Downsampling, EndpointRelationMetrics, minute_bucket
from skyoap.storage.config import StorageConfig
from skyoap.storage.select import open_storage
from skyoap.vocabulary.duration import Step
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.helpers import eventually
from tests.integration.telemetry_data import collect
from tests.integration.test_aliases import called_by_a, expected, relations, served_by_b
from tests.integration.test_query_endpoint import VERSION, ask

A, B, MYSQL = "QQ==.1", "Qg==.1", "bXlzcWw6MzMwNg==.0"
A1, B1 = f"{A}_YS0x", f"{B}_Yi0x"
JOB, GET_B = f"{A}_am9i", f"{B}_R0VUOi9i"

# As SkyWalking's UI (booster-ui) asks them.
GLOBAL = """query queryData($duration: Duration!) {
    topology: getGlobalTopology(duration: $duration) {
        nodes { id name type isReal layers } calls { id source detectPoints target } } }"""
SERVICE = """query queryData($duration: Duration!, $serviceIds: [ID!]!) {
    topology: getServicesTopology(duration: $duration, serviceIds: $serviceIds) {
        nodes { id name type isReal layers } calls { id source detectPoints target } } }"""
INSTANCES = """query queryData($clientServiceId: ID!, $serverServiceId: ID!, $duration: Duration!) {
    topology: getServiceInstanceTopology(clientServiceId: $clientServiceId,
        serverServiceId: $serverServiceId, duration: $duration) {
        nodes { id name isReal serviceName serviceId } calls { id source target detectPoints } } }"""
ENDPOINT = """query queryData($endpointId: ID!, $duration: Duration!) {
    topology: getEndpointDependencies(endpointId: $endpointId, duration: $duration) {
        nodes { id name serviceId serviceName type isReal } calls { id source target detectPoints } } }"""


def duration(now_ms: int, step: Step) -> dict[str, str]:
    """The ``step`` before ``now_ms``'s to the one after it, as the UI sends a Duration."""
    now = datetime.datetime.fromtimestamp(now_ms / 1000, datetime.UTC)
    start, end = now - step.width, now + step.width
    return {"start": step.format(start), "end": step.format(end), "step": step.value}


def endpoint_relations(config: StorageConfig, minute: int) -> int:
    storage = open_storage(config)
    try:
        return len(storage.metrics.query(EndpointRelationMetrics, Downsampling.MINUTE, minute, minute))
    finally:
        storage.close()


def topology(url: str, query: str, **variables: Any) -> Any:
    reply = ask(url, query, variables)
    assert reply.status == 200, reply.body
    return reply.body


def service(id_: str, name: str, real: bool, type_: str | None = None, layer: str = "") -> dict[str, Any]:
    return {
        "id": id_,
        "name": name,
        "type": type_,
        "isReal": real,
        "layers": [layer or ("GENERAL" if real else "UNDEFINED")],
    }


def call(source: str, target: str, *sides: str, id_: str | None = None) -> dict[str, Any]:
    return {
        "id": id_ or f"{source}-{target}",
        "source": source,
        "detectPoints": list(sides),
        "target": target,
    }


# B's type is the component that served it; A served nothing; the database is
# the server the client library reached, and a service of the virtual layer.
SERVICES = {
    "nodes": [
        service(A, "A", True),
        service(B, "B", True, "Tomcat"),
        service(MYSQL, "mysql:3306", False, "Mysql", "VIRTUAL_DATABASE"),
    ],
    "calls": [call(A, B, "CLIENT", "SERVER"), call(A, MYSQL, "CLIENT")],
}


def test_a_node_answers_who_called_whom_as_it_measured_it(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node]
) -> None:
    fast = {"metrics_persist_interval_s": 0.5, "metrics_l1_flush_period_s": 0.2, "alias_refresh_s": 0.5}
    node = start_node(node_config.with_options(**fast))
    assert node.query_url is not None
    url = node.query_url
    now = int(time.time() * 1000)
    minute = minute_bucket(now)
    collect(node.address, [served_by_b(now, n) for n in range(3)])  # the alias is learned here
    collect(node.address, [called_by_a(now, n) for n in range(3)])
    eventually(lambda: relations(node_config.storage, minute) == expected(3, 3))
    eventually(lambda: endpoint_relations(node_config.storage, minute) == 1)
    minutes = duration(now, Step.MINUTE)

    # The database's own metrics, which make it a service of its layer, are written on their own.
    eventually(lambda: topology(url, GLOBAL, duration=minutes) == {"data": {"topology": SERVICES}})
    # The same calls by DAY, once the minute's relations are merged into its day.
    days = duration(now, Step.DAY)
    eventually(lambda: topology(url, GLOBAL, duration=days) == {"data": {"topology": SERVICES}})
    assert topology(url, SERVICE, duration=minutes, serviceIds=[B]) == {
        "data": {
            "topology": {
                "nodes": [service(A, "A", True), service(B, "B", True, "Tomcat")],
                "calls": [call(A, B, "CLIENT", "SERVER")],
            }
        }
    }

    instances = {
        "nodes": [
            {"id": A1, "name": "a-1", "isReal": True, "serviceName": "A", "serviceId": A},
            {"id": B1, "name": "b-1", "isReal": True, "serviceName": "B", "serviceId": B},
        ],
        "calls": [call(A1, B1, "CLIENT", "SERVER")],
    }
    assert topology(url, INSTANCES, duration=minutes, clientServiceId=A, serverServiceId=B) == {
        "data": {"topology": instances}
    }

    assert topology(url, ENDPOINT, duration=minutes, endpointId=GET_B) == {
        "data": {
            "topology": {
                "nodes": [
                    {
                        "id": JOB,
                        "name": "job",
                        "serviceId": A,
                        "serviceName": "A",
                        "type": None,
                        "isReal": True,
                    },
                    {
                        "id": GET_B,
                        "name": "GET:/b",
                        "serviceId": B,
                        "serviceName": "B",
                        "type": None,
                        "isReal": True,
                    },
                ],
                "calls": [call(JOB, GET_B, "SERVER", id_="QQ==.1-am9i-Qg==.1-R0VUOi9i")],
            }
        }
    }

    bad = topology(url, SERVICE, duration=minutes, serviceIds=["B"])
    assert bad == {
        "data": {"topology": None},
        "errors": [
            {
                "message": "serviceIds 'B' is not an id skyoap gave: a service's id is the base64 of its "
                "name then .1 (a service that reports) or .0",
                "locations": [{"line": 2, "column": 5}],
                "path": ["topology"],
            }
        ],
    }
    assert ask(url, "query version { version }").body == {"data": {"version": VERSION}}
    # The database's own metrics, which make it a service of its layer, are written on their own.
    eventually(lambda: topology(url, GLOBAL, duration=minutes) == {"data": {"topology": SERVICES}})
