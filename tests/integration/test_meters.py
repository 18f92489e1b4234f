"""The meter system on a real node: exporters scraped by the node itself,
their samples through the rules into the layers' services and metrics,
and counters' rates and increases exact over a target that serves a
known sequence, a restart of its counter included."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from skyoap.deploy.servers import ExporterServer, PostgresServer, RedisServer
from skyoap.model.metrics import Downsampling, ServiceMeterMetrics
from skyoap.query.ui.dashboards import dashboards
from skyoap.runtime import clock
from skyoap.storage.select import open_storage
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.helpers import eventually
from tests.integration.test_query_endpoint import ask
from tests.unit.test_query_reads import expressions_of


@pytest.fixture(scope="module")
def node_exporter() -> Iterator[ExporterServer]:
    exporter = ExporterServer("node").start()
    yield exporter
    exporter.stop()


def scrape_config(path: Path, job: str, address: str, interval: str = "1s") -> Path:
    path.write_text(
        f"scrape_configs:\n  - job_name: {job}\n    scrape_interval: {interval}\n"
        f"    static_configs:\n      - targets: ['{address}']\n"
    )
    return path


def graphql(node: Node, query: str, **variables: Any) -> Any:
    assert node.query_url is not None
    reply = ask(node.query_url, query, variables)
    assert reply.status == 200 and "errors" not in reply.body, reply.body
    return reply.body["data"]


def minutes(around_ms: int, before: int = 2, after: int = 1) -> dict[str, str]:
    """A Duration of the minutes around ``around_ms``."""
    import time

    def text(ms: int) -> str:
        return time.strftime("%Y-%m-%d %H%M", time.gmtime(ms // 1000))

    return {
        "start": text(around_ms - before * 60_000),
        "end": text(around_ms + after * 60_000),
        "step": "MINUTE",
    }


EXPRESSION = """query ($e: String!, $entity: Entity!, $d: Duration!) {
  result: execExpression(expression: $e, entity: $entity, duration: $d) {
    type error results { metric { labels { key value } } values { id value } } } }"""


def values(node: Node, expression: str, service: str) -> tuple[str | None, list[Any]]:
    """``expression`` of ``service`` over the minutes around now: its error
    and its results."""
    entity = {"serviceName": service, "normal": True}
    found = graphql(node, EXPRESSION, e=expression, entity=entity, d=minutes(clock.now_ms()))["result"]
    return found["error"], found["results"]


def served(exporter: ExporterServer, name: str) -> float:
    (value,) = {
        s.value
        for f in text_string_to_metric_families(exporter.metrics())
        for s in f.samples
        if s.name == name
    }
    return float(value)


def test_a_host_scraped_from_its_node_exporter_is_a_service_of_the_linux_layer(
    node_config: NodeConfig,
    start_node: Callable[[NodeConfig], Node],
    node_exporter: ExporterServer,
    tmp_path: Path,
) -> None:
    config = scrape_config(tmp_path / "scrape.yaml", "vm-monitoring", node_exporter.address)
    node = start_node(node_config.with_options(scrape_config=str(config), metrics_persist_interval_s=0.5))
    services = "query ($layer: String!) { listServices(layer: $layer) { name layers normal } }"
    eventually(lambda: graphql(node, services, layer="OS_LINUX")["listServices"])
    assert graphql(node, services, layer="OS_LINUX")["listServices"] == [
        {"name": "127.0.0.1", "layers": ["OS_LINUX"], "normal": True}
    ]
    assert "OS_LINUX" in graphql(node, "{ listLayers }")["listLayers"]

    # A gauge is what the exporter served: the host's memory does not change.
    total = served(node_exporter, "node_memory_MemTotal_bytes")

    def memory() -> bool:
        error, results = values(node, "latest(meter_vm_memory_total)", "127.0.0.1")
        assert error is None
        return bool(results) and results[0]["values"][0]["value"] is not None

    eventually(memory)
    _, results = values(node, "latest(meter_vm_memory_total)", "127.0.0.1")
    assert float(results[0]["values"][0]["value"]) == total
    # A labelled metric keeps its labels: the share of each mount point in use.
    _, mounts = values(node, "meter_vm_filesystem_percentage", "127.0.0.1")
    assert {label["key"] for r in mounts for label in r["metric"]["labels"]} == {"mountpoint"}

    # Every expression of the layer's pages answers, without errors, and with values once the CPU
    # has been scraped twice (its rate needs two samples).
    (page,) = [d for d in dashboards() if d["id"] == "Linux-Service"]
    expressions = set(expressions_of(page["configuration"]["children"]))
    assert len(expressions) == 24

    def all_answer() -> bool:
        answers = {e: values(node, e, "127.0.0.1") for e in sorted(expressions)}
        assert {e: error for e, (error, _) in answers.items() if error} == {}
        empty = [e for e, (_, rs) in answers.items() if not any(v["value"] for r in rs for v in r["values"])]
        # A host with no swap has no share of it in use (0 of 0 is no number), as in SkyWalking.
        swap = served(node_exporter, "node_memory_SwapTotal_bytes")
        assert empty == ([] if swap else ["avg(meter_vm_memory_swap_percentage)"]), empty
        return True

    eventually(all_answer)


COUNTER_RULES = """
filter: "{ tags -> tags.job_name == 'counters' }"
expSuffix: service(['job_name'], Layer.GENERAL)
metricPrefix: meter_test
metricsRules:
  - name: rate
    exp: test_requests_total.rate('PT1M').downsampling(LATEST)
  - name: increase
    exp: test_requests_total.increase('PT30S').downsampling(SUM)
"""
SEQUENCE = (100, 130, 160, 190, 220, 250, 10, 40, 70)
"""The counter, every 15 s of its own time: 2 a second, then its process
restarts between 75 s and 90 s (250, then 10) and counts 2 a second again."""


class Counter(http.server.ThreadingHTTPServer):
    """A target that serves the next sample of ``SEQUENCE`` at each scrape,
    with its own time stamp (15 s apart from ``start_ms``), then the last one."""

    def __init__(self, start_ms: int) -> None:
        super().__init__(("127.0.0.1", 0), _CounterHandler)
        self.start_ms = start_ms
        self.served = 0

    def next_sample(self) -> str:
        i = min(self.served, len(SEQUENCE) - 1)
        self.served += 1
        time_ms = self.start_ms + 15_000 * i
        return f"# TYPE test_requests_total counter\ntest_requests_total {SEQUENCE[i]} {time_ms}\n"


class _CounterHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        assert isinstance(self.server, Counter)
        body = self.server.next_sample().encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize("node_config", ["embedded"], indirect=True)
def test_rates_and_increases_are_exact_over_a_known_counter_with_a_restart(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node], tmp_path: Path
) -> None:
    first = (clock.now_ms() // 60_000 - 10) * 60_000  # a whole minute, ten minutes ago
    target = Counter(first)
    threading.Thread(target=target.serve_forever, name="counter-target", daemon=True).start()
    try:
        rules = tmp_path / "counters.yaml"
        rules.write_text(COUNTER_RULES)
        config = scrape_config(
            tmp_path / "scrape.yaml", "counters", f"127.0.0.1:{target.server_port}", "200ms"
        )
        node_config = node_config.with_options(
            scrape_config=str(config), meter_rules=f"shipped,{rules}", metrics_persist_interval_s=0.5
        )
        start_node(node_config)
        m0, m1, m2 = (Downsampling.MINUTE.bucket_of(first + i * 60_000) for i in range(3))
        storage = open_storage(node_config.storage)
        try:

            def stored(name: str) -> dict[int, float]:
                rows = storage.metrics.query(
                    ServiceMeterMetrics, Downsampling.MINUTE, m0, m2, {"name": f"meter_test_{name}"}
                )
                column = "last_value" if name == "rate" else "value_sum"
                return {r.time_bucket: getattr(r, column) for r in rows if r.service == "counters"}

            # The rate over the last minute at each minute's latest sample: 2 a second at 45 s;
            # 100 in the minute to 105 s and to 120 s, the restart counting the 10 after it.
            eventually(lambda: stored("rate") == {m0: 2.0, m1: 100 / 60, m2: 100 / 60})
            # The increases over 30 s, added up by minute: 30 + 60 + 60; 60 + 60 + 40 + 40; 60.
            eventually(lambda: stored("increase") == {m0: 150.0, m1: 200.0, m2: 60.0})
        finally:
            storage.close()
    finally:
        target.shutdown()
        target.server_close()


def instance_values(node: Node, expression: str, service: str, instance: str) -> tuple[str | None, list[Any]]:
    entity = {"serviceName": service, "normal": True, "serviceInstanceName": instance}
    found = graphql(node, EXPRESSION, e=expression, entity=entity, d=minutes(clock.now_ms()))["result"]
    return found["error"], found["results"]


def latest(node: Node, expression: str, service: str, instance: str) -> float | None:
    error, results = instance_values(node, f"latest({expression})", service, instance)
    assert error is None, error
    value = results[0]["values"][0]["value"] if results else None
    return None if value is None else float(value)


@pytest.mark.parametrize("node_config", ["embedded"], indirect=True)
def test_postgresql_and_redis_scraped_from_their_exporters_are_services_of_their_layers(
    node_config: NodeConfig,
    start_node: Callable[[NodeConfig], Node],
    tmp_path: Path,
) -> None:
    # Servers of this test's own: the keys of every database are counted, and the session's Redis
    # holds other tests' keys, some expiring.
    postgres, redis_server = PostgresServer().start(), RedisServer().start()
    dsn = f"postgresql://postgres@127.0.0.1:{postgres.port}/postgres?sslmode=disable"
    exporters = [ExporterServer("postgres", env={"DATA_SOURCE_NAME": dsn})]
    exporters.append(ExporterServer("redis", f"--redis.addr=redis://127.0.0.1:{redis_server.port}"))
    client = redis.Redis(port=redis_server.port, db=3)
    client.mset({f"key-{i}": i for i in range(7)})
    try:
        pg, rd = (e.start() for e in exporters)
        config = tmp_path / "scrape.yaml"
        config.write_text(f"""scrape_configs:
  - job_name: postgresql-monitoring
    scrape_interval: 1s
    static_configs: [{{targets: ['{pg.address}'], labels: {{host_name: pg-test}}}}]
  - job_name: redis-monitoring
    scrape_interval: 1s
    static_configs: [{{targets: ['{rd.address}'], labels: {{host_name: redis-test}}}}]
""")
        node = start_node(node_config.with_options(scrape_config=str(config), metrics_persist_interval_s=0.5))
        layers = "query ($layer: String!) { listServices(layer: $layer) { name layers normal } }"

        def listed(layer: str) -> list[dict[str, Any]]:
            found: list[dict[str, Any]] = graphql(node, layers, layer=layer)["listServices"]
            return found

        for layer, name in (("POSTGRESQL", "postgresql::pg-test"), ("REDIS", "redis::redis-test")):
            assert eventually(functools.partial(listed, layer)) == [
                {"name": name, "layers": [layer], "normal": True}
            ]
        instances = "query ($id: ID!, $d: Duration!) { listInstances(serviceId: $id, duration: $d) { name } }"
        find = "query ($name: String!) { findService(serviceName: $name) { id } }"
        pg_id = graphql(node, find, name="postgresql::pg-test")["findService"]["id"]
        found = graphql(node, instances, id=pg_id, d=minutes(clock.now_ms()))["listInstances"]
        assert found == [{"name": pg.address}]

        # Gauges are what the exporters served: a setting, and the keys of every database added up.
        shared = served(pg, "pg_settings_shared_buffers_bytes")
        pg_service = ("postgresql::pg-test", pg.address)
        eventually(lambda: latest(node, "meter_pg_instance_shared_buffers", *pg_service) == shared)
        families = text_string_to_metric_families(rd.metrics())
        assert sum(s.value for f in families for s in f.samples if s.name == "redis_db_keys") == 7
        redis_instance = ("redis::redis-test", rd.address)
        eventually(lambda: latest(node, "meter_redis_instance_db_keys", *redis_instance) == 7.0)

        # Every expression of the layers' service and instance pages answers without an error.
        for page_id, service, instance in (
            ("PostgreSQL-Service", pg_service[0], None), ("PostgreSQL-Instance", *pg_service),
            ("Redis-Service", redis_instance[0], None), ("Redis-Instance", *redis_instance),
        ):  # fmt: skip
            (page,) = [d for d in dashboards() if d["id"] == page_id]
            for asked in sorted(set(expressions_of(page["configuration"]["children"]))):
                if instance:
                    error, _ = instance_values(node, asked, service, instance)
                else:
                    error, _ = values(node, asked, service)
                assert error is None, (page_id, asked, error)
    finally:
        client.close()
        for e in exporters:
            e.stop()
        postgres.stop()
        redis_server.stop()
