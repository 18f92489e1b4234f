"""The RemoteService: takes L1 results from other nodes and hands each to the
worker it names. Worker and stream ids mean the same on every node (see
``pipeline/stream.py``)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator

import grpc

from pipeline.grpc_edge import Undecodable
from pipeline.instruments import Instruments
from pipeline.ratelimit import RateLimitedLog
from pipeline.stream import StreamTypes, UndecodableData, stream_id_of_worker
from pipeline.worker import UnknownWorker, Workers
from proto import remote_pb2

log = logging.getLogger(__name__)


class RemoteService:
    def __init__(self, workers: Workers, types: StreamTypes, instruments: Instruments) -> None:
        self._workers = workers
        self._types = types
        self._received = instruments.counter("remote_received_total", "items taken from other nodes")
        self._rejected = instruments.counter(
            "remote_rejected_total", "messages from other nodes refused (unknown ids, undecodable bodies)"
        )
        self._log = RateLimitedLog(log)

    def call(
        self, requests: Iterator[remote_pb2.RemoteMessage | Undecodable], context: grpc.ServicerContext
    ) -> remote_pb2.RemoteAck:
        """Hands every good message to its worker; a bad one is counted, logged
        with the sender's address and skipped, and the stream goes on."""
        return self._take(requests, context.peer())

    def callBatched(
        self, requests: Iterator[remote_pb2.RemoteBatch | Undecodable], context: grpc.ServicerContext
    ) -> remote_pb2.RemoteAck:
        """As ``call``, with many messages in each batch."""
        peer = context.peer()
        received = rejected = 0
        for batch in requests:
            ack = self._take([batch] if isinstance(batch, Undecodable) else batch.messages, peer)
            received += ack.received
            rejected += ack.rejected
        return remote_pb2.RemoteAck(received=received, rejected=rejected)

    def _take(
        self, messages: Iterable[remote_pb2.RemoteMessage | Undecodable], peer: str
    ) -> remote_pb2.RemoteAck:
        received = rejected = 0
        for message in messages:
            reason = self._hand_over(message)
            if reason is None:
                received += 1
            else:
                rejected += 1
                self._log.warning(reason.split(":")[0], "refused a message from %s: %s", peer, reason)
        self._received.inc(received)
        self._rejected.inc(rejected)
        return remote_pb2.RemoteAck(received=received, rejected=rejected)

    def _hand_over(self, message: remote_pb2.RemoteMessage | Undecodable) -> str | None:
        """Gives the message's item to its worker; returns why not, if not."""
        if isinstance(message, Undecodable):
            return message.describe()
        stream = self._types.get(message.streamDataId)
        if stream is None:
            return f"unknown stream data id {message.streamDataId}"
        if stream_id_of_worker(message.nextWorkerId) != message.streamDataId:
            return f"worker {message.nextWorkerId} does not take stream data {message.streamDataId}"
        try:
            worker = self._workers.get(message.nextWorkerId)
            data = message.remoteData
            item = stream.from_remote(data.dataStrings, data.dataLongs)
        except (UnknownWorker, UndecodableData) as e:
            return str(e)
        worker.accept(item)
        return None
