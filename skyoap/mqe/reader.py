"""What MQE evaluation reads metrics through: ``MetricReader``, and the
conditions and rows it takes and gives. A storage-backed reader answers each
method with one or a few storage reads; unit tests use an in-memory one."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from skyoap.mqe.results import KeyValue
from skyoap.mqe.syntax import Label, Order
from skyoap.vocabulary.catalogue import Attribute, MetricDef
from skyoap.vocabulary.duration import Duration
from skyoap.vocabulary.entity import Entity


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A metric's ``{p='50,75', …}``, by label: the values each selected
    series must have one of. Empty: every series."""

    values: Mapping[str, frozenset[str]]

    @classmethod
    def of(cls, labels: Iterable[Label]) -> LabelSelector:
        """As SkyWalking reads a selector: values split at commas and trimmed,
        blanks left out, a label named twice taking the values of both."""
        selected: dict[str, set[str]] = {}
        for label in labels:
            values = {v.strip() for v in label.value.split(",") if v.strip()}
            if values:
                selected.setdefault(label.name, set()).update(values)
        return cls({name: frozenset(values) for name, values in selected.items()})

    def selects(self, labels: Iterable[KeyValue]) -> bool:
        have = {kv.key: kv.value for kv in labels}
        return all(have.get(name) in values for name, values in self.values.items())


class LabeledValues(NamedTuple):
    """A metric's value at each point of a Duration (None where there is no
    data), for one combination of labels (none for an unlabeled metric)."""

    labels: tuple[KeyValue, ...]
    values: tuple[float | None, ...]


@dataclass(frozen=True, slots=True)
class AttrCondition:
    """``attrN='value'`` (``equal``) or ``attrN!='value'``, with what attrN holds."""

    attribute: Attribute
    value: str
    equal: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class TopNCondition:
    limit: int
    order: Order
    parent_service: str | None = None
    """Rank only this service's instances or endpoints (for a service metric,
    that service alone); None ranks every entity of the metric's scope."""
    normal: bool | None = None
    """The parent service's normal flag, as the client sent it."""
    attributes: tuple[AttrCondition, ...] = ()
    """Conditions every ranked entity meets."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Ranked:
    """An entity of a top list. ``instance`` or ``endpoint`` is set for a
    metric of that scope; ``normal`` is the service's normal flag."""

    value: float
    service: str
    normal: bool
    instance: str | None = None
    endpoint: str | None = None


class Sample(NamedTuple):
    """A sampled record: a slow call's statement, its latency (ms) and its trace."""

    statement: str
    latency: int
    trace_id: str


class MetricReader(Protocol):
    def values(
        self, metric: MetricDef, entity: Entity, duration: Duration, selector: LabelSelector
    ) -> Sequence[LabeledValues]:
        """``metric`` of ``entity`` at each of ``duration.points()``: one
        ``LabeledValues`` without labels for a REGULAR_VALUE metric, one per
        combination of labels with data in the Duration for a LABELED_VALUE
        one. The reader may leave out the combinations ``selector`` does not
        select (storage can narrow its read with it); the evaluator keeps
        only those it selects, whatever the reader returns. ``metric`` is
        measured and ``entity`` has the names its scope needs."""
        ...

    def top(self, metric: MetricDef, duration: Duration, condition: TopNCondition) -> Sequence[Ranked]:
        """The first ``condition.limit`` entities of ``metric``'s scope (a
        service, an instance or an endpoint) in ``condition.order`` of their
        mean value over the buckets of the Duration (from ``start_bucket`` to
        ``end_bucket``, not bounded to 500 points) in which they have one.
        ``metric`` is a measured REGULAR_VALUE metric."""
        ...

    def samples(
        self, metric: MetricDef, service: str, duration: Duration, limit: int, order: Order
    ) -> Sequence[Sample]:
        """The first ``limit`` records of the SAMPLED_RECORD ``metric`` of
        ``service`` sampled in the Duration's time, slowest first (``DES``)
        or fastest first (``ASC``)."""
        ...

    def meter(self, name: str) -> MetricDef | None:
        """The meter an agent reports that an expression names ``name``
        (built by ``catalogue.meter``), labeled if its reports carry labels;
        None if no agent reported one."""
        ...
