"""Running queries: parse (at most ``max_tokens``), measure (depth and
fields, ``complexity.py``), validate with the schema's rules, execute with the
bound resolvers, and the answer as JSON. A valid text is kept, parsed,
for the next request that sends it; the root fields of a batch resolver are
resolved at once (``binder.py``), and answers completed by plans made once
per selection (``completion.py``).

A query runs on a thread of the endpoint's admission (``runtime/admission.py``:
bounded, under a deadline from its arrival), since resolvers read storage with
blocking clients: validation and execution stop where they are once the
deadline passes, and the query is answered with an error saying so. An answer
is weighed as its fields resolve: one past ``max_answer_bytes`` stops there
and says so.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import orjson
from graphql import (
    DocumentNode,
    ExecutionResult,
    FieldNode,
    GraphQLError,
    GraphQLField,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    Node,
    Undefined,
    ValidationRule,
    VariableNode,
    execute_sync,
    get_argument_values,
    parse,
    specified_rules,
    validate,
)
from graphql.execution.collect_fields import FieldDetailsList, GroupedFieldSet
from graphql.execution.executor_throwing_on_incremental import ExecutorThrowingOnIncremental
from graphql.execution.values import VariableValues
from graphql.pyutils import Path

from skyoap.query.binder import Answers, BatchResolver, Binder
from skyoap.query.completion import Complete, GiveUp, Plan, completer, selection_text, typename
from skyoap.query.complexity import size_error
from skyoap.query.serving import Outcome
from skyoap.runtime import deadline
from skyoap.runtime.cache import TextCache
from skyoap.runtime.ratelimit import RateLimitedLog

log = logging.getLogger(__name__)
_failures = RateLimitedLog(log)


PLANS_CACHED_CHARS = 64 * 1024
"""How much selection text the completion plans kept stand for (``completion.py``)."""

DOCUMENTS_CACHED_CHARS = 256 * 1024
"""How much query text the valid documents kept stand for. SkyWalking's UI
asks the same queries again and again, with other variables, and parsing and
validating a list of 400 aliased fields takes longer than answering it. A
parsed document holds about 100 bytes per character of its text: some 26 MB
at most."""


@dataclass(frozen=True)
class QueryRequest:
    """What a client posts: ``{query, variables, operationName}``."""

    query: str
    variables: dict[str, Any] | None = None
    operation_name: str | None = None


@dataclass(frozen=True)
class Answer:
    outcome: Outcome
    body: bytes
    """``{"data": ..., "errors": [...]}`` as JSON (``errors`` only when there are some)."""


def encode(result: ExecutionResult) -> bytes:
    """``result`` as compact JSON in UTF-8. orjson writes the strings, numbers
    and lists of an answer as the json module does, in a tenth of its time;
    what it refuses (an integer past 64 bits) the json module writes."""
    formatted = result.formatted
    try:
        return orjson.dumps(formatted)
    except orjson.JSONEncodeError:
        return json.dumps(formatted, ensure_ascii=False, separators=(",", ":")).encode()


class Execution:
    def __init__(
        self,
        binder: Binder,
        context: object,
        deadline_s: float,
        max_depth: int,
        max_fields: int = 5000,
        max_tokens: int = 50_000,
        max_answer_bytes: int = 16 * 2**20,
    ) -> None:
        """``context`` is handed to every resolver (``query/context.py``); one
        with a ``for_request()`` hands each request its own (what a request's
        resolvers share, such as the rows it read)."""
        self._binder = binder
        self._context: Callable[[], object] = getattr(context, "for_request", lambda: context)
        self.deadline_s = deadline_s
        self._max_depth, self._max_fields, self._max_tokens = max_depth, max_fields, max_tokens
        self._max_answer_bytes = max_answer_bytes
        self._executor = _guarded(binder, max_answer_bytes)
        self._rules = (*specified_rules, _WithinDeadline)
        self._documents: TextCache[DocumentNode] = TextCache(DOCUMENTS_CACHED_CHARS)
        self._reading: dict[str, threading.Event] = {}
        """Texts being parsed and checked, each by the first request that sent it."""
        self._lock = threading.Lock()
        self.late = Answer(
            Outcome.DEADLINE,
            encode(
                ExecutionResult(
                    None,
                    [
                        GraphQLError(
                            f"the query did not finish within its deadline of {deadline_s:g} s "
                            "(--query-deadline-s): ask for less at once (a shorter duration, fewer "
                            "entities or fields), or try again when the node is less busy"
                        )
                    ],
                )
            ),
        )
        """The answer to a query whose deadline passed."""
        self._too_large = _failed(
            f"the answer would be larger than the {max_answer_bytes} bytes this node sends "
            "(--query-max-answer-bytes): ask for less at once (fewer fields or entities, a smaller page)"
        )

    def answer(self, request: QueryRequest) -> Answer:
        """``run``, with a failure of the node's own answered as such."""
        try:
            return self.run(request)
        except Exception as e:
            log.exception("a query failed to run")
            return _failed(f"the node failed to run the query: {e!r}")

    def run(self, request: QueryRequest) -> Answer:
        """Runs ``request`` in this thread (under the caller's deadline, if
        any: past it, validation and execution stop where they are)."""
        try:
            document = self._document(request.query)
            if isinstance(document, Answer):
                return document
            result = execute_sync(
                self._binder.schema,
                document,
                context_value=self._context(),
                variable_values=request.variables,
                operation_name=request.operation_name,
                field_resolver=self._binder.resolve,
                executor_class=self._executor,
            )
        except _DeadlinePassed:
            return self.late
        except _AnswerTooLarge:
            return self._too_large
        body = encode(result)
        if len(body) > self._max_answer_bytes:  # the guard weighs an answer by its text, not as encoded
            return self._too_large
        return Answer(self._outcome(result), body)

    def _document(self, query: str) -> DocumentNode | Answer:
        """``query`` parsed and valid, or the answer saying what is wrong with
        it. A text another request is reading is waited for, not read again:
        the UI sends a list's requests at once, all of the same text."""
        document = self._documents.get(query)
        if document is not None:
            return document
        with self._lock:
            reading = self._reading.get(query)
            if reading is None:
                self._reading[query] = threading.Event()
        if reading is not None:
            reading.wait(deadline.remaining(self.deadline_s))
            return self._documents.get(query) or self._read(query)  # not kept: invalid, or too long
        try:
            return self._read(query)
        finally:
            with self._lock:
                self._reading.pop(query).set()

    def _read(self, query: str) -> DocumentNode | Answer:
        """``query`` parsed and checked, kept if valid."""
        try:
            document = _without_tokens(parse(query, max_tokens=self._max_tokens))
        except GraphQLError as e:
            return Answer(Outcome.INVALID, encode(ExecutionResult(None, [_named(e, self._max_tokens)])))
        except RecursionError:
            return _invalid("the query nests too deeply to be read; ask for fewer levels at once")
        too_large = size_error(document, self._max_depth, self._max_fields)
        if too_large is not None:
            return Answer(Outcome.INVALID, encode(ExecutionResult(None, [too_large])))
        try:
            errors = validate(self._binder.schema, document, self._rules)
        except RecursionError:
            return _invalid("the query nests too deeply to be checked; ask for fewer levels at once")
        if errors:
            return Answer(Outcome.INVALID, encode(ExecutionResult(None, errors)))
        self._documents.put(query, document)
        return document

    @staticmethod
    def _outcome(result: ExecutionResult) -> Outcome:
        if not result.errors:
            return Outcome.ANSWERED
        # Errors of the request as a whole (its variables, which operation to
        # run) have no path; a field's error has the field's.
        if all(e.path is None for e in result.errors):
            return Outcome.INVALID
        for e in result.errors:
            cause = e.original_error
            if cause is not None:
                _failures.warning(type(cause).__name__, "a query's field %s failed: %r", e.path, cause)
        return Outcome.FAILED


class _DeadlinePassed(BaseException):
    """Stops a validation or an execution whose deadline passed. Not an
    Exception: graphql-core catches those per field, answers the field null
    and goes on with the others."""


class _AnswerTooLarge(BaseException):
    """Stops an execution whose answer grew past its bound."""


class _WithinDeadline(ValidationRule):
    """Stops validating once the request's deadline has passed."""

    def enter(self, *_: Any) -> None:
        if deadline.remaining(1.0) <= 0:
            raise _DeadlinePassed


class _Guarded(ExecutorThrowingOnIncremental):
    """graphql-core's executor, stopped once the request's deadline passes
    (so a query answered late stops taking CPU and reading storage) or once
    the objects it completed would be an answer past ``max_bytes`` (weighed
    as they complete, so the answer is never built whole). It looks once per
    object, introspection's too, not per field: a field costs nothing more.

    The root fields of a batch resolver (``binder.py``) are resolved at
    once, before the others. What resolvers answer is completed by plans
    (``completion.py``), kept in ``completers`` by the text of their
    selections, where one can be made; graphql-core completes the rest."""

    binder: ClassVar[Binder]
    max_bytes: ClassVar[int]
    completers: ClassVar[TextCache[Complete]]
    _left: int | None = None

    def execute_root_grouped_field_set(
        self,
        root_type: GraphQLObjectType,
        root_value: Any,
        grouped_field_set: GroupedFieldSet,
        serially: bool,
        position_context: None,
    ) -> Any:
        batches = self.binder.batches(root_type.name)
        if serially or not batches:
            return super().execute_root_grouped_field_set(
                root_type, root_value, grouped_field_set, serially, position_context
            )
        self.entering()
        answers = self._batched(root_type, grouped_field_set, batches)
        done: dict[str, Any] = {}
        for key, fields in grouped_field_set.items():
            if key in answers:  # completed here, unless its plan gives up
                complete = self._completer(root_type.fields[fields[0].node.name.value].type, fields)
                if complete is not None:
                    left = self._left
                    try:
                        done[key] = complete(answers[key], self)
                        continue
                    except GiveUp:
                        self._left = left
            value = self.execute_field(root_type, answers, fields, Path(None, key, root_type.name), None)
            if value is not Undefined:
                done[key] = value
        self.completed(done)
        return done

    def _batched(
        self, root_type: GraphQLObjectType, fields: GroupedFieldSet, batches: Mapping[str, BatchResolver]
    ) -> Answers:
        """What the batch resolvers answer for their fields among ``fields``,
        by response key. A field whose arguments are wrong is left out, for
        graphql-core to say what is wrong with them."""
        asked: dict[str, tuple[list[str], list[dict[str, Any]]]] = {}
        for key, details in fields.items():
            node = details[0].node
            name = node.name.value
            if name not in batches:
                continue
            field = root_type.fields[name]
            arguments = (
                None
                if details[0].fragment_variable_values
                else _of_variables(field, node, self.variable_values)
            )
            if arguments is None:
                try:
                    arguments = get_argument_values(
                        field,
                        node,
                        self.variable_values,
                        details[0].fragment_variable_values,
                        self.hide_suggestions,
                    )
                except Exception:
                    continue
            keys, each = asked.setdefault(name, ([], []))
            keys.append(key)
            each.append(arguments)
        answers = Answers()
        for name, (keys, each) in asked.items():
            try:
                values = batches[name](self.context_value, each)
            except Exception as e:
                values = [e] * len(keys)
            answers.update(zip(keys, values, strict=True))
        return answers

    def execute_fields(self, *arguments: Any) -> Any:
        self.entering()
        fields = cast(dict[str, Any], super().execute_fields(*arguments))  # a sync execution's
        self.completed(fields)
        return fields

    def entering(self) -> None:
        if deadline.remaining(1.0) <= 0:
            raise _DeadlinePassed

    def completed(self, fields: dict[str, Any]) -> None:
        left = (self.max_bytes if self._left is None else self._left) - _weight(fields)
        if left < 0:
            raise _AnswerTooLarge
        self._left = left

    def complete_value(
        self,
        return_type: GraphQLOutputType,
        field_details_list: FieldDetailsList,
        *arguments: Any,
    ) -> Any:
        if field_details_list[0].node.selection_set is not None:
            complete = self._completer(return_type, field_details_list)
            if complete is not None:
                left = self._left
                try:
                    return complete(arguments[2], self)
                except GiveUp:
                    self._left = left  # graphql-core weighs them again
        return super().complete_value(return_type, field_details_list, *arguments)

    def _completer(self, type_: GraphQLOutputType, fields: FieldDetailsList) -> Complete | None:
        text = selection_text(fields)
        if text is None:
            return None
        key = f"{type_}\0{text}"
        found = self.completers.get(key)
        if found is None:
            found = completer(type_, lambda parent: self._plan(parent, fields)) or _NOT_PLANNED
            self.completers.put(key, found)
        return None if found is _NOT_PLANNED else found

    def _plan(self, parent: GraphQLObjectType, fields: FieldDetailsList) -> Plan | None:
        grouped, deferred, _ = self.collect_subfields(parent, fields)
        if deferred:
            return None
        planned = []
        for key, details in grouped.items():
            node = details[0].node
            name = node.name.value
            if name == "__typename":
                planned.append((key, name, typename(parent.name)))
                continue
            field = self.schema.get_field(parent, name)
            if field is None or field.resolve is not None or field.args or node.arguments:
                return None
            complete = completer(field.type, functools.partial(self._plan, fields=details))
            if complete is None:
                return None
            planned.append((key, name, complete))
        return Plan(tuple(planned))


def _of_variables(field: GraphQLField, node: FieldNode, variables: VariableValues) -> dict[str, Any] | None:
    """The arguments of ``node``, as ``get_argument_values`` gives them, when
    each is a variable with a value (SkyWalking's UI sends each expression and
    entity of a list as one) and those not given have no default: each is
    then its variable's value, coerced with the others; None otherwise.
    graphql-core's own takes several times as long, for the hundreds of
    fields of a list."""
    given: dict[str, Any] = {}
    for argument in node.arguments or ():
        if not isinstance(argument.value, VariableNode):
            return None
        value = variables.coerced.get(argument.value.name.value)
        if value is None or value is Undefined:
            return None
        given[argument.name.value] = value
    arguments = {}
    for name, definition in field.args.items():
        if name in given:
            arguments[definition.out_name or name] = given[name]
        elif (
            definition.default is not None
            or definition.default_value is not Undefined
            or isinstance(definition.type, GraphQLNonNull)
        ):
            return None
    return arguments


def _not_planned(_value: Any, _guard: Any) -> Any:
    raise GiveUp


_NOT_PLANNED: Complete = _not_planned
"""Kept for a selection no plan completes, so that it is not looked at again."""


def _guarded(binder: Binder, max_bytes: int) -> type[_Guarded]:
    attributes = {
        "binder": binder,
        "max_bytes": max_bytes,
        "completers": TextCache[Complete](PLANS_CACHED_CHARS),
    }
    return type("Guarded", (_Guarded,), attributes)


def _weight(fields: dict[str, Any]) -> int:
    """About what an object's fields add to the answer's text: their names,
    their strings and lists of strings (objects are weighed as they
    complete), a few bytes for anything else."""
    weight = 0
    for name, value in fields.items():
        weight += len(name) + 4
        if value.__class__ is str:
            weight += len(value)
        elif value.__class__ is list:
            weight += sum(len(v) + 3 if v.__class__ is str else 1 for v in value)
        else:
            weight += 4
    return weight


def _without_tokens(document: DocumentNode) -> DocumentNode:
    """``document`` without the lexer's tokens, which each node's location
    holds (a linked list of every token of the text) and nothing reads once
    it is parsed: a kept document of SkyWalking's lists is then a fifth fewer
    objects for the garbage collector to walk, each time it walks them all.
    What errors need of a location (its offsets and text) stays."""
    stack: list[Any] = [document]
    while stack:
        node = stack.pop()
        if isinstance(node, Node):
            if node.loc is not None:
                node.loc.start_token = node.loc.end_token = None  # type: ignore[assignment]
            stack.extend(getattr(node, key) for key in node.keys)
        elif isinstance(node, tuple | list):
            stack.extend(node)
    return document


def _named(error: GraphQLError, max_tokens: int) -> GraphQLError:
    """graphql-core's error past ``max_tokens``, with the option to name."""
    if "Document contains more than" not in error.message:
        return error
    return GraphQLError(
        f"the query has more than {max_tokens} tokens, more than this node reads "
        f"(--query-max-tokens {max_tokens}); split it over several requests"
    )


def _invalid(message: str) -> Answer:
    return Answer(Outcome.INVALID, encode(ExecutionResult(None, [GraphQLError(message)])))


def _failed(message: str) -> Answer:
    return Answer(Outcome.FAILED, encode(ExecutionResult(None, [GraphQLError(message)])))
