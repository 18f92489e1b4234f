"""MQE's operators (``+ - * / %``, the comparisons, ``&&`` and ``||``, and the
math functions ``abs``, ``ceil`` and ``floor``) on evaluated operands, with
SkyWalking's rules for pairing them:

- a single value with a single value gives a single value;
- a single value with a time series or a list applies to each of its points;
- a time series with a time series pairs their points one to one;
- a list with a time series or another list does not combine.

Labels: a labeled operand with an unlabeled one applies the unlabeled one to
each labeled series; two labeled operands pair the series whose label sets
are equal, keeping the left one's labels, and a left series with no partner
has no values. A point with no data on either side gives no data.

Arithmetic is IEEE double arithmetic, as Java's: ``x / 0`` is infinite and
``0 / 0`` NaN, which the formatting shows as no data. Each operator is
defined once, on arrays of values: the evaluator applies it to a series'
points at once, and ``vectorized`` to every entity's at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeAlias, TypeVar

import numpy as np
import numpy.typing as npt

from skyoap.mqe.results import Evaluated, ExpressionResultType, KeyValue, Series
from skyoap.mqe.syntax import BinaryOperator, BoolOperator, Comparison, MathFunction

Floats: TypeAlias = npt.NDArray[np.float64]
Flags: TypeAlias = npt.NDArray[np.bool_]

Apply = Callable[[Floats, Floats], Floats]
"""An operator, element by element (arrays broadcast)."""

SINGLE = ExpressionResultType.SINGLE_VALUE
SERIES = ExpressionResultType.TIME_SERIES_VALUES


class ExpressionError(Exception):
    """An expression that cannot be evaluated; the message is the result's error."""


def _truth(test: Callable[[Floats, Floats], Flags]) -> Apply:
    return lambda a, b: test(a, b).astype(np.float64)


ARITHMETIC: dict[BinaryOperator, Apply] = {
    BinaryOperator.ADD: np.add,
    BinaryOperator.SUB: np.subtract,
    BinaryOperator.MUL: np.multiply,
    BinaryOperator.DIV: np.divide,  # x / 0 infinite, 0 / 0 NaN
    BinaryOperator.MOD: np.fmod,  # the dividend's sign, as Java's %; NaN for x % 0 and inf % x
}

COMPARISONS: dict[Comparison, Apply] = {
    Comparison.DEQ: _truth(np.equal),
    Comparison.NEQ: _truth(np.not_equal),
    Comparison.LTE: _truth(np.less_equal),
    Comparison.LT: _truth(np.less),
    Comparison.GTE: _truth(np.greater_equal),
    Comparison.GT: _truth(np.greater),
}

LOGIC: dict[BoolOperator, Apply] = {
    BoolOperator.AND: _truth(lambda a, b: (a == 1) & (b == 1)),
    BoolOperator.OR: _truth(lambda a, b: (a == 1) | (b == 1)),
}

MATH: dict[MathFunction, Callable[[Floats], Floats]] = {
    MathFunction.ABS: np.abs,
    # + 0.0: Java's ceil(-0.5) is 0, not -0. Infinities and NaN stay as they are.
    MathFunction.CEIL: lambda v: np.ceil(v) + 0.0,
    MathFunction.FLOOR: lambda v: np.floor(v) + 0.0,
}


def applied(
    apply: Apply, left: Sequence[float | None], right: Sequence[float | None]
) -> tuple[float | None, ...]:
    """``apply`` to points (one on a side applies to each of the other's); no
    data where either has none."""
    with np.errstate(all="ignore"):  # IEEE's infinities and NaN are Java's too
        values: list[float] = apply(np.array(left, np.float64), np.array(right, np.float64)).tolist()
    lefts = left if len(left) == len(values) else [left[0]] * len(values)
    rights = right if len(right) == len(values) else [right[0]] * len(values)
    return tuple(None if a is None or b is None else v for v, a, b in zip(values, lefts, rights, strict=True))


class _Labeled(Protocol):
    @property
    def labels(self) -> tuple[KeyValue, ...]: ...


S = TypeVar("S", bound=_Labeled)


def paired(
    left: Sequence[S],
    left_labeled: bool,
    right: Sequence[S],
    right_labeled: bool,
    only: Callable[[Sequence[S], str], S],
) -> list[tuple[tuple[KeyValue, ...], S, S | None]]:
    """The series of two operands as they combine, by the rules above: each
    result's labels, its left series and its right one (None: a labeled
    series with no partner). ``only(series, side)`` is an unlabeled operand's one series."""
    if left_labeled and right_labeled:
        partners = {frozenset(s.labels): s for s in right}
        return [(s.labels, s, partners.get(frozenset(s.labels))) for s in left]
    if left_labeled:
        b = only(right, "right")
        return [(s.labels, s, b) for s in left]
    if right_labeled:
        a = only(left, "left")
        return [(s.labels, a, s) for s in right]
    return [((), only(left, "left"), only(right, "right"))]


def combine(left: Evaluated, right: Evaluated, apply: Apply, operation: str) -> Evaluated:
    """``left`` and ``right`` paired by the rules above and combined point by
    point with ``apply``. ``operation`` names the operation in errors
    (``binary``, ``compare``, ``bool``)."""
    kind = _result_type(left.type, right.type, operation)
    operands = {"left": left, "right": right}
    pairs = paired(
        left.series,
        left.labeled,
        right.series,
        right.labeled,
        lambda _, side: _only(operands[side], side, operation),
    )
    lt, rt = left.type, right.type
    if kind is SINGLE and not (left.labeled or right.labeled):
        # Two single values give a value of no one time, as in SkyWalking (max() keeps its point's id).
        [(_, a, b)] = pairs
        assert b is not None
        series: tuple[Series, ...] = (Series.single(applied(apply, a.values, b.values)[0]),)
    else:
        series = tuple(_pair(a, lt, b, rt, apply, labels) for labels, a, b in pairs)
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
        return Series(labels, right.ids, applied(apply, left.values[:1], right.values), right.owners)
    if rtype is SINGLE and ltype is not SINGLE:
        values = applied(apply, left.values, right.values[:1])
    else:
        if len(left.values) != len(right.values):
            raise ExpressionError(
                f"Unsupported operation: the left operand has {len(left.values)} points and the right one "
                f"{len(right.values)}; they are paired one to one."
            )
        values = applied(apply, left.values, right.values)
    return Series(labels, left.ids, values, left.owners)
