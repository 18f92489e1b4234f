"""SkyWalking's ``TraceSegmentReportService``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import grpc

from skyoap.proto.skywalking import common_pb2, tracing_pb2
from skyoap.receiver.checks import Tally
from skyoap.receiver.skywalking.streams import NO_COMMANDS, taking
from skyoap.receiver.traces import SegmentIntake


class TraceSegmentReportService(SegmentIntake):
    """SkyWalking's ``TraceSegmentReportService``: segments, streamed or in
    one collection, taken by the intake of segments."""

    def collect(
        self, requests: Iterator[tracing_pb2.SegmentObject], context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        tally = self._refusals.tally()
        return self._answer(taking(requests, tally, context), tally)

    def collectInSync(
        self, request: tracing_pb2.SegmentCollection, context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        return self._answer(request.segments, self._refusals.tally())

    def _answer(self, segments: Iterable[tracing_pb2.SegmentObject], tally: Tally) -> common_pb2.Commands:
        self.take(segments, tally)
        tally.check()
        return NO_COMMANDS
