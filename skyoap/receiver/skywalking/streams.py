"""What SkyWalking's services share: the answer every call gets, an agent's
client stream read message by message, and a service whose every message
is one record."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc

from skyoap.edge.binding import Undecodable
from skyoap.model.checks import Reason, Refused
from skyoap.model.records import Record
from skyoap.proto.skywalking import common_pb2
from skyoap.receiver.checks import Tally
from skyoap.receiver.intake import TelemetryService
from skyoap.runtime import clock
from skyoap.runtime.budget import memory_size
from skyoap.runtime.tracebacks import detach

NO_COMMANDS = common_pb2.Commands()


def taking(requests: Iterator[Any], tally: Tally, context: grpc.ServicerContext) -> Iterator[Any]:
    """The messages of an agent's stream that decode; the ones that do not are
    refused, and a stream that breaks ends the iteration, keeping what came.

    gRPC may report a cancelled stream as an ordinary end when the end
    overtakes the cancellation; such a break is counted only if the call is
    already known to be dead when the stream ends."""
    try:
        for request in requests:
            if isinstance(request, Undecodable):
                tally.refuse(Refused(Reason.UNDECODABLE, request.describe()))
            else:
                yield request
    except grpc.RpcError as e:  # the agent cancelled or lost the call
        detach(e)  # or this frame, and the last request, stay until collected
        tally.refuse(Refused(Reason.BROKEN_STREAM, "the stream ended with an error"))
        return
    if not context.is_active():
        tally.refuse(Refused(Reason.BROKEN_STREAM, "the agent cancelled the call"))


class RecordReportService(TelemetryService):
    """A service each of whose messages is one record: each is checked into
    its record (``_record``) and held in the budget, and the good ones of a
    call are handed on together."""

    def _record(self, pb: Any, now_ms: int) -> Record:
        raise NotImplementedError

    def _register(self, records: list[Any]) -> None:
        """Registers the names ``records`` carry, once they are handed on."""

    def collect(self, requests: Iterator[Any], context: grpc.ServicerContext) -> common_pb2.Commands:
        tally = self._refusals.tally()
        now_ms = clock.now_ms()
        records: list[Record] = []
        for pb in taking(requests, tally, context):
            self._received.inc()
            try:
                record = self._record(pb, now_ms)
            except Refused as e:
                tally.refuse(e)
                continue
            records.append(record)
            self._sinks.hold(memory_size([record]))
        if records:
            self._sinks.take(records, ())
            tally.taken += len(records)
            self._register(records)
        tally.check()
        return NO_COMMANDS
