"""Running queries: the depth bound, the shape of every error a client can
cause, the deadline, and the bound on queries running or waiting."""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import graphql
import pytest

from skyoap.query import execution as query_execution
from skyoap.query.binder import Binder
from skyoap.query.complexity import size_error
from skyoap.query.execution import Answer, Execution, QueryRequest
from skyoap.query.resolvers import resolvers
from skyoap.query.schema import load_schema
from skyoap.query.serving import Outcome
from skyoap.runtime import deadline
from skyoap.runtime.admission import Admission, Busy


def depth_errors(query: str, limit: int) -> list[str]:
    error = size_error(graphql.parse(query), limit, 2**50)
    return [] if error is None else [error.message]


def field_errors(query: str, limit: int) -> list[str]:
    error = size_error(graphql.parse(query), 100, limit)
    return [] if error is None else [error.message]


def too_many(limit: int) -> str:
    return (
        f"the query asks for more than {limit} fields, more than this node answers at once "
        f"(--query-max-fields {limit}); split it over several requests"
    )


def too_deep(limit: int) -> str:
    return (
        f"the query nests its fields more than {limit} levels deep, more than this node answers "
        f"(--query-max-depth {limit}); ask for fewer levels at once"
    )


def nested(levels: int) -> str:
    """``getMenuItems { subItems { ... { title } } }``: ``levels`` levels of fields."""
    return "{ getMenuItems " + "{ subItems " * (levels - 2) + "{ title }" + " }" * (levels - 2) + " }"


def test_a_query_as_deep_as_the_bound_runs_and_one_level_more_is_refused() -> None:
    assert depth_errors(nested(5), 5) == []
    assert depth_errors(nested(6), 5) == [too_deep(5)]
    assert depth_errors("{ version }", 1) == []


def test_fragments_count_where_they_are_spread() -> None:
    fragments = """
        query { getMenuItems { ...Items } }
        fragment Items on MenuItem { subItems { ... on MenuItem { subItems { ...Title } } } }
        fragment Title on MenuItem { title }
    """
    assert depth_errors(fragments, 4) == []
    assert depth_errors(fragments, 3) == [too_deep(3)]


def test_the_standard_introspection_query_fits_the_default_bound() -> None:
    introspection = graphql.get_introspection_query()
    assert depth_errors(introspection, 15) == []
    assert depth_errors(introspection, 14) == [too_deep(14)]


def test_fragments_spread_in_a_cycle_or_many_times_over_are_walked_once() -> None:
    cycle = "{ getMenuItems { ...A } } fragment A on MenuItem { subItems { ...A } }"
    assert depth_errors(cycle, 15) == []  # the cycle itself is refused by graphql's own rule
    # Each fragment spreads the next twice: walked naively, 2^40 spreads.
    chain = "".join(f"fragment F{i} on MenuItem {{ ...F{i + 1} ...F{i + 1} }} " for i in range(40))
    fan_out = "{ getMenuItems { ...F0 } } " + chain + "fragment F40 on MenuItem { title }"
    assert depth_errors(fan_out, 2) == []
    assert depth_errors(fan_out, 1) == [too_deep(1)]
    assert field_errors(fan_out, 2**40 + 1) == []
    assert field_errors(fan_out, 2**40) == [too_many(2**40)]


def test_every_alias_and_every_spread_counts_as_a_field() -> None:
    aliased = "{ " + " ".join(f"a{i}: getMenuItems {{ title icon }}" for i in range(10)) + " }"
    assert field_errors(aliased, 30) == []
    assert field_errors(aliased, 29) == [too_many(29)]
    spread = "{ a: getMenuItems { ...T } b: getMenuItems { ...T } } fragment T on MenuItem { title icon }"
    assert field_errors(spread, 6) == []
    assert field_errors(spread, 5) == [too_many(5)]
    second = "query A { version } query B { a: version b: version }"
    assert field_errors(second, 1) == [too_many(1)]


def execution(binder: Binder | None = None, **options: Any) -> Execution:
    settings = {"deadline_s": 30.0, "max_depth": 5, **options}
    return Execution(binder or resolvers(), None, **settings)


class Runs:
    """Queries as the endpoint runs them: each answered by the execution on
    a thread of the admission, the late one as such."""

    def __init__(
        self, binder: Binder, threads: int = 2, max_waiting: int = 0, deadline_s: float = 30.0
    ) -> None:
        self.admission = Admission(threads, max_waiting, deadline_s)
        self.execution = execution(binder, deadline_s=deadline_s)
        self.late = self.execution.late

    def __enter__(self) -> Runs:
        self.admission.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.admission.close(5)

    def submit(self, request: QueryRequest) -> Future[Answer]:
        answered: Future[Answer] = Future()

        def done(ran: Future[Answer | None]) -> None:
            answered.set_result(ran.result() or self.late)

        self.admission.submit(functools.partial(self.execution.answer, request)).add_done_callback(done)
        return answered


def answer_of(
    query: str, variables: dict[str, Any] | None = None, name: str | None = None
) -> tuple[Outcome, Any]:
    answer = execution().run(QueryRequest(query, variables, name))
    return answer.outcome, json.loads(answer.body)


def error(message: str, *locations: tuple[int, int]) -> dict[str, Any]:
    found: dict[str, Any] = {"message": message}
    if locations:
        found["locations"] = [{"line": line, "column": column} for line, column in locations]
    return {"data": None, "errors": [found]}


INSTANCES = 'query ($d: Duration!) { listInstances(duration: $d, serviceId: "s") { id } }'


@pytest.mark.parametrize(
    ("query", "variables", "name", "expected"),
    [
        ("{ version", None, None, error("Syntax Error: Expected Name, found <EOF>.", (1, 10))),
        ("{ versions }", None, None,
         error("Cannot query field 'versions' on type 'Query'. Did you mean 'version'?", (1, 3))),
        ("{ listServices }", None, None,
         error("Field 'listServices' of type '[Service!]!' must have a selection of subfields. "
               "Did you mean 'listServices { ... }'?", (1, 3))),
        (INSTANCES, {"d": {"start": "2026-01-01 0000", "end": "2026-01-01 0030", "step": "WEEK"}}, None,
         error("Variable '$d' has invalid value at .step: Value 'WEEK' does not exist in 'Step' enum.",
               (1, 8))),
        (INSTANCES, None, None,
         error("Variable '$d' has invalid value: Expected a value of non-null type 'Duration!' "
               "to be provided.", (1, 8))),
        ("query a { version } query b { version }", None, None,
         error("Must provide operation name if query contains multiple operations.")),
        ("query a { version }", None, "c", error("Unknown operation named 'c'.")),
        (nested(6), None, None, error(too_deep(5), (1, 1))),
    ],
)  # fmt: skip
def test_a_query_this_node_cannot_run_is_answered_with_what_was_wrong(
    query: str, variables: dict[str, Any] | None, name: str | None, expected: dict[str, Any]
) -> None:
    assert answer_of(query, variables, name) == (Outcome.INVALID, expected)


def test_a_failing_field_is_answered_beside_the_others_with_its_path() -> None:
    def fail(context: object) -> list[str]:
        raise RuntimeError("the layers could not be read")

    binder = Binder(load_schema()).query("listLayers", fail)
    answer = execution(binder).run(QueryRequest("{ listLayers hasQueryTracesV2Support }"))
    assert answer.outcome is Outcome.FAILED
    assert json.loads(answer.body) == {
        "data": None,  # listLayers is non-null: its error nulls the whole answer
        "errors": [{"message": "the layers could not be read", "locations": [{"line": 1, "column": 3}],
                    "path": ["listLayers"]}],
    }  # fmt: skip


def test_a_query_past_its_token_bound_is_refused_as_it_is_read() -> None:
    query = "{ " + " ".join(f"a{i}: version" for i in range(40)) + " }"  # 122 tokens
    assert execution(max_tokens=122).run(QueryRequest(query)).outcome is Outcome.ANSWERED
    answer = execution(max_tokens=121).run(QueryRequest(query))
    assert (answer.outcome, json.loads(answer.body)) == (
        Outcome.INVALID,
        error(
            "the query has more than 121 tokens, more than this node reads (--query-max-tokens 121); "
            "split it over several requests"
        ),
    )


TOO_LARGE = (
    "the answer would be larger than {} bytes this node sends (--query-max-answer-bytes): ask for "
    "less at once (fewer fields or entities, a smaller page)"
)


class Title:
    """A menu item whose title counts how often it is read."""

    reads = 0

    @property
    def title(self) -> str:
        Title.reads += 1
        return "t" * 100


def test_an_answer_past_its_bound_stops_being_built_and_says_so() -> None:
    binder = Binder(load_schema()).query("getMenuItems", lambda context: [Title() for _ in range(1000)])
    Title.reads = 0
    answer = execution(binder, max_answer_bytes=10_000).run(QueryRequest("{ getMenuItems { title } }"))
    assert (answer.outcome, json.loads(answer.body)) == (
        Outcome.FAILED,
        error(TOO_LARGE.format("the 10000")),
    )
    assert Title.reads == 92  # each item weighs 109 bytes: the 92nd passes the bound
    whole = execution(binder, max_answer_bytes=200_000).run(QueryRequest("{ getMenuItems { title } }"))
    assert (whole.outcome, len(json.loads(whole.body)["data"]["getMenuItems"])) == (Outcome.ANSWERED, 1000)


def test_a_query_past_its_deadline_stops_resolving_its_fields() -> None:
    def late_items(context: object) -> list[Title]:
        while deadline.remaining(60.0) > 0:
            time.sleep(0.01)
        return [Title() for _ in range(10_000)]

    binder = Binder(load_schema()).query("getMenuItems", late_items)
    with Runs(binder, deadline_s=0.2) as runs:
        Title.reads = 0
        answer = runs.submit(QueryRequest("{ getMenuItems { title } }")).result(60)
        assert answer == runs.late
        assert Title.reads == 0


class Gate:
    """A resolver that waits: for ``open`` (or, with ``until_deadline``, for
    the query's deadline to pass), counting who is inside."""

    def __init__(self, until_deadline: bool = False) -> None:
        self.open = threading.Event()
        self.inside = threading.Semaphore(0)
        self._until_deadline = until_deadline

    def __call__(self, context: object) -> str:
        self.inside.release()
        if self._until_deadline:
            while deadline.remaining(60.0) > 0:
                time.sleep(0.01)
        else:
            self.open.wait(60)
        return "through"


@pytest.fixture
def gate() -> Iterator[Gate]:
    gate = Gate()
    yield gate
    gate.open.set()


def test_a_query_past_its_deadline_answers_so_and_the_next_is_answered(gate: Gate) -> None:
    slow = Gate(until_deadline=True)
    binder = Binder(load_schema()).query("version", slow).query("listLayers", lambda context: ["GENERAL"])
    with Runs(binder, deadline_s=0.2) as runs:
        late = runs.submit(QueryRequest("{ version }")).result(60)
        assert late is runs.late and late.outcome is Outcome.DEADLINE
        assert json.loads(late.body)["errors"][0]["message"].startswith(
            "the query did not finish within its deadline of 0.2 s (--query-deadline-s)"
        )
        answer = runs.submit(QueryRequest("{ listLayers }")).result(60)
        assert json.loads(answer.body) == {"data": {"listLayers": ["GENERAL"]}}


def test_past_the_threads_and_the_waiting_room_a_query_is_refused_at_once(gate: Gate) -> None:
    binder = Binder(load_schema()).query("version", gate).query("checkHealth", lambda context: {"score": 0})
    with Runs(binder, threads=1, max_waiting=1) as runs:
        running = runs.submit(QueryRequest("{ version }"))
        assert gate.inside.acquire(timeout=60)
        waiting = runs.submit(QueryRequest("{ checkHealth { score } }"))
        with pytest.raises(Busy) as refused:
            runs.submit(QueryRequest("{ checkHealth { score } }"))
        assert str(refused.value) == (
            "the node runs 1 queries at once and 1 more may wait, and all of them are taken "
            "(--query-threads, --query-max-waiting); try again shortly"
        )
        assert runs.admission.pending == 2
        gate.open.set()
        assert json.loads(running.result(60).body) == {"data": {"version": "through"}}
        assert json.loads(waiting.result(60).body) == {"data": {"checkHealth": {"score": 0}}}
        assert runs.admission.pending == 0


def test_a_text_sent_by_several_requests_at_once_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[str] = []
    first = threading.Event()

    def slow_parse(text: str, **options: Any) -> graphql.DocumentNode:
        parsed.append(text)
        first.set()
        time.sleep(0.2)  # the others come meanwhile
        return graphql.parse(text, **options)

    monkeypatch.setattr(query_execution, "parse", slow_parse)
    with Runs(resolvers(), threads=4) as runs:
        query = QueryRequest("{ a: version b: version }")
        answers = [runs.submit(query)]
        assert first.wait(10)
        answers += [runs.submit(query) for _ in range(3)]
        bodies = {json.loads(a.result(60).body)["data"]["a"] for a in answers}
        assert (len(parsed), len(bodies)) == (1, 1)
