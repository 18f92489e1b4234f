"""What evaluating an expression gives: numbers while it is evaluated
(``Evaluated``), and the protocol's ``ExpressionResult`` once formatted.

The protocol's types map one to one onto the frozen dataclasses here, their
fields named as in the schema but in snake case (``traceID`` is ``trace_id``).
"""

from __future__ import annotations

import decimal
import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from skyoap.query.entity import Scope


class ExpressionResultType(enum.Enum):
    UNKNOWN = "UNKNOWN"
    SINGLE_VALUE = "SINGLE_VALUE"
    TIME_SERIES_VALUES = "TIME_SERIES_VALUES"
    SORTED_LIST = "SORTED_LIST"
    RECORD_LIST = "RECORD_LIST"


@dataclass(frozen=True, slots=True, order=True)
class KeyValue:
    key: str
    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Owner:
    """The entity a value of a top list belongs to."""

    scope: Scope
    service_id: str
    service_name: str
    normal: bool
    service_instance_id: str | None = None
    service_instance_name: str | None = None
    endpoint_id: str | None = None
    endpoint_name: str | None = None


@dataclass(frozen=True, slots=True)
class MQEValue:
    id: str | None
    """A time series point's bucket start in epoch ms; an entity's name in a
    top list; None for a value of no one time (``avg``)."""
    value: str | None
    """Formatted as SkyWalking formats it (``format_value``); None for no data."""
    trace_id: str | None = None
    owner: Owner | None = None


@dataclass(frozen=True, slots=True)
class Metadata:
    labels: tuple[KeyValue, ...] = ()


@dataclass(frozen=True, slots=True)
class MQEValues:
    metric: Metadata
    values: tuple[MQEValue, ...]


@dataclass(frozen=True, slots=True)
class ExpressionResult:
    type: ExpressionResultType
    results: tuple[MQEValues, ...] = ()
    error: str | None = None

    @classmethod
    def failed(cls, error: str) -> ExpressionResult:
        return cls(ExpressionResultType.UNKNOWN, (), error)


_CONTEXT = decimal.Context(prec=400)
"""Enough digits for any double with three decimals (the largest has 309 before the point)."""
_THOUSANDTH = decimal.Decimal("0.001")
_HALF = decimal.Decimal("0.0005")


def format_value(value: float) -> str | None:
    """``value`` as SkyWalking writes MQE values (Java's ``DecimalFormat`` with
    no grouping): at most three decimals, rounded half to even, no trailing
    zeros or point: ``1500``, ``99.5``, ``0.333``, ``-0`` for a negative
    that rounds to zero.

    The digits are those of the shortest decimal that reads back as
    ``value`` (``1e23`` is ``100000000000000000000000``); where those digits
    sit exactly half way, the exact binary value decides, as in Java 8 and
    later (``0.0005`` is a little above half way and gives ``0.001``).

    None for infinity and NaN (a division by zero): Java writes ``∞`` and
    ``NaN``, which a client cannot read as numbers; no value is what it can show."""
    if not math.isfinite(value):
        return None
    shortest = decimal.Decimal(repr(value))
    rounded = shortest.quantize(_THOUSANDTH, decimal.ROUND_HALF_EVEN, _CONTEXT)
    if abs(shortest - rounded) == _HALF:
        rounded = decimal.Decimal(value).quantize(_THOUSANDTH, decimal.ROUND_HALF_EVEN, _CONTEXT)
    text = f"{rounded:f}".rstrip("0").rstrip(".")
    return text


class Point(NamedTuple):
    """A value while an expression is evaluated: a number, or None for no data.
    A named tuple, not a frozen dataclass: an expression over a list of
    entities makes tens of thousands, which a tuple makes in half the time."""

    id: str | None
    value: float | None
    trace_id: str | None = None
    owner: Owner | None = None

    def formatted(self) -> MQEValue:
        text = None if self.value is None else format_value(self.value)
        return MQEValue(self.id, text, self.trace_id, self.owner)

    @classmethod
    def each(cls, ids: Sequence[str | None], values: Sequence[float | None]) -> tuple[Point, ...]:
        """A point of each id with its value (of no trace, of no one), made
        as a tuple is made: a series read makes a point of each bucket."""
        new = tuple.__new__
        return tuple([new(cls, (i, v, None, None)) for i, v in zip(ids, values, strict=True)])


@dataclass(frozen=True, slots=True)
class Series:
    labels: tuple[KeyValue, ...]
    points: tuple[Point, ...]

    def with_values(self, values: list[float | None]) -> Series:
        """The same points with new values."""
        points = (Point(p.id, v, p.trace_id, p.owner) for p, v in zip(self.points, values, strict=True))
        return Series(self.labels, tuple(points))


@dataclass(frozen=True, slots=True)
class Evaluated:
    """An expression's value: one series per label combination (one, unlabeled,
    for an unlabeled value); a single value is a series of one point.
    ``labeled`` is SkyWalking's "labeled result": it holds for a labeled
    metric's read even when no label combination has data."""

    type: ExpressionResultType
    series: tuple[Series, ...]
    labeled: bool = False

    def has_values(self) -> bool:
        return any(p.value is not None for s in self.series for p in s.points)

    def formatted(self) -> ExpressionResult:
        results = (MQEValues(Metadata(s.labels), tuple(p.formatted() for p in s.points)) for s in self.series)
        return ExpressionResult(self.type, tuple(results))
