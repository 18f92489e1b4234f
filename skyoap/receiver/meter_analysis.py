"""The meter rules of a node, run where samples arrive: each batch (a
scrape, an OTLP export, an agent's report) becomes the ``meter_*`` metrics
its rules make, one value per entity, minute and label set, merged in L1
and routed to L2 as every metric is.

A rule whose values keep no labels besides its entity's (SkyWalking's
single-value metrics) adds up the samples an entity has in one batch:
where SkyWalking keeps the first and drops the others (a MySQL instance's
commits and rollbacks, a Redis instance's keys of each database), skyoap
counts them all."""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Iterable, Sequence
from typing import Any

from skyoap.layers.meters import MODELS
from skyoap.mal import families as f
from skyoap.mal.evaluation import Batch, Compiled, Context
from skyoap.mal.rules import RuleFile, evaluate_files
from skyoap.model.checks import Reason, Refused, TelemetryLimits
from skyoap.model.metrics import Meter, MeterMetrics, ServiceMeterMetrics, minute_bucket
from skyoap.receiver.cardinality import Cardinality
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.ratelimit import RateLimitedLog

log = logging.getLogger(__name__)


class MeterAnalyzer:
    """Runs the rules of ``files`` over each batch it is given."""

    def __init__(
        self,
        files: Sequence[RuleFile],
        limits: TelemetryLimits,
        cardinality: Cardinality,
        instruments: Instruments,
        context: Context | None = None,
    ) -> None:
        self.files = tuple(files)
        self._limits = limits
        self._cardinality = cardinality
        self._context = context or Context()
        self._made = instruments.counter(
            "skyoap_meter_values_total", "values the meter rules made of the samples that arrived"
        )
        self._refused = instruments.counter(
            "skyoap_meter_values_refused_total", "values of the meter rules not kept", ["reason"]
        )
        self._failed = instruments.counter(
            "skyoap_meter_rule_failures_total", "batches a meter rule failed on", ["file"]
        )
        self._failures = RateLimitedLog(log, 60.0)

    @functools.cached_property
    def families(self) -> frozenset[str]:
        """The families the rules read."""
        return frozenset(name for file in self.files for name in file.families)

    def analyze(self, batch: Batch, now_ms: int) -> list[Meter]:
        """The metrics the rules make of ``batch``, each checked as the
        RemoteService checks it."""
        if not self.files:
            return []
        made: list[Meter] = []
        for rule, scoped in evaluate_files(self.files, batch, self._context, self._failure):
            if rule.scope not in MODELS:  # an endpoint's or a relation's: evaluated and counted, not kept
                self._refused.labels(reason="scope_not_stored").inc(sum(map(len, scoped.entities.values())))
                continue
            for entity, samples in scoped.entities.items():
                for meter in self._values(rule, entity, samples):
                    try:
                        meter.check(self._limits, now_ms)
                    except Refused as e:
                        self._refused.labels(reason=e.reason.value).inc()
                        continue
                    made.append(meter)
        self._made.inc(len(made))
        return made

    def _values(self, rule: Compiled, entity: f.Entity, samples: Sequence[f.Sample]) -> Iterable[Meter]:
        if not entity.service or (rule.scope is f.Scope.INSTANCE and not entity.instance):
            self._refused.labels(reason=Reason.MISSING_NAME.value).inc(len(samples))
            return
        service, instance = self._cardinality.source(entity.service, entity.instance)
        values: dict[str, tuple[float, int]] = {}
        for sample in samples:
            labels = ",".join(f"{k}={v}" for k, v in sample.labels) if rule.labeled else ""
            value, time_ms = values.get(labels, (0.0, 0))
            values[labels] = (value + sample.value, max(time_ms, sample.time_ms))
        for labels, (value, time_ms) in values.items():
            if not math.isfinite(value):
                self._refused.labels(reason=Reason.NOT_A_NUMBER.value).inc()
                continue
            common: dict[str, Any] = {
                "time_bucket": minute_bucket(time_ms), "service": service, "name": rule.metric,
                "labels": labels, "layer": entity.layer, "samples": 1, "last_time": time_ms,
                "value_sum": value, "last_value": value, "value_max": value, "value_min": value,
            }  # fmt: skip
            if rule.scope is f.Scope.INSTANCE:
                yield MeterMetrics(**common, instance=instance)
            else:
                yield ServiceMeterMetrics(**common)

    def _failure(self, path: str, metric: str, error: Exception) -> None:
        self._failed.labels(file=path).inc()
        self._failures.error(
            f"{path}\x1f{metric}",
            "meter rule %s of %s failed on a batch: %s",
            metric or "filter",
            path,
            error,
        )
