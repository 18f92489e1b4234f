"""OTLP metrics as the meter rules read them, labelled as SkyWalking's
OpenTelemetry receiver labels them, one batch per resource:

- a name's and a key's dots (and a name's slashes) read as underscores;
- the resource's attributes are every sample's labels, with
  ``service.name`` also as ``job_name`` and ``host.name`` or
  ``net.host.name`` also as ``node_identifier_host_name`` when those are
  not given; a data point's own attributes win over the resource's;
- a gauge's or a sum's point is a sample (a sum of unspecified
  temporality is left out, as SkyWalking leaves it); a histogram's is
  ``<name>`` by each bucket's upper bound ``le`` (``Infinity`` the last),
  ``<name>_count`` and ``<name>_sum``; an exponential histogram's alike, its
  bounds ``base ** (offset + i + 1)``; a summary's ``<name>`` by
  ``quantile``, ``<name>_count`` and ``<name>_sum``."""

from __future__ import annotations

import math
from collections.abc import Container, Iterable, Iterator

from skyoap.mal import families as f
from skyoap.mal.evaluation import Batch
from skyoap.proto.otlp import common_pb2, metrics_pb2, metrics_service_pb2

_FALLBACKS = (("net.host.name", "node_identifier_host_name"), ("host.name", "node_identifier_host_name"),
              ("service.name", "job_name"))  # fmt: skip
_NO_RECORDED_VALUE = 1
_UNSPECIFIED = metrics_pb2.AGGREGATION_TEMPORALITY_UNSPECIFIED


def _key(name: str) -> str:
    return name.replace(".", "_")


def _text(value: common_pb2.AnyValue) -> str:
    """An attribute's value as SkyWalking reads it: a number or a boolean
    written out, a string as it is, anything else ''."""
    kind = value.WhichOneof("value")
    if kind == "bool_value":
        return "true" if value.bool_value else "false"
    if kind == "int_value":
        return str(value.int_value)
    if kind == "double_value":
        return f.java_double(value.double_value)
    return value.string_value if kind == "string_value" else ""


def _labels(kvs: Iterable[common_pb2.KeyValue]) -> dict[str, str]:
    found: dict[str, str] = {}
    for kv in kvs:
        found.setdefault(_key(kv.key), _text(kv.value))
    return found


def batches(
    request: metrics_service_pb2.ExportMetricsServiceRequest, wanted: Container[str]
) -> Iterator[Batch]:
    """The samples of each resource of ``request`` of the families ``wanted``
    (those the rules read: the others would be made for nothing)."""
    for resource_metrics in request.resource_metrics:
        resource = _labels(resource_metrics.resource.attributes)
        for source, target in _FALLBACKS:
            for kv in resource_metrics.resource.attributes:
                if kv.key == source:
                    resource.setdefault(target, _text(kv.value))
        found: dict[str, list[f.Sample]] = {}
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                for name, labels, value, time_ms in _samples(metric):
                    if name in wanted and not math.isnan(value):
                        sample = f.Sample(name, f.labels_of({**resource, **labels}), value, time_ms)
                        found.setdefault(name, []).append(sample)
        if found:
            yield Batch({name: f.Family(tuple(samples)) for name, samples in found.items()})


Point = tuple[str, dict[str, str], float, int]


def _samples(metric: metrics_pb2.Metric) -> Iterator[Point]:
    name = metric.name.replace(".", "_").replace("/", "_")
    kind = metric.WhichOneof("data")
    if kind == "sum" and metric.sum.aggregation_temporality == _UNSPECIFIED:
        return
    data = getattr(metric, kind) if kind else None
    for point in getattr(data, "data_points", ()):
        if point.flags & _NO_RECORDED_VALUE:
            continue
        labels, time_ms = _labels(point.attributes), point.time_unix_nano // 1_000_000
        if kind in ("gauge", "sum"):
            value = point.as_double if point.WhichOneof("value") == "as_double" else float(point.as_int)
            yield name, labels, value, time_ms
            continue
        yield f"{name}_count", labels, float(point.count), time_ms
        yield f"{name}_sum", labels, float(point.sum), time_ms
        if kind == "summary":
            for q in point.quantile_values:
                yield name, {**labels, "quantile": f.java_double(q.quantile)}, q.value, time_ms
            continue
        for bound, count in _buckets(kind, point):
            yield name, {**labels, "le": f.java_double(bound)}, float(count), time_ms


def _buckets(kind: str | None, point: object) -> Iterator[tuple[float, int]]:
    """Each bucket's upper bound and count."""
    if kind == "histogram":
        assert isinstance(point, metrics_pb2.HistogramDataPoint)
        bounds = [*point.explicit_bounds, math.inf]
        yield from zip(bounds, point.bucket_counts, strict=False)
    elif kind == "exponential_histogram":
        assert isinstance(point, metrics_pb2.ExponentialHistogramDataPoint)
        base = 2.0 ** (2.0**-point.scale)
        negative, positive = point.negative, point.positive
        for i, count in enumerate(negative.bucket_counts):
            yield -(base ** (negative.offset + i)), count
        counts = list(positive.bucket_counts)
        for i, count in enumerate(counts):
            yield (math.inf if i == len(counts) - 1 else base ** (positive.offset + i + 1)), count
