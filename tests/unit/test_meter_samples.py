"""The three ways samples reach the meter rules, and one meaning: a scrape
of an exporter, an OTLP export and an agent's meters, labelled as
SkyWalking's receivers and OpenTelemetry's Collector label them; and what
the analyzer stores of the rules' results."""

from __future__ import annotations

from pathlib import Path

import pytest

from skyoap.mal import families as f
from skyoap.mal.evaluation import Batch
from skyoap.mal.rules import read_rule_file
from skyoap.proto.otlp import common_pb2, metrics_pb2, metrics_service_pb2, resource_pb2
from skyoap.receiver import otlp_samples
from skyoap.receiver.meter_analysis import MeterAnalyzer
from skyoap.receiver.prometheus import (
    ScrapeConfigError,
    Shares,
    Target,
    owner,
    read_scrape_config,
    samples_of,
)
from skyoap.runtime.instruments import Instruments
from tests.unit.test_guards import guards
from tests.unit.test_meter_checks import LIMITS

NOW_MS = 1_796_644_800_000  # 2026-12-07 12:00 UTC

EXPOSITION = """# TYPE up gauge
node_load1 0.5
# TYPE http_requests_total counter
http_requests_total{code="200",host_name="from-series"} 7
# TYPE latency_seconds histogram
latency_seconds_bucket{le="0.1"} 2
latency_seconds_bucket{le="1"} 5
latency_seconds_bucket{le="+Inf"} 6
latency_seconds_sum 3.5
latency_seconds_count 6
# TYPE rpc_seconds summary
rpc_seconds{quantile="0.5"} 0.2
rpc_seconds{quantile="1"} 0.9
rpc_seconds_sum 4
rpc_seconds_count 10
stamped 3 1796644700000
missing NaN
"""


def target(**labels: str) -> Target:
    return Target("db-monitoring", "10.0.0.5:9187", labels, 15.0, 10.0, "http://10.0.0.5:9187/metrics")


def by_name(batch: Batch) -> dict[str, list[tuple[dict[str, str], float, int]]]:
    return {
        name: [(dict(s.labels), s.value, s.time_ms) for s in family.samples]
        for name, family in sorted(batch.families.items())
    }


def test_a_scrape_is_labelled_as_the_collectors_prometheus_receiver_labels_it() -> None:
    found = by_name(samples_of(EXPOSITION, target(host_name="db-host"), NOW_MS))
    resource = {
        "job_name": "db-monitoring", "service_name": "db-monitoring", "service_instance_id": "10.0.0.5:9187",
        "net_host_name": "10.0.0.5", "net_host_port": "9187", "node_identifier_host_name": "10.0.0.5",
        "http_scheme": "http", "host_name": "db-host",
    }  # fmt: skip
    assert found["node_load1"] == [(resource, 0.5, NOW_MS)]
    # A series' own label wins over the target's.
    assert found["http_requests_total"] == [
        ({**resource, "code": "200", "host_name": "from-series"}, 7, NOW_MS)
    ]
    # Buckets as OTLP has them: each its own count, by its upper bound, as SkyWalking writes bounds.
    assert [(labels["le"], value) for labels, value, _ in found["latency_seconds"]] == [
        ("0.1", 2.0), ("1.0", 3.0), ("Infinity", 1.0),
    ]  # fmt: skip
    assert [v for _, v, _ in found["latency_seconds_count"]] == [6.0]
    assert [v for _, v, _ in found["latency_seconds_sum"]] == [3.5]
    assert [(labels["quantile"], v) for labels, v, _ in found["rpc_seconds"]] == [("0.5", 0.2), ("1.0", 0.9)]
    assert found["stamped"] == [(resource | {}, 3.0, 1_796_644_700_000)]
    assert "missing" not in found  # not a number: left out, as SkyWalking leaves it


@pytest.mark.parametrize(
    ("text", "wrong"),
    [
        ("jobs: []", "a scrape config has a list of scrape_configs"),
        ("scrape_configs:\n  - scrape_interval: 1s", "scrape config 1 has no job_name"),
        ("scrape_configs:\n  - job_name: a\n  - job_name: a", "job a is named twice"),
        (
            "scrape_configs:\n  - job_name: a\n    scrape_interval: soon",
            "job a: scrape_interval: 'soon' is not a duration",
        ),
        (
            "scrape_configs:\n  - job_name: a\n    relabel_configs: []",
            "job a: relabel_configs: not taken here",
        ),
        (
            "scrape_configs:\n  - job_name: a\n    static_configs: [{targets: ['nohost']}]",
            "job a: target 'nohost'",
        ),
        (
            "scrape_configs:\n  - job_name: a\n    scheme: ftp",
            "job a: scheme 'ftp' is neither http nor https",
        ),
    ],
)
def test_a_bad_scrape_config_says_which_job_and_what(tmp_path: Path, text: str, wrong: str) -> None:
    path = tmp_path / "scrape.yaml"
    path.write_text(text)
    with pytest.raises(ScrapeConfigError) as refused:
        read_scrape_config(path)
    assert str(refused.value).startswith(f"{path}: {wrong}")


def test_a_scrape_config_in_prometheuss_form_gives_each_target_its_url_times_and_credentials(
    tmp_path: Path,
) -> None:
    (tmp_path / "password").write_text("s3cret\n")
    path = tmp_path / "scrape.yaml"
    path.write_text(f"""
global: {{scrape_interval: 30s}}
scrape_configs:
  - job_name: vm-monitoring
    static_configs:
      - targets: ['a:9100', 'b:9100']
        labels: {{zone: east}}
  - job_name: pg
    scrape_interval: 1m30s
    scrape_timeout: 5s
    metrics_path: /probe
    params: {{target: ['db:5432']}}
    basic_auth: {{username: scraper, password_file: {tmp_path / "password"}}}
    static_configs: [{{targets: ['[::1]:9187']}}]
""")
    a, b, pg = read_scrape_config(path)
    assert (a.job, a.address, dict(a.labels), a.interval_s, a.timeout_s, a.url) == (
        "vm-monitoring", "a:9100", {"zone": "east"}, 30.0, 10.0, "http://a:9100/metrics",
    )  # fmt: skip
    assert b.url == "http://b:9100/metrics"
    assert (pg.interval_s, pg.timeout_s, pg.url, pg.host, pg.port) == (
        90.0, 5.0, "http://[::1]:9187/probe?target=db%3A5432", "::1", "9187",
    )  # fmt: skip
    assert pg.headers == {"Authorization": "Basic c2NyYXBlcjpzM2NyZXQ="}


def attribute(key: str, value: str | float | bool) -> common_pb2.KeyValue:
    if isinstance(value, bool):
        return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(bool_value=value))
    if isinstance(value, float):
        return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(double_value=value))
    return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(string_value=value))


def test_otlp_metrics_are_labelled_as_skywalkings_opentelemetry_receiver_labels_them() -> None:
    nanos = NOW_MS * 1_000_000
    resource = resource_pb2.Resource(attributes=[
        attribute("service.name", "vm-monitoring"), attribute("host.name", "box"),
        attribute("service.instance.id", "box:9100"), attribute("host_name", "resource"),
    ])  # fmt: skip
    point = [attribute("mode", "idle"), attribute("host.name", "point"), attribute("ratio", 0.5)]
    cumulative = metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE
    cpu = metrics_pb2.NumberDataPoint(attributes=point, time_unix_nano=nanos, as_double=12.5)
    exponential = metrics_pb2.ExponentialHistogramDataPoint(
        time_unix_nano=nanos, count=3, sum=3.0, scale=0,
        positive=metrics_pb2.ExponentialHistogramDataPoint.Buckets(offset=1, bucket_counts=[1, 2]),
    )  # fmt: skip
    metrics = [
        metrics_pb2.Metric(name="system.cpu.time", sum=metrics_pb2.Sum(
            aggregation_temporality=cumulative, is_monotonic=True, data_points=[cpu])),
        metrics_pb2.Metric(name="unknown_sum", sum=metrics_pb2.Sum(
            data_points=[metrics_pb2.NumberDataPoint(time_unix_nano=nanos, as_int=1)])),
        metrics_pb2.Metric(name="http/latency", histogram=metrics_pb2.Histogram(data_points=[
            metrics_pb2.HistogramDataPoint(time_unix_nano=nanos, count=6, sum=2.0, bucket_counts=[1, 4, 1],
                                           explicit_bounds=[0.5, 1.0])])),
        metrics_pb2.Metric(
            name="exp", exponential_histogram=metrics_pb2.ExponentialHistogram(data_points=[exponential])),
        metrics_pb2.Metric(name="rpc", summary=metrics_pb2.Summary(data_points=[
            metrics_pb2.SummaryDataPoint(time_unix_nano=nanos, count=4, sum=1.0, quantile_values=[
                metrics_pb2.SummaryDataPoint.ValueAtQuantile(quantile=0.99, value=0.8)])])),
    ]  # fmt: skip
    scoped = [metrics_pb2.ScopeMetrics(metrics=metrics)]
    request = metrics_service_pb2.ExportMetricsServiceRequest(
        resource_metrics=[metrics_pb2.ResourceMetrics(resource=resource, scope_metrics=scoped)]
    )
    read = {"system_cpu_time", "unknown_sum", "http_latency", "http_latency_count", "exp", "rpc"}
    (batch,) = otlp_samples.batches(request, read)
    found = by_name(batch)
    # host.name reads as host_name before the resource's own host_name does: the first of a key wins.
    labels = {
        "service_name": "vm-monitoring", "job_name": "vm-monitoring", "host_name": "box",
        "node_identifier_host_name": "box", "service_instance_id": "box:9100", "mode": "idle",
        "ratio": "0.5",
    }  # fmt: skip
    # A point's attribute wins over the resource's (host.name); the fallbacks keep the resource's.
    assert found["system_cpu_time"] == [({**labels, "host_name": "point"}, 12.5, NOW_MS)]
    assert "unknown_sum" not in found  # a sum of unspecified temporality, as SkyWalking leaves it out
    assert "http_latency_sum" not in found  # what no rule reads is not made
    common = {k: v for k, v in labels.items() if k not in ("mode", "ratio")}
    assert [(lab["le"], v) for lab, v, _ in found["http_latency"]] == [
        ("0.5", 1.0),
        ("1.0", 4.0),
        ("Infinity", 1.0),
    ]
    assert found["http_latency_count"] == [(common, 6.0, NOW_MS)]
    assert [(lab["le"], v) for lab, v, _ in found["exp"]] == [("4.0", 1.0), ("Infinity", 2.0)]
    assert [(lab["quantile"], v) for lab, v, _ in found["rpc"]] == [("0.99", 0.8)]


RUNTIME = """
metricPrefix: meter
metricsRules:
  - name: threads
    exp: threads.instance(['service'], ['instance'], Layer.GENERAL)
  - name: by_pool
    exp: pool.sum(['service', 'instance', 'pool']).instance(['service'], ['instance'], Layer.GENERAL)
  - name: host_cpu
    exp: cpu.service(['service'], Layer.OS_LINUX)
"""


def test_the_analyzer_stores_a_rules_values_by_scope_adding_up_an_entitys_samples() -> None:
    rules = read_rule_file(Path("runtime.yaml"), RUNTIME)
    analyzer = MeterAnalyzer([rules], LIMITS, guards()[0], Instruments())
    shop = {"service": "shop", "instance": "shop-1"}

    def family(name: str, *samples: tuple[dict[str, str], float]) -> f.Family:
        return f.Family(tuple(f.Sample(name, f.labels_of(t), v, NOW_MS) for t, v in samples))

    made = analyzer.analyze(Batch({
        "threads": family("threads", ({**shop, "kind": "a"}, 3.0), ({**shop, "kind": "b"}, 4.0)),
        "pool": family("pool", ({**shop, "pool": "io"}, 1.0), ({**shop, "pool": "cpu"}, 2.0)),
        "cpu": family("cpu", (shop, 55.0)),
    }), NOW_MS)  # fmt: skip
    found = {(type(m).__name__, m.name, m.labels): (m.value_sum, m.layer) for m in made}
    assert found == {
        ("MeterMetrics", "meter_threads", ""): (7.0, "GENERAL"),  # its two samples, added up
        ("MeterMetrics", "meter_by_pool", "pool=cpu"): (2.0, "GENERAL"),
        ("MeterMetrics", "meter_by_pool", "pool=io"): (1.0, "GENERAL"),
        ("ServiceMeterMetrics", "meter_host_cpu", ""): (55.0, "OS_LINUX"),
    }
    assert {(m.entity(), m.time_bucket) for m in made} == {
        ("shop\x1fshop-1\x1fmeter_threads\x1f", 202612071200),
        ("shop\x1fshop-1\x1fmeter_by_pool\x1fpool=cpu", 202612071200),
        ("shop\x1fshop-1\x1fmeter_by_pool\x1fpool=io", 202612071200),
        ("shop\x1fmeter_host_cpu\x1f", 202612071200),
    }


def test_a_clusters_scrapers_share_the_targets_each_to_one_and_a_leaver_moves_only_its_own() -> None:
    targets = [
        Target("vm-monitoring", f"10.0.{i // 250}.{i % 250}:9100", {}, 15.0, 10.0, f"http://10.0.0.{i}:9100/m")
        for i in range(1000)
    ]  # fmt: skip
    three = ["node-a", "node-b", "node-c"]
    before = {t.url: owner(t, three) for t in targets}
    shares = {name: sum(1 for o in before.values() if o == name) for name in three}
    assert sum(shares.values()) == 1000 and min(shares.values()) > 250  # about a third each
    after = {t.url: owner(t, ["node-a", "node-c"]) for t in targets}
    moved = {url for url in before if before[url] != after[url]}
    assert moved == {url for url, o in before.items() if o == "node-b"}
    mine = Shares("node-a", lambda: three)
    assert [t.url for t in targets if mine.mine(t)] == [url for url, o in before.items() if o == "node-a"]
    alone = Shares("node-a", lambda: [])
    assert all(alone.mine(t) for t in targets[:10])
