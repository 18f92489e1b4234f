"""Jobs for analysts, runnable as ``skyoap spark <job>`` and written to be read
as examples of the ``skyoap`` data source:

- ``slowest-endpoints``: each service's endpoints with the highest average
  latency over a window, with calls, errors and p99 from the merged sketches;
- ``dependencies``: the service dependency graph with call counts and error
  rates (a callee's own view where it is instrumented, the caller's otherwise);
- ``error-spikes``: a streaming detector over the metrics topic that reports a
  service's minute whose error rate jumps above a threshold and a multiple of
  its recent baseline.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from skyoap.model import sketch
from skyoap.model.metrics import rank_at


def _table(spark: SparkSession, storage: Mapping[str, str], table: str, minutes: int) -> DataFrame:
    return (
        spark.read.format("skyoap").options(**storage)
        .option("table", table).option("level", "minute").option("minutes", str(minutes)).load()
    )  # fmt: skip


@dataclass(frozen=True)
class SlowEndpoint:
    service: str
    rank: int
    endpoint: str
    calls: int
    errors: int
    latency_avg_ms: float
    p99_ms: int


def slowest_endpoints(
    spark: SparkSession, storage: Mapping[str, str], minutes: int = 60, top: int = 5
) -> list[SlowEndpoint]:
    rows = _table(spark, storage, "endpoint_metrics", minutes).where(F.size("histogram") > 0)
    merged = rows.groupBy("service", "endpoint").agg(
        F.sum("calls").alias("calls"),
        F.sum("errors").alias("errors"),
        (F.sum("latency_sum_ms") / F.sum("calls")).alias("latency_avg_ms"),
        F.collect_list("histogram").alias("histograms"),
    )
    by_service = Window.partitionBy("service").orderBy(F.desc("latency_avg_ms"), "endpoint")
    ranked = merged.withColumn("rank", F.row_number().over(by_service)).where(F.col("rank") <= top)
    out = []
    for r in ranked.orderBy("service", "rank").collect():
        histogram = sketch.merged(sketch.of_stored(h) for h in r.histograms)
        p99 = sketch.value_at(histogram, rank_at(99, r.calls))
        out.append(SlowEndpoint(r.service, r.rank, r.endpoint, r.calls, r.errors, r.latency_avg_ms, p99))
    return out


@dataclass(frozen=True)
class Dependency:
    source: str
    dest: str
    calls: int
    errors: int
    error_rate: float


def dependencies(spark: SparkSession, storage: Mapping[str, str], minutes: int = 60) -> list[Dependency]:
    rows = _table(spark, storage, "service_relation_metrics", minutes)

    def side(point: str, column: str) -> F.Column:
        return F.sum(F.when(F.col("detect_point") == point, F.col(column)))

    edges = rows.groupBy("source", "dest").agg(
        F.coalesce(side("server", "calls"), side("client", "calls")).alias("calls"),
        F.coalesce(side("server", "errors"), side("client", "errors")).alias("errors"),
    )
    return [
        Dependency(r.source, r.dest, r.calls, r.errors, r.errors / r.calls if r.calls else 0.0)
        for r in edges.orderBy(F.desc("calls"), "source", "dest").collect()
    ]


@dataclass(frozen=True)
class Spike:
    service: str
    minute: int
    calls: int
    errors: int
    error_rate: float
    baseline: float
    """The mean error rate of the service's previous minutes (0 with none)."""


class SpikeDetector:
    """Keeps each service's recent minutes (the latest stored value of each)
    and judges the minutes a batch changed. A minute is a spike when it had at
    least ``min_calls`` calls and its error rate is at least ``threshold`` and
    at least ``factor`` times the baseline of the ``history`` minutes before it.
    Each minute is reported once."""

    def __init__(
        self,
        on_spike: Callable[[Spike], None],
        threshold: float = 0.2,
        factor: float = 3.0,
        min_calls: int = 10,
        history: int = 10,
    ) -> None:
        self.on_spike = on_spike
        self.threshold, self.factor, self.min_calls, self.history = threshold, factor, min_calls, history
        self._minutes: dict[str, dict[int, tuple[int, int]]] = {}
        self._reported: set[tuple[str, int]] = set()

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        values = F.from_json(
            "value", "model STRING, level STRING, service STRING, time_bucket LONG, calls LONG, errors LONG"
        )
        rows = (
            batch.select("offset", "partition", values.alias("v"))
            .where((F.col("v.model") == "service_metrics") & (F.col("v.level") == "minute"))
            .select("partition", "offset", "v.service", "v.time_bucket", "v.calls", "v.errors")
            .collect()
        )
        changed = set()
        for r in sorted(rows, key=lambda r: (r.partition, r.offset)):  # the latest value of a minute wins
            self._minutes.setdefault(r.service, {})[r.time_bucket] = (r.calls, r.errors)
            changed.add((r.service, r.time_bucket))
        for service, minute in sorted(changed):
            self._judge(service, minute)

    def _judge(self, service: str, minute: int) -> None:
        minutes = self._minutes[service]
        calls, errors = minutes[minute]
        if (service, minute) in self._reported or calls < self.min_calls:
            return
        before = sorted(m for m in minutes if m < minute)[-self.history :]
        rates = [minutes[m][1] / minutes[m][0] for m in before if minutes[m][0]]
        baseline = sum(rates) / len(rates) if rates else 0.0
        rate = errors / calls
        if rate >= self.threshold and rate >= self.factor * baseline:
            self._reported.add((service, minute))
            self.on_spike(Spike(service, minute, calls, errors, rate, baseline))


def error_spikes(
    spark: SparkSession,
    storage: Mapping[str, str],
    detector: SpikeDetector,
    checkpoint: str,
    starting_offsets: str = "latest",
    available_now: bool = False,
    every_s: float = 5.0,
) -> StreamingQuery:
    """Starts the detector on the metrics topic; returns the streaming query."""
    stream = (
        spark.readStream.format("skyoap").options(**storage).option("topic", "metrics")
        .option("startingOffsets", starting_offsets).option("maxRecordsPerTrigger", "50000").load()
    )  # fmt: skip
    writer = stream.writeStream.foreachBatch(detector).option("checkpointLocation", checkpoint)
    writer = (
        writer.trigger(availableNow=True)
        if available_now
        else writer.trigger(processingTime=f"{every_s} seconds")
    )
    return writer.start()
