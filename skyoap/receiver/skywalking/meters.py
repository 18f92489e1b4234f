"""SkyWalking's ``MeterReportService``: agents' meters."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

import grpc

from skyoap.mal.evaluation import Batch
from skyoap.mal.families import Family, Sample, labels_of
from skyoap.model.checks import Reason, Refused
from skyoap.model.metrics import MeterMetrics, add_to, minute_bucket
from skyoap.proto.skywalking import common_pb2, meter_pb2
from skyoap.receiver.checks import Tally
from skyoap.receiver.intake import TelemetryService
from skyoap.receiver.skywalking.streams import NO_COMMANDS, taking
from skyoap.runtime import clock
from skyoap.runtime.budget import memory_size


class MeterReportService(TelemetryService):
    """Takes meters: registers the service and instance they come from (named
    in the first message of a stream only) and turns each value into a metric,
    checked as the RemoteService checks it. A value whose sum with the others
    of its meter and minute in the same call would overflow is refused."""

    KIND = "meters"

    def _metric(self, pb: meter_pb2.MeterData, source: tuple[str, str], now_ms: int) -> MeterMetrics:
        lim = self._limits
        timestamp = lim.time("timestamp", pb.timestamp, now_ms) if pb.timestamp else now_ms
        kind = pb.WhichOneof("metric")
        if kind is None:
            raise Refused(Reason.NO_VALUE, "the meter has neither a single value nor a histogram")
        value = getattr(pb, kind)
        labels = ",".join(f"{lab.name}={lab.value}" for lab in sorted(value.labels, key=lambda x: x.name))
        common: dict[str, Any] = {
            "time_bucket": minute_bucket(timestamp),
            "service": source[0],
            "instance": source[1],
            "name": lim.name("meter name", value.name),
            "labels": lim.name("meter labels", labels, required=False),
            "samples": 1,
            "last_time": timestamp,
        }
        if kind == "singleValue":
            if not math.isfinite(value.value):
                raise Refused(Reason.NOT_A_NUMBER, f"meter {value.name} has the value {value.value}")
            v = value.value
            meter = MeterMetrics(**common, value_sum=v, last_value=v, value_max=v, value_min=v)
        else:
            meter = self._histogram(common, value)
        meter.check(lim, now_ms)
        return meter

    def _histogram(self, common: dict[str, Any], value: meter_pb2.MeterHistogram) -> MeterMetrics:
        lim = self._limits
        lim.at_most(
            f"buckets of meter {value.name}",
            len(value.values),
            lim.max_histogram_buckets,
            "--max-histogram-buckets",
        )
        buckets = {"-inf" if b.isNegativeInfinity else repr(b.bucket): str(b.count) for b in value.values}
        if len(buckets) < len(value.values):  # two counts of one bucket: which is right is not known
            raise Refused(Reason.INCONSISTENT, f"histogram {value.name} names a bucket bound twice")
        total = float(sum(b.count for b in value.values))
        return MeterMetrics(
            **common, value_sum=total, last_value=total, value_max=total, value_min=total, buckets=buckets
        )

    def _take(
        self,
        meters: Iterable[meter_pb2.MeterData],
        tally: Tally,
        taken: list[MeterMetrics],
        totals: dict[str, MeterMetrics],
        samples: dict[str, list[Sample]],
    ) -> None:
        """Checks ``meters``, adding the good ones to ``taken``, to the call's
        ``totals`` by key and, as the meter rules read them, to ``samples``."""
        now_ms = clock.now_ms()
        source: tuple[str, str] | None = None
        for pb in meters:
            self._received.inc()
            try:
                if pb.service and (pb.service, pb.serviceInstance) != source:
                    service = self._limits.name("service", pb.service)
                    instance = self._limits.name("serviceInstance", pb.serviceInstance)
                    source = self._cardinality.source(service, instance)
                if source is None:
                    raise Refused(Reason.MISSING_NAME, "the first meter of a stream names no service")
                metric = self._metric(pb, source, now_ms)
                add_to(totals, metric)
            except Refused as e:
                tally.refuse(e)
                continue
            taken.append(metric)
            self._sinks.hold(memory_size([metric]))
            for sample in _samples(pb, metric):
                samples.setdefault(sample.name, []).append(sample)

    def _hand_on(
        self, taken: list[MeterMetrics], tally: Tally, samples: dict[str, list[Sample]]
    ) -> common_pb2.Commands:
        """Hands on the meters taken and what the meter rules make of them
        (their bounds in ms, as agents report them)."""
        batch = Batch({name: Family(tuple(found)) for name, found in samples.items()}, seconds=False)
        made = self._meters.analyze(batch, clock.now_ms()) if samples else []
        if taken:
            self._sinks.hold(memory_size(made))
            self._sinks.take((), [*taken, *made])
            tally.taken += len(taken)
        for service, instance in sorted({(m.service, m.instance) for m in taken}):
            self._names.seen(service, instance)
        tally.check()
        return NO_COMMANDS

    def collect(
        self, requests: Iterator[meter_pb2.MeterData], context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        tally = self._refusals.tally()
        taken: list[MeterMetrics] = []
        samples: dict[str, list[Sample]] = {}
        self._take(taking(requests, tally, context), tally, taken, {}, samples)
        return self._hand_on(taken, tally, samples)

    def collectBatch(
        self, requests: Iterator[meter_pb2.MeterDataCollection], context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        tally = self._refusals.tally()
        taken: list[MeterMetrics] = []
        totals: dict[str, MeterMetrics] = {}
        samples: dict[str, list[Sample]] = {}
        for batch in taking(requests, tally, context):
            self._take(batch.meterData, tally, taken, totals, samples)
        return self._hand_on(taken, tally, samples)


_NEGATIVE_INFINITY = str(-(2**63))
"""The bound SkyWalking writes for a bucket from -inf (Java's Long.MIN_VALUE)."""


def _samples(pb: meter_pb2.MeterData, meter: MeterMetrics) -> Iterator[Sample]:
    """The meter as the meter rules read it: its labels and ``service`` and
    ``instance``; a histogram a sample per bucket, by its lower bound ``le``."""
    kind = pb.WhichOneof("metric")
    value = getattr(pb, kind)
    tags = {label.name: label.value for label in value.labels}
    tags.update(service=meter.service, instance=meter.instance)
    if kind == "singleValue":
        yield Sample(value.name, labels_of(tags), value.value, meter.last_time)
        return
    for bucket in value.values:
        le = _NEGATIVE_INFINITY if bucket.isNegativeInfinity else repr(float(bucket.bucket))
        yield Sample(value.name, labels_of({**tags, "le": le}), float(bucket.count), meter.last_time)
