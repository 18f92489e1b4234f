"""What a node holds for storage when it stops gracefully: storage that is
slow to take it (a timed-out bulk on a busy machine) is asked again within
the node's grace, not given up at once."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from skyoap.model.metrics import Downsampling, ServiceMetrics
from skyoap.model.records import SegmentRecord
from skyoap.model.stream import Stage, Text, worker_id
from skyoap.model.topics import Position
from skyoap.remote.cluster import Role
from skyoap.runtime.budget import MemoryBudget
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.worker import Workers
from skyoap.storage.api import R, StorageUnavailable
from skyoap.wiring.chains import MetricsStreamProcessor, RecordStreamProcessor
from skyoap.wiring.config import NodeConfig
from tests.unit.fakes import MemoryMetricsDAO


class SlowRecordDAO:
    """Times out the first ``failures`` bulks, as a busy Elasticsearch does,
    then stores what it is given by key."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.stored: dict[str, object] = {}
        self.tried = threading.Event()
        """Set once the first bulk was tried."""

    def install(self, models: Sequence[type[R]]) -> None:
        pass

    def insert(
        self, model: type[R], items: Sequence[R], positions: Sequence[Position] | None = None
    ) -> dict[str, str]:
        self.tried.set()
        if self.failures:
            self.failures -= 1
            raise StorageUnavailable(
                "Elasticsearch is unreachable while writing records: Connection timed out"
            )
        self.stored.update((item.key(), item) for item in items)
        return {}

    def query(self, *args: object, **kwargs: object) -> list[R]:
        raise NotImplementedError

    def search(self, *args: object, **kwargs: object) -> list[R]:
        raise NotImplementedError

    def tag_values(self, *args: object, **kwargs: object) -> list[str]:
        raise NotImplementedError

    def close(self) -> None:
        pass


def test_records_held_at_a_graceful_stop_are_asked_again_within_the_grace() -> None:
    dao = SlowRecordDAO(failures=3)
    instruments = Instruments()
    config = NodeConfig()
    records = RecordStreamProcessor(config, dao, Workers(), instruments, MemoryBudget(64 << 20, instruments))
    assert records.l2 is not None
    records.l2.start()
    record = SegmentRecord(
        time_bucket=202611240700, segment_id="s1", trace_id="t1", service="shop", instance="shop-1",
        endpoint="/a", start_time=1, end_time=5, latency_ms=4, is_error=False, spans=1, data=Text(""),
    )  # fmt: skip
    records.entry(SegmentRecord).accept(record)
    assert dao.tried.wait(10)
    records.l2.close(15)  # the stop begins while the first bulk waits to be tried again
    assert list(dao.stored) == [record.key()]
    dropped = instruments.value("skyoap_worker_dropped_total", worker="segment_records", reason="closing")
    assert dropped == 0


def test_metrics_an_aggregator_holds_at_a_graceful_stop_are_written_again_within_the_grace() -> None:
    """The last round's write of the hour rows times out (nothing lands): the
    stopping aggregator writes them again rather than exit holding them."""
    dao = MemoryMetricsDAO()
    instruments = Instruments()
    config = NodeConfig().with_options(role=Role.AGGREGATOR, metrics_persist_interval_s=3600)
    workers = Workers()
    metrics = MetricsStreamProcessor(
        config, dao, workers, None, instruments, MemoryBudget(64 << 20, instruments)
    )
    assert metrics.l2 is not None
    metrics.l2.start()
    dao.lands[Downsampling.HOUR] = 0
    row = ServiceMetrics(time_bucket=202611240700, service="shop", calls=3)
    workers.get(worker_id(ServiceMetrics, Stage.L2)).accept(row)
    metrics.l2.close(15)
    assert {lv: dao.values(ServiceMetrics, lv) for lv in Downsampling} == {
        Downsampling.MINUTE: {row.key(): row},
        Downsampling.HOUR: {row.downsampled(Downsampling.HOUR).key(): row.downsampled(Downsampling.HOUR)},
        Downsampling.DAY: {row.downsampled(Downsampling.DAY).key(): row.downsampled(Downsampling.DAY)},
    }
