"""What a layer of meters declares of its rules (``rules/*.yaml``, in
SkyWalking's form): the files themselves, which the receivers run, and
the metrics they make, by SkyWalking's names, which the catalogue lists.

A rule of a service's scope stores ``ServiceMeterMetrics``, of an
instance's ``MeterMetrics``; what a query reads of them is what the rule's
``downsampling`` keeps of each bucket's samples (their mean unless told)."""

from __future__ import annotations

import functools
import importlib.resources
from pathlib import Path

from skyoap.mal import families
from skyoap.mal.evaluation import Downsampling
from skyoap.mal.rules import RuleFile, read_rule_file
from skyoap.model.metrics import Meter, MeterMetrics, ServiceMeterMetrics
from skyoap.vocabulary import catalogue as c
from skyoap.vocabulary.entity import Scope

RULES = Path(str(importlib.resources.files(__package__).joinpath("rules")))
"""The rule files skyoap ships, one or two per layer."""

COLUMNS = {
    Downsampling.AVG: "value_avg", Downsampling.SUM: "value_sum", Downsampling.LATEST: "last_value",
    Downsampling.SUM_PER_MIN: "value_per_min", Downsampling.MAX: "value_max", Downsampling.MIN: "value_min",
}  # fmt: skip
"""What a query reads of a meter's bucket, by the rule's downsampling."""

MODELS: dict[families.Scope, tuple[type[Meter], Scope]] = {
    families.Scope.SERVICE: (ServiceMeterMetrics, Scope.SERVICE),
    families.Scope.INSTANCE: (MeterMetrics, Scope.SERVICE_INSTANCE),
}
"""Where a rule of each scope stores its values, and the scope queries name."""


@functools.cache
def rule_file(name: str) -> RuleFile:
    """A shipped rule file, read once."""
    return read_rule_file(RULES / name)


def rule_metrics(*names: str) -> tuple[c.MetricDef, ...]:
    """The metrics the shipped rule files ``names`` make."""
    found = []
    for name in names:
        for rule in rule_file(name).rules:
            model, scope = MODELS[rule.scope]
            kind = c.MetricsType.LABELED_VALUE if rule.labeled else c.MetricsType.REGULAR_VALUE
            column = COLUMNS[rule.downsampling]
            found.append(
                c.MetricDef(
                    name=rule.metric,
                    type=kind,
                    scope=scope,
                    model=model,
                    column=column,
                    where={"name": rule.metric},
                )
            )
    return tuple(found)
