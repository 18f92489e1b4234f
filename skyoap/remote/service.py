"""The RemoteService: takes L1 results from other nodes and hands each to the
worker it names. Worker and stream ids mean the same on every node (see
``model/stream.py``).

Every item is checked as strictly as a receiver checks what agents report
(``model/checks.py``): a client of the internal port can make L2 merge or
store nothing an agent could not.

A batch is taken whole, once: it waits a bounded time for room in the node's
memory budget and is refused (RESOURCE_EXHAUSTED, ending the stream) when none
comes, and a batch sent again after a stream failed is recognised by its
sender and number and dropped, since its items were taken the first time.
Which batches were taken lives in memory, so each run of the node has an
incarnation of its own: a stream addressed to another one (an earlier run at
this address) is answered at once with this run's, and none of it is taken."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NamedTuple, TypeVar

import grpc

from skyoap.edge.binding import Undecodable
from skyoap.edge.server import GrpcServer
from skyoap.model.checks import Refused, TelemetryLimits
from skyoap.model.stream import StreamData, StreamTypes, UndecodableData, stream_id_of_worker
from skyoap.proto import remote_pb2
from skyoap.remote.cluster import new_incarnation
from skyoap.runtime import clock, deadline
from skyoap.runtime.budget import MemoryBudget, Overloaded, admitted_size
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.ratelimit import RateLimitedLog
from skyoap.runtime.worker import UnknownWorker, Workers

log = logging.getLogger(__name__)

M = TypeVar("M")


class TakenBatches:
    """The highest batch number taken from each of the last ``senders``
    senders. A sender numbers its batches in order, and after a failed stream
    sends its batches again in order before any new one; a stream ends at the
    first batch refused. So a node that took batch n of a sender has taken
    every lower one, and a batch numbered at most that was taken already.

    Two streams of one sender can carry the same batch at once (the sender
    gave up on the first while its batch still waited for room): a batch is
    claimed by one of them, in the same step as the check, and the other
    waits for the outcome."""

    def __init__(self, senders: int = 10_000, on_overlap: Callable[[], None] = lambda: None) -> None:
        """``on_overlap`` is called when a batch comes while another stream holds its claim."""
        self._senders = senders
        self._on_overlap = on_overlap
        self._highest: OrderedDict[str, int] = OrderedDict()
        self._claimed: set[tuple[str, int]] = set()
        """Batches being handed over by a stream now."""
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def claim(self, sender: str, sequence: int, wait_s: float) -> Iterator[bool]:
        """Yields False for a batch taken already. Else yields True: the
        caller is the one to hand it over, and the batch counts as taken once
        the block ends without an exception (an exception releases the claim:
        a later copy of the batch may be taken). A copy claimed by another
        stream waits up to ``wait_s`` (less if the call's deadline is
        nearer) for that stream's outcome, then raises Overloaded."""
        ends_at = time.monotonic() + deadline.remaining(wait_s)
        key = (sender, sequence)
        with self._changed:
            if key in self._claimed:
                self._on_overlap()
            while key in self._claimed:
                if not self._changed.wait(ends_at - time.monotonic()):
                    raise Overloaded(
                        f"batch {sequence} of sender {sender} is still being taken from another stream"
                    )
            fresh = sequence > self._highest.get(sender, 0)
            if fresh:
                self._claimed.add(key)
        if not fresh:
            yield False
            return
        taken = False
        try:
            yield True
            taken = True
        finally:
            self._settle(sender, sequence, taken)

    def _settle(self, sender: str, sequence: int, taken: bool) -> None:
        with self._changed:
            self._claimed.discard((sender, sequence))
            if taken:
                self._highest[sender] = max(sequence, self._highest.get(sender, 0))
                self._highest.move_to_end(sender)
                if len(self._highest) > self._senders:
                    self._highest.popitem(last=False)
            self._changed.notify_all()


class _Columns(NamedTuple):
    """A RemoteBatch's columns as lists: one conversion per column, since
    reading the containers item by item costs more."""

    workers: list[int]
    streams: list[int]
    string_counts: list[int]
    long_counts: list[int]
    strings: list[str]
    longs: list[int]

    @classmethod
    def of(cls, batch: remote_pb2.RemoteBatch) -> _Columns:
        return cls(
            list(batch.nextWorkerIds),
            list(batch.streamDataIds),
            list(batch.stringCounts),
            list(batch.longCounts),
            list(batch.strings),
            list(batch.longs),
        )

    def add_up(self) -> bool:
        n = len(self.workers)
        return (
            len(self.streams) == len(self.string_counts) == len(self.long_counts) == n
            and sum(self.string_counts) == len(self.strings)
            and sum(self.long_counts) == len(self.longs)
            and min(self.string_counts + self.long_counts, default=0) >= 0
        )


class RemoteService:
    def __init__(
        self,
        workers: Workers,
        types: StreamTypes,
        instruments: Instruments,
        budget: MemoryBudget | None = None,
        wait_s: float = 5.0,
        *,
        limits: TelemetryLimits,
        incarnation: str | None = None,
    ) -> None:
        """A batch waits up to ``wait_s`` for room in ``budget``; items are
        checked against ``limits``. ``incarnation`` names this run of the node
        (the one its membership record names; None picks a new one)."""
        self.incarnation = incarnation or new_incarnation()
        self._limits = limits
        self._workers = workers
        self._types = types
        self._budget = budget
        self._wait_s = wait_s
        overlapping = instruments.counter(
            "skyoap_remote_service_overlapping_batches_total",
            "batches that came while another stream of their sender was taking them, "
            "held until that one was done",
        )
        self._taken = TakenBatches(on_overlap=overlapping.inc)
        self._duplicates = instruments.counter(
            "skyoap_remote_service_duplicate_batches_total",
            "batches sent again after a failed stream that this node had taken already, dropped",
        )
        self._misaddressed = instruments.counter(
            "skyoap_remote_service_misaddressed_streams_total",
            "streams addressed to an earlier run of this node (which may have taken their batches), "
            "answered with this run's incarnation and none of their batches taken",
        )
        self._received = instruments.counter(
            "skyoap_remote_service_received_total", "items taken from other nodes"
        )
        self._rejected = instruments.counter(
            "skyoap_remote_service_rejected_total",
            "items from other nodes refused (unknown ids, undecodable bodies, values no receiver sends)",
        )
        self._log = RateLimitedLog(log)

    def call(
        self, requests: Iterator[remote_pb2.RemoteMessage | Undecodable], context: grpc.ServicerContext
    ) -> remote_pb2.RemoteAck:
        """Hands every good message to its worker; a bad one is counted, logged
        with the sender's address and skipped, and the stream goes on."""
        return self._tally((self._take_message(m) for m in self._each(requests)), context.peer())

    def callBatched(
        self, requests: Iterator[remote_pb2.RemoteBatch | Undecodable], context: grpc.ServicerContext
    ) -> remote_pb2.RemoteAck:
        """As ``call``, with many items in each batch. A batch whose columns do
        not add up is refused whole, as one message."""
        return self._tally(self._take_batches(requests, context.peer()), context.peer())

    def _take_batches(
        self, requests: Iterator[remote_pb2.RemoteBatch | Undecodable], peer: str
    ) -> Iterator[str | None]:
        """Why each item was refused (None: taken), until a batch addressed to
        another incarnation ends the stream."""
        for batch in self._each(requests):
            if isinstance(batch, Undecodable):
                yield batch.describe()
            elif batch.incarnation not in ("", self.incarnation):
                self._misaddressed.inc()
                self._log.warning(
                    "misaddressed",
                    "%s addressed incarnation %s, this is %s: taking none of its stream",
                    peer,
                    batch.incarnation,
                    self.incarnation,
                )
                return
            else:
                yield from self._take_batch(batch)

    def _each(self, requests: Iterator[M]) -> Iterator[M]:
        """The requests of a stream, each handed over before the next is read:
        the memory its decoding reserved is free again then."""
        for request in requests:
            yield request
            if self._budget is not None:
                self._budget.release()

    def _tally(self, reasons: Iterable[str | None], peer: str) -> remote_pb2.RemoteAck:
        """Counts the items taken (reason None) and refused (the reason), logging each refusal."""
        received = rejected = 0
        for reason in reasons:
            if reason is None:
                received += 1
            else:
                rejected += 1
                self._log.warning(reason.split(":")[0], "refused a message from %s: %s", peer, reason)
        self._received.inc(received)
        self._rejected.inc(rejected)
        return remote_pb2.RemoteAck(received=received, rejected=rejected, incarnation=self.incarnation)

    def _take_message(self, message: remote_pb2.RemoteMessage | Undecodable) -> str | None:
        """Gives the message's item to its worker; returns why not, if not."""
        if isinstance(message, Undecodable):
            return message.describe()
        data = message.remoteData
        item = self._decode(
            message.nextWorkerId, message.streamDataId, data.dataStrings, data.dataLongs, clock.now_ms()
        )
        if isinstance(item, str):
            return item
        self._workers.get(message.nextWorkerId).accept(item)
        return None

    def _take_batch(self, batch: remote_pb2.RemoteBatch) -> list[str | None]:
        columns = _Columns.of(batch)
        n = len(columns.workers)
        if not columns.add_up():
            return [f"a batch of {n} items whose columns do not add up"]
        claim = (
            # The stream holding the batch waits up to wait_s for room itself.
            self._taken.claim(batch.senderId, batch.sequence, 2 * self._wait_s)
            if batch.senderId
            else contextlib.nullcontext(True)
        )
        with claim as mine:
            if not mine:
                self._duplicates.inc()
                return [None] * n  # taken the first time: confirmed, not taken again
            return self._hand_over_batch(columns)

    def _hand_over_batch(self, columns: _Columns) -> list[str | None]:
        """Hands the good items to their workers once there is room in the
        budget; returns why each item was refused (None: taken)."""
        workers, streams, string_counts, long_counts, strings, longs = columns
        reasons: list[str | None] = []
        by_worker: dict[int, list[StreamData]] = {}
        sp = lp = 0
        now_ms = clock.now_ms()
        for i in range(len(workers)):
            se, le = sp + string_counts[i], lp + long_counts[i]
            item = self._decode(workers[i], streams[i], strings[sp:se], longs[lp:le], now_ms)
            if isinstance(item, str):
                reasons.append(item)
            else:
                by_worker.setdefault(workers[i], []).append(item)
                reasons.append(None)
            sp, lp = se, le
        if self._budget is None:
            self._hand_over(by_worker)
        else:
            size = sum(admitted_size(items) for items in by_worker.values())
            with self._budget.admission(size, self._wait_s):
                self._hand_over(by_worker)
        return reasons

    def _hand_over(self, by_worker: dict[int, list[StreamData]]) -> None:
        for worker_id, items in by_worker.items():  # one hand-over per worker and batch
            self._workers.get(worker_id).accept_many(items)

    def _decode(
        self,
        next_worker_id: int,
        stream_data_id: int,
        strings: Sequence[str],
        longs: Sequence[int],
        now_ms: int,
    ) -> StreamData | str:
        """The item, or why there is none. Its form is checked as a receiver
        checks it, but not how its minute stands to this node's clock: the
        receiver that took the telemetry judged its times once, and a value
        may be minutes on its way or meet a clock that differs."""
        stream = self._types.get(stream_data_id)
        if stream is None:
            return f"unknown stream data id {stream_data_id}"
        if stream_id_of_worker(next_worker_id) != stream_data_id:
            return f"worker {next_worker_id} does not take stream data {stream_data_id}"
        try:
            self._workers.get(next_worker_id)
            item = stream.from_remote(strings, longs)
            item.check(self._limits, now_ms)
            return item
        except (UnknownWorker, UndecodableData) as e:
            return str(e)
        except Refused as e:
            return f"{e.reason.value}: {e}"


def add_remote_service(
    server: GrpcServer,
    workers: Workers,
    types: StreamTypes,
    instruments: Instruments,
    budget: MemoryBudget,
    wait_s: float,
    limits: TelemetryLimits,
    incarnation: str,
) -> None:
    """Serves the RemoteService on ``server``: L1 results from other nodes,
    as the run ``incarnation`` of this node."""
    server.add(
        remote_pb2.DESCRIPTOR.services_by_name["RemoteService"],
        RemoteService(workers, types, instruments, budget, wait_s, limits=limits, incarnation=incarnation),
        keep_undecodable=True,  # one bad message from a peer must not end its stream
    )
