"""Metrics as SkyWalking's ``execExpression`` answers them (MQE, evaluated
by ``skyoap/mqe/``), over the rows storage holds (``mqe/stored.py``'s
``StoredMetrics``; the older reads are ``legacy_metrics.py``'s). A request's
``execExpression`` are evaluated together, what they read read at once for
all their entities (``StoredMetrics.read_ahead``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from skyoap.layers import CATALOGUE
from skyoap.mqe.arithmetic import ExpressionError
from skyoap.mqe.evaluator import Evaluator, reads
from skyoap.mqe.parser import parse
from skyoap.mqe.results import Evaluated, ExpressionResultType
from skyoap.mqe.stored import StoredMetrics
from skyoap.mqe.syntax import Expression
from skyoap.query.context import QueryContext
from skyoap.vocabulary.catalogue import MetricDef
from skyoap.vocabulary.duration import Duration
from skyoap.vocabulary.entity import Entity, entity_of


def exec_expressions(context: QueryContext, asked: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``execExpression`` asked with each of ``asked``'s arguments (the fields
    of a request, ``Binder.query_batch``): what the expressions read is read
    at once for every entity (``StoredMetrics.read_ahead``), then each is
    evaluated. What cannot be read (an expression, a Duration) is the
    expression's error, as SkyWalking answers it. ``debug`` traces are not
    kept: ``debuggingTrace`` is null."""
    reader = StoredMetrics(context.metrics, context.shared, context.records)
    evaluators: dict[tuple[Any, ...], Evaluator] = {}  # a list asks several expressions of each entity
    prepared = [_prepared(reader, arguments, evaluators) for arguments in asked]
    if len(prepared) > 1:
        reader.read_ahead(_reads(p for p in prepared if isinstance(p, _Prepared)))
    return [p if isinstance(p, dict) else p.answer() for p in prepared]


def _reads(prepared: Iterable[_Prepared]) -> Iterator[tuple[MetricDef, Duration, list[Entity]]]:
    """What ``prepared`` read: each metric of the catalogue, over a Duration,
    with the entities it is read of."""
    by_expression: dict[tuple[int, Duration], list[Entity]] = {}
    trees: dict[int, Expression] = {}
    for p in prepared:
        trees[id(p.tree)] = p.tree
        by_expression.setdefault((id(p.tree), p.evaluator.duration), []).append(p.evaluator.entity)
    for (tree, duration), entities in by_expression.items():
        for metric, over in reads(trees[tree], duration):
            definition = CATALOGUE.get(metric.name)  # an agent's meter is looked up as it is read
            if definition is not None:
                yield definition, over, entities


@dataclass(frozen=True, slots=True)
class _Prepared:
    """An expression read, ready to be evaluated."""

    evaluator: Evaluator
    tree: Expression

    def answer(self) -> dict[str, Any]:
        try:
            return _answer(self.evaluator.evaluate(self.tree))
        except (ExpressionError, ValueError, KeyError) as e:  # ValueError: a read past MAX_ROWS, …
            return _failed(str(e))


def _prepared(
    reader: StoredMetrics, arguments: Mapping[str, Any], evaluators: dict[tuple[Any, ...], Evaluator]
) -> _Prepared | dict[str, Any]:
    """An expression ready to be evaluated, with the evaluator of its entity
    and Duration (made once for each, kept in ``evaluators``)."""
    try:
        duration = Duration.of(arguments["duration"])
        given = arguments["entity"]
        evaluator = evaluators.get(key := (duration, *given.items()))
        if evaluator is None:
            evaluator = evaluators[key] = Evaluator(reader, entity_of(given), duration)
        tree = parse(arguments["expression"])
    except (ValueError, KeyError) as e:
        return _failed(str(e))
    return _Prepared(evaluator, tree)


def _answer(result: Evaluated) -> dict[str, Any]:
    """The protocol's ``ExpressionResult`` of ``result``: what
    ``Evaluated.formatted`` gives, as the endpoint answers it."""
    return {"type": result.type.value, "error": None, "results": [s.answered() for s in result.series]}


def _failed(error: str) -> dict[str, Any]:
    return {"type": ExpressionResultType.UNKNOWN.value, "error": error, "results": []}
