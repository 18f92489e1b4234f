from __future__ import annotations

import threading

from skyoap.runtime.buffer import BufferQueue, BufferStrategy
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.pools import DrainPool


class Recorder:
    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.lock = threading.Lock()
        self.seen = threading.Condition(self.lock)

    def handle_batch(self, batch: list[int]) -> None:
        with self.seen:
            self.batches.append(batch)
            self.seen.notify_all()

    def wait_for(self, count: int, timeout_s: float = 5) -> list[int]:
        with self.seen:
            self.seen.wait_for(lambda: sum(len(b) for b in self.batches) >= count, timeout_s)
            return [i for b in self.batches for i in b]


def test_one_pool_drains_the_queues_of_several_workers_in_order() -> None:
    instruments = Instruments()
    pool = DrainPool("P", 1, instruments)
    q1: BufferQueue[int] = BufferQueue("q1", 1, 100, BufferStrategy.BLOCKING, instruments)
    q2: BufferQueue[int] = BufferQueue("q2", 1, 100, BufferStrategy.BLOCKING, instruments)
    r1, r2 = Recorder(), Recorder()
    pool.register(q1, r1)
    pool.register(q2, r2)
    pool.start()
    for i in range(50):
        q1.produce(i)
        q2.produce(100 + i)
    assert r1.wait_for(50) == list(range(50))
    assert r2.wait_for(50) == list(range(100, 150))
    assert instruments.value("skyoap_pool_depth", pool="P") == 0
    pool.close()


def test_close_drains_what_was_queued_before() -> None:
    instruments = Instruments()
    pool = DrainPool("P", 2, instruments)
    q: BufferQueue[int] = BufferQueue("q", 2, 1000, BufferStrategy.BLOCKING, instruments)
    r = Recorder()
    pool.register(q, r)
    for i in range(500):
        q.produce(i)
    pool.start()
    pool.close()
    assert sorted(r.wait_for(500, timeout_s=0)) == list(range(500))


def test_a_failing_batch_is_counted_and_the_pool_keeps_going() -> None:
    instruments = Instruments()
    pool = DrainPool("P", 1, instruments)
    q: BufferQueue[int] = BufferQueue("q", 1, 100, BufferStrategy.BLOCKING, instruments)
    r = Recorder()

    class FailsOnce:
        failed = False

        def handle_batch(self, batch: list[int]) -> None:
            if not self.failed:
                self.failed = True
                raise RuntimeError("boom")
            r.handle_batch(batch)

    pool.register(q, FailsOnce())
    pool.start()
    q.produce(1)
    while instruments.value("skyoap_pool_errors_total", pool="P") == 0:
        threading.Event().wait(0.01)
    q.produce(2)
    assert r.wait_for(1) == [2]
    assert instruments.value("skyoap_pool_errors_total", pool="P") == 1
    pool.close()
