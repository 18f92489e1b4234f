"""Sample families and what MAL does to them, as SkyWalking's meter
analyzer does: the samples of one batch (a scrape, an OTLP request, an
agent's report) by metric name, filtered, combined and aggregated.

A family that holds no sample is EMPTY: a metric absent from the batch,
or one whose every sample a filter took away. How the operators treat it is
SkyWalking's, and lets one rule add up alternatives (``a + b`` is ``a``
where ``b`` is absent): ``+`` passes the other side, ``-`` too (negated when
it is on the right), ``*`` and ``/`` give EMPTY; a family divided by an
EMPTY one is divided by zero. A value that is not a number (0/0) leaves
its sample out.
"""

from __future__ import annotations

import enum
import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

Labels = tuple[tuple[str, str], ...]
"""A sample's labels, sorted by key."""


def labels_of(tags: Mapping[str, str]) -> Labels:
    return tuple(sorted(tags.items()))


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    """The metric it was read as: what a counter's window is kept by."""
    labels: Labels
    value: float
    time_ms: int

    def tag(self, key: str) -> str:
        """The label's value; '' when the sample has none."""
        for k, v in self.labels:
            if k == key:
                return v
        return ""


class Scope(enum.Enum):
    SERVICE = "service"
    INSTANCE = "instance"
    ENDPOINT = "endpoint"
    SERVICE_RELATION = "serviceRelation"


@dataclass(frozen=True, slots=True)
class Entity:
    """What a scope function names from a sample's labels."""

    scope: Scope
    layer: str
    service: str
    instance: str = ""
    endpoint: str = ""
    dest_service: str = ""
    detect_point: str = ""
    """A relation's side: ``server`` or ``client``."""


@dataclass(frozen=True)
class Scoped:
    """Each entity of a family with its samples, the labels that named the
    entity taken off: what a rule stores."""

    entities: Mapping[Entity, Sequence[Sample]]


@dataclass(frozen=True)
class Family:
    samples: tuple[Sample, ...] = ()
    scoped: Scoped | None = field(default=None, compare=False)
    """Set by the last scope function; kept by whatever follows it (as
    SkyWalking stores what the scope function grouped)."""

    def __bool__(self) -> bool:
        return bool(self.samples)

    def with_samples(self, samples: Iterable[Sample]) -> Family:
        """A family of ``samples``, those whose value is a number."""
        return Family(tuple(s for s in samples if not math.isnan(s.value)), self.scoped)

    def values(self, op: Callable[[float], float]) -> Family:
        return self.with_samples(replace(s, value=op(s.value)) for s in self.samples)


EMPTY = Family()


class Arithmetic(enum.Enum):
    ADD = "+"
    SUB = "-"
    MUL = "*"
    DIV = "/"


_OPERATIONS: Mapping[Arithmetic, Callable[[float, float], float]] = {
    Arithmetic.ADD: operator.add,
    Arithmetic.SUB: operator.sub,
    Arithmetic.MUL: operator.mul,
}


def _divide(a: float, b: float) -> float:
    if b == 0:
        return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a) * math.copysign(1, b)
    return a / b


def apply(op: Arithmetic, a: float, b: float) -> float:
    """``a op b``; a division by 0 is infinite (0/0 is not a number), as in Java."""
    return _divide(a, b) if op is Arithmetic.DIV else _OPERATIONS[op](a, b)


def with_scalar(op: Arithmetic, family: Family, scalar: float, scalar_first: bool) -> Family:
    """``family op scalar`` (or ``scalar op family``), value by value."""
    if scalar_first:
        return family.values(lambda v: apply(op, scalar, v))
    return family.values(lambda v: apply(op, v, scalar))


def java_double(value: float) -> str:
    """A number as SkyWalking writes a bucket's bound or a quantile (Java's
    ``Double.toString``): ``0.5``, ``1.0``, ``Infinity``."""
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(float(value))


def _matched(left: Family, right: Family) -> Iterable[tuple[Sample, float]]:
    """Each sample of ``left`` with the value of the first of ``right`` of the same labels."""
    by_labels: dict[Labels, float] = {}
    for s in right.samples:
        by_labels.setdefault(s.labels, s.value)
    return ((s, by_labels[s.labels]) for s in left.samples if s.labels in by_labels)


def between(op: Arithmetic, left: Family, right: Family) -> Family:
    """``left op right``: each sample of ``left`` with the sample of
    ``right`` of the same labels (those with none are left out)."""
    if not left or not right:
        if op is Arithmetic.ADD:
            return left or right
        if op is Arithmetic.SUB:
            return left if left else right.values(operator.neg)
        if op is Arithmetic.DIV and left:
            return left.values(lambda v: _divide(v, 0.0))
        return EMPTY
    return left.with_samples(replace(s, value=apply(op, s.value, v)) for s, v in _matched(left, right))


def safe_divide(left: Family, right: Family) -> Family:
    """``left / right`` where a division by 0 gives 0; EMPTY when either is."""
    if not left or not right:
        return EMPTY
    return left.with_samples(
        replace(s, value=0.0 if d == 0 else s.value / d) for s, d in _matched(left, right)
    )


class Aggregation(enum.Enum):
    SUM = "sum"
    MIN = "min"
    MAX = "max"
    AVG = "avg"
    COUNT = "count"


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values)


_REDUCTIONS: Mapping[Aggregation, Callable[[list[float]], float]] = {
    Aggregation.SUM: math.fsum,
    Aggregation.MIN: min,
    Aggregation.MAX: max,
    Aggregation.AVG: _mean,
}


def aggregate(family: Family, how: Aggregation, by: Sequence[str]) -> Family:
    """One sample per value of the ``by`` labels (a missing one is ''), with
    those labels only; the name and time of the group's first sample."""
    if how is Aggregation.COUNT:
        return _count(family, by)
    groups: dict[Labels, list[Sample]] = {}
    for s in family.samples:
        groups.setdefault(tuple((k, s.tag(k)) for k in by), []).append(s)
    reduce = _REDUCTIONS[how]
    return family.with_samples(
        Sample(group[0].name, tuple(sorted(labels)), reduce([s.value for s in group]), group[0].time_ms)
        for labels, group in groups.items()
    )


def _count(family: Family, by: Sequence[str]) -> Family:
    """How many distinct values the last of ``by`` takes, per value of the
    others (of the samples that have every one of them); with one label, in
    all; with none, how many samples there are."""
    if not family:
        return EMPTY
    first = family.samples[0]
    if not by:
        return family.with_samples([Sample(first.name, (), float(len(family.samples)), first.time_ms)])
    *outer, last = by
    seen: dict[Labels, set[str]] = {}
    for s in family.samples:
        tags = dict(s.labels)
        if len(by) > 1 and not all(k in tags for k in by):
            continue
        if len(by) == 1 and not tags.get(last, "").strip():
            continue
        seen.setdefault(tuple(sorted((k, tags.get(k, "")) for k in outer)), set()).add(tags.get(last, ""))
    return family.with_samples(
        Sample(first.name, labels, float(len(values)), first.time_ms) for labels, values in seen.items()
    )


class TagTest(enum.Enum):
    EQUAL = "tagEqual"
    NOT_EQUAL = "tagNotEqual"
    MATCH = "tagMatch"
    NOT_MATCH = "tagNotMatch"


def tag_filter(family: Family, test: TagTest, pairs: Sequence[tuple[str, str]]) -> Family:
    """The samples every ``(label, value)`` pair passes: equal values (a
    missing label is ''), or a regular expression matching the whole value."""
    patterns = [(k, re.compile(v)) for k, v in pairs] if test in (TagTest.MATCH, TagTest.NOT_MATCH) else []

    def passes(s: Sample) -> bool:
        if patterns:
            matched = all(p.fullmatch(s.tag(k)) is not None for k, p in patterns)
            return matched if test is TagTest.MATCH else not matched
        equal = all(s.tag(k) == v for k, v in pairs)
        return equal if test is TagTest.EQUAL else not equal

    return family.with_samples(s for s in family.samples if passes(s))


class ValueTest(enum.Enum):
    EQUAL = ("valueEqual", operator.eq)
    NOT_EQUAL = ("valueNotEqual", operator.ne)
    GREATER = ("valueGreater", operator.gt)
    GREATER_EQUAL = ("valueGreaterEqual", operator.ge)
    LESS = ("valueLess", operator.lt)
    LESS_EQUAL = ("valueLessEqual", operator.le)


def value_filter(family: Family, test: ValueTest, bound: float) -> Family:
    compare = test.value[1]
    return family.with_samples(s for s in family.samples if compare(s.value, bound))


def retag(family: Family, change: Callable[[dict[str, str]], dict[str, str]]) -> Family:
    """Each sample with the labels ``change`` makes of a copy of its own."""
    return family.with_samples(replace(s, labels=labels_of(change(dict(s.labels)))) for s in family.samples)


def keep(family: Family, test: Callable[[dict[str, str]], bool]) -> Family:
    return family.with_samples(s for s in family.samples if test(dict(s.labels)))


def histogram(family: Family, le: str, scale: float) -> Family:
    """Buckets as the meter system keeps them: label ``le`` the bucket's bound
    in ms (``scale`` ms to a unit of the input: 1,000 for seconds), whole."""
    plain = [s for s in family.samples if not any(k == le for k, _ in s.labels)]
    buckets = sorted((float(s.tag(le)), s) for s in family.samples if any(k == le for k, _ in s.labels))
    out = list(plain)
    for bound, s in buckets:
        rest = tuple((k, v) for k, v in s.labels if k != le)
        out.append(replace(s, labels=labels_of({**dict(rest), "le": _bound_ms(bound, scale)})))
    return family.with_samples(out)


def _bound_ms(bound: float, scale: float) -> str:
    if math.isinf(bound):
        return "Infinity" if bound > 0 else "-Infinity"
    return str(int(bound * scale))
