"""MQE's functions on evaluated operands, as SkyWalking defines them. Each
takes and returns ``Evaluated`` values and raises ExpressionError with the
message the result's error carries. ``text`` arguments are the operand as
written, for those messages."""

from __future__ import annotations

import decimal
import math
from collections.abc import Callable, Sequence

import numpy as np

from skyoap.mqe.arithmetic import MATH, SERIES, SINGLE, ExpressionError, Floats
from skyoap.mqe.results import Evaluated, KeyValue, Point, Series
from skyoap.mqe.syntax import Aggregation, Label, LabelsAggregation, MathFunction, Order, TrendFunction
from skyoap.vocabulary.duration import Step


def _java_order(value: float | None) -> tuple[bool, float]:
    """Java's order of doubles: NaN above every number."""
    value = value if value is not None else 0.0
    return (math.isnan(value), 0.0 if math.isnan(value) else value)


def _mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


_OF_VALUES: dict[Aggregation, Callable[[list[float]], float | None]] = {
    Aggregation.AVG: _mean,
    Aggregation.COUNT: lambda vs: float(len(vs)),
    Aggregation.SUM: math.fsum,
}
"""Aggregations to a value of no one time or entity."""

_CHOOSING: dict[Aggregation, Callable[[Series, list[int]], int | None]] = {
    Aggregation.MAX: lambda s, at: max(at, key=lambda i: _java_order(s.values[i]), default=None),
    Aggregation.MIN: lambda s, at: min(at, key=lambda i: _java_order(s.values[i]), default=None),
    Aggregation.LATEST: lambda s, at: at[-1] if at else None,
}
"""Aggregations choosing a point (by its place among those with data)."""


def aggregate(result: Evaluated, func: Aggregation, operand: object) -> Evaluated:
    """Each series to one value, from its points with data: their mean, count
    or sum (no id), or the point with the greatest or least value, or the
    last (with its id). A series with no data gives no data (``count`` and
    ``sum`` 0). Labels are kept. ``operand`` is written (``str``) only in an
    error: an aggregate is evaluated for each of a list's entities."""
    if func is Aggregation.LATEST and result.type is not SERIES:
        raise ExpressionError(f"latest needs a time series: [{operand}] gives {result.type.value}.")
    of_values, choosing = _OF_VALUES.get(func), _CHOOSING.get(func)
    series = []
    for s in result.series:
        if of_values is not None:
            value = of_values([v for v in s.values if v is not None])
            series.append(Series(s.labels, (None,), (value,)))
            continue
        assert choosing is not None
        chosen = choosing(s, [i for i, v in enumerate(s.values) if v is not None])
        point = Point(None, None) if chosen is None else s.point(chosen)
        series.append(Series.of(s.labels, (point,)))
    return Evaluated(SINGLE, tuple(series), result.labeled)


def _each_value(result: Evaluated, apply: Callable[[Floats], Floats]) -> Evaluated:
    """``apply`` to the values of each series (those with data)."""

    def each(series: Series) -> Series:
        values: list[float] = apply(np.array(series.values, np.float64)).tolist()
        return series.with_values(
            [None if v is None else a for a, v in zip(values, series.values, strict=True)]
        )

    return Evaluated(result.type, tuple(map(each, result.series)), result.labeled)


def mathematical(result: Evaluated, func: MathFunction) -> Evaluated:
    return _each_value(result, MATH[func])


_MAX_PLACES = 400
"""Past this many places rounding changes no double (the longest shortest
decimal of one has about 340)."""


def rounded(result: Evaluated, places: int) -> Evaluated:
    """Each value rounded to ``places`` decimals, half away from zero, from
    the shortest decimal that reads back as it (Java's ``BigDecimal.valueOf``)."""
    exponent = decimal.Decimal(1).scaleb(-min(places, _MAX_PLACES))
    context = decimal.Context(prec=_MAX_PLACES + 400)

    def round_one(value: float) -> float:
        if not math.isfinite(value):
            return value
        return float(decimal.Decimal(repr(value)).quantize(exponent, decimal.ROUND_HALF_UP, context))

    return _each_value(result, np.vectorize(round_one, otypes=[np.float64]))


def trend(result: Evaluated, func: TrendFunction, steps: int, step: Step) -> Evaluated:
    """``result`` read from ``steps`` steps before the Duration's start, to the
    change over ``steps`` steps at each point of the Duration (``increase``),
    or that change per second (``rate``). No data at either end: no data."""
    per = steps * step.width.total_seconds() if func is TrendFunction.RATE else 1.0
    return Evaluated(result.type, tuple(_trend(s, steps, per) for s in result.series), result.labeled)


def _trend(series: Series, steps: int, per: float) -> Series:
    values = series.values
    changes = (
        None if now is None or then is None else (now - then) / per
        for now, then in zip(values[steps:], values, strict=False)
    )
    return Series(series.labels, series.ids[steps:], tuple(changes))


def top_n_of(results: Sequence[Evaluated], limit: int, order: Order) -> Evaluated:
    """The values of several top lists in one, ``limit`` long, in ``order``."""
    kinds = {r.type for r in results}
    if len(kinds) > 1:
        names = " and ".join(sorted(k.value for k in kinds))
        raise ExpressionError(f"top_n_of merges top lists of one type, not {names}.")
    values = [p for r in results for s in r.series for p in s.points if p.value is not None]
    ordered = sorted(values, key=lambda p: _java_order(p.value), reverse=order is Order.DES)
    return Evaluated(results[0].type, (Series.of((), ordered[:limit]),))


def _labeled(result: Evaluated, text: str) -> None:
    if not result.labeled:
        raise ExpressionError(f"The result of expression [{text}] is not a labeled result.")


def _split(label: Label) -> list[KeyValue]:
    """A relabeling's values, as SkyWalking splits them: at commas, not trimmed."""
    if not label.value.strip():
        return []
    values = label.value.split(",")
    while values and not values[-1]:  # Java's split drops trailing empty strings
        values.pop()
    return [KeyValue(label.name, v) for v in values]


def relabel(result: Evaluated, target: Label, replacement: Label, text: str) -> Evaluated:
    """Renames the labels ``target`` lists to those ``replacement`` lists,
    the n-th to the n-th."""
    _labeled(result, text)
    targets, replacements = _split(target), _split(replacement)
    if not targets or not replacements:
        return result
    if len(targets) != len(replacements):
        raise ExpressionError(
            f"relabels: label [{target.name}] lists {len(targets)} values and [{replacement.name}] "
            f"{len(replacements)}; the n-th value of one replaces the n-th of the other."
        )
    renamed = dict(zip(targets, replacements, strict=True))
    series = tuple(s._replace(labels=tuple(renamed.get(kv, kv) for kv in s.labels)) for s in result.series)
    return Evaluated(result.type, series, True)


_LABEL_AGGREGATIONS: dict[LabelsAggregation, Callable[[list[float]], float]] = {
    LabelsAggregation.AVG: lambda vs: math.fsum(vs) / len(vs),
    LabelsAggregation.SUM: math.fsum,
    LabelsAggregation.MAX: max,
    LabelsAggregation.MIN: min,
}


def aggregate_labels(result: Evaluated, func: LabelsAggregation, by: Sequence[str], text: str) -> Evaluated:
    """The series grouped by their values of the labels ``by`` (those the
    first series has), each group to one series holding, at each point, the
    ``func`` of its series' values there. No ``by``: all series in one, unlabeled."""
    _labeled(result, text)
    if not result.series:
        return result
    present = {kv.key for kv in result.series[0].labels}
    names = [name for name in by if name in present]
    groups: dict[tuple[KeyValue, ...], list[Series]] = {}
    for s in result.series:
        values = {kv.key: kv.value for kv in s.labels}
        groups.setdefault(tuple(KeyValue(n, values.get(n, "")) for n in names), []).append(s)
    combine = _LABEL_AGGREGATIONS[func]
    combined = tuple(_combine_group(labels, group, combine) for labels, group in groups.items())
    return Evaluated(result.type, combined, bool(names))


def _combine_group(
    labels: tuple[KeyValue, ...], group: list[Series], func: Callable[[list[float]], float]
) -> Series:
    ids = group[0].ids
    if any(len(s.values) != len(ids) for s in group):
        raise ExpressionError("aggregate_labels: the labeled series have different numbers of points.")
    combined = []
    for i in range(len(ids)):
        values = [v for s in group if (v := s.values[i]) is not None]
        combined.append(func(values) if values else None)
    return Series(labels, ids, tuple(combined))


def sort_values(
    result: Evaluated, limit: int, order: Order, aggregation: Aggregation | None, text: str
) -> Evaluated:
    """The first ``limit`` series in ``order`` of their ``aggregation`` (avg
    unless told); series with no data last. An unlabeled result is returned
    as it is."""
    if not result.labeled:
        return result
    keys = [s.values[0] for s in aggregate(result, aggregation or Aggregation.AVG, text).series]
    sign = -1.0 if order is Order.DES else 1.0
    ranked = sorted(range(len(keys)), key=lambda i: (keys[i] is None, sign * (keys[i] or 0.0)))
    return Evaluated(result.type, tuple(result.series[i] for i in ranked[:limit]), True)


def sort_label_values(result: Evaluated, order: Order, names: Sequence[str]) -> Evaluated:
    """The series in ``order`` of their values of the labels ``names``, the
    first deciding first; a series without a label sorts as its empty value.
    Values compare as strings (``100`` before ``50``), as SkyWalking's do."""
    names = list(dict.fromkeys(names))

    def key(series: Series) -> tuple[str, ...]:
        values = {kv.key: kv.value for kv in series.labels}
        return tuple(values.get(name, "") for name in names)

    ordered = sorted(result.series, key=key, reverse=order is Order.DES)
    return Evaluated(result.type, tuple(ordered), result.labeled)
