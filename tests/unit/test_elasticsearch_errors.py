"""What a write to Elasticsearch holds: its documents at their size, and
once it failed, nothing left in a cycle for the collector to find later
(against a local socket that takes connections and never answers)."""

from __future__ import annotations

import gc
import socket
import sys
import threading
import tracemalloc
from collections.abc import Iterator

import pytest

from skyoap.model.records import SegmentRecord
from skyoap.model.stream import Text
from skyoap.storage.api import StorageUnavailable
from skyoap.storage.elasticsearch.client import ElasticsearchClient
from skyoap.storage.elasticsearch.records import ElasticsearchRecordDAO


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A server that takes connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    taken: list[socket.socket] = []

    def accept() -> None:
        try:
            while True:
                taken.append(server.accept()[0])
        except OSError:  # closed
            return

    thread = threading.Thread(target=accept, name="silent-es", daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    server.shutdown(socket.SHUT_RDWR)  # wakes the accept
    server.close()
    for s in taken:
        s.close()
    thread.join(5)


def record(n: int) -> SegmentRecord:
    return SegmentRecord(
        segment_id=f"s{n}", trace_id="t", service="shop", instance="i", endpoint="/", start_time=1,
        end_time=2, latency_ms=1, is_error=False, spans=1, data=Text("x" * 1000), time_bucket=202601010000,
    )  # fmt: skip


def test_a_timed_out_bulk_write_leaves_no_cycle_holding_its_rows(silent_url: str) -> None:
    dao = ElasticsearchRecordDAO(ElasticsearchClient(silent_url, "p", request_timeout_s=0.3))
    records = [record(n) for n in range(100)]
    gc.collect()
    gc.disable()
    try:
        with pytest.raises(StorageUnavailable, match="unreachable while writing 100 segment records"):
            dao.insert(SegmentRecord, records)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        # urllib3 keeps its error in a frame of the error's own traceback; the
        # frames of the write (its rows, its body) must not stay with it.
        frames = [f"{o.f_code.co_name}" for o in gc.garbage if type(o).__name__ == "frame"]
        assert frames == []
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def test_a_document_written_holds_no_more_memory_than_its_size() -> None:
    serializer = ElasticsearchClient("http://127.0.0.1:9", "p").es.transport.serializers.get_serializer(
        "application/json"
    )
    row = record(0).to_row()
    tracemalloc.start()
    try:
        lines = [serializer.dumps(row) for _ in range(100)]
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held <= 1.1 * sum(sys.getsizeof(line) for line in lines)
