"""The gRPC remote client: one per other node, with its own bounded buffer and
sender thread streaming RemoteMessages over client-streaming calls."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import Counter

from skyoap.edge.auth import SendingToken
from skyoap.model.stream import StreamData
from skyoap.proto import remote_pb2
from skyoap.remote.batches import Item, Outbox
from skyoap.runtime.batching import BatchPolicy
from skyoap.runtime.buffer import BufferQueue, BufferStrategy
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.retry import RetryPolicy

log = logging.getLogger(__name__)

CALL = "/skyoap.v1.RemoteService/call"
CALL_BATCHED = "/skyoap.v1.RemoteService/callBatched"
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


def encode_batch(
    items: list[Item], sender_id: str = "", sequence: int = 0, incarnation: str = ""
) -> remote_pb2.RemoteBatch:
    """Items in the columns of a RemoteBatch (``RemoteService.callBatched``),
    numbered ``sequence`` by the client ``sender_id``, for the run
    ``incarnation`` of the target ("" for any)."""
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
        senderId=sender_id,
        sequence=sequence,
        incarnation=incarnation,
    )


LEAVE_S = 10.0
"""How long a client whose target left tries to have its last batches confirmed."""


class GrpcRemoteClient:
    """Items pushed here wait in the client's own queue; its thread sends them
    in numbered batches (``batches.BATCH``, ``RemoteService.callBatched``), in streams
    of at most ``stream.max_items`` items or ``stream.max_delay_s`` seconds,
    each confirmed by the target's RemoteAck.

    When a stream fails, its batches are sent again first, with their numbers,
    once the client has reconnected (jittered exponential backoff): the target
    drops those it took already, so nothing is counted twice. When the target
    leaves, the client lets the stream under way finish and sends again what
    a failed one carried, for up to ``LEAVE_S``; what was never sent goes to
    ``give_back`` for the new owner, and batches still unconfirmed are counted
    (``skyoap_remote_unconfirmed_total``), not sent elsewhere: the target may
    have taken them.

    Batches are addressed to one run of the target (``incarnation``, from
    its membership record, else learnt from its first ack), since only that
    run knows which it took. A target restarted at the same address takes
    none of a stream addressed to its earlier run and acks with its new
    incarnation: the client then counts what its failed streams carried as
    unconfirmed, as for a target that left, and sends on to the new run what
    it never sent before."""

    def __init__(
        self,
        address: str,
        instruments: Instruments,
        buffer_size: int,
        give_back: Callable[[list[Item]], None],
        stream: BatchPolicy = STREAM,
        reconnect: RetryPolicy = RECONNECT,
        token: str = "",
        channel: grpc.Channel | None = None,
        incarnation: str = "",
    ) -> None:
        """``address`` names the target in routing. ``channel`` reaches its
        RemoteService (default: plaintext to ``address``); ``token`` is the
        agent token the target requires (``edge/auth.py``), if any;
        ``incarnation`` the run of the target its membership names."""
        self._address = address
        self._incarnation = incarnation
        self._give_back = give_back
        if stream.max_delay_s is None:
            raise ValueError("a stream of batches ends after max_delay_s: give one")
        self._stream, self._stream_s = stream, stream.max_delay_s
        self._reconnect = reconnect
        self._queue: BufferQueue[Item] = BufferQueue(
            f"remote_{address}", 1, buffer_size, BufferStrategy.BLOCKING, instruments
        )
        self._wake = threading.Event()
        self._queue.on_data = self._wake.set
        self._outbox = Outbox(self._queue)
        self._sender_id = uuid.uuid4().hex
        self._closing = threading.Event()
        self._leaving = threading.Event()
        self._channel = channel or grpc.insecure_channel(address)
        if token:
            self._channel = grpc.intercept_channel(self._channel, SendingToken(token))
        self._call = self._channel.stream_unary(
            CALL_BATCHED,
            request_serializer=remote_pb2.RemoteBatch.SerializeToString,
            response_deserializer=remote_pb2.RemoteAck.FromString,
        )
        self._health = health_pb2_grpc.HealthStub(self._channel).Check
        self._reachable = False
        self._future: grpc.Future | None = None
        self._streaming = False
        self._count_in(instruments, address)
        self._thread: threading.Thread | None = None

    def _count_in(self, instruments: Instruments, address: str) -> None:
        """The client's counters, labelled with its target's ``address``."""

        def counter(name: str, help: str) -> Counter:
            return instruments.counter(f"skyoap_remote_{name}_total", help, ["target"]).labels(target=address)

        self._pushed = counter("pushed", "items routed to a target node")
        self._given_back = counter("given_back", "items held for a target when it left, routed elsewhere")
        self._dropped = counter("dropped", "items for a target still held when this node shut down")
        self._sent = counter("sent", "items a target confirmed")
        self._rejected = counter("rejected", "items a target confirmed but refused")
        self._unconfirmed = counter(
            "unconfirmed",
            "items of failed streams the target never confirmed before it left or this node closed: "
            "lost unless the target had taken them",
        )
        self._resent = counter("resent", "items of failed streams sent again (the target drops what it took)")
        self._restarts = counter(
            "target_restarts",
            "times the target answered as a new run of its node; what its earlier run was sent and "
            "did not confirm is counted unconfirmed, not sent again",
        )
        instruments.gauge(
            "skyoap_remote_held_items",
            "items taken from a client's queue and not yet confirmed by its target",
            ["target"],
        ).labels(target=address).set_function(self._outbox.held)
        self._stream_seconds = instruments.histogram(
            "skyoap_remote_stream_seconds",
            "one stream of batches to a target, from its first batch to the target's acknowledgement",
            ["target"],
        ).labels(target=address)

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

    def _batches(self, carried: list[int], incarnation: str) -> Iterator[remote_pb2.RemoteBatch]:
        deadline = time.monotonic() + self._stream_s
        while carried[0] < self._stream.max_items:
            batch = None if self._closing.is_set() else self._outbox.take(self._leaving.is_set())
            if batch is None:
                return  # idle or closing: end the stream, get the ack
            number, items = batch
            carried[0] += len(items)
            yield encode_batch(items, self._sender_id, number, incarnation)
            if time.monotonic() >= deadline:
                return

    def _has_work(self) -> bool:
        return self._outbox.has_work(self._leaving.is_set())

    def _run(self) -> None:
        failures = 0
        while not self._closing.is_set():
            if not self._has_work():
                self._wake.wait(0.5)
                self._wake.clear()
                continue
            if not self._connected():
                failures += 1
                self._closing.wait(self._pause(failures))
                continue
            carried = [0]
            incarnation = self._incarnation  # one for the whole stream
            self._outbox.open()
            self._streaming = True
            try:
                self._future = self._call.future(
                    self._batches(carried, incarnation), timeout=max(30.0, self._stream_s * 5)
                )
                with self._stream_seconds.time():
                    ack = self._future.result()
                self._acked(ack, incarnation)
                failures = 0
            except grpc.FutureCancelledError:
                break  # close() gave up on the stream; _stop() counts what it carried
            except grpc.RpcError as e:
                self._outbox.end(failed=True)
                self._reachable = False
                if self._closing.is_set():
                    break
                failures += 1
                self._failed(e, carried[0], self._pause(failures))
            finally:
                self._streaming = False

    def _acked(self, ack: remote_pb2.RemoteAck, incarnation: str) -> None:
        if incarnation and ack.incarnation and ack.incarnation != incarnation:
            self._readdress(ack.incarnation, incarnation)
            return
        self._outbox.end(failed=False)
        if not self._incarnation:
            self._incarnation = ack.incarnation
        self._sent.inc(ack.received)
        self._rejected.inc(ack.rejected)

    def _readdress(self, incarnation: str, earlier: str) -> None:
        """The target restarted as ``incarnation`` and took none of the stream
        addressed to ``earlier``. What failed streams carried (to the earlier
        run, which may have taken it) is unconfirmed, as for a target that
        left; the batches this stream carried first go to the new run."""
        unconfirmed = self._outbox.readdress()
        self._incarnation = incarnation
        self._restarts.inc()
        self._unconfirmed.inc(unconfirmed)
        log.warning(
            "%s restarted (incarnation %s, was %s): %d items sent to its earlier run were never "
            "confirmed; they are not sent again (it may have taken them)",
            self._address,
            incarnation,
            earlier,
            unconfirmed,
        )

    def _failed(self, error: grpc.RpcError, carried: int, pause: float) -> None:
        code = error.code() if isinstance(error, grpc.Call) else None
        self._resent.inc(carried)
        log.warning(
            "stream to %s failed (%s); sending its %d items again in %.2f s%s",
            self._address,
            code,
            carried,
            pause,
            "" if code in RETRYABLE else " (the failure may not pass)",
        )
        self._closing.wait(pause)

    def _pause(self, failures: int) -> float:
        return self._reconnect.delay_s(failures)

    def _connected(self) -> bool:
        """After a failure (and before the first stream), asks the node's health
        service first, so that no stream takes items from the queue towards a
        node that cannot be reached. A target that left answers NOT_SERVING
        while it still takes streams: a leaving client just tries."""
        if self._leaving.is_set():
            return True
        if not self._reachable:
            self._reachable = self.answers()
        return self._reachable

    def answers(self, timeout_s: float = 1.0) -> bool:
        """Whether the target answers SERVING to a health check (with cluster
        TLS: after presenting the certificate this client expects of it)."""
        try:
            answer = self._health(health_pb2.HealthCheckRequest(), timeout=timeout_s)
            return answer.status == health_pb2.HealthCheckResponse.SERVING
        except grpc.RpcError as e:
            log.debug("%s is not reachable: %s", self._address, e)
            return False

    def close(self, timeout_s: float) -> None:
        """This node shuts down: lets the thread send what is held, for up to
        ``timeout_s``, and counts what is left after that as dropped. Idempotent."""
        deadline = time.monotonic() + timeout_s
        while (self._has_work() or self._streaming) and time.monotonic() < deadline:
            self._wake.set()
            time.sleep(0.01)
        never_sent, unconfirmed = self._stop()
        if never_sent or unconfirmed:
            self._dropped.inc(len(never_sent))
            self._unconfirmed.inc(len(unconfirmed))
            log.warning(
                "shutting down: %d items for %s could not be sent in %g s, %d more not confirmed",
                len(never_sent),
                self._address,
                timeout_s,
                len(unconfirmed),
            )

    def leave(self) -> None:
        """The target left: lets the stream under way finish and sends again
        what failed streams carried, for up to ``LEAVE_S``; then stops and
        gives back what was never sent. Idempotent."""
        self._leaving.set()
        self._wake.set()
        deadline = time.monotonic() + LEAVE_S
        while (
            (self._streaming or self._outbox.has_work(leaving=True))
            and time.monotonic() < deadline
            and not self._closing.is_set()
        ):
            time.sleep(0.01)
        never_sent, unconfirmed = self._stop()
        if unconfirmed:
            self._unconfirmed.inc(len(unconfirmed))
            log.warning(
                "%s left before confirming %d items; they are not sent elsewhere (it may have taken them)",
                self._address,
                len(unconfirmed),
            )
        if never_sent:
            log.info(
                "%s left: handing %d items it never got to their new owners", self._address, len(never_sent)
            )
            self._given_back.inc(len(never_sent))
            self._give_back(never_sent)

    def _stop(self) -> tuple[list[Item], list[Item]]:
        """Stops the thread and the channel; returns the items never sent and
        those sent but not confirmed (nothing the second time)."""
        if self._closing.is_set():
            return [], []
        self._closing.set()
        self._queue.close()  # producers blocked on a full queue get BufferClosed and route again
        self._wake.set()
        future = self._future
        if future is not None:
            future.cancel()
        if self._thread is not None:
            self._thread.join(10)
        never_sent, unconfirmed = self._outbox.empty()
        self._channel.close()
        return never_sent, unconfirmed
