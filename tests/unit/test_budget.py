"""The memory budget: a call is admitted whole or refused whole, and what is
admitted is counted until it leaves the node's memory."""

from __future__ import annotations

import threading

import pytest

from skyoap.model.metrics import ServiceMetrics
from skyoap.model.records import LogRecord
from skyoap.model.stream import Words
from skyoap.receiver.intake import Sinks
from skyoap.runtime.budget import ITEM_OVERHEAD_BYTES, HeldBytes, MemoryBudget, Overloaded, memory_size
from skyoap.runtime.buffer import BufferQueue, BufferStrategy
from skyoap.runtime.instruments import Instruments
from tests.unit.fakes import Collect


def log_line(n: int, body: str = "x" * 100) -> LogRecord:
    return LogRecord(
        time_bucket=202611221900, log_id=f"log-{n}", timestamp=1, service="shop", instance="shop-1",
        endpoint="", trace_id="", segment_id="", span_id=0, content_type="text", content=Words(body), tags={},
    )  # fmt: skip


def test_an_admitted_queue_takes_every_item_and_counts_its_bytes() -> None:
    budget = MemoryBudget(10**6, Instruments())
    worker = HeldBytes()
    budget.hold(worker)
    queue: BufferQueue[LogRecord] = BufferQueue(
        "q", 2, 1, BufferStrategy.ADMITTED, Instruments(), part_of=worker
    )
    lines = [log_line(n) for n in range(5)]
    assert queue.produce_many(lines) == 5  # far past its 2 x 1 items: room was admitted upstream
    assert queue.produce(lines[0])  # into the other channel
    assert (queue.held.value, worker.value, budget.held()) == (memory_size(lines + lines[:1]),) * 3
    assert memory_size(lines[:1]) == lines[0].size_hint() + ITEM_OVERHEAD_BYTES
    assert queue.drain(0, 3) == lines[:3]
    assert (queue.held.value, budget.held()) == (memory_size(lines[3:] + lines[:1]),) * 2
    assert queue.drain(1, 10) == lines[:1]  # a channel emptied counts nothing
    assert queue.drain(0, 10) == lines[3:]
    assert (queue.held.value, budget.held()) == (0, 0)
    blocking: BufferQueue[LogRecord] = BufferQueue("b", 1, 1, BufferStrategy.BLOCKING, Instruments())
    blocking.produce(lines[0])
    assert blocking.held.value == 0


def test_a_call_is_taken_whole_or_refused_whole() -> None:
    instruments = Instruments()
    lines = [log_line(n) for n in range(10)]
    budget = MemoryBudget(memory_size(lines) * 2, instruments)
    held = HeldBytes()
    budget.hold(held)
    sink: Collect[LogRecord] = Collect()
    sinks = Sinks(lambda m: sink, lambda m: sink, budget, wait_s=0.05)  # type: ignore[arg-type, return-value]

    sinks.take(lines, ())
    assert len(sink.items) == 10
    held.set(memory_size(lines) + 1)  # what was taken is still held: one more call does not fit
    with pytest.raises(Overloaded, match=r"the node holds \d+ bytes of telemetry, and \d+ more"):
        sinks.take(lines, ())
    assert len(sink.items) == 10  # nothing of the refused call was handed on
    assert instruments.value("skyoap_memory_shed_total") == 1
    assert instruments.value("skyoap_memory_held_bytes") == held.value

    # A call waiting for room is taken as soon as the room is there: woken
    # when it comes, never later than the wait allows.
    threading.Timer(0.1, lambda: held.set(0)).start()
    Sinks(sinks.metrics, sinks.records, budget, wait_s=600.0).take(lines, ())
    assert len(sink.items) == 20
    assert instruments.value("skyoap_memory_waited_total") == 2
    assert budget.held() == 0  # the admission's count ended with it


def test_a_call_larger_than_the_whole_budget_is_refused_at_once() -> None:
    budget = MemoryBudget(1000, Instruments())
    sinks = Sinks(lambda m: Collect(), lambda m: Collect(), budget, wait_s=60.0)
    with pytest.raises(Overloaded, match="more than the node's whole memory budget"):
        sinks.take([log_line(1, "y" * 2000)], ())
    with budget.call(), pytest.raises(Overloaded, match="send less per call"):
        budget.reserve(1001, wait_s=60.0)


def test_what_calls_hold_is_counted_until_each_ends_and_compared_with_what_is_left() -> None:
    instruments = Instruments()
    budget = MemoryBudget(1000, instruments)
    queued = HeldBytes()
    queued.add(300)
    budget.hold(queued)
    budget.reserve(10_000, wait_s=0)  # outside a call: nothing to count
    assert budget.held() == 300
    first_done, second_tried = threading.Event(), threading.Event()
    outcome: list[str] = []

    def another_call() -> None:
        with budget.call():
            try:
                budget.reserve(400, wait_s=0)  # 300 queued + 400 of the first call: 300 left
            except Overloaded:
                outcome.append("refused")
            second_tried.set()
            first_done.wait(5)
            budget.reserve(400, wait_s=0)  # the first call ended: its 400 are free again
            outcome.append("taken")
            assert budget.held() == 700

    with budget.call():
        budget.reserve(300, wait_s=0)
        budget.reserve(100, wait_s=0)
        assert budget.held() == 700
        other = threading.Thread(target=another_call)
        other.start()
        assert second_tried.wait(5)
    first_done.set()
    other.join(5)
    assert outcome == ["refused", "taken"]
    assert budget.held() == 300
    assert instruments.value("skyoap_memory_shed_total") == 1


def test_metrics_are_sized_by_their_strings_and_numbers() -> None:
    m = ServiceMetrics(time_bucket=202611221900, service="shop", calls=1, histogram=(1, 1))
    assert memory_size([m, m]) == 2 * (m.size_hint() + ITEM_OVERHEAD_BYTES)


def test_a_stream_that_hands_each_message_over_frees_its_reservation_each_time() -> None:
    budget = MemoryBudget(1000, Instruments())
    with budget.call():
        for _ in range(50):  # 50 x 600 bytes: far past the budget, had they stayed reserved
            budget.reserve(600, wait_s=0)
            assert budget.held() == 600
            budget.release()
        assert budget.held() == 0
    assert budget.held() == 0


def test_a_second_wait_of_a_call_ends_when_its_first_would_have() -> None:
    budget = MemoryBudget(1000, Instruments())
    queued = HeldBytes()
    queued.set(900)
    budget.hold(queued)
    with budget.call():
        with pytest.raises(Overloaded):
            budget.reserve(200, wait_s=0.05)  # its wait ends
        queued.set(0)
        budget.reserve(200, wait_s=60.0)  # room: no wait
        queued.set(900)
        threading.Timer(0.3, lambda: queued.set(0)).start()
        # The call waited its wait already: refused before the room comes.
        with pytest.raises(Overloaded), budget.admission(200, wait_s=60.0):
            pass
    with budget.call():
        queued.set(900)
        threading.Timer(0.3, lambda: queued.set(0)).start()
        with budget.admission(200, wait_s=60.0):  # another call waits its own wait
            pass
