"""Answers completed by plans (``completion.py``) and root fields resolved
in batches (``Binder.query_batch``) are the answers graphql-core's own
execution gives, errors and all."""

from __future__ import annotations

import json
from typing import Any

import graphql
import pytest

from skyoap.query.binder import Binder
from skyoap.query.execution import Execution, QueryRequest
from skyoap.query.schema import load_schema


def item(title: Any, **more: Any) -> dict[str, Any]:
    return {"title": title, "layer": "GENERAL", "activate": True, "subItems": [], **more}


class Titled:
    """A menu item read by attribute, not by key."""

    layer = "GENERAL"
    activate = True
    subItems: list[Any] = []
    icon = None

    @property
    def title(self) -> str:
        return "by attribute"


def failing(_info: Any) -> str:
    raise ValueError("this title cannot be read")


MENUS: dict[str, list[Any]] = {
    "plain": [item("a", icon="i", subItems=[item("b"), item("c", subItems=[item("d")])]), Titled()],
    "null where none may be": [item("a"), item(None), item("c")],
    "a nested null": [item("a", subItems=[item("b"), item(None)])],
    "a value of the wrong type": [item(3.5), {**item("b"), "activate": "yes"}],
    "a callable": [item(lambda _info: "called"), item(failing)],
    "an exception": [item("a", subItems=[ValueError("no such item")])],
    "not a list": [item("a", subItems="b")],
}

QUERIES = [
    "{ getMenuItems { title icon layer activate subItems { title subItems { title } } } }",
    "{ a: getMenuItems { t: title kind: __typename subItems { title } } b: getMenuItems { activate } }",
    "{ getMenuItems { title } getMenuItems { icon subItems { title } } }",
    "{ getMenuItems { ...Item subItems { ... on MenuItem { title } } } } fragment Item on MenuItem { title }",
    "query ($x: Boolean!) { getMenuItems { title @include(if: $x) subItems { title @skip(if: $x) } } }",
    "{ checkHealth { score details } version }",
]


def both(binder: Binder, query: str, variables: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """The answer of ``Execution`` and that of graphql-core's own execution."""
    ran = Execution(binder, None, deadline_s=30.0, max_depth=15)
    answer = json.loads(ran.run(QueryRequest(query, variables)).body)
    own = graphql.graphql_sync(binder.schema, query, variable_values=variables, field_resolver=binder.resolve)
    return answer, json.loads(json.dumps(own.formatted))


@pytest.mark.parametrize("menu", list(MENUS))
@pytest.mark.parametrize("query", QUERIES)
def test_answers_are_completed_as_graphql_core_completes_them(menu: str, query: str) -> None:
    binder = Binder(load_schema()).query("getMenuItems", lambda context: MENUS[menu])
    answer, own = both(binder, query, {"x": True})
    assert answer == own


def test_each_value_is_read_once() -> None:
    reads = []

    class Counted(dict[str, Any]):
        def get(self, key: str, default: Any = None) -> Any:
            reads.append(key)
            return super().get(key, default)

    binder = Binder(load_schema()).query("getMenuItems", lambda context: [Counted(item("a"))])
    query = "{ " + " ".join(f"m{i}: getMenuItems {{ title }}" for i in range(50)) + " }"
    ran = Execution(binder, None, deadline_s=30.0, max_depth=15)
    answer = json.loads(ran.run(QueryRequest(query)).body)
    assert answer == {"data": {f"m{i}": [{"title": "a"}] for i in range(50)}}
    assert reads == ["title"] * 50


class Asked:
    """A batch resolver of ``version``-like answers, counting its calls."""

    def __init__(self) -> None:
        self.calls: list[list[dict[str, Any]]] = []

    def __call__(self, context: object, asked: list[dict[str, Any]]) -> list[Any]:
        self.calls.append(asked)
        return [
            ValueError(f"no {a['expression']}") if a["expression"] == "bad" else
            {"type": "SINGLE_VALUE", "error": None, "results": [{"values": [{"value": a["expression"]}]}]}
            for a in asked
        ]  # fmt: skip


EXPRESSIONS = """query ($d: Duration!, $x: String!, $y: String!, $in: Boolean!, $debug: Boolean) {
  a: execExpression(expression: "one", entity: {serviceName: "s"}, duration: $d) { ...V }
  b: execExpression(expression: $x, entity: {serviceName: "s"}, duration: $d) {
    type results { values { value } }
  }
  c: execExpression(expression: $y, entity: {serviceName: "s"}, duration: $d, debug: $debug) { type }
  d: execExpression(expression: "four", entity: {serviceName: "s"}, duration: $d) @include(if: $in) { error }
  ... on Query { e: execExpression(expression: "five", entity: {serviceName: "s"}, duration: $d) { type } }
  version
}
fragment V on ExpressionResult { results { values { value } } }"""

DURATION = {"start": "2026-11-24 1000", "end": "2026-11-24 1004", "step": "MINUTE"}


def test_the_fields_of_a_batch_resolver_are_resolved_in_one_call() -> None:
    asked = Asked()
    binder = Binder(load_schema()).query_batch("execExpression", asked).query("version", lambda context: "v")
    answer, own = both(
        binder, EXPRESSIONS, {"d": DURATION, "x": "two", "y": "three", "in": True, "debug": None}
    )
    assert answer == own
    assert answer == {
        "data": {
            "a": {"results": [{"values": [{"value": "one"}]}]},
            "b": {"type": "SINGLE_VALUE", "results": [{"values": [{"value": "two"}]}]},
            "c": {"type": "SINGLE_VALUE"},
            "d": {"error": None},
            "e": {"type": "SINGLE_VALUE"},
            "version": "v",
        }
    }
    arguments = [
        {"expression": "one", "entity": {"serviceName": "s"}, "duration": DURATION},
        {"expression": "two", "entity": {"serviceName": "s"}, "duration": DURATION},
        {"expression": "three", "entity": {"serviceName": "s"}, "duration": DURATION, "debug": None},
        {"expression": "four", "entity": {"serviceName": "s"}, "duration": DURATION},
        {"expression": "five", "entity": {"serviceName": "s"}, "duration": DURATION},
    ]
    # The request's at once, with the arguments graphql-core gives each when it resolves them one by one.
    assert asked.calls == [arguments, *([a] for a in arguments)]


def test_an_answer_that_is_an_error_fails_its_field_and_a_batch_that_fails_fails_them_all() -> None:
    binder = (
        Binder(load_schema()).query_batch("execExpression", Asked()).query("version", lambda context: "v")
    )
    answer, own = both(binder, EXPRESSIONS, {"d": DURATION, "x": "two", "y": "bad", "in": False})
    assert answer == own
    assert (answer["data"], [e["path"] for e in answer["errors"]]) == (None, [["c"]])

    def down(context: object, asked: list[dict[str, Any]]) -> list[Any]:
        raise RuntimeError("storage is down")

    binder = Binder(load_schema()).query_batch("execExpression", down).query("version", lambda context: "v")
    answer, own = both(binder, EXPRESSIONS, {"d": DURATION, "x": "two", "y": "three", "in": False})
    assert answer == own
    assert (answer["data"], [e["message"] for e in answer["errors"]]) == (None, ["storage is down"])
