"""The RemoteService: takes L1 results from other nodes and hands each to the
worker it names. Worker and stream ids mean the same on every node (see
``pipeline/stream.py``)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

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

    def _reject(self, peer: str, reason: str) -> None:
        self._rejected.inc()
        self._log.warning(reason.split(":")[0], "refused a message from %s: %s", peer, reason)

    def call(
        self, requests: Iterator[remote_pb2.RemoteMessage], context: grpc.ServicerContext
    ) -> remote_pb2.RemoteAck:
        """Hands every good message to its worker; a bad one is counted, logged
        with the sender's address and skipped, and the stream goes on."""
        peer = context.peer()
        received = rejected = 0
        for message in requests:
            if isinstance(message, Undecodable):
                self._reject(peer, message.describe())
                rejected += 1
                continue
            stream = self._types.get(message.streamDataId)
            if stream is None:
                self._reject(peer, f"unknown stream data id {message.streamDataId}")
                rejected += 1
                continue
            if stream_id_of_worker(message.nextWorkerId) != message.streamDataId:
                self._reject(
                    peer, f"worker {message.nextWorkerId} does not take stream data {message.streamDataId}"
                )
                rejected += 1
                continue
            try:
                worker = self._workers.get(message.nextWorkerId)
                data = message.remoteData
                item = stream.from_remote(data.dataStrings, data.dataLongs)
            except (UnknownWorker, UndecodableData) as e:
                self._reject(peer, str(e))
                rejected += 1
                continue
            worker.accept(item)
            received += 1
        self._received.inc(received)
        return remote_pb2.RemoteAck(received=received, rejected=rejected)
