"""Metadata and metrics queries over a real embedded storage: what SkyWalking's
UI and CLI ask for a service list, an instance list, endpoints, a metric's
series and average, a top list, and what a bad id or a read too large gets."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import graphql
import pytest

from skyoap.model import sketch
from skyoap.model.inventory import (
    INVENTORY_TYPES,
    EndpointInventory,
    ServiceInstanceInventory,
    ServiceInventory,
)
from skyoap.model.metrics import (
    METRICS_TYPES,
    Downsampling,
    EndpointMetrics,
    MeterMetrics,
    ServiceMetrics,
)
from skyoap.model.records import RECORD_TYPES
from skyoap.mqe import stored
from skyoap.query import status
from skyoap.query.context import QueryContext
from skyoap.query.execution import Execution, QueryRequest
from skyoap.query.resolvers import resolvers
from skyoap.runtime.config import effective
from skyoap.storage.api import MetricsWrite
from skyoap.storage.config import StorageConfig, StorageKind
from skyoap.storage.select import OpenStorage, open_storage
from skyoap.vocabulary.ttl import TimesToLive
from skyoap.wiring.config import NodeConfig

MINUTE = 202611241000
"""10:00 UTC; the rows below are of 10:00 to 10:04."""
NOW_MS = 1_795_514_400_000  # 2026-11-24 10:00 UTC
DURATION = {"start": "2026-11-24 1000", "end": "2026-11-24 1004", "step": "MINUTE"}
SHOP = base64.b64encode(b"shop").decode() + ".1"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def calls(n: int, errors: int = 0, latency_ms: int = 10) -> dict[str, Any]:
    """``n`` calls of ``latency_ms`` each, ``errors`` of them failed."""
    histogram = sketch.of_latencies([latency_ms] * n)
    return {"calls": n, "errors": errors, "latency_sum_ms": n * latency_ms, "histogram": histogram}


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[OpenStorage]:
    opened = open_storage(StorageConfig(kind=StorageKind.EMBEDDED, embedded_path=str(tmp_path / "s.db")))
    inv = opened.inventory
    inv.install(INVENTORY_TYPES)
    opened.metrics.install(METRICS_TYPES)
    opened.records.install(RECORD_TYPES)
    inv.insert(
        ServiceInventory,
        [ServiceInventory(name="shop", sequence=1), ServiceInventory(name="pay::checkout", sequence=2)],
    )
    inv.insert(
        ServiceInstanceInventory,
        [
            ServiceInstanceInventory(
                name="shop-1", sequence=1, service_id=1, instance_uuid="shop-1", heartbeat_time=NOW_MS,
                properties={"language": "python", "hostname": "h1"},
            ),
            # Last seen a day before the Duration.
            ServiceInstanceInventory(
                name="shop-2", sequence=2, service_id=1, instance_uuid="shop-2",
                heartbeat_time=NOW_MS - 86_400_000,
            ),
            ServiceInstanceInventory(
                name="pay-1", sequence=3, service_id=2, instance_uuid="pay-1", heartbeat_time=NOW_MS
            ),
        ],
    )  # fmt: skip
    inv.insert(
        EndpointInventory,
        [
            EndpointInventory(name="/orders", sequence=1, service_id=1, detect_point=1),
            EndpointInventory(name="/pay", sequence=2, service_id=1, detect_point=1),
            EndpointInventory(name="/refund", sequence=3, service_id=2, detect_point=1),
        ],
    )
    minute = Downsampling.MINUTE
    rows: list[Any] = [
        ServiceMetrics(time_bucket=MINUTE, service="shop", **calls(10, errors=1, latency_ms=20)),
        ServiceMetrics(time_bucket=MINUTE + 2, service="shop", **calls(30, latency_ms=100)),
        ServiceMetrics(time_bucket=MINUTE, service="pay::checkout", **calls(5)),
    ]
    opened.metrics.put(ServiceMetrics, minute, [MetricsWrite(None, r, {"w": 1}) for r in rows])
    endpoints = [
        EndpointMetrics(time_bucket=MINUTE, service="shop", endpoint="/orders", **calls(8)),
        EndpointMetrics(time_bucket=MINUTE, service="shop", endpoint="/pay", **calls(2)),
        EndpointMetrics(time_bucket=MINUTE + 1, service="shop", endpoint="/pay", **calls(6)),
    ]
    opened.metrics.put(EndpointMetrics, minute, [MetricsWrite(None, r, {"w": 1}) for r in endpoints])
    meters = [
        MeterMetrics(
            time_bucket=MINUTE + m, service="shop", instance="shop-1", name="pool", labels=f"kind={kind}",
            samples=2, value_sum=total, last_value=total / 2, last_time=NOW_MS + m * 60_000,
        )
        for m, kind, total in ((0, "core", 8.0), (1, "core", 12.0), (0, "max", 40.0))
    ]  # fmt: skip
    opened.metrics.put(MeterMetrics, minute, [MetricsWrite(None, r, {"w": 1}) for r in meters])
    # Meters are found by name in the day rows, which every meter reported has.
    days = [meters[0].downsampled(Downsampling.DAY), meters[2].downsampled(Downsampling.DAY)]
    opened.metrics.put(MeterMetrics, Downsampling.DAY, [MetricsWrite(None, r, {"w": 1}) for r in days])
    yield opened
    opened.close()


def ask(storage: OpenStorage, query: str, **variables: Any) -> Any:
    ttl = TimesToLive(3, 1, 7, 90, 7, 7)
    context = QueryContext(storage.inventory, storage.metrics, storage.records, ttl)
    binder = resolvers()
    result = graphql.graphql_sync(
        binder.schema, query, variable_values=variables, context_value=context, field_resolver=binder.resolve
    )
    return result.data, [e.message for e in result.errors or []]


def test_services_are_listed_with_their_ids_groups_and_layer(storage: OpenStorage) -> None:
    data, errors = ask(
        storage, '{ listLayers listServices(layer: "GENERAL") { id name group shortName layers normal } }'
    )
    assert errors == []
    assert data == {
        "listLayers": ["GENERAL"],
        "listServices": [
            {"id": b64("pay::checkout") + ".1", "name": "pay::checkout", "group": "pay",
             "shortName": "checkout", "layers": ["GENERAL"], "normal": True},
            {"id": SHOP, "name": "shop", "group": "", "shortName": "shop", "layers": ["GENERAL"],
             "normal": True},
        ],
    }  # fmt: skip
    data, _ = ask(storage, '{ listServices(layer: "MESH") { name } findService(serviceName: "shop") { id } }')
    assert data == {"listServices": [], "findService": {"id": SHOP}}
    data, _ = ask(storage, "query($d: Duration!) { getAllServices(duration: $d) { name } }", d=DURATION)
    assert data == {"getAllServices": [{"name": "pay::checkout"}, {"name": "shop"}]}


def test_instances_alive_in_the_duration_are_listed_with_their_attributes(storage: OpenStorage) -> None:
    query = """query($d: Duration!, $id: ID!) {
        listInstances(duration: $d, serviceId: $id) {
            id name language instanceUUID attributes { name value }
        }
    }"""
    data, errors = ask(storage, query, d=DURATION, id=SHOP)
    assert errors == []
    assert data == {
        "listInstances": [
            {"id": f"{SHOP}_{b64('shop-1')}", "name": "shop-1", "language": "PYTHON",
             "instanceUUID": "shop-1",
             "attributes": [{"name": "hostname", "value": "h1"}, {"name": "language", "value": "python"}]},
        ]
    }  # fmt: skip
    data, _ = ask(storage, f'{{ getInstance(instanceId: "{SHOP}_{b64("shop-2")}") {{ name language }} }}')
    assert data == {"getInstance": {"name": "shop-2", "language": "UNKNOWN"}}


def test_endpoints_are_found_by_keyword_and_by_id(storage: OpenStorage) -> None:
    data, errors = ask(
        storage, f'{{ findEndpoint(serviceId: "{SHOP}", keyword: "pa", limit: 10) {{ id name }} }}'
    )
    assert errors == []
    assert data == {"findEndpoint": [{"id": f"{SHOP}_{b64('/pay')}", "name": "/pay"}]}
    data, _ = ask(storage, f'{{ findEndpoint(serviceId: "{SHOP}", limit: 1) {{ name }} }}')
    assert data == {"findEndpoint": [{"name": "/orders"}]}
    data, _ = ask(
        storage, f'{{ getEndpointInfo(endpointId: "{SHOP}_{b64("/pay")}") {{ name serviceId serviceName }} }}'
    )
    assert data == {"getEndpointInfo": {"name": "/pay", "serviceId": SHOP, "serviceName": "shop"}}


def test_a_bad_id_says_what_is_wrong(storage: OpenStorage) -> None:
    data, errors = ask(storage, '{ getService(serviceId: "shop") { name } }')
    assert data == {"getService": None}
    assert errors == [
        "serviceId 'shop' is not an id skyoap gave: a service's id is the base64 of its name then .1 "
        "(a service that reports) or .0"
    ]
    _, errors = ask(storage, '{ getInstance(instanceId: "c2hvcA==.1_%%%") { name } }')
    assert errors == [
        "serviceInstanceId 'c2hvcA==.1_%%%' is not an id skyoap gave: ids come from listServices, "
        "listInstances and findEndpoint (a service's is the base64 of its name, then .1 or .0)"
    ]


def test_times_to_live_are_the_nodes(storage: OpenStorage) -> None:
    data, _ = ask(
        storage, "{ getMetricsTTL { metadata minute hour day coldDay } getRecordsTTL { trace log coldLog } }"
    )
    assert data == {
        "getMetricsTTL": {"metadata": 7, "minute": 1, "hour": 7, "day": 90, "coldDay": -1},
        "getRecordsTTL": {"trace": 3, "log": 3, "coldLog": -1},
    }


EXPRESSION = """query($e: String!, $entity: Entity!, $d: Duration!) {
    execExpression(expression: $e, entity: $entity, duration: $d) {
        type error results {
            metric { labels { key value } } values { id value owner { serviceName endpointName } }
        }
    }
}"""


def expression(storage: OpenStorage, text: str, **entity: Any) -> dict[str, Any]:
    data, errors = ask(storage, EXPRESSION, e=text, entity=entity, d=DURATION)
    assert errors == []
    result: dict[str, Any] = data["execExpression"]
    return result


def ms(minute: int) -> str:
    return str(NOW_MS + minute * 60_000)


def test_a_metric_is_a_series_with_null_where_nothing_was_measured(storage: OpenStorage) -> None:
    result = expression(storage, "service_cpm", serviceName="shop", normal=True)
    assert result["type"] == "TIME_SERIES_VALUES" and result["error"] is None
    (series,) = result["results"]
    assert [(v["id"], v["value"]) for v in series["values"]] == [
        (ms(0), "10"), (ms(1), None), (ms(2), "30"), (ms(3), None), (ms(4), None),
    ]  # fmt: skip
    result = expression(storage, "avg(service_sla) / 100", serviceName="shop", normal=True)
    assert result["type"] == "SINGLE_VALUE"
    # 90.00 % and 100.00 %, averaged over the minutes measured
    assert result["results"][0]["values"] == [{"id": None, "value": "95", "owner": None}]


def test_percentiles_and_meters_come_one_series_per_label(storage: OpenStorage) -> None:
    result = expression(storage, "service_percentile{p='50,99'}", serviceName="shop")
    assert [(r["metric"]["labels"], [v["value"] for v in r["values"]]) for r in result["results"]] == [
        ([{"key": "p", "value": "50"}], ["20", None, "100", None, None]),
        ([{"key": "p", "value": "99"}], ["20", None, "100", None, None]),
    ]
    result = expression(
        storage, "latest(pool{kind='core'})", serviceName="shop", serviceInstanceName="shop-1"
    )
    assert [(r["metric"]["labels"], r["values"][0]["value"]) for r in result["results"]] == [
        ([{"key": "kind", "value": "core"}], "6")
    ]


def test_top_n_ranks_the_endpoints_of_a_service(storage: OpenStorage) -> None:
    result = expression(storage, "top_n(endpoint_cpm, 2, des)", serviceName="shop", normal=True)
    assert result["type"] == "SORTED_LIST"
    assert [(v["value"], v["owner"]["endpointName"]) for v in result["results"][0]["values"]] == [
        ("8", "/orders"),
        ("4", "/pay"),
    ]


def test_what_cannot_be_evaluated_answers_an_error(storage: OpenStorage) -> None:
    result = expression(storage, "no_such_metric", serviceName="shop")
    assert result == {"type": "UNKNOWN", "error": "Metric: [no_such_metric] does not exist.", "results": []}
    result = expression(storage, "service_cpm +", serviceName="shop")
    assert result["type"] == "UNKNOWN" and result["error"]


def test_a_read_past_the_row_bound_is_refused(storage: OpenStorage, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stored, "MAX_ROWS", 2)
    result = expression(storage, "top_n(endpoint_cpm, 2, des)", serviceName="shop")
    assert result["error"] == (
        "endpoint_cpm has more than 2 rows in the Duration: shorten it or take a longer step"
    )


def test_read_metrics_values_fills_every_bucket(storage: OpenStorage) -> None:
    query = """query($c: MetricsCondition!, $d: Duration!) {
        readMetricsValues(condition: $c, duration: $d) { label values { values { id value isEmptyValue } } }
    }"""
    condition = {"name": "service_cpm", "entity": {"serviceName": "shop", "normal": True}}
    data, errors = ask(storage, query, c=condition, d=DURATION)
    assert errors == []
    values = data["readMetricsValues"]["values"]["values"]
    assert [(v["id"], v["value"], v["isEmptyValue"]) for v in values] == [
        (f"{MINUTE}_{SHOP}", 10, False),
        (f"{MINUTE + 1}_{SHOP}", 0, True),
        (f"{MINUTE + 2}_{SHOP}", 30, False),
        (f"{MINUTE + 3}_{SHOP}", 0, True),
        (f"{MINUTE + 4}_{SHOP}", 0, True),
    ]


def expressions_of(widgets: list[dict[str, Any]]) -> Iterator[str]:
    for w in widgets:
        yield from w.get("expressions", [])
        yield from w.get("subExpressions", [])
        for key in ("nodeExpressions", "linkServerExpressions", "linkClientExpressions"):
            yield from w.get(key, [])
        for tab in w.get("children", []):
            yield from expressions_of(tab["children"])


def test_every_expression_of_every_dashboard_evaluates(storage: OpenStorage) -> None:
    data, errors = ask(storage, "{ getAllTemplates { id configuration } }")
    assert errors == []
    templates = {t["id"]: json.loads(t["configuration"]) for t in data["getAllTemplates"]}
    assert {(c["layer"], c["entity"], c["name"], c["isRoot"]) for c in templates.values()} == {
        ("GENERAL", "All", "General-Root", True),
        ("GENERAL", "Service", "General-Service", False),
        ("GENERAL", "ServiceInstance", "General-Instance", False),
        ("GENERAL", "Endpoint", "General-Endpoint", False),
        ("GENERAL", "ServiceRelation", "General-Service-Relation", False),
        ("GENERAL", "ServiceInstanceRelation", "General-Instance-Relation", False),
        ("GENERAL", "EndpointRelation", "General-Endpoint-Relation", False),
        ("VIRTUAL_DATABASE", "All", "Virtual-Database-Root", True),
        ("VIRTUAL_DATABASE", "Service", "Virtual-Database-Service", False),
        ("VIRTUAL_CACHE", "All", "Virtual-Cache-Root", True),
        ("VIRTUAL_CACHE", "Service", "Virtual-Cache-Service", False),
        ("VIRTUAL_MQ", "All", "Virtual-MQ-Root", True),
        ("VIRTUAL_MQ", "Service", "Virtual-MQ-Service", False),
        ("VIRTUAL_MQ", "Endpoint", "Virtual-MQ-Endpoint", False),
        ("OS_LINUX", "All", "Linux-Root", True),
        ("OS_LINUX", "Service", "Linux-Service", False),
        *(
            (layer, entity, f"{name}-{page}", page == "Root")
            for layer, name in (("MYSQL", "MySQL"), ("POSTGRESQL", "PostgreSQL"), ("REDIS", "Redis"))
            for entity, page in (("All", "Root"), ("Service", "Service"), ("ServiceInstance", "Instance"))
        ),
    }
    entity = {
        "serviceName": "shop", "normal": True, "serviceInstanceName": "shop-1", "endpointName": "/orders",
        "destServiceName": "pay::checkout", "destNormal": True, "destServiceInstanceName": "pay-1",
        "destEndpointName": "/refund",
    }  # fmt: skip
    found = {e for c in templates.values() for e in expressions_of(c["children"])}
    assert len(found) > 40
    failed = {e: r["error"] for e in sorted(found) if (r := expression(storage, e, **entity))["error"]}
    assert failed == {}
    shop = expression(storage, "avg(service_cpm)", **entity)
    assert shop["results"][0]["values"][0]["value"] == "20"


def test_the_menu_shows_the_general_layer_once_it_has_services(storage: OpenStorage, tmp_path: Path) -> None:
    query = "{ getMenuItems { title layer activate subItems { title layer activate } } }"
    data, _ = ask(storage, query)
    assert data == {
        "getMenuItems": [
            {"title": "General Service", "layer": "", "activate": True,
             "subItems": [{"title": "Services", "layer": "GENERAL", "activate": True},
                          {"title": "Virtual Database", "layer": "VIRTUAL_DATABASE", "activate": False},
                          {"title": "Virtual Cache", "layer": "VIRTUAL_CACHE", "activate": False},
                          {"title": "Virtual MQ", "layer": "VIRTUAL_MQ", "activate": False}]},
            {"title": "Infrastructure", "layer": "", "activate": False,
             "subItems": [{"title": "Linux", "layer": "OS_LINUX", "activate": False}]},
            {"title": "Database", "layer": "", "activate": False,
             "subItems": [{"title": "MySQL", "layer": "MYSQL", "activate": False},
                          {"title": "PostgreSQL", "layer": "POSTGRESQL", "activate": False},
                          {"title": "Redis", "layer": "REDIS", "activate": False}]},
        ]
    }  # fmt: skip
    empty = open_storage(StorageConfig(kind=StorageKind.EMBEDDED, embedded_path=str(tmp_path / "e.db")))
    try:
        empty.inventory.install(INVENTORY_TYPES)
        empty.metrics.install(METRICS_TYPES)
        data, _ = ask(empty, query)
    finally:
        empty.close()
    assert data["getMenuItems"][0]["activate"] is False


def test_status_pages_give_the_times_to_live_and_the_nodes() -> None:
    ttl = status.ttl_page(TimesToLive(3, 1, 7, 90, 7, 7))
    records = ("normal", "trace", "zipkinTrace", "log", "browserErrorLog")
    assert ttl(False).body.decode().splitlines() == [
        "metrics.minute=1", "metrics.hour=7", "metrics.day=90", *(f"records.{r}=3" for r in records),
        "metrics.minute.cold=-1", "metrics.hour.cold=-1", "metrics.day.cold=-1",
        *(f"records.{r}.cold=-1" for r in records),
    ]  # fmt: skip
    # As SkyWalking's UI reads it (its settings page): the keys of SkyWalking 10's TTL definition.
    assert json.loads(ttl(True).body) == {
        "metrics": {"minute": 1, "hour": 7, "day": 90, "coldMinute": -1, "coldHour": -1, "coldDay": -1},
        "records": {"normal": 3, "trace": 3, "zipkinTrace": 3, "log": 3, "browserErrorLog": 3,
                    "coldNormal": -1, "coldTrace": -1, "coldZipkinTrace": -1, "coldLog": -1,
                    "coldBrowserErrorLog": -1},
    }  # fmt: skip
    # Every option, by section, a credential masked.
    given = {"auth_token": "t0ken", "query_port": 8080, "redis_url": "redis://me:pw@h:6379/0"}
    dump = status.config_page(effective(NodeConfig().with_options(**given)))
    shown = json.loads(dump(True).body)
    names = ("server.auth_token", "storage.redis_url", "query.query_port", "query.query_max_tokens")
    assert [shown[n] for n in names] == ["******", "redis://******@h:6379/0", "8080", "50000"]
    assert "storage.es_password=\n" in dump(False).body.decode()  # none given: nothing to mask
    nodes = status.cluster_page(lambda: [("10.0.0.1:11800", True), ("10.0.0.2:11800", False)])
    assert json.loads(nodes(True).body) == {
        "nodes": [
            {"host": "10.0.0.1", "port": 11800, "self": True},
            {"host": "10.0.0.2", "port": 11800, "self": False},
        ]
    }


class CountedReads:
    """The metrics storage, counting its queries."""

    def __init__(self, metrics: Any) -> None:
        self.metrics = metrics
        self.queries = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.metrics, name)

    def query(self, *args: Any, **kwargs: Any) -> Any:
        self.queries += 1
        return self.metrics.query(*args, **kwargs)


def test_a_list_of_entities_in_one_request_reads_their_rows_at_once(storage: OpenStorage) -> None:
    """As the UI's service list asks: an average per service, aliased."""
    counted = CountedReads(storage.metrics)
    context = QueryContext(storage.inventory, counted, storage.records, TimesToLive(3, 1, 7, 90, 7, 7))
    execution = Execution(resolvers(), context, deadline_s=30.0, max_depth=15)
    names = ["shop", "pay::checkout", "gone", "shop"]
    fields = " ".join(
        f'e{i}: execExpression(expression: "avg(service_cpm)", entity: {{serviceName: "{n}", normal: true}}, '
        "duration: $d) { results { values { value } } }"
        for i, n in enumerate(names)
    )
    request = QueryRequest(f"query ($d: Duration!) {{ {fields} }}", {"d": DURATION})
    data = json.loads(execution.run(request).body)["data"]
    values = [data[f"e{i}"]["results"][0]["values"][0]["value"] for i in range(len(names))]
    assert values == ["20", "5", None, "20"]
    assert counted.queries == 1  # the rows of the three services
    execution.run(request)
    assert counted.queries == 2  # a request reads afresh
    alone = ask(storage, f"query ($d: Duration!) {{ {fields} }}", d=DURATION)
    assert alone == ({f"e{i}": {"results": [{"values": [{"value": v}]}]} for i, v in enumerate(values)}, [])


# SkyWalking's CLI's queries, as it sends them (swctl metrics single, nullable,
# multiple-linear, top, list; dashboard global).
SWCTL_VALUE = """query ($condition: MetricsCondition!, $duration: Duration!) {
    result: readMetricsValue(condition: $condition, duration: $duration)
}"""
SWCTL_NULLABLE = """query ($condition: MetricsCondition!, $duration: Duration!) {
    result: readNullableMetricsValue(condition: $condition, duration: $duration) {
        value
        isEmptyValue
    }
}"""
SWCTL_LABELED = """query ($condition: MetricsCondition!, $labels: [String!]!, $duration: Duration!) {
    result: readLabeledMetricsValues(condition: $condition, labels: $labels, duration: $duration) {
        label
        values {
            values {
                value
                isEmptyValue
            }
        }
    }
}"""
SWCTL_SORT = """query ($condition:TopNCondition!, $duration: Duration!) {
    result: sortMetrics(condition: $condition, duration: $duration) {
        name
        value
    }
}"""
SWCTL_LIST = """query ($regex: String!) {
    result: listMetrics(regex: $regex) {
        name
        type
        catalog
    }
}"""


def shop(name: str) -> dict[str, Any]:
    return {"name": name, "entity": {"scope": "Service", "serviceName": "shop", "normal": True}}


def test_a_metric_over_a_duration_is_the_mean_of_its_buckets_with_data(storage: OpenStorage) -> None:
    def value(query: str, condition: dict[str, Any]) -> Any:
        data, errors = ask(storage, query, condition=condition, duration=DURATION)
        assert errors == []
        return data["result"]

    # shop took 10 calls in 10:00 (one failed, 20 ms each) and 30 in 10:02 (100 ms each).
    assert value(SWCTL_VALUE, shop("service_cpm")) == 20
    assert value(SWCTL_VALUE, shop("service_resp_time")) == 60
    assert value(SWCTL_VALUE, shop("service_sla")) == 9500
    assert value(SWCTL_NULLABLE, shop("service_cpm")) == {"value": 20, "isEmptyValue": False}
    nobody = {"name": "service_cpm", "entity": {"serviceName": "nobody", "normal": True}}
    assert value(SWCTL_NULLABLE, nobody) == {"value": 0, "isEmptyValue": True}
    assert value(SWCTL_VALUE, nobody) == 0


@pytest.mark.parametrize(
    ("query", "condition", "message"),
    [
        (
            SWCTL_VALUE,
            shop("nope"),
            "readMetricsValue: there is no metric 'nope' (listMetrics lists those skyoap has)",
        ),
        (
            SWCTL_NULLABLE,
            shop("service_mq_consume_count"),
            "readNullableMetricsValue: service_mq_consume_count is SkyWalking's; skyoap does not measure it",
        ),
        (
            SWCTL_VALUE,
            shop("service_percentile"),
            "readMetricsValue reads a metric of type REGULAR_VALUE; service_percentile is LABELED_VALUE",
        ),
        (
            SWCTL_VALUE,
            shop("endpoint_cpm"),
            "readMetricsValue: endpoint_cpm is of scope Endpoint: the entity needs endpointName",
        ),
    ],
)
def test_a_metric_skyoap_does_not_measure_is_answered_with_an_error(
    storage: OpenStorage, query: str, condition: dict[str, Any], message: str
) -> None:
    data, errors = ask(storage, query, condition=condition, duration=DURATION)
    assert (data, errors) == (None, [message])


def test_labeled_values_are_read_by_their_labels(storage: OpenStorage) -> None:
    def labeled(condition: dict[str, Any], labels: list[str]) -> list[tuple[str, list[int | None]]]:
        data, errors = ask(storage, SWCTL_LABELED, condition=condition, labels=labels, duration=DURATION)
        assert errors == []
        return [
            (s["label"], [None if v["isEmptyValue"] else v["value"] for v in s["values"]["values"]])
            for s in data["result"]
        ]

    percentile = shop("service_percentile")
    assert labeled(percentile, ["50", "p=95"]) == [
        ("{p=50}", [20, None, 100, None, None]),
        ("{p=95}", [20, None, 100, None, None]),
    ]
    assert [label for label, _ in labeled(percentile, [""])] == [
        "{p=50}",
        "{p=75}",
        "{p=90}",
        "{p=95}",
        "{p=99}",
    ]
    pool = {
        "name": "pool",
        "entity": {"serviceName": "shop", "serviceInstanceName": "shop-1", "normal": True},
    }
    assert labeled(pool, ["{kind=core}", "max"]) == [
        ("{kind=core}", [4, 6, None, None, None]),
        ("{kind=max}", [20, None, None, None, None]),
    ]
    _, errors = ask(storage, SWCTL_LABELED, condition=percentile, labels=["42"], duration=DURATION)
    assert errors == ["the metric has no label '42'; its labels: {p=50}, {p=75}, {p=90}, {p=95}, {p=99}"]


def test_entities_are_sorted_by_their_mean_over_the_duration(storage: OpenStorage) -> None:
    def top(**condition: Any) -> list[tuple[str, str]]:
        given = {"topN": 10, "order": "DES", **condition}
        data, errors = ask(storage, SWCTL_SORT, condition=given, duration=DURATION)
        assert errors == []
        return [(r["name"], r["value"]) for r in data["result"]]

    # As swctl's dashboard global asks.
    assert top(name="service_cpm", normal=True, scope="Service") == [("shop", "20"), ("pay::checkout", "5")]
    assert top(name="service_cpm", parentService="", normal=False, scope="Service", order="ASC") == [
        ("pay::checkout", "5"),
        ("shop", "20"),
    ]
    assert top(name="endpoint_cpm", scope="Endpoint") == [("shop - /orders", "8"), ("shop - /pay", "4")]
    assert top(name="endpoint_cpm", parentService="shop", normal=True, topN=1) == [("/orders", "8")]
    _, errors = ask(
        storage, SWCTL_SORT, condition={"name": "service_cpm", "topN": 0, "order": "DES"}, duration=DURATION
    )
    assert errors == ["sortMetrics: topN must be 1 to 1000, not 0"]


def test_metrics_are_listed_with_their_type_and_catalog(storage: OpenStorage) -> None:
    data, errors = ask(storage, SWCTL_LIST, regex="service_(cpm|percentile)|pool")
    assert errors == []
    assert data["result"] == [
        {"name": "pool", "type": "LABELED_VALUE", "catalog": "SERVICE_INSTANCE"},
        {"name": "service_cpm", "type": "REGULAR_VALUE", "catalog": "SERVICE"},
        {"name": "service_percentile", "type": "LABELED_VALUE", "catalog": "SERVICE"},
    ]
    data, errors = ask(storage, '{ a: typeOfMetrics(name: "service_sla") b: typeOfMetrics(name: "nope") }')
    assert data == {"a": "REGULAR_VALUE", "b": "UNKNOWN"}
    _, errors = ask(storage, SWCTL_LIST, regex="(")
    assert errors == [
        "listMetrics: '(' is not a regular expression: missing ), unterminated subpattern at position 0"
    ]
