"""SkyWalking's ``MeterReportService``: agents' meters."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

import grpc

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
            meter = MeterMetrics(**common, value_sum=value.value, last_value=value.value)
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
        return MeterMetrics(**common, value_sum=total, last_value=total, buckets=buckets)

    def _take(
        self,
        meters: Iterable[meter_pb2.MeterData],
        tally: Tally,
        taken: list[MeterMetrics],
        totals: dict[str, MeterMetrics],
    ) -> None:
        """Checks ``meters``, adding the good ones to ``taken`` and to the
        call's ``totals`` by key."""
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

    def _hand_on(self, taken: list[MeterMetrics], tally: Tally) -> common_pb2.Commands:
        if taken:
            self._sinks.take((), taken)
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
        self._take(taking(requests, tally, context), tally, taken, {})
        return self._hand_on(taken, tally)

    def collectBatch(
        self, requests: Iterator[meter_pb2.MeterDataCollection], context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        tally = self._refusals.tally()
        taken: list[MeterMetrics] = []
        totals: dict[str, MeterMetrics] = {}
        for batch in taking(requests, tally, context):
            self._take(batch.meterData, tally, taken, totals)
        return self._hand_on(taken, tally)
