"""A program instrumented with OpenTelemetry's own SDK, run by the OTLP tests
in a virtualenv of its own (``.venv-otel``): it imports nothing of skyoap.

Two services in one process: ``orders`` serves HTTP, ``shop`` calls it. Each
of ``--calls`` checkouts is a server span of ``shop`` (``GET /checkout``) that
makes a client call to ``orders`` with the trace context in its headers;
``orders`` answers in a server span (``GET /orders/{id}``), with 500 and an
error status for every third order. Each service has its own tracer,
meter and logger providers exporting over OTLP/gRPC to ``--endpoint``;
``orders`` counts what it served (a sum), the amounts (a histogram) and logs
a line per order inside its span. Prints one JSON line: the trace ids and
the port ``orders`` listened on.
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry import propagate
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode


class Service:
    """One service's providers, exporting to the node."""

    def __init__(self, name: str, endpoint: str, headers: tuple[tuple[str, str], ...]) -> None:
        resource = Resource.create({"service.name": name, "service.instance.id": f"{name}-1"})
        options = {"endpoint": endpoint, "insecure": True, "headers": headers}
        self.traces = TracerProvider(resource=resource)
        self.traces.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(**options)))
        self.metrics = MeterProvider(
            resource=resource,
            metric_readers=[PeriodicExportingMetricReader(OTLPMetricExporter(**options), 3_600_000)],
            views=[View(instrument_name="order.amount",
                        aggregation=ExplicitBucketHistogramAggregation((10.0, 100.0)))],
        )  # fmt: skip
        self.logs = LoggerProvider(resource=resource)
        self.logs.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(**options)))
        self.tracer = self.traces.get_tracer(name)
        self.meter = self.metrics.get_meter(name)
        self.log = logging.getLogger(name)
        self.log.addHandler(LoggingHandler(logger_provider=self.logs))
        self.log.setLevel(logging.INFO)

    def flush(self) -> None:
        self.traces.force_flush()
        self.metrics.force_flush()
        self.logs.force_flush()

    def shutdown(self) -> None:
        self.traces.shutdown()
        self.metrics.shutdown()
        self.logs.shutdown()


def serve_orders(orders: Service) -> ThreadingHTTPServer:
    port = 0
    served = orders.meter.create_counter("orders.served", description="orders answered")
    amounts = orders.meter.create_histogram("order.amount", unit="EUR")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            order = int(self.path.rsplit("/", 1)[1])
            context = propagate.extract({k.lower(): v for k, v in self.headers.items()})
            with orders.tracer.start_as_current_span(
                "GET /orders/{id}", context=context, kind=SpanKind.SERVER,
                attributes={"http.request.method": "GET", "url.path": self.path,
                            "server.address": "127.0.0.1", "server.port": port},
            ) as span:  # fmt: skip
                failed = order % 3 == 0
                status = 500 if failed else 200
                span.set_attribute("http.response.status_code", status)
                if failed:
                    span.set_status(Status(StatusCode.ERROR, "the order store failed"))
                orders.log.info("order %d answered %d", order, status)
                served.add(1, {"outcome": "error" if failed else "ok"})
                amounts.record(order * 7.5)
                self.send_response(status)
                self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port = server.server_port
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def checkout(shop: Service, port: int, order: int) -> str:
    with shop.tracer.start_as_current_span(
        "GET /checkout", kind=SpanKind.SERVER, attributes={"http.request.method": "GET"}
    ) as entry:
        with shop.tracer.start_as_current_span(
            "GET", kind=SpanKind.CLIENT,
            attributes={"http.request.method": "GET", "server.address": "127.0.0.1", "server.port": port},
        ) as call:  # fmt: skip
            headers: dict[str, str] = {}
            propagate.inject(headers)
            request = urllib.request.Request(f"http://127.0.0.1:{port}/orders/{order}", headers=headers)
            try:
                urllib.request.urlopen(request, timeout=10).close()
            except urllib.error.HTTPError:
                call.set_status(Status(StatusCode.ERROR, "orders answered 500"))
        return format(entry.get_span_context().trace_id, "032x")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--calls", type=int, default=6)
    parser.add_argument("--token", default="")
    args = parser.parse_args()
    headers = (("authentication", args.token),) if args.token else ()
    orders, shop = Service("orders", args.endpoint, headers), Service("shop", args.endpoint, headers)
    server = serve_orders(orders)
    traces = [checkout(shop, server.server_port, n) for n in range(1, args.calls + 1)]
    server.shutdown()
    for service in (orders, shop):  # the callee's spans first, as they mostly come
        service.flush()
        service.shutdown()
    print(json.dumps({"traces": traces, "port": server.server_port}), flush=True)


if __name__ == "__main__":
    main()
