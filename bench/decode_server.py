"""A gRPC server whose TraceSegmentReportService only decodes what it is sent:
the ceiling the telemetry benchmark compares the real node with. Same server,
same decoding into protobuf messages; nothing is analysed or stored."""

from __future__ import annotations

from collections.abc import Iterator

import grpc

from bench.serving import serve_until_terminated
from skyoap.edge.server import GrpcServer
from skyoap.proto.skywalking import common_pb2, tracing_pb2


class DecodeOnly:
    def collect(
        self, requests: Iterator[tracing_pb2.SegmentObject], context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        for _ in requests:
            pass
        return common_pb2.Commands()


def main() -> None:
    server = GrpcServer("127.0.0.1", 0, max_message_bytes=4 * 1024 * 1024)
    server.add(tracing_pb2.DESCRIPTOR.services_by_name["TraceSegmentReportService"], DecodeOnly())
    serve_until_terminated(server, "decode-only server")


if __name__ == "__main__":
    main()
