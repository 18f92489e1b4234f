from __future__ import annotations

import threading
import time

import pytest

from skyoap.runtime.buffer import BufferClosed, BufferFull, BufferQueue, BufferStrategy
from skyoap.runtime.instruments import Instruments


def make(strategy: BufferStrategy, channels: int = 1, size: int = 3) -> tuple[BufferQueue[int], Instruments]:
    instruments = Instruments()
    return BufferQueue("q", channels, size, strategy, instruments), instruments


def test_if_possible_drops_and_counts_what_does_not_fit() -> None:
    q, instruments = make(BufferStrategy.IF_POSSIBLE, channels=1, size=3)
    accepted = [q.produce(i) for i in range(5)]
    assert accepted == [True, True, True, False, False]
    assert instruments.value("skyoap_buffer_dropped_total", queue="q") == 2
    assert instruments.value("skyoap_buffer_depth", queue="q") == 3
    assert q.drain(0, 10) == [0, 1, 2]


def test_blocking_waits_for_room_then_keeps_every_item() -> None:
    q, instruments = make(BufferStrategy.BLOCKING, channels=1, size=2)
    q.produce(1)
    q.produce(2)
    done = threading.Event()

    def produce_third() -> None:
        q.produce(3)
        done.set()

    t = threading.Thread(target=produce_third)
    t.start()
    assert not done.wait(0.2), "a full blocking queue must make the producer wait"
    assert q.drain(0, 1) == [1]
    assert done.wait(5)
    t.join()
    assert q.drain(0, 10) == [2, 3]
    assert instruments.value("skyoap_buffer_dropped_total", queue="q") == 0


def test_drain_takes_batches_oldest_first_up_to_the_limit() -> None:
    q, _ = make(BufferStrategy.BLOCKING, channels=1, size=100)
    for i in range(10):
        q.produce(i)
    assert q.drain(0, 4) == [0, 1, 2, 3]
    assert q.drain(0, 4) == [4, 5, 6, 7]
    assert q.drain(0, 4) == [8, 9]
    assert q.drain(0, 4) == []


def test_items_are_spread_over_channels_round_robin() -> None:
    q, _ = make(BufferStrategy.BLOCKING, channels=3, size=10)
    for i in range(7):
        q.produce(i)
    assert [q.drain(c, 10) for c in range(3)] == [[0, 3, 6], [1, 4], [2, 5]]
    assert q.capacity == 30


def test_a_blocking_queue_with_a_wait_limit_gives_up_with_buffer_full() -> None:
    q: BufferQueue[int] = BufferQueue("q", 1, 1, BufferStrategy.BLOCKING, Instruments(), max_wait_s=0.2)
    q.produce(1)
    with pytest.raises(
        BufferFull, match=r"buffer queue q stayed full for as long as the call could wait \(at most 0\.2 s\)"
    ):
        q.produce(2)
    with pytest.raises(BufferFull):
        q.produce_many([3, 4])
    assert q.drain(0, 10) == [1]


def test_a_closed_queue_refuses_items_but_keeps_what_it_holds() -> None:
    q, _ = make(BufferStrategy.BLOCKING)
    q.produce(1)
    q.close()
    with pytest.raises(BufferClosed):
        q.produce(2)
    assert q.drain(0, 10) == [1]


def test_a_producer_blocked_on_a_full_queue_is_released_by_close() -> None:
    q, _ = make(BufferStrategy.BLOCKING, size=1)
    q.produce(1)
    errors: list[BaseException] = []

    def blocked() -> None:
        try:
            q.produce(2)
        except BufferClosed as e:
            errors.append(e)

    t = threading.Thread(target=blocked)
    t.start()
    time.sleep(0.1)
    q.close()
    t.join(5)
    assert len(errors) == 1
    assert "closed" in str(errors[0])


def test_the_queue_wakes_its_consumer_on_data() -> None:
    q, _ = make(BufferStrategy.BLOCKING)
    calls = []
    q.on_data = lambda: calls.append(1)
    q.produce(1)
    q.produce(2)
    assert len(calls) == 2


def test_produce_many_keeps_order_and_drops_what_does_not_fit_under_if_possible() -> None:
    q, instruments = make(BufferStrategy.IF_POSSIBLE, channels=1, size=4)
    assert q.produce_many([1, 2, 3]) == 3
    assert q.produce_many([4, 5, 6]) == 1
    assert instruments.value("skyoap_buffer_dropped_total", queue="q") == 2
    assert q.drain(0, 10) == [1, 2, 3, 4]


def test_produce_many_waits_for_room_under_blocking() -> None:
    q, _ = make(BufferStrategy.BLOCKING, channels=1, size=3)
    kept: list[int] = []
    t = threading.Thread(target=lambda: kept.append(q.produce_many(list(range(7)))))
    t.start()
    seen: list[int] = []
    while len(seen) < 7:
        seen += q.drain(0, 2)
        time.sleep(0.01)
    t.join(5)
    assert seen == list(range(7))
    assert kept == [7]
