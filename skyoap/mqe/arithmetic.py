"""MQE's binary operators (``+ - * / %``, the comparisons, ``&&`` and ``||``)
on evaluated operands, with SkyWalking's rules for pairing them:

- a single value with a single value gives a single value;
- a single value with a time series or a list applies to each of its points;
- a time series with a time series pairs their points one to one;
- a list with a time series or another list does not combine.

Labels: a labeled operand with an unlabeled one applies the unlabeled one to
each labeled series; two labeled operands pair the series whose label sets
are equal, keeping the left one's labels, and a left series with no partner
has no values. A point with no data on either side gives no data.

Arithmetic is IEEE double arithmetic, as Java's: ``x / 0`` is infinite and
``0 / 0`` NaN, which the formatting shows as no data.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from skyoap.mqe.results import Evaluated, ExpressionResultType, KeyValue, Series
from skyoap.mqe.syntax import BinaryOperator, BoolOperator, Comparison

Apply = Callable[[float, float], float]

SINGLE = ExpressionResultType.SINGLE_VALUE
SERIES = ExpressionResultType.TIME_SERIES_VALUES


class ExpressionError(Exception):
    """An expression that cannot be evaluated; the message is the result's error."""


def _divide(a: float, b: float) -> float:
    if b == 0:
        return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a) * math.copysign(1, b)
    return a / b


def _modulo(a: float, b: float) -> float:
    try:
        return math.fmod(a, b)  # the sign of the dividend, as Java's %
    except ValueError:  # x % 0 and inf % x, which Java makes NaN
        return math.nan


ARITHMETIC: dict[BinaryOperator, Apply] = {
    BinaryOperator.ADD: lambda a, b: a + b,
    BinaryOperator.SUB: lambda a, b: a - b,
    BinaryOperator.MUL: lambda a, b: a * b,
    BinaryOperator.DIV: _divide,
    BinaryOperator.MOD: _modulo,
}

COMPARISONS: dict[Comparison, Apply] = {
    Comparison.DEQ: lambda a, b: float(a == b),
    Comparison.NEQ: lambda a, b: float(a != b),
    Comparison.LTE: lambda a, b: float(a <= b),
    Comparison.LT: lambda a, b: float(a < b),
    Comparison.GTE: lambda a, b: float(a >= b),
    Comparison.GT: lambda a, b: float(a > b),
}

LOGIC: dict[BoolOperator, Apply] = {
    BoolOperator.AND: lambda a, b: float(a == 1 and b == 1),
    BoolOperator.OR: lambda a, b: float(a == 1 or b == 1),
}


def combine(left: Evaluated, right: Evaluated, apply: Apply, operation: str) -> Evaluated:
    """``left`` and ``right`` paired by the rules above and combined point by
    point with ``apply``. ``operation`` names the operation in errors
    (``binary``, ``compare``, ``bool``)."""
    kind = _result_type(left.type, right.type, operation)
    lt, rt = left.type, right.type
    if left.labeled and right.labeled:
        partners = {frozenset(s.labels): s for s in right.series}
        pairs = ((s, partners.get(frozenset(s.labels))) for s in left.series)
        series = tuple(_pair(s, lt, partner, rt, apply, s.labels) for s, partner in pairs)
    elif left.labeled:
        only = _only(right, "right", operation)
        series = tuple(_pair(s, lt, only, rt, apply, s.labels) for s in left.series)
    elif right.labeled:
        only = _only(left, "left", operation)
        series = tuple(_pair(only, lt, s, rt, apply, s.labels) for s in right.series)
    elif kind is SINGLE:
        # Two single values give a value of no one time, as in SkyWalking (max() keeps its point's id).
        a, b = _only(left, "left", operation).values[0], _only(right, "right", operation).values[0]
        series = (Series.single(None if a is None or b is None else apply(a, b)),)
    else:
        series = (_pair(_only(left, "left", operation), lt, _only(right, "right", operation), rt, apply, ()),)
    return Evaluated(kind, series, left.labeled or right.labeled)


def _result_type(
    left: ExpressionResultType, right: ExpressionResultType, operation: str
) -> ExpressionResultType:
    if left is SINGLE:
        return right
    if right is SINGLE or left is right is SERIES:
        return left
    raise ExpressionError(
        f"Unsupported {operation} operation: {left.value} and {right.value} do not combine; a list combines "
        "only with a single value, and a time series with a time series or a single value."
    )


def _only(result: Evaluated, side: str, operation: str) -> Series:
    """The one series of an unlabeled operand (a single value: of one point)."""
    if len(result.series) != 1 or (result.type is SINGLE and len(result.series[0].values) != 1):
        raise ExpressionError(f"Unsupported {operation} operation: the {side} operand has no value.")
    return result.series[0]


def _pair(
    left: Series,
    ltype: ExpressionResultType,
    right: Series | None,
    rtype: ExpressionResultType,
    apply: Apply,
    labels: tuple[KeyValue, ...],
) -> Series:
    """``left`` and ``right`` combined: a single value with each point of the
    other side (whose points the result keeps), or point by point. No
    ``right`` (a labeled series with no partner): no values."""
    if right is None:
        return Series(labels, left.ids, (None,) * len(left.values), left.owners)
    if ltype is SINGLE and rtype is not SINGLE:
        a = left.values[0]
        values = [None if a is None or b is None else apply(a, b) for b in right.values]
        return Series(labels, right.ids, tuple(values), right.owners)
    if rtype is SINGLE and ltype is not SINGLE:
        b = right.values[0]
        values = [None if a is None or b is None else apply(a, b) for a in left.values]
    else:
        if len(left.values) != len(right.values):
            raise ExpressionError(
                f"Unsupported operation: the left operand has {len(left.values)} points and the right one "
                f"{len(right.values)}; they are paired one to one."
            )
        pairs = zip(left.values, right.values, strict=True)
        values = [None if a is None or b is None else apply(a, b) for a, b in pairs]
    return Series(labels, left.ids, tuple(values), left.owners)
