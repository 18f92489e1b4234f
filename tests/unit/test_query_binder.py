"""Resolvers bound by name, and the empty answer of every field without one,
over the real schema: no field a client may select fails the query."""

from __future__ import annotations

import json
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

from skyoap.query.binder import Binder
from skyoap.query.execution import Execution, Outcome, QueryRequest
from skyoap.query.identity import server_version
from skyoap.query.resolvers import resolvers
from skyoap.query.schema import load_schema


def execution(binder: Binder | None = None) -> Execution:
    return Execution(binder or resolvers(), None, threads=1, max_waiting=0, deadline_s=30.0, max_depth=15)


def run(query: str, variables: dict[str, Any] | None = None) -> tuple[Outcome, Any]:
    answer = execution().run(QueryRequest(query, variables))
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
    answer = execution(binder).run(QueryRequest("{ listLayers hasQueryTracesV2Support }"))
    assert json.loads(answer.body) == {"data": {"listLayers": ["GENERAL"], "hasQueryTracesV2Support": False}}


def test_a_resolver_gets_the_context_and_the_arguments_the_client_gave() -> None:
    seen: list[tuple[object, dict[str, Any]]] = []

    def list_services(context: object, **arguments: Any) -> list[dict[str, Any]]:
        seen.append((context, arguments))
        return [
            {"id": "c2VydmljZQ==.1", "name": "service", "group": "", "shortName": "service", "layers": []}
        ]

    binder = Binder(load_schema()).query("listServices", list_services)
    context = object()
    run_ = Execution(binder, context, 1, 0, 30.0, 15).run
    answer = run_(
        QueryRequest('{ a: listServices(layer: "GENERAL") { name normal } b: listServices { id } }')
    )
    assert json.loads(answer.body) == {
        "data": {"a": [{"name": "service", "normal": None}], "b": [{"id": "c2VydmljZQ==.1"}]}
    }
    assert seen == [(context, {"layer": "GENERAL"}), (context, {})]


def test_the_node_binds_its_identity_and_nothing_else_yet() -> None:
    binder = resolvers()
    assert binder.bound("Query") == {"version", "getTimeInfo", "checkHealth"} | TRACES_AND_LOGS
    assert binder.bound("Mutation") == {"version"}
    outcome, answer = run("{ version checkHealth { score details } getTimeInfo { timezone } }")
    assert outcome is Outcome.ANSWERED
    assert answer == {
        "data": {
            "version": server_version(),
            "checkHealth": {"score": 0, "details": ""},
            "getTimeInfo": {"timezone": "+0000"},
        }
    }
    assert server_version().startswith("10.4.0-skyoap-")
    assert run("mutation { version }")[1] == {"data": {"version": server_version()}}


TRACES_AND_LOGS = {
    "queryBasicTraces",
    "queryTrace",
    "queryTraceTagAutocompleteKeys",
    "queryTraceTagAutocompleteValues",
    "queryLogs",
    "supportQueryLogsByKeywords",
}
"""Fields bound to the resolvers of traces and logs (``tests/unit/test_query_traces.py``)."""

DURATION = '{start: "2026-01-01 0000", end: "2026-01-01 0030", step: MINUTE}'
EMPTY_ANSWERS = {
    "hasQueryTracesV2Support": ("hasQueryTracesV2Support", False),
    "supportQueryLogsByKeywords": ("supportQueryLogsByKeywords", False),
    "listLayers": ("listLayers", []),
    "listServices": ('listServices(layer: "GENERAL") { id name }', []),
    "getGlobalTopology": (
        f"getGlobalTopology(duration: {DURATION}) {{ nodes {{ id }} calls {{ id }} }}",
        None,
    ),
    "queryBasicTracesByName": (
        "queryBasicTracesByName(condition: {traceState: ALL, queryOrder: BY_START_TIME, "
        "paging: {pageSize: 20}}) { traces { segmentId } }",
        None,
    ),
    "getMenuItems": ("getMenuItems { title subItems { title } }", []),
    "getAllTemplates": ("getAllTemplates { id configuration }", []),
    "getTimeInfo is bound": ("getTimeInfo { timezone }", {"timezone": "+0000"}),
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
    "readNullableMetricsValue (scalars!)": (
        f'readNullableMetricsValue(condition: {{name: "service_cpm", entity: {{serviceName: "s"}}}}, '
        f"duration: {DURATION}) {{ value isEmptyValue }}",
        {"value": 0, "isEmptyValue": False},
    ),
}


@pytest.mark.parametrize("name", EMPTY_ANSWERS)
def test_a_root_field_without_a_resolver_answers_what_its_type_calls_empty(name: str) -> None:
    selection, expected = EMPTY_ANSWERS[name]
    outcome, answer = run(f"{{ field: {selection} }}")
    assert (outcome, answer) == (Outcome.ANSWERED, {"data": {"field": expected}})


def test_a_mutation_without_a_resolver_answers_that_nothing_changed() -> None:
    outcome, answer = run('mutation { addTemplate(setting: {configuration: "{}"}) { id status message } }')
    assert (outcome, answer) == (
        Outcome.ANSWERED,
        {"data": {"addTemplate": {"id": "", "status": False, "message": None}}},
    )


def literal(type_: GraphQLInputType) -> str:
    """A valid literal of ``type_``: its required parts only."""
    inner = type_.of_type if isinstance(type_, GraphQLNonNull) else type_
    if isinstance(inner, GraphQLList):
        return f"[{literal(inner.of_type)}]"
    if isinstance(inner, GraphQLEnumType):
        return next(iter(inner.values))
    if isinstance(inner, GraphQLInputObjectType):
        fields = [
            f"{name}: {literal(f.type)}"
            for name, f in inner.fields.items()
            if isinstance(f.type, GraphQLNonNull)
        ]
        return "{" + ", ".join(fields) + "}"
    assert isinstance(inner, GraphQLScalarType)
    return {"Int": "1", "Long": "1", "Boolean": "true"}.get(inner.name, '"x"')


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
        f"{arg}: {literal(a.type)}" for arg, a in field.args.items() if isinstance(a.type, GraphQLNonNull)
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
        if operation == "mutation" or name not in TRACES_AND_LOGS
    ]


@pytest.mark.parametrize(("operation", "name", "field"), roots(), ids=[f"{o}.{n}" for o, n, _ in roots()])
def test_every_root_field_answers_selected_in_full_without_an_error(
    operation: str, name: str, field: GraphQLField
) -> None:
    outcome, answer = run(f"{operation} {{ {field_query(name, field)} }}")
    assert "errors" not in answer
    assert outcome is Outcome.ANSWERED
    value = answer["data"][name]
    if isinstance(field.type, GraphQLNonNull) and isinstance(field.type.of_type, GraphQLList):
        assert value == []
    elif not isinstance(field.type, GraphQLNonNull) and name not in ("version", "getTimeInfo"):
        assert value is None
