"""The query endpoint, asked over HTTP what SkyWalking's UI asks, beside the
storage reads each query makes, timed alone in the same run: the ceiling.

For each storage (embedded, then Elasticsearch), a day of minute metrics of
``--services`` services with ``--endpoints`` endpoints each, each service
calling the next (both sides measured), is written straight to storage.
Then, over the UI's default window (the last 30 minutes):

- the service list: ``listServices`` and one request of 4 ``execExpression``
  averages per service, aliased, as the UI's service list batches them;
- a service dashboard: the overview widgets' expressions of one service;
- the global topology;
- a trace by id (``queryTrace``, a trace of two segments of five spans), and
  a trace search (``queryBasicTraces``) by tag over the window, among
  ``--traces`` traces of the day;
- the PromQL forms of the service list (the four averages as top lists
  over the window, one ``query_range`` each) and of a service dashboard
  (the service row of ``docs/grafana/general-service.json``).

Each query is asked ``--rounds`` times; its storage reads are recorded on
its first ask and replayed against the same storage, alone, as many times.

    .venv/bin/python -m bench.query [--services 100] [--endpoints 20] [--traces 50000] [--rounds 30]
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import gc
import http.client
import json
import random
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.results import Figure, at_most, pct, record
from skyoap.deploy.servers import ElasticsearchServer, RedisServer
from skyoap.model import sketch
from skyoap.model.inventory import INVENTORY_TYPES, EndpointInventory, ServiceInventory
from skyoap.model.metrics import (
    METRICS_TYPES,
    CallMetrics,
    Downsampling,
    EndpointMetrics,
    ServiceMetrics,
    ServiceRelationMetrics,
    minute_bucket,
)
from skyoap.model.records import RECORD_TYPES, SegmentRecord
from skyoap.model.stream import Text
from skyoap.proto.skywalking import common_pb2, tracing_pb2
from skyoap.query.context import QueryContext
from skyoap.query.execution import Execution
from skyoap.query.promql.api import PromQLApi
from skyoap.query.resolvers import resolvers
from skyoap.query.server import QueryServer
from skyoap.query.ui.dashboards import dashboards
from skyoap.runtime.admission import Admission
from skyoap.runtime.instruments import Instruments
from skyoap.storage.api import MetricsWrite
from skyoap.storage.config import StorageConfig, StorageKind
from skyoap.storage.select import OpenStorage, open_storage
from skyoap.vocabulary.ttl import TimesToLive

MINUTES = 1440
WINDOW_MINUTES = 30
CHUNK = 5_000


@dataclass
class Recorder:
    """A DAO whose calls are recorded while ``on``, to be replayed alone."""

    target: Any
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = field(default_factory=list)
    on: bool = False

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.target, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.on:
                self.calls.append((name, args, kwargs))
            return method(*args, **kwargs)

        return call

    def replay(self) -> None:
        for name, args, kwargs in self.calls:
            getattr(self.target, name)(*args, **kwargs)


def calls(rng: random.Random, bucket: int, scale: int) -> dict[str, Any]:
    n = rng.randint(1, 10 * scale)
    latencies = [round(rng.lognormvariate(3, 1)) for _ in range(min(n, 20))]
    latencies += [1] * (n - len(latencies))
    return {"time_bucket": bucket, "calls": n, "errors": rng.randint(0, n // 10),
            "latency_sum_ms": sum(latencies), "histogram": sketch.of_latencies(latencies)}  # fmt: skip


def rows(
    services: int, endpoints: int, first: int, minutes: int = MINUTES
) -> Iterator[tuple[type[CallMetrics], CallMetrics]]:
    rng = random.Random(7)
    for m in range(minutes):
        bucket = minute_bucket((first + m) * 60_000)
        for s in range(services):
            name, callee = f"svc-{s}", f"svc-{(s + 1) % services}"
            yield ServiceMetrics, ServiceMetrics(service=name, **calls(rng, bucket, endpoints))
            for side in ("client", "server"):
                relation = ServiceRelationMetrics(
                    source=name, dest=callee, detect_point=side, **calls(rng, bucket, 1)
                )
                yield ServiceRelationMetrics, relation
            for e in range(endpoints):
                yield (
                    EndpointMetrics,
                    EndpointMetrics(service=name, endpoint=f"GET:/api/{e}", **calls(rng, bucket, 1)),
                )


def segment(trace: int, side: int, services: int, start_ms: int) -> SegmentRecord:
    """One of the two segments of trace ``trace`` (``side`` 0, the caller's;
    1, the callee's): an entry span, three local ones and an exit to a
    database; one trace in 50 fails with 500."""
    service, status = f"svc-{(trace + side) % services}", "500" if trace % 50 == 0 else "200"
    endpoint = f"GET:/api/{trace % 20}"
    tags = [common_pb2.KeyStringValuePair(key="http.method", value="GET"),
            common_pb2.KeyStringValuePair(key="http.status_code", value=status)]  # fmt: skip
    kinds = [tracing_pb2.Entry, tracing_pb2.Local, tracing_pb2.Local, tracing_pb2.Local, tracing_pb2.Exit]
    spans = [
        tracing_pb2.SpanObject(spanId=i, parentSpanId=i - 1, startTime=start_ms + i,
                               endTime=start_ms + 20 - i, spanType=kind, operationName=endpoint,
                               peer="db:3306" if i == 4 else "", componentId=7001,
                               tags=tags if i == 0 else [])
        for i, kind in enumerate(kinds)
    ]  # fmt: skip
    segment_id = f"seg-{trace}-{side}"
    data = tracing_pb2.SegmentObject(traceId=f"trace-{trace}", traceSegmentId=segment_id, service=service,
                                     serviceInstance=f"{service}-1", spans=spans)  # fmt: skip
    return SegmentRecord(
        time_bucket=minute_bucket(start_ms), segment_id=segment_id, trace_id=f"trace-{trace}",
        service=service, instance=f"{service}-1", endpoint=endpoint, start_time=start_ms,
        end_time=start_ms + 20, latency_ms=20, is_error=status == "500", spans=5,
        data=Text(base64.b64encode(data.SerializeToString()).decode()),
        tags=("http.method=GET", f"http.status_code={status}"),
    )  # fmt: skip


def populate(
    storage: OpenStorage,
    services: int,
    endpoints: int,
    first_minute: int,
    traces: int,
    minutes: int = MINUTES,
) -> int:
    """Writes ``minutes`` of metrics and ``traces`` traces from ``first_minute`` on."""
    storage.inventory.install(INVENTORY_TYPES)
    storage.metrics.install(METRICS_TYPES)
    storage.records.install(RECORD_TYPES)
    names = [ServiceInventory(name=f"svc-{s}", sequence=s + 1) for s in range(services)]
    storage.inventory.insert(ServiceInventory, names)
    storage.inventory.insert(
        EndpointInventory,
        [
            EndpointInventory(
                name=f"GET:/api/{e}", sequence=s * endpoints + e + 1, service_id=s + 1, detect_point=1
            )
            for s in range(services)
            for e in range(endpoints)
        ],
    )
    pending: dict[type[CallMetrics], list[MetricsWrite[Any]]] = {}
    written = 0
    for model, row in rows(services, endpoints, first_minute, minutes):
        batch = pending.setdefault(model, [])
        batch.append(MetricsWrite(None, row, {"bench": 1}))
        if len(batch) >= CHUNK:
            storage.metrics.put(model, Downsampling.MINUTE, batch)
            written += len(batch)
            batch.clear()
    for model, batch in pending.items():
        storage.metrics.put(model, Downsampling.MINUTE, batch)
        written += len(batch)
    step_ms = minutes * 60_000 // traces
    for first in range(0, traces, CHUNK // 2):
        chunk = range(first, min(traces, first + CHUNK // 2))
        starts = [(t, first_minute * 60_000 + t * step_ms) for t in chunk]
        storage.records.insert(
            SegmentRecord, [segment(t, side, services, at) for t, at in starts for side in (0, 1)]
        )
    return written


class Client:
    """Posts queries over one kept-alive connection, as a browser does."""

    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self._path = parts.path
        self._connection = http.client.HTTPConnection(parts.netloc, timeout=60)

    def post(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        body = json.dumps({"query": query, "variables": variables}).encode()
        self._connection.request("POST", self._path, body, {"Content-Type": "application/json"})
        answer = self._connection.getresponse()
        reply: dict[str, Any] = json.loads(answer.read())
        if answer.status != 200 or reply.get("errors"):
            raise RuntimeError(f"the query failed ({answer.status}): {reply.get('errors', [])[:2]}")
        return reply

    def close(self) -> None:
        self._connection.close()


SELECTED = "type results { values { value } } error"
"""What the UI selects of an expression's result."""


def expressions_query(count: int) -> str:
    """One request of ``count`` ``execExpression``, aliased ``e0``, ``e1``, …"""
    fields = " ".join(
        f"e{i}: execExpression(expression: $x{i}, entity: $n{i}, duration: $d) {{ {SELECTED} }}"
        for i in range(count)
    )
    declared = " ".join(f"$x{i}: String! $n{i}: Entity!" for i in range(count))
    return f"query ({declared} $d: Duration!) {{ {fields} }}"


def batch(pairs: list[tuple[str, dict[str, Any]]], duration: dict[str, str]) -> tuple[str, dict[str, Any]]:
    variables: dict[str, Any] = {"d": duration}
    for i, (expression, entity) in enumerate(pairs):
        variables[f"x{i}"], variables[f"n{i}"] = expression, entity
    return expressions_query(len(pairs)), variables


def overview_expressions() -> list[str]:
    service = next(d for d in dashboards() if d["id"] == "General-Service")
    tabs = next(c for c in service["configuration"]["children"] if c["type"] == "Tab")  # below the events
    tab = tabs["children"][0]
    return [e for w in tab["children"] for e in w.get("expressions", [])]


class FullCollections:
    """The full collections of the bench process's heap (generation 2) while
    ``counting``, and how long they took: tens of milliseconds each, in the
    rounds they fall in."""

    def __init__(self) -> None:
        self.counting: list[float] | None = None
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2 or self.counting is None:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.counting.append((time.perf_counter() - self._started) * 1000)

    @contextlib.contextmanager
    def into(self, collections: list[float]) -> Iterator[None]:
        self.counting = collections
        try:
            yield
        finally:
            self.counting = None


def promql_ask(url: str, queries: list[str], start: int, end: int) -> Callable[[], None]:
    """``query_range`` of each of ``queries`` over one kept-alive connection, every minute of the window."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.netloc, timeout=60)

    def ask() -> None:
        for query in queries:
            form = urllib.parse.urlencode({"query": query, "start": start, "end": end, "step": 60})
            connection.request("GET", f"/api/v1/query_range?{form}")
            answer = connection.getresponse()
            reply = json.loads(answer.read())
            if answer.status != 200:
                raise RuntimeError(f"{query} failed ({answer.status}): {reply.get('error')}")

    return ask


def promql_forms(services: int) -> dict[str, list[str]]:
    """The service list's averages as top lists, and the PromQL dashboard's
    charts of one service (those of ``{service='$service', layer='$layer'}``) for svc-0."""
    top = f"layer='GENERAL', top_n='{services}', order='DES'"
    board = json.loads((Path(__file__).parents[1] / "docs" / "grafana" / "general-service.json").read_text())
    mine = "{service='$service', layer='$layer'"
    charts = [t["expr"] for p in board["panels"] if p["type"] == "timeseries" for t in p["targets"]]
    service = [e.replace("$service", "svc-0").replace("$layer", "GENERAL") for e in charts if mine in e]
    averages = ("service_cpm", "service_sla", "service_resp_time", "service_apdex")
    return {"PromQL service list": [f"{m}{{{top}}}" for m in averages], "PromQL service dashboard": service}


def measure(
    name: str, ask: Callable[[], Any], recorders: list[Recorder], rounds: int
) -> tuple[list[float], list[float]]:
    """The query's times over HTTP and its storage reads' times alone, in ms."""
    for r in recorders:
        r.calls.clear()
        r.on = True
    ask()
    for r in recorders:
        r.on = False
    reads = sum(len(r.calls) for r in recorders)
    asked, alone = [], []
    full = FullCollections()
    collected: tuple[list[float], list[float]] = ([], [])
    gc.callbacks.append(full)
    try:
        for _ in range(rounds):
            with full.into(collected[0]):
                start = time.perf_counter()
                ask()
                asked.append((time.perf_counter() - start) * 1000)
            with full.into(collected[1]):
                start = time.perf_counter()
                for r in recorders:
                    r.replay()
                alone.append((time.perf_counter() - start) * 1000)
    finally:
        gc.callbacks.remove(full)
    p50, p99, reads_p50 = pct(asked, 50), pct(asked, 99), pct(alone, 50)
    print(f"  {name}: {reads} storage reads; p50 {p50:.1f} ms (reads alone {reads_p50:.1f} ms), "
          f"p99 {p99:.1f} ms; full collections {len(collected[0])} asked, {len(collected[1])} alone "
          f"({sum(collected[0]):.0f} and {sum(collected[1]):.0f} ms)")  # fmt: skip
    return asked, alone


def run(label: str, storage: OpenStorage, args: argparse.Namespace) -> list[Figure]:
    now_minute = int(time.time()) // 60
    start = time.perf_counter()
    written = populate(storage, args.services, args.endpoints, now_minute - MINUTES + 1, args.traces)
    print(f"{label}: {written:,} minute rows and {2 * args.traces:,} segments written in "
          f"{time.perf_counter() - start:.0f} s")  # fmt: skip
    inventory, metrics, records = (
        Recorder(storage.inventory),
        Recorder(storage.metrics),
        Recorder(storage.records),
    )
    context = QueryContext(inventory, metrics, records, TimesToLive(3, 1, 7, 90, 7, 7))
    execution = Execution(resolvers(), context, deadline_s=60.0, max_depth=15)
    server = QueryServer(
        "127.0.0.1",
        0,
        Admission(8, 32, 60.0),
        execution,
        Instruments(),
        1 << 20,
        promql=(0, PromQLApi(context)),
    )
    server.start()
    client = Client(server.url)
    recorders = [inventory, metrics, records]
    try:
        fmt = "%Y-%m-%d %H%M"
        duration = {
            "start": time.strftime(fmt, time.gmtime((now_minute - WINDOW_MINUTES + 1) * 60)),
            "end": time.strftime(fmt, time.gmtime(now_minute * 60)),
            "step": "MINUTE",
        }
        averages = [
            "avg(service_cpm)",
            "avg(service_sla)/100",
            "avg(service_resp_time)",
            "avg(service_apdex)/10000",
        ]
        entities = [{"serviceName": f"svc-{s}", "normal": True} for s in range(args.services)]
        services_query = 'query { services: listServices(layer: "GENERAL") { id name normal } }'
        listing, listing_vars = batch([(a, e) for e in entities for a in averages], duration)
        dashboard, dashboard_vars = batch([(e, entities[0]) for e in overview_expressions()], duration)
        spans = "segmentId spanId parentSpanId endpointName type peer tags { key value }"
        trace = f"query ($id: ID!) {{ t: queryTrace(traceId: $id) {{ spans {{ {spans} }} }} }}"
        search = {
            "queryDuration": duration, "traceState": "ALL", "queryOrder": "BY_START_TIME",
            "tags": [{"key": "http.status_code", "value": "500"}], "paging": {"pageNum": 1, "pageSize": 20},
        }  # fmt: skip
        basic = "segmentId endpointNames duration start isError traceIds"
        found = f"t: queryBasicTraces(condition: $c) {{ traces {{ {basic} }} }}"
        traces = f"query ($c: TraceQueryCondition) {{ {found} }}"
        topology = (
            "query ($d: Duration!) { t: getGlobalTopology(duration: $d) { nodes { id } calls { id } } }"
        )

        def service_list() -> None:
            client.post(services_query, {})
            client.post(listing, listing_vars)

        figures = []
        asks: list[tuple[str, Callable[[], Any]]] = [
            (name, functools.partial(client.post, query, variables))
            for name, query, variables in (
                ("service list", services_query, {}),
                ("service list's averages", listing, listing_vars),
                ("service dashboard", dashboard, dashboard_vars),
                ("global topology", topology, {"d": duration}),
                ("trace by id", trace, {"id": f"trace-{args.traces - 1}"}),  # of the window's last minute
                ("trace search by tag", traces, {"c": search}),
            )
        ]
        window = ((now_minute - WINDOW_MINUTES + 1) * 60, now_minute * 60)
        promql = f"http://127.0.0.1:{server.promql_port}"
        asks += [
            (name, promql_ask(promql, queries, *window))
            for name, queries in promql_forms(args.services).items()
        ]
        for name, ask in asks:
            asked, alone = measure(name, ask, recorders, args.rounds)
            figures.append(
                Figure(f"{label}: {name} p50", pct(asked, 50), "ms", pct(alone, 50),
                       "its storage reads alone", at_most(2.0, of_ceiling=True, or_within=3.0))
            )  # fmt: skip
            if name == "trace by id":
                figures.append(Figure(f"{label}: trace by id p99", pct(asked, 99), "ms", goal=at_most(50)))
        listed = timed(service_list, args.rounds)
        print(f"  the service list, both requests: p99 {pct(listed, 99):.1f} ms")
        figures.append(Figure(f"{label}: service list p99", pct(listed, 99), "ms", goal=at_most(300)))
        return figures
    finally:
        client.close()
        server.close()


def timed(action: Callable[[], None], rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--services", type=int, default=100)
    parser.add_argument("--endpoints", type=int, default=20)
    parser.add_argument("--traces", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory() as tmp:
        storage = open_storage(
            StorageConfig(kind=StorageKind.EMBEDDED, embedded_path=str(Path(tmp) / "q.db"))
        )
        try:
            figures += run("embedded", storage, args)
        finally:
            storage.close()
    es, rs = ElasticsearchServer().start(), RedisServer().start()
    try:
        prefix = f"b{uuid.uuid4().hex[:8]}"
        config = StorageConfig(kind=StorageKind.ELASTICSEARCH, es_hosts=es.url, es_index_prefix=prefix,
                               redis_url=rs.url)  # fmt: skip
        storage = open_storage(config)
        try:
            figures += run("Elasticsearch", storage, args)
        finally:
            storage.close()
    finally:
        es.stop()
        rs.stop()
    record("query", figures)


if __name__ == "__main__":
    main()
