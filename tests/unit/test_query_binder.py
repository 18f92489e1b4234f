"""Resolvers bound by name over the real schema: a field answers what its
resolver gives, what its type calls empty where skyoap keeps none of what it
lists, or an error saying skyoap does not serve it; never a made-up value."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from graphql import (
    GraphQLEnumType,
    GraphQLField,
    GraphQLInputObjectType,
    GraphQLInputType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLScalarType,
    get_named_type,
)

from skyoap.model import sketch
from skyoap.model.inventory import INVENTORY_TYPES
from skyoap.model.metrics import METRICS_TYPES, Downsampling, ServiceMetrics
from skyoap.model.records import RECORD_TYPES
from skyoap.query.binder import EMPTY, Binder, empty
from skyoap.query.context import QueryContext
from skyoap.query.execution import Execution, QueryRequest
from skyoap.query.identity import server_version
from skyoap.query.resolvers import resolvers
from skyoap.query.schema import load_schema
from skyoap.query.serving import Outcome
from skyoap.storage.api import MetricsWrite
from skyoap.storage.config import StorageConfig, StorageKind
from skyoap.storage.select import open_storage
from skyoap.vocabulary.ttl import TimesToLive


def execution(binder: Binder | None = None) -> Execution:
    """Queries run with ``binder``'s resolvers, by default none: every field answers empty."""
    binder = binder or Binder(load_schema())
    return Execution(binder, None, deadline_s=30.0, max_depth=15)


def run(query: str, binder: Binder | None = None) -> tuple[Outcome, Any]:
    answer = execution(binder).run(QueryRequest(query))
    return answer.outcome, json.loads(answer.body)


def test_a_resolver_binds_to_a_root_field_of_the_schema_once() -> None:
    binder = Binder(load_schema()).query("listLayers", lambda context: ["GENERAL"])
    with pytest.raises(
        ValueError, match=r"^the schema has no root field 'listServies' to bind a resolver to$"
    ):
        binder.query("listServies", lambda context: [])
    with pytest.raises(
        ValueError, match=r"^the schema has no root field 'listLayers' to bind a resolver to$"
    ):
        binder.mutation("listLayers", lambda context: [])
    with pytest.raises(ValueError, match=r"^Query\.listLayers has a resolver already$"):
        binder.query("listLayers", lambda context: [])
    binder.none("hasQueryTracesV2Support", "none here")
    answer = execution(binder).run(QueryRequest("{ listLayers hasQueryTracesV2Support }"))
    assert json.loads(answer.body) == {"data": {"listLayers": ["GENERAL"], "hasQueryTracesV2Support": False}}
    assert binder.reasons() == {"hasQueryTracesV2Support": "none here"}


def test_a_resolver_gets_the_context_and_the_arguments_the_client_gave() -> None:
    seen: list[tuple[object, dict[str, Any]]] = []

    def list_services(context: object, **arguments: Any) -> list[dict[str, Any]]:
        seen.append((context, arguments))
        return [
            {"id": "c2VydmljZQ==.1", "name": "service", "group": "", "shortName": "service", "layers": []}
        ]

    binder = Binder(load_schema()).query("listServices", list_services)
    context = object()
    run_ = Execution(binder, context, 30.0, 15).run
    answer = run_(
        QueryRequest('{ a: listServices(layer: "GENERAL") { name normal } b: listServices { id } }')
    )
    assert json.loads(answer.body) == {
        "data": {"a": [{"name": "service", "normal": None}], "b": [{"id": "c2VydmljZQ==.1"}]}
    }
    assert seen == [(context, {"layer": "GENERAL"}), (context, {})]


def test_the_node_answers_its_identity() -> None:
    binder = resolvers()
    assert {"version", "getTimeInfo", "checkHealth"} <= binder.bound("Query")
    assert "version" in binder.bound("Mutation")
    outcome, answer = run("{ version checkHealth { score details } getTimeInfo { timezone } }", binder)
    assert outcome is Outcome.ANSWERED
    assert answer == {
        "data": {
            "version": server_version(),
            "checkHealth": {"score": 0, "details": ""},
            "getTimeInfo": {"timezone": "+0000"},
        }
    }
    assert server_version().startswith("10.4.0-skyoap-")
    assert run("mutation { version }", binder)[1] == {"data": {"version": server_version()}}


DURATION = '{start: "2026-01-01 0000", end: "2026-01-01 0030", step: MINUTE}'
EMPTY_ANSWERS = {
    "hasQueryTracesV2Support": ("hasQueryTracesV2Support", False),
    "listLayers": ("listLayers", []),
    "getGlobalTopology": (
        f"getGlobalTopology(duration: {DURATION}) {{ nodes {{ id }} calls {{ id }} }}",
        None,
    ),
    "estimateProcessScale (Long!)": ('estimateProcessScale(serviceId: "s", labels: [])', 0),
    "typeOfMetrics (an enum!)": ('typeOfMetrics(name: "service_cpm")', "UNKNOWN"),
    "getServiceHierarchy (an object!)": (
        'getServiceHierarchy(serviceId: "s", layer: "GENERAL") { relations { upperService { id } } }',
        {"relations": []},
    ),
    "execExpression (an object! holding an enum!)": (
        f'execExpression(expression: "service_cpm", entity: {{serviceName: "s", normal: true}}, '
        f"duration: {DURATION}) {{ type results {{ metric {{ labels {{ key }} }} }} error }}",
        {"type": "UNKNOWN", "results": [], "error": None},
    ),
}


@pytest.mark.parametrize("name", EMPTY_ANSWERS)
def test_a_field_of_what_skyoap_keeps_none_of_answers_what_its_type_calls_empty(name: str) -> None:
    selection, expected = EMPTY_ANSWERS[name]
    field = selection.partition("(")[0].partition(" ")[0]
    outcome, answer = run(f"{{ field: {selection} }}", Binder(load_schema()).none(field, "none"))
    assert (outcome, answer) == (Outcome.ANSWERED, {"data": {"field": expected}})


def test_a_field_without_a_resolver_answers_that_skyoap_does_not_serve_it() -> None:
    outcome, answer = run("{ listLayers }")
    assert outcome is Outcome.FAILED
    assert answer == {
        "data": None,
        "errors": [
            {
                "message": "skyoap does not serve listLayers",
                "locations": [{"line": 1, "column": 3}],
                "path": ["listLayers"],
            }
        ],
    }
    binder = Binder(load_schema()).refuse("addTemplate", "not here", mutation=True)
    _, answer = run('mutation { addTemplate(setting: {configuration: "{}"}) { id } }', binder)
    assert [e["message"] for e in answer["errors"]] == ["skyoap does not serve addTemplate: not here"]


def literal(type_: GraphQLInputType, name: str = "") -> str:
    """A valid literal of ``type_``, named ``name``: its required parts only,
    a Duration of real minutes, a metric's and a service's names of the
    storage's, other strings "x"."""
    inner = type_.of_type if isinstance(type_, GraphQLNonNull) else type_
    if isinstance(inner, GraphQLList):
        return f"[{literal(inner.of_type, name)}]"
    if isinstance(inner, GraphQLEnumType):
        return next(iter(inner.values))
    if isinstance(inner, GraphQLInputObjectType):
        if inner.name == "Duration":
            return DURATION
        fields = [
            f"{field}: {literal(f.type, field)}"
            for field, f in inner.fields.items()
            if isinstance(f.type, GraphQLNonNull)
        ]
        return "{" + ", ".join(fields) + "}"
    assert isinstance(inner, GraphQLScalarType)
    strings = {"name": '"service_cpm"', "serviceName": '"shop"'}
    return {"Int": "1", "Long": "1", "Boolean": "true"}.get(inner.name, strings.get(name, '"x"'))


def selection(type_: GraphQLOutputType, depth: int) -> str:
    """Every leaf of ``type_`` down to ``depth`` levels (an object with none left: ``__typename``)."""
    named = get_named_type(type_)
    if not isinstance(named, GraphQLObjectType):
        return ""
    if depth == 0:
        return "{ __typename }"
    parts = [f"{name} {selection(f.type, depth - 1)}" for name, f in named.fields.items() if not f.args]
    return "{ " + " ".join(parts) + " }"


def field_query(name: str, field: GraphQLField) -> str:
    required = [
        f"{arg}: {literal(a.type, arg)}"
        for arg, a in field.args.items()
        if isinstance(a.type, GraphQLNonNull)
    ]
    arguments = f"({', '.join(required)})" if required else ""
    return f"{name}{arguments} {selection(field.type, 4)}"


def roots() -> list[tuple[str, str, GraphQLField]]:
    schema = load_schema()
    return [
        (operation, name, field)
        for operation, root in (("query", schema.query_type), ("mutation", schema.mutation_type))
        if root is not None
        for name, field in root.fields.items()
    ]


def test_every_root_field_has_a_resolver_or_a_reason() -> None:
    binder = resolvers()
    fields = {(o, n) for o, n, _ in roots()}
    bound = {("query", n) for n in binder.bound("Query")} | {
        ("mutation", n) for n in binder.bound("Mutation")
    }
    assert fields - bound == set()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Execution, Binder]]:
    """The node's resolvers over an embedded storage holding a minute of a service's calls."""
    path = tmp_path_factory.mktemp("walk") / "walk.db"
    storage = open_storage(StorageConfig(kind=StorageKind.EMBEDDED, embedded_path=str(path)))
    storage.inventory.install(INVENTORY_TYPES)
    storage.metrics.install(METRICS_TYPES)
    storage.records.install(RECORD_TYPES)
    row = ServiceMetrics(time_bucket=202601010010, service="shop", calls=30, errors=3, latency_sum_ms=300,
                         histogram=sketch.of_latencies([10] * 30))  # fmt: skip
    storage.metrics.put(ServiceMetrics, Downsampling.MINUTE, [MetricsWrite(None, row, {})])
    context = QueryContext(
        storage.inventory, storage.metrics, storage.records, TimesToLive(3, 1, 7, 90, 7, 7)
    )
    binder = resolvers()
    yield Execution(binder, context, deadline_s=30.0, max_depth=15), binder
    storage.close()


SERVICE_ID = "a service's id is the base64 of its name then .1 (a service that reports) or .0"
CHILD_ID = "it is its service's id, _, then the base64 of its name"


def bad_id(argument: str, form: str) -> str:
    return f"{argument} 'x' is not an id skyoap gave: {form}"


REFUSED = {
    "queryEvents": "queryEvents needs a condition with a uuid or a time",
    "queryLogs": "queryLogs needs a condition with a queryDuration or a relatedTrace",
    "queryLogsByName": "queryLogs needs a condition with a queryDuration or a relatedTrace",
    "getService": bad_id("serviceId", SERVICE_ID),
    "listInstances": bad_id("serviceId", SERVICE_ID),
    "getInstance": bad_id("serviceInstanceId", CHILD_ID),
    "findEndpoint": bad_id("serviceId", SERVICE_ID),
    "getEndpointInfo": bad_id("endpointId", SERVICE_ID),
    "getServiceInstances": bad_id("serviceId", SERVICE_ID),
    "searchEndpoint": bad_id("serviceId", SERVICE_ID),
    "readMetricsValue": "readMetricsValue: service_cpm is of scope Service: the entity needs serviceName",
    "readNullableMetricsValue": (
        "readNullableMetricsValue: service_cpm is of scope Service: the entity needs serviceName"
    ),
    "readMetricsValues": "readMetricsValues: service_cpm is of scope Service: the entity needs serviceName",
    "readLabeledMetricsValues": (
        "readLabeledMetricsValues reads a metric of type LABELED_VALUE; service_cpm is REGULAR_VALUE"
    ),
    "readSampledRecords": "readSampledRecords: give the parentService whose records to read",
    "getTopNRecords": bad_id("serviceId", SERVICE_ID),
    "readRecords": "readRecords: the parentEntity needs serviceName (records are a service's)",
    "getProfileTaskList": "this node keeps no profiling tasks: it was started without a shared state",
    "getProfileTaskLogs": "getProfileTaskLogs needs a taskID",
    "getProfileTaskSegments": "there is no profiling task 'x': ids come from getProfileTaskList",
    "getServiceTopology": bad_id("serviceIds", SERVICE_ID),
    "getServicesTopology": bad_id("serviceIds", SERVICE_ID),
    "getServiceInstanceTopology": bad_id("clientServiceId", SERVICE_ID),
    "getEndpointTopology": bad_id("endpointId", CHILD_ID),
    "getEndpointDependencies": bad_id("endpointId", CHILD_ID),
    "queryBasicTraces": "queryBasicTraces needs a condition with a traceId or a queryDuration",
    "queryBasicTracesByName": "queryBasicTraces needs a condition with a traceId or a queryDuration",
    "addTemplate": "this node keeps no dashboards: it was started without a shared state",
    "changeTemplate": "this node keeps no dashboards: it was started without a shared state",
    "disableTemplate": "this node keeps no dashboards: it was started without a shared state",
}
"""What each resolver says of the walk's arguments ("x" for every id and
string, no optional condition): the argument that is wrong, and why."""


@pytest.mark.parametrize(("operation", "name", "field"), roots(), ids=[f"{o}.{n}" for o, n, _ in roots()])
def test_every_root_field_answers_truthfully_or_says_it_is_not_served(
    served: tuple[Execution, Binder],
    operation: str,
    name: str,
    field: GraphQLField,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Selected in full with the arguments it requires, a field bound to a
    reason answers its type's empty value (skyoap keeps none of it) or the
    error naming the reason; any other answers what its resolver gives, or,
    given what it cannot take, the error ``REFUSED`` says; none fails inside."""
    execution, binder = served
    answer = execution.run(QueryRequest(f"{operation} {{ {field_query(name, field)} }}"))
    body = json.loads(answer.body)
    errors = [e["message"] for e in body.get("errors", [])]
    reason = binder.reasons().get(name)
    if reason is None:
        assert errors == ([REFUSED[name]] if name in REFUSED else [])
    elif errors:
        assert errors == [f"skyoap does not serve {name}: {reason}"]
    else:
        assert body["data"][name] == _completed(field.type, empty(field.type))
    assert "a query failed to run" not in caplog.text


def _completed(type_: GraphQLOutputType, value: object) -> object:
    """``value`` as the answer shows it: an empty object's leaves empty in turn."""
    if value is EMPTY:
        named = get_named_type(type_)
        assert isinstance(named, GraphQLObjectType)
        return {name: _completed(f.type, empty(f.type)) for name, f in named.fields.items() if not f.args}
    return value
