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
from typing import Any, NamedTuple

from skyoap.vocabulary.entity import Scope


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
    text = repr(value)
    _, point, fraction = text.partition(".")
    if point and len(fraction) <= 3 and "e" not in fraction:  # already so written: no rounding
        return text.rstrip("0").rstrip(".")
    shortest = decimal.Decimal(text)
    rounded = shortest.quantize(_THOUSANDTH, decimal.ROUND_HALF_EVEN, _CONTEXT)
    if abs(shortest - rounded) == _HALF:
        rounded = decimal.Decimal(value).quantize(_THOUSANDTH, decimal.ROUND_HALF_EVEN, _CONTEXT)
    text = f"{rounded:f}".rstrip("0").rstrip(".")
    return text


class Point(NamedTuple):
    """A point of a series: its id, its value (None: no data) and, in a top
    list, whose value it is."""

    id: str | None
    value: float | None
    owner: Owner | None = None


class Series(NamedTuple):
    """A value at each of some points, kept as columns: a series read holds
    a point per bucket, and most of what is done to it is done to its
    values alone."""

    labels: tuple[KeyValue, ...]
    ids: tuple[str | None, ...]
    values: tuple[float | None, ...]
    owners: tuple[Owner | None, ...] | None = None
    """Whose each value is, in a top list; None where no point has an owner."""
    trace_ids: tuple[str, ...] | None = None
    """The trace each value was sampled in, in a record list."""

    @classmethod
    def of(cls, labels: tuple[KeyValue, ...], points: Sequence[Point]) -> Series:
        owners = tuple(p.owner for p in points)
        return cls(
            labels,
            tuple(p.id for p in points),
            tuple(p.value for p in points),
            owners if any(o is not None for o in owners) else None,
        )

    @classmethod
    def single(cls, value: float | None) -> Series:
        """A value of no one time or entity, unlabeled."""
        return cls((), (None,), (value,))

    @property
    def points(self) -> tuple[Point, ...]:
        owners = self.owners or (None,) * len(self.ids)
        return tuple(map(Point, self.ids, self.values, owners))

    def point(self, index: int) -> Point:
        return Point(self.ids[index], self.values[index], self.owners[index] if self.owners else None)

    def answered(self) -> dict[str, Any]:
        """The protocol's ``MQEValues`` of the series, as the query endpoint
        answers it (``formatted``'s, as JSON)."""
        owners = self.owners or (None,) * len(self.ids)
        traces = self.trace_ids or (None,) * len(self.ids)
        return {
            "metric": {"labels": [{"key": kv.key, "value": kv.value} for kv in self.labels]},
            "values": [
                {"id": i, "value": None if v is None else format_value(v), "traceID": t, "owner": _owner(o)}
                for i, v, t, o in zip(self.ids, self.values, traces, owners, strict=True)
            ],
        }

    def with_values(self, values: Sequence[float | None]) -> Series:
        """The same points with new values."""
        if len(values) != len(self.ids):
            raise ValueError(f"{len(values)} values for {len(self.ids)} points")
        return Series(self.labels, self.ids, tuple(values), self.owners)


class Evaluated(NamedTuple):
    """An expression's value: one series per label combination (one, unlabeled,
    for an unlabeled value); a single value is a series of one point.
    ``labeled`` is SkyWalking's "labeled result": it holds for a labeled
    metric's read even when no label combination has data.

    It and ``Series`` are named tuples, not frozen dataclasses: an expression
    over a list makes several of each for every entity, and a tuple is made
    in half the time."""

    type: ExpressionResultType
    series: tuple[Series, ...]
    labeled: bool = False

    def has_values(self) -> bool:
        return any(v is not None for s in self.series for v in s.values)

    def formatted(self) -> ExpressionResult:
        return ExpressionResult(self.type, tuple(map(_formatted, self.series)))


def _formatted(series: Series) -> MQEValues:
    owners = series.owners or (None,) * len(series.ids)
    traces = series.trace_ids or (None,) * len(series.ids)
    values = (
        MQEValue(i, None if v is None else format_value(v), t, o)
        for i, v, t, o in zip(series.ids, series.values, traces, owners, strict=True)
    )
    return MQEValues(Metadata(series.labels), tuple(values))


def _owner(o: Owner | None) -> dict[str, Any] | None:
    if o is None:
        return None
    return {
        "scope": o.scope.value,
        "serviceID": o.service_id,
        "serviceName": o.service_name,
        "normal": o.normal,
        "serviceInstanceID": o.service_instance_id,
        "serviceInstanceName": o.service_instance_name,
        "endpointID": o.endpoint_id,
        "endpointName": o.endpoint_name,
    }
