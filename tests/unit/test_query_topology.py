"""The topology queries over relation rows held in memory, asked as clients
ask them (GraphQL): exact nodes and calls, the Duration's bounds, ids that
are not ids, and the bound on what one topology reads."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from skyoap.model import sketch
from skyoap.model.inventory import ServiceInventory
from skyoap.model.metrics import (
    CallMetrics,
    DatabaseAccessMetrics,
    Downsampling,
    EndpointRelationMetrics,
    Metrics,
    ServiceInstanceRelationMetrics,
    ServiceRelationMetrics,
)
from skyoap.query import topology
from skyoap.query.context import QueryContext
from skyoap.query.execution import Execution, QueryRequest
from skyoap.query.resolvers import resolvers
from skyoap.query.serving import Outcome
from skyoap.storage.api import M, check_where
from skyoap.vocabulary import ids
from skyoap.vocabulary.ttl import TimesToLive
from tests.unit.fakes import MemoryInventoryDAO, MemoryMetricsDAO

A, B, D = "QQ==.1", "Qg==.1", "RA==.1"
MYSQL, USER = "bXlzcWw6MzMwNg==.0", "VXNlcg==.0"
A1, B1, D1 = f"{A}_YS0x", f"{B}_Yi0x", f"{D}_ZC0x"
MYSQL_INSTANCE = f"{MYSQL}_bXlzcWw6MzMwNg=="
JOB, GET_B, GET_D = f"{A}_am9i", f"{B}_R0VUOi9i", f"{D}_R0VUOi9k"
WINDOW = {"start": "2026-11-21 1900", "end": "2026-11-21 1907", "step": "MINUTE"}


class QueriedMetricsDAO(MemoryMetricsDAO):
    """The in-memory metrics, read as the storages read them: the window's
    rows whose columns equal ``where``'s, newest first, at most ``limit``."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.limits: list[int] = []

    def query(
        self,
        model: type[M],
        level: Downsampling,
        first_bucket: int,
        last_bucket: int,
        where: dict[str, str] | None = None,
        limit: int = 10_000,
    ) -> list[M]:
        self.reads += 1
        self.limits.append(limit)
        wanted = check_where(model, where)
        rows = [
            row
            for row in self.values(model, level).values()
            if first_bucket <= row.time_bucket <= last_bucket
            and all(getattr(row, column) == value for column, value in wanted.items())
        ]
        return sorted(rows, key=lambda r: (-r.time_bucket, r.key()))[:limit]

    def distinct(
        self, model: type[Metrics], level: Downsampling, first_bucket: int, columns: Sequence[str]
    ) -> set[tuple[str, ...]]:
        rows = self.values(model, level).values()
        return {tuple(getattr(r, c) for c in columns) for r in rows if r.time_bucket >= first_bucket}

    def hold(self, *rows: CallMetrics) -> None:
        for row in rows:
            self.rows.setdefault((row.MODEL, Downsampling.MINUTE), {})[row.key()] = (row, 1, {})


def calls(n: int) -> dict[str, Any]:
    return {"calls": n, "latency_sum_ms": 5 * n, "histogram": sketch.of_latencies([5] * n)}


def service_relation(
    source: str, dest: str, side: str, minute: int = 1905, components: tuple[int, ...] = ()
) -> ServiceRelationMetrics:
    return ServiceRelationMetrics(
        time_bucket=202611210000 + minute,
        source=source,
        dest=dest,
        detect_point=side,
        components=components,
        **calls(2),
    )


def instance_relation(
    source: tuple[str, str], dest: tuple[str, str], side: str, minute: int = 1905
) -> ServiceInstanceRelationMetrics:
    return ServiceInstanceRelationMetrics(
        time_bucket=202611210000 + minute,
        source_service=source[0],
        source_instance=source[1],
        dest_service=dest[0],
        dest_instance=dest[1],
        detect_point=side,
        **calls(2),
    )


def endpoint_relation(
    source: tuple[str, str], dest: tuple[str, str], minute: int = 1905
) -> EndpointRelationMetrics:
    return EndpointRelationMetrics(
        time_bucket=202611210000 + minute,
        source_service=source[0],
        source_endpoint=source[1],
        dest_service=dest[0],
        dest_endpoint=dest[1],
        **calls(2),
    )


FLASK, REQUESTS, PY_MYSQL, SPRING_MVC, MYSQL_DRIVER = 7001, 7002, 7003, 14, 5
"""Components by SkyWalking's ids; SpringMVC's priority (60) is above Flask's (50)."""


@pytest.fixture
def metrics() -> QueriedMetricsDAO:
    """A calls B (both sides measured it, in two minutes: through Requests,
    into Flask and then SpringMVC) and mysql:3306, which nobody reports
    from (through PyMysql); D calls mysql:3306 too (through Mysql's own
    driver); users call A (served by Flask); C called B, but after the
    window, and A called E before it."""
    dao = QueriedMetricsDAO()
    dao.hold(
        service_relation("A", "B", "server", 1905, (FLASK,)),
        service_relation("A", "B", "server", 1906, (SPRING_MVC,)),
        service_relation("A", "B", "client", 1906, (REQUESTS,)),
        service_relation("A", "mysql:3306", "client", components=(PY_MYSQL,)),
        service_relation("D", "mysql:3306", "client", components=(MYSQL_DRIVER,)),
        service_relation("User", "A", "server", 1900, (FLASK,)),
        service_relation("C", "B", "server", 1908),
        # mysql:3306 is a database: its callers' spans measured it as one.
        DatabaseAccessMetrics(time_bucket=202611211905, service="mysql:3306", **calls(2)),
        service_relation("A", "E", "client", 1859),
        instance_relation(("A", "a-1"), ("B", "b-1"), "server"),
        instance_relation(("A", "a-1"), ("B", "b-1"), "client", 1907),
        instance_relation(("A", "a-1"), ("mysql:3306", "mysql:3306"), "client"),
        instance_relation(("D", "d-1"), ("mysql:3306", "mysql:3306"), "client"),
        endpoint_relation(("A", "job"), ("B", "GET:/b")),
        endpoint_relation(("A", "job"), ("B", "GET:/b"), 1906),
        endpoint_relation(("B", "GET:/b"), ("D", "GET:/d")),
        endpoint_relation(("A", "job"), ("D", "GET:/d")),
    )
    return dao


def ask(metrics: QueriedMetricsDAO, query: str, **variables: Any) -> tuple[Outcome, Any]:
    inventory = MemoryInventoryDAO()
    services = [ServiceInventory(name=name, sequence=n) for n, name in enumerate("ABCDE", 1)]
    inventory.insert(ServiceInventory, services)
    context = QueryContext(inventory, metrics, None, TimesToLive(3, 1, 7, 90, 7, 7))  # type: ignore[arg-type]
    run = Execution(resolvers(), context, deadline_s=30.0, max_depth=15).run
    answer = run(QueryRequest(query, {"duration": WINDOW, **variables}))
    return answer.outcome, json.loads(answer.body)


TOPOLOGY = """nodes { id name type isReal layers }
    calls { id source sourceComponents target targetComponents detectPoints }"""
GLOBAL = f"query ($duration: Duration!, $layer: String) {{ t: getGlobalTopology(duration: $duration, layer: $layer) {{ {TOPOLOGY} }} }}"  # noqa: E501
SERVICES = f"query ($duration: Duration!, $ids: [ID!]!) {{ t: getServicesTopology(duration: $duration, serviceIds: $ids) {{ {TOPOLOGY} }} }}"  # noqa: E501
SERVICE = f"query ($duration: Duration!, $id: ID!) {{ t: getServiceTopology(duration: $duration, serviceId: $id) {{ {TOPOLOGY} }} }}"  # noqa: E501


def node(id_: str, name: str, real: bool, type_: str | None = None) -> dict[str, Any]:
    return {
        "id": id_,
        "name": name,
        "type": type_,
        "isReal": real,
        "layers": ["GENERAL" if real else "UNDEFINED"],
    }


def call(
    source: str, target: str, *sides: str, client: tuple[str, ...] = (), server: tuple[str, ...] = ()
) -> dict[str, Any]:
    return {
        "id": f"{source}-{target}",
        "source": source,
        "sourceComponents": list(client),
        "target": target,
        "targetComponents": list(server),
        "detectPoints": list(sides),
    }


EMPTY: dict[str, list[Any]] = {"nodes": [], "calls": []}
NODE_A, NODE_B, NODE_D = node(A, "A", True, "Flask"), node(B, "B", True, "SpringMVC"), node(D, "D", True)
NODE_MYSQL = {**node(MYSQL, "mysql:3306", False, "Mysql"), "layers": ["VIRTUAL_DATABASE"]}
NODE_USER = node(USER, "User", False, "USER")
CALL_A_B = call(A, B, "CLIENT", "SERVER", client=("Requests",), server=("SpringMVC", "Flask"))
CALL_USER_A = call(USER, A, "SERVER", server=("Flask",))
EVERY_CALL = {
    "nodes": [NODE_A, NODE_B, NODE_D, NODE_USER, NODE_MYSQL],
    "calls": [
        CALL_A_B,
        call(A, MYSQL, "CLIENT", client=("PyMysql",)),
        call(D, MYSQL, "CLIENT", client=("Mysql",)),
        CALL_USER_A,
    ],
}


def test_the_global_topology_is_one_call_per_pair_with_the_sides_that_measured_it_in_the_window(
    metrics: QueriedMetricsDAO,
) -> None:
    assert ask(metrics, GLOBAL) == (Outcome.ANSWERED, {"data": {"t": EVERY_CALL}})


def test_the_global_topology_of_a_layer_is_that_of_its_services(metrics: QueriedMetricsDAO) -> None:
    # Every call has a reporting service at one end: GENERAL is all of them.
    assert ask(metrics, GLOBAL, layer="GENERAL") == (Outcome.ANSWERED, {"data": {"t": EVERY_CALL}})
    assert ask(metrics, GLOBAL, layer="") == (Outcome.ANSWERED, {"data": {"t": EVERY_CALL}})
    reads = metrics.reads
    assert ask(metrics, GLOBAL, layer="MESH") == (
        Outcome.ANSWERED,
        {"data": {"t": {"nodes": [], "calls": []}}},
    )
    assert metrics.reads == reads  # no service is of that layer: nothing to read


def test_a_service_topology_is_its_callers_and_callees(metrics: QueriedMetricsDAO) -> None:
    assert ask(metrics, SERVICE, id=A) == (
        Outcome.ANSWERED,
        {
            "data": {
                "t": {
                    "nodes": [NODE_A, NODE_B, NODE_USER, NODE_MYSQL],
                    "calls": [CALL_A_B, call(A, MYSQL, "CLIENT", client=("PyMysql",)), CALL_USER_A],
                }
            }
        },
    )
    assert ask(metrics, SERVICE, id=MYSQL) == (
        Outcome.ANSWERED,
        {
            "data": {
                "t": {
                    # A served no call of these: nothing gives it a type.
                    "nodes": [{**NODE_A, "type": None}, NODE_D, NODE_MYSQL],
                    "calls": [
                        call(A, MYSQL, "CLIENT", client=("PyMysql",)),
                        call(D, MYSQL, "CLIENT", client=("Mysql",)),
                    ],
                }
            }
        },
    )
    # The id of a service that reports, for a name that does not: no such service.
    assert ask(metrics, SERVICE, id="bXlzcWw6MzMwNg==.1") == (Outcome.ANSWERED, {"data": {"t": EMPTY}})


def test_the_topology_of_several_services_is_the_same_read_by_service_or_whole(
    metrics: QueriedMetricsDAO,
) -> None:
    expected = {
        "nodes": [{**NODE_A, "type": None}, NODE_B, NODE_D, NODE_MYSQL],
        "calls": [
            CALL_A_B,
            call(A, MYSQL, "CLIENT", client=("PyMysql",)),
            call(D, MYSQL, "CLIENT", client=("Mysql",)),
        ],
    }
    assert ask(metrics, SERVICES, ids=[B, MYSQL]) == (Outcome.ANSWERED, {"data": {"t": expected}})
    assert metrics.reads == 4  # each service's calls out and in
    unknown = [ids.service_id(name, True) for name in "FGHIJKLM"]  # services nobody saw
    many = [B, MYSQL, *unknown]
    assert len(many) > topology.FEW_SERVICES
    assert ask(metrics, SERVICES, ids=many) == (Outcome.ANSWERED, {"data": {"t": expected}})
    assert metrics.reads == 5  # the whole window, once
    assert ask(metrics, SERVICES, ids=[]) == (Outcome.ANSWERED, {"data": {"t": EMPTY}})


INSTANCES = """query ($duration: Duration!, $client: ID!, $server: ID!) {
    t: getServiceInstanceTopology(clientServiceId: $client, serverServiceId: $server, duration: $duration) {
        nodes { id name serviceId serviceName type isReal }
        calls { id source sourceComponents target targetComponents detectPoints } } }"""


def instance(id_: str, name: str, service_id: str, service: str, real: bool) -> dict[str, Any]:
    return {
        "id": id_,
        "name": name,
        "serviceId": service_id,
        "serviceName": service,
        "type": None,
        "isReal": real,
    }


def test_the_instance_topology_of_two_services_is_the_calls_between_their_instances_either_way(
    metrics: QueriedMetricsDAO,
) -> None:
    a_and_b = {
        "nodes": [instance(A1, "a-1", A, "A", True), instance(B1, "b-1", B, "B", True)],
        "calls": [call(A1, B1, "CLIENT", "SERVER")],
    }
    assert ask(metrics, INSTANCES, client=A, server=B) == (Outcome.ANSWERED, {"data": {"t": a_and_b}})
    assert ask(metrics, INSTANCES, client=B, server=A) == (Outcome.ANSWERED, {"data": {"t": a_and_b}})
    assert ask(metrics, INSTANCES, client=A, server=MYSQL) == (
        Outcome.ANSWERED,
        {
            "data": {
                "t": {
                    "nodes": [
                        instance(A1, "a-1", A, "A", True),
                        instance(MYSQL_INSTANCE, "mysql:3306", MYSQL, "mysql:3306", False),
                    ],
                    "calls": [call(A1, MYSQL_INSTANCE, "CLIENT")],
                }
            }
        },
    )


DEPENDENCIES = """query ($duration: Duration!, $id: ID!) {
    t: getEndpointDependencies(endpointId: $id, duration: $duration) {
        nodes { id name serviceId serviceName type isReal }
        calls { id source sourceComponents target targetComponents detectPoints } } }"""
ENDPOINT_TOPOLOGY = f"""query ($duration: Duration!, $id: ID!) {{
    t: getEndpointTopology(endpointId: $id, duration: $duration) {{ {TOPOLOGY} }} }}"""


def endpoint_call(source: str, target: str) -> dict[str, Any]:
    """SkyWalking's endpoint relation id: each end's service id and the base64 of its name."""
    call_id = "-".join([*source.split("_"), *target.split("_")])
    return {**call(source, target, "SERVER"), "id": call_id}


def test_an_endpoints_dependencies_are_the_endpoints_that_called_it_and_those_it_called(
    metrics: QueriedMetricsDAO,
) -> None:
    calls_ = [endpoint_call(JOB, GET_B), endpoint_call(GET_B, GET_D)]
    assert calls_[0]["id"] == "QQ==.1-am9i-Qg==.1-R0VUOi9i"
    assert ask(metrics, DEPENDENCIES, id=GET_B) == (
        Outcome.ANSWERED,
        {
            "data": {
                "t": {
                    "nodes": [
                        instance(JOB, "job", A, "A", True),
                        instance(GET_B, "GET:/b", B, "B", True),
                        instance(GET_D, "GET:/d", D, "D", True),
                    ],
                    "calls": calls_,
                }
            }
        },
    )
    plain = [
        {"id": id_, "name": name, "type": "", "isReal": True, "layers": []}
        for id_, name in ((GET_B, "GET:/b"), (GET_D, "GET:/d"), (JOB, "job"))
    ]
    assert ask(metrics, ENDPOINT_TOPOLOGY, id=GET_B) == (
        Outcome.ANSWERED,
        {"data": {"t": {"nodes": plain, "calls": calls_}}},
    )


def test_users_are_the_callers_of_an_entry_endpoint_no_service_called(metrics: QueriedMetricsDAO) -> None:
    metrics.hold(endpoint_relation(("User", "User"), ("A", "job")))
    user = f"{USER}_VXNlcg=="
    _, answer = ask(metrics, DEPENDENCIES, id=JOB)
    assert answer["data"]["t"]["nodes"] == [
        instance(JOB, "job", A, "A", True),
        instance(GET_B, "GET:/b", B, "B", True),
        instance(GET_D, "GET:/d", D, "D", True),
        {**instance(user, "User", USER, "User", False), "type": "USER"},
    ]
    assert answer["data"]["t"]["calls"][-1] == endpoint_call(user, JOB)


def error(outcome_answer: tuple[Outcome, Any]) -> str:
    outcome, answer = outcome_answer
    assert outcome is Outcome.FAILED
    assert answer["data"] == {"t": None}
    (only,) = answer["errors"]
    return str(only["message"])


def test_an_id_that_is_not_one_is_answered_with_what_an_id_is(metrics: QueriedMetricsDAO) -> None:
    def refused(argument: str, given: str) -> str:
        return f"{argument} {given!r} is not an id skyoap gave: "

    assert error(ask(metrics, SERVICE, id="A")) == refused("serviceIds", "A") + (
        "a service's id is the base64 of its name then .1 (a service that reports) or .0"
    )
    ids_come_from = (
        "ids come from listServices, listInstances and findEndpoint (a service's is the base64 of its "
        "name, then .1 or .0)"
    )
    assert (
        error(ask(metrics, SERVICE, id="QQ.1")) == refused("serviceIds", "QQ.1") + ids_come_from
    )  # no padding
    assert error(ask(metrics, SERVICES, ids=[A, "QQ==.2"])).startswith(refused("serviceIds", "QQ==.2"))
    assert error(ask(metrics, INSTANCES, client=A, server=A1)).startswith(refused("serverServiceId", A1))
    assert error(ask(metrics, DEPENDENCIES, id=A)) == refused("endpointId", A) + (
        "it is its service's id, _, then the base64 of its name"
    )
    assert error(ask(metrics, DEPENDENCIES, id=f"{A}_not base64")) == (
        refused("endpointId", f"{A}_not base64") + ids_come_from
    )


def test_a_duration_that_cannot_be_read_is_answered_with_why(metrics: QueriedMetricsDAO) -> None:
    seconds = {"start": "2026-11-21 190000", "end": "2026-11-21 190500", "step": "SECOND"}
    assert error(ask(metrics, GLOBAL, duration=seconds)) == (
        "skyoap keeps metrics per minute, hour and day: the smallest step for metrics is MINUTE, not SECOND"
    )
    backwards = {**WINDOW, "start": "2026-11-21 1910"}
    assert error(ask(metrics, GLOBAL, duration=backwards)) == (
        "Duration end '2026-11-21 1907' is before its start '2026-11-21 1910'"
    )


def test_a_topology_of_more_rows_than_one_reads_is_refused_with_what_to_ask(
    metrics: QueriedMetricsDAO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(topology, "MAX_ROWS", 6)
    assert ask(metrics, SERVICE, id=B)[0] is Outcome.ANSWERED  # 2 + 1 rows in, none out
    assert error(ask(metrics, GLOBAL)) == (
        "the global topology from 2026-11-21 1900 to 2026-11-21 1907 by MINUTE has 6 relation rows or "
        "more (one per relation and minute), and this node builds a topology from fewer; ask for a "
        "shorter Duration, or a step of HOUR or DAY"
    )
    assert all(limit <= 6 for limit in metrics.limits)
    # The bound is of the rows of every read together: A's 5 and B's 3.
    assert error(ask(metrics, SERVICES, ids=[A, B])).startswith(
        "the topology of 'A', 'B' from 2026-11-21 1900 to 2026-11-21 1907 by MINUTE has 6 relation rows "
    )


BY_NAMES = """query ($duration: Duration!, $a: ServiceCondition!, $mysql: ServiceCondition!,
        $endpoint: EndpointCondition!) {
    one: getServiceTopologyByName(service: $a, duration: $duration) { nodes { id } calls { id detectPoints } }
    some: getServicesTopologyByNames(services: [$a, $mysql], duration: $duration) {
        nodes { id } calls { id detectPoints } }
    instances: getServiceInstanceTopologyByName(
        clientService: $a, serverService: $mysql, duration: $duration) {
        nodes { id } calls { id detectPoints } }
    endpoint: getEndpointDependenciesByName(endpoint: $endpoint, duration: $duration) {
        nodes { id } calls { id detectPoints } } }"""
BY_IDS = """query ($duration: Duration!, $a: ID!, $mysql: ID!, $endpoint: ID!) {
    one: getServiceTopology(serviceId: $a, duration: $duration) { nodes { id } calls { id detectPoints } }
    some: getServicesTopology(serviceIds: [$a, $mysql], duration: $duration) {
        nodes { id } calls { id detectPoints } }
    instances: getServiceInstanceTopology(clientServiceId: $a, serverServiceId: $mysql, duration: $duration) {
        nodes { id } calls { id detectPoints } }
    endpoint: getEndpointDependencies(endpointId: $endpoint, duration: $duration) {
        nodes { id } calls { id detectPoints } } }"""


def test_a_topology_asked_by_names_is_that_of_the_ids_the_names_make(metrics: QueriedMetricsDAO) -> None:
    by_ids = ask(metrics, BY_IDS, a=A, mysql=MYSQL, endpoint=GET_B)
    assert by_ids[0] is Outcome.ANSWERED
    assert by_ids[1]["data"]["instances"]["calls"] == [
        {"id": f"{A1}-{MYSQL_INSTANCE}", "detectPoints": ["CLIENT"]}
    ]
    # A service of no layer or a layer of reporting services is one that reports; of UNDEFINED or a
    # VIRTUAL_ layer, one known only from its callers.
    for a_layer, mysql_layer in ((None, "VIRTUAL_DATABASE"), ("GENERAL", "UNDEFINED")):
        by_names = ask(
            metrics,
            BY_NAMES,
            a={"serviceName": "A", "layer": a_layer},
            mysql={"serviceName": "mysql:3306", "layer": mysql_layer},
            endpoint={"serviceName": "B", "endpointName": "GET:/b"},
        )
        assert by_names == by_ids
