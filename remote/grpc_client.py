"""The gRPC remote client: one per other node, with its own bounded buffer and
sender thread streaming RemoteMessages over client-streaming calls."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import Counter

from model.stream import StreamData
from proto import remote_pb2
from runtime.batching import BatchPolicy
from runtime.buffer import BufferQueue, BufferStrategy
from runtime.instruments import Instruments
from runtime.retry import RetryPolicy

log = logging.getLogger(__name__)

CALL = "/skyoap.v1.RemoteService/call"
CALL_BATCHED = "/skyoap.v1.RemoteService/callBatched"
BATCH = BatchPolicy(max_items=500, max_bytes=512 * 1024)
"""One RemoteBatch: far below any node's message limit."""
STREAM = BatchPolicy(max_items=10_000, max_delay_s=2.0)
"""One stream of batches, confirmed by one RemoteAck."""
RECONNECT = RetryPolicy(first_delay_s=0.1, multiplier=2.0, max_delay_s=5.0)
"""Pauses between connection attempts; the client tries until it is closed."""
# Failures worth trying again: the node may be restarting or briefly overloaded.
RETRYABLE = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.RESOURCE_EXHAUSTED}
)


def encode(next_worker_id: int, item: StreamData) -> remote_pb2.RemoteMessage:
    """One item as a RemoteMessage (``RemoteService.call``)."""
    strings, longs = item.to_remote()
    return remote_pb2.RemoteMessage(
        nextWorkerId=next_worker_id,
        streamDataId=item.STREAM_ID,
        remoteData=remote_pb2.RemoteData(dataStrings=strings, dataLongs=longs),
    )


def encode_batch(items: list[tuple[int, StreamData]]) -> remote_pb2.RemoteBatch:
    """Items in the columns of a RemoteBatch (``RemoteService.callBatched``)."""
    workers, streams, string_counts, long_counts = [], [], [], []
    strings: list[str] = []
    longs: list[int] = []
    for next_worker_id, item in items:
        s, n = item.to_remote()
        workers.append(next_worker_id)
        streams.append(item.STREAM_ID)
        string_counts.append(len(s))
        long_counts.append(len(n))
        strings += s
        longs += n
    return remote_pb2.RemoteBatch(
        nextWorkerIds=workers,
        streamDataIds=streams,
        stringCounts=string_counts,
        longCounts=long_counts,
        strings=strings,
        longs=longs,
    )


class GrpcRemoteClient:
    """Items pushed here wait in the client's own queue; its thread sends them
    in batches (``BATCH``, ``RemoteService.callBatched``), in streams of at
    most ``stream.max_items`` items or ``stream.max_delay_s`` seconds,
    each confirmed by the target's RemoteAck. When a stream fails, what it
    carried is counted as unconfirmed (the target may or may not have taken it:
    sending it again could count it twice) and the client reconnects with
    jittered exponential backoff. ``close`` hands everything still held to
    ``give_back``, so that the new owner gets it."""

    def __init__(
        self,
        address: str,
        instruments: Instruments,
        buffer_size: int,
        give_back: Callable[[list[tuple[int, StreamData]]], None],
        stream: BatchPolicy = STREAM,
        reconnect: RetryPolicy = RECONNECT,
    ) -> None:
        self._address = address
        self._give_back = give_back
        if stream.max_delay_s is None:
            raise ValueError("a stream of batches ends after max_delay_s: give one")
        self._stream, self._stream_s = stream, stream.max_delay_s
        self._reconnect = reconnect
        self._queue: BufferQueue[tuple[int, StreamData]] = BufferQueue(
            f"remote_{address}", 1, buffer_size, BufferStrategy.BLOCKING, instruments
        )
        self._wake = threading.Event()
        self._queue.on_data = self._wake.set
        self._pending: deque[tuple[int, StreamData]] = deque()  # taken from the queue, not yet sent
        self._pending_lock = threading.Lock()
        self._closing = threading.Event()
        self._channel = grpc.insecure_channel(address)
        self._call = self._channel.stream_unary(
            CALL_BATCHED,
            request_serializer=remote_pb2.RemoteBatch.SerializeToString,
            response_deserializer=remote_pb2.RemoteAck.FromString,
        )
        self._health = health_pb2_grpc.HealthStub(self._channel).Check
        self._reachable = False
        self._future: grpc.Future | None = None
        self._streaming = False

        def counter(name: str, help: str) -> Counter:
            return instruments.counter(f"skyoap_remote_{name}_total", help, ["target"]).labels(target=address)

        self._pushed = counter("pushed", "items routed to a target node")
        self._given_back = counter("given_back", "items held for a target when it left, routed elsewhere")
        self._dropped = counter("dropped", "items for a target still held when this node shut down")
        self._sent = counter("sent", "items a target confirmed")
        self._rejected = counter("rejected", "items a target confirmed but refused")
        self._unconfirmed = counter(
            "unconfirmed", "items sent in streams that failed: lost if the target died before persisting them"
        )
        self._stream_seconds = instruments.histogram(
            "skyoap_remote_stream_seconds",
            "one stream of batches to a target, from its first batch to the target's acknowledgement",
            ["target"],
        ).labels(target=address)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"remote-{self._address}", daemon=True)
            self._thread.start()

    @property
    def address(self) -> str:
        return self._address

    def push(self, next_worker_id: int, item: StreamData) -> None:
        """Raises BufferClosed once the client is closing: route the item again."""
        self._queue.produce((next_worker_id, item))
        self._pushed.inc()

    def _take_batch(self) -> list[tuple[int, StreamData]]:
        """Up to ``BATCH.max_items`` items of about ``BATCH.max_bytes`` at most; none
        once the client is closing. Runs on gRPC's request thread, hence the lock."""
        with self._pending_lock:
            if self._closing.is_set():
                return []
            if not self._pending:
                self._pending.extend(self._queue.drain(0, BATCH.max_items))
            batch: list[tuple[int, StreamData]] = []
            size = 0
            max_bytes = BATCH.max_bytes or sys.maxsize
            while self._pending and len(batch) < BATCH.max_items and size < max_bytes:
                entry = self._pending.popleft()
                batch.append(entry)
                size += entry[1].size_hint()
            return batch

    def _batches(self, carried: list[int]) -> Iterator[remote_pb2.RemoteBatch]:
        deadline = time.monotonic() + self._stream_s
        while carried[0] < self._stream.max_items:
            batch = self._take_batch()
            if not batch:
                return  # idle or closing: end the stream, get the ack
            carried[0] += len(batch)
            yield encode_batch(batch)
            if time.monotonic() >= deadline:
                return

    def _run(self) -> None:
        failures = 0
        while not self._closing.is_set():
            if not self._pending and not self._queue.depth():
                self._wake.wait(0.5)
                self._wake.clear()
                continue
            if not self._connected():
                failures += 1
                self._closing.wait(self._pause(failures))
                continue
            carried = [0]
            self._streaming = True
            try:
                self._future = self._call.future(
                    self._batches(carried), timeout=max(30.0, self._stream_s * 5)
                )
                with self._stream_seconds.time():
                    ack = self._future.result()
                self._sent.inc(ack.received)
                self._rejected.inc(ack.rejected)
                failures = 0
            except grpc.FutureCancelledError:
                self._unconfirmed.inc(carried[0])  # close() gave up on the stream
                break
            except grpc.RpcError as e:
                self._unconfirmed.inc(carried[0])
                self._reachable = False
                if self._closing.is_set():
                    break
                failures += 1
                code = e.code() if isinstance(e, grpc.Call) else None
                pause = self._pause(failures)
                log.warning(
                    "stream to %s failed (%s, %d items unconfirmed)%s; reconnecting in %.2f s",
                    self._address,
                    code,
                    carried[0],
                    "" if code in RETRYABLE else " and may not recover",
                    pause,
                )
                self._closing.wait(pause)
            finally:
                self._streaming = False

    def _pause(self, failures: int) -> float:
        return self._reconnect.delay_s(failures)

    def _connected(self) -> bool:
        """After a failure (and before the first stream), asks the node's health
        service first, so that no stream takes items from the queue towards a
        node that cannot be reached."""
        if not self._reachable:
            try:
                answer = self._health(health_pb2.HealthCheckRequest(), timeout=1.0)
                self._reachable = answer.status == health_pb2.HealthCheckResponse.SERVING
            except grpc.RpcError as e:
                log.debug("%s is not reachable: %s", self._address, e)
        return self._reachable

    def close(self, timeout_s: float) -> None:
        """This node shuts down: lets the thread send what is held, for up to
        ``timeout_s``, and counts what is left after that as dropped. Idempotent."""
        deadline = time.monotonic() + timeout_s
        while (self._pending or self._queue.depth() or self._streaming) and time.monotonic() < deadline:
            self._wake.set()
            time.sleep(0.01)
        leftover = self._stop()
        if leftover:
            self._dropped.inc(len(leftover))
            log.warning(
                "shutting down: %d items for %s could not be sent in %g s",
                len(leftover),
                self._address,
                timeout_s,
            )

    def leave(self) -> None:
        """The target left: stops sending and gives back whatever is still held. Idempotent."""
        leftover = self._stop()
        if leftover:
            log.info(
                "%s left: handing %d items it still held to their new owners", self._address, len(leftover)
            )
            self._given_back.inc(len(leftover))
            self._give_back(leftover)

    def _stop(self) -> list[tuple[int, StreamData]]:
        """Stops the thread and the channel; returns what was never sent (nothing
        the second time)."""
        if self._closing.is_set():
            return []
        self._closing.set()
        self._queue.close()  # producers blocked on a full queue get BufferClosed and route again
        self._wake.set()
        future = self._future
        if future is not None:
            future.cancel()
        if self._thread is not None:
            self._thread.join(10)
        with self._pending_lock:
            leftover = list(self._pending) + self._queue.drain(0, self._queue.capacity)
            self._pending.clear()
        self._channel.close()
        return leftover
