"""What L2 and the record workers could not store by their close is spilled
to disk and stored once at a later start: whatever landed before the close,
whatever a start killed while storing it had written."""

from __future__ import annotations

import random
import stat
from pathlib import Path

import pytest

from skyoap.aggregator.metrics import LastRound, MetricsPersistentWorker
from skyoap.aggregator.records import RecordPersistentWorker
from skyoap.model.metrics import Downsampling, ServiceMetrics
from skyoap.model.records import Record, SegmentRecord
from skyoap.model.stream import Text
from skyoap.runtime.batching import BatchPolicy
from skyoap.runtime.budget import memory_size
from skyoap.runtime.buffer import BufferSpec, BufferStrategy
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.pools import DrainPool
from skyoap.runtime.spill import SpillDir
from skyoap.storage.api import StorageUnavailable
from tests.unit.fakes import MemoryMetricsDAO
from tests.unit.test_metrics import delta, expected_calls, stored_calls, take

NAME = "service_metrics_l2"
STORAGE = "memory:test"


def worker(
    dao: MemoryMetricsDAO, spill: Path | None, instruments: Instruments | None = None
) -> MetricsPersistentWorker:
    instruments = instruments or Instruments()
    return MetricsPersistentWorker(
        1,
        NAME,
        ServiceMetrics,
        dao,
        DrainPool("test", 1, instruments),
        instruments,
        BufferSpec(1, 100, BufferStrategy.BLOCKING),
        max_held_bytes=10**9,
        spill_dir=SpillDir(spill, STORAGE) if spill else None,
    )


def close(w: MetricsPersistentWorker) -> None:
    """What the node's close does: interrupt, then the round at close."""
    w.interrupt()
    w.persist(LastRound())


def killed(w: MetricsPersistentWorker) -> None:
    """The process of ``w`` dies: its spill files' locks go with it."""
    for replay in w._spilled.replays or ():
        replay.spill.release()


def spills(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.spill.json"))


def assert_exact(dao: MemoryMetricsDAO, sent: list[ServiceMetrics]) -> None:
    for level in Downsampling:
        assert stored_calls(dao, level) == expected_calls(sent, level), level


def test_what_storage_did_not_take_at_close_is_stored_once_at_the_next_start(tmp_path: Path) -> None:
    dao = MemoryMetricsDAO()
    instruments = Instruments()
    first = worker(dao, tmp_path, instruments)
    sent = [delta(202611211905, "shop", 10), delta(202611211906, "cart", 20, 30)]
    take(first, sent)
    dao.down = set(Downsampling)
    close(first)
    (path,) = spills(tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert instruments.value("skyoap_spilled_total", worker=NAME, reason="storage_failed") == 6  # 2 a level
    assert instruments.value("skyoap_worker_dropped_total", worker=NAME, reason="closing") == 0
    dao.down = set()
    second = worker(dao, tmp_path)
    second.persist()
    assert_exact(dao, sent)
    assert spills(tmp_path) == []
    second.persist()  # nothing is stored twice
    assert_exact(dao, sent)


def test_a_write_that_landed_before_the_close_is_not_added_again(tmp_path: Path) -> None:
    """The last round before the close writes every level, the answers are
    lost (the writes landed), then storage stops answering."""
    dao = MemoryMetricsDAO()
    first = worker(dao, tmp_path)
    sent = [delta(202611211905, "shop", 10), delta(202611211905, "cart", 20)]
    take(first, sent)
    dao.lands = {level: 2 for level in Downsampling}
    first.persist()
    more = [delta(202611211905, "shop", 40)]  # waits behind the unconfirmed shop rows
    take(first, more)
    dao.down = set(Downsampling)
    close(first)
    dao.down = set()
    second = worker(dao, tmp_path)
    for _ in range(2):  # the unconfirmed ones, then those behind them
        second.persist()
    assert_exact(dao, sent + more)
    assert spills(tmp_path) == []


class Killed(BaseException):
    """The process dies: nothing after this runs."""


class DyingDAO(MemoryMetricsDAO):
    """Its next write of ``dies_at`` lands whole, then the process dies."""

    dies_at: Downsampling | None = None

    def put(self, model, level, rows):  # type: ignore[no-untyped-def]
        outcome = super().put(model, level, rows)
        if level is self.dies_at:
            self.dies_at = None
            raise Killed
        return outcome


@pytest.mark.parametrize("level", list(Downsampling))
def test_a_start_killed_while_storing_a_spill_leaves_it_for_the_next_once(
    tmp_path: Path, level: Downsampling
) -> None:
    dao = DyingDAO()
    first = worker(dao, tmp_path)
    sent = [delta(202611211905, "shop", 10), delta(202611211906, "cart", 20)]
    take(first, sent)
    dao.down = set(Downsampling)
    close(first)
    dao.down = set()
    dao.dies_at = level
    second = worker(dao, tmp_path)
    with pytest.raises(Killed):
        second.persist()
    killed(second)
    third = worker(dao, tmp_path)
    third.persist()
    assert_exact(dao, sent)
    assert spills(tmp_path) == []


def test_two_starts_on_one_directory_never_store_one_spill_both(tmp_path: Path) -> None:
    dao = MemoryMetricsDAO()
    first = worker(dao, tmp_path)
    sent = [delta(202611211905, "shop", 10)]
    take(first, sent)
    dao.down = set(Downsampling)
    close(first)
    dao.down = set()
    a, b = worker(dao, tmp_path), worker(dao, tmp_path)
    a.persist()  # takes the spill and stores it
    b.persist()  # found it taken
    b.persist()
    assert_exact(dao, sent)


def test_a_spill_of_another_storage_is_left_alone(tmp_path: Path) -> None:
    dao, other = MemoryMetricsDAO(), MemoryMetricsDAO()
    first = worker(dao, tmp_path)
    take(first, [delta(202611211905, "shop", 10)])
    dao.down = set(Downsampling)
    close(first)
    stranger = MetricsPersistentWorker(
        1, NAME, ServiceMetrics, other, DrainPool("t", 1, Instruments()), Instruments(),
        BufferSpec(1, 100, BufferStrategy.BLOCKING), max_held_bytes=10**9,
        spill_dir=SpillDir(tmp_path, "memory:other"),
    )  # fmt: skip
    stranger.persist()
    assert stored_calls(other, Downsampling.MINUTE) == {}
    assert len(spills(tmp_path)) == 1


def test_without_a_spill_directory_what_is_left_at_close_is_counted_as_dropped(tmp_path: Path) -> None:
    dao = MemoryMetricsDAO()
    instruments = Instruments()
    first = worker(dao, None, instruments)
    take(first, [delta(202611211905, "shop", 10), delta(202611211906, "cart", 20)])
    dao.down = set(Downsampling)
    close(first)
    # Each level's two rows: the storage failure of the minute level stops the others waiting on it.
    assert instruments.value("skyoap_worker_dropped_total", worker=NAME, reason="closing") == 6


def test_starts_and_closes_through_random_faults_add_each_delta_once(tmp_path: Path) -> None:
    """Forty rounds of one node that storage fails in every way, closed
    (storage down, or it dies) at random and started again on its spills."""
    rnd = random.Random(20261124)
    dao = MemoryMetricsDAO()
    w = worker(dao, tmp_path)
    sent: list[ServiceMetrics] = []
    for _ in range(40):
        batch = [
            delta(
                202611211900 + rnd.randrange(3) * 100 + rnd.randrange(60),
                rnd.choice("abc"),
                rnd.randrange(99),
            )
            for _ in range(rnd.randrange(1, 5))
        ]
        sent += batch
        take(w, batch)
        dao.down = {lvl for lvl in Downsampling if rnd.random() < 0.2}
        dao.lands = {lvl: rnd.randrange(4) for lvl in Downsampling if rnd.random() < 0.3}
        w.persist()
        if rnd.random() < 0.3:
            dao.down = {lvl for lvl in Downsampling if rnd.random() < 0.5}
            close(w)
            killed(w)
            w = worker(dao, tmp_path)
    dao.down, dao.lands = set(), {}
    for _ in range(3):
        w.persist()
    assert_exact(dao, sent)
    assert spills(tmp_path) == []


class MemoryRecordDAO:
    """Records by key, as the real storages write them; ``down`` refuses every write."""

    def __init__(self) -> None:
        self.rows: dict[str, Record] = {}
        self.down = False

    def insert(self, model, items, positions=None):  # type: ignore[no-untyped-def]
        if self.down:
            raise StorageUnavailable("storage is down")
        self.rows.update({i.key(): i for i in items})
        return {}


def record_worker(
    dao: MemoryRecordDAO, spill: Path | None, instruments: Instruments
) -> RecordPersistentWorker:
    return RecordPersistentWorker(
        2, "segment_records", SegmentRecord, dao,  # type: ignore[arg-type]
        DrainPool("test", 1, instruments), instruments, BufferSpec(1, 100, BufferStrategy.BLOCKING),
        BatchPolicy(max_items=2), spill_dir=SpillDir(spill, STORAGE) if spill else None,
    )  # fmt: skip


def segment_records(n: int) -> list[Record]:
    return [
        SegmentRecord(
            time_bucket=202611211905, segment_id=f"s{i}", trace_id=f"t{i}", service="shop", instance="i",
            endpoint="/", start_time=1, end_time=2, latency_ms=1, is_error=False, spans=1, data=Text("AA=="),
        )
        for i in range(n)
    ]  # fmt: skip


def test_records_storage_did_not_take_at_close_are_stored_at_the_next_start(tmp_path: Path) -> None:
    dao, instruments = MemoryRecordDAO(), Instruments()
    first = record_worker(dao, tmp_path, instruments)
    first.interrupt_retries()  # the node closes
    dao.down = True
    first.handle_batch(segment_records(5))  # what the drain of its queue hands it
    first.spill()
    assert instruments.value("skyoap_spilled_total", worker="segment_records", reason="storage_failed") == 5
    assert instruments.value("skyoap_worker_dropped_total", worker="segment_records", reason="closing") == 0
    dao.down = False
    second = record_worker(dao, tmp_path, Instruments())
    second.apply_spilled()
    assert sorted(dao.rows) == [f"s{i}" for i in range(5)]
    assert spills(tmp_path) == []


def test_without_a_spill_directory_records_left_at_close_are_counted_as_dropped() -> None:
    dao, instruments = MemoryRecordDAO(), Instruments()
    first = record_worker(dao, None, instruments)
    first.interrupt_retries()
    dao.down = True
    first.handle_batch(segment_records(5))
    first.spill()
    assert instruments.value("skyoap_worker_dropped_total", worker="segment_records", reason="closing") == 5


class FailingAfter(MemoryRecordDAO):
    """Takes ``bulks`` bulks, then is down."""

    def __init__(self, bulks: int) -> None:
        super().__init__()
        self.bulks = bulks

    def insert(self, model, items, positions=None):  # type: ignore[no-untyped-def]
        self.down = self.bulks == 0
        self.bulks -= 1
        return super().insert(model, items, positions)


def test_spilled_records_are_held_until_stored_and_each_bulk_counted_once(tmp_path: Path) -> None:
    first = record_worker(MemoryRecordDAO(), tmp_path, Instruments())
    first.interrupt_retries()
    first._keep_unstored(segment_records(5))
    first.spill()
    dao, instruments = FailingAfter(bulks=1), Instruments()  # 2 of 5 stored, then storage fails
    second = record_worker(dao, tmp_path, instruments)
    second.apply_spilled()
    assert sorted(dao.rows) == ["s0", "s1"]
    assert instruments.value("skyoap_spill_applied_total", worker="segment_records") == 2
    assert second.held.value == memory_size(segment_records(5)[2:])
    dao.down, dao.bulks = False, 10
    second.apply_spilled()
    assert sorted(dao.rows) == [f"s{i}" for i in range(5)]
    assert instruments.value("skyoap_spill_applied_total", worker="segment_records") == 5
    assert (second.held.value, spills(tmp_path)) == (0, [])


def test_spilled_metrics_count_as_held_until_stored(tmp_path: Path) -> None:
    dao = MemoryMetricsDAO()
    first = worker(dao, tmp_path)
    take(first, [delta(202611211905, "shop", 10)])
    dao.down = set(Downsampling)
    close(first)
    second = worker(dao, tmp_path)
    second.persist()  # takes the spill; storage does not take it yet
    assert second.held.value == 3 * memory_size([delta(202611211905, "shop", 10)])  # a row a level
    dao.down = set()
    second.persist()
    assert (second.held.value, spills(tmp_path)) == (0, [])


def test_records_a_write_still_under_way_fails_after_the_spill_are_counted_as_dropped(tmp_path: Path) -> None:
    dao, instruments = MemoryRecordDAO(), Instruments()
    first = record_worker(dao, tmp_path, instruments)
    first.interrupt_retries()
    dao.down = True
    first.handle_batch(segment_records(2))
    first.spill()
    first.handle_batch(segment_records(3))  # the write that outlasted the grace
    assert instruments.value("skyoap_spilled_total", worker="segment_records", reason="storage_failed") == 2
    assert instruments.value("skyoap_worker_dropped_total", worker="segment_records", reason="closing") == 3
