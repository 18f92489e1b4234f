"""Events reported over SkyWalking's EventService to a real node, on each
storage, and read back as SkyWalking's CLI asks: an upgrade reported at its
start and at its end is one event; a report sent twice is stored once; a
report the node cannot take is refused with why, and the rest of its stream
is kept."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from skyoap.model.metrics import minute_bucket
from skyoap.model.records import EventRecord
from skyoap.proto.skywalking import common_pb2, event_pb2
from skyoap.storage.api import RecordSearch
from skyoap.storage.select import open_storage
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.helpers import eventually
from tests.integration.test_query_traces import ask, minute
from tests.unit.test_query_events import CLI_EVENTS


def event(uuid: str, start: int = 0, end: int = 0, **fields: Any) -> event_pb2.Event:
    source = event_pb2.Source(service="shop", serviceInstance="shop-1")
    given: dict[str, Any] = {"source": source, "name": "Upgrade", "layer": "GENERAL", **fields}
    return event_pb2.Event(uuid=uuid, startTime=start, endTime=end, **given)


def send(address: str, events: list[event_pb2.Event]) -> None:
    with grpc.insecure_channel(address) as channel:
        channel.stream_unary(
            "/skywalking.v3.EventService/collect",
            request_serializer=event_pb2.Event.SerializeToString,
            response_deserializer=common_pb2.Commands.FromString,
        )(iter(events), timeout=60)


def test_events_are_stored_as_reported_and_read_back_merged(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node]
) -> None:
    node = start_node(node_config)
    url = node.query_url
    assert url is not None
    now = int(time.time() * 1000) - 120_000
    upgrade: dict[str, Any] = {
        "message": "Upgrade from 1.0 to 1.1",
        "parameters": {"from": "1.0", "to": "1.1"},
    }
    send(node.address, [event("up", start=now, **upgrade)])
    crash = event("crash", start=now + 5_000, end=now + 9_000, type=event_pb2.Error, name="Crash")
    with pytest.raises(grpc.RpcError) as refused:
        send(
            node.address,
            [
                event("up", end=now + 30_000, **upgrade),
                crash,
                crash,  # sent again: stored once
                event("no-layer", start=now, layer=""),
                event("backwards", start=now + 10, end=now),
                event("unknown-layer", start=now, layer="NOT_A_LAYER"),
            ],
        )
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details() == (
        "3 events refused (1 end_before_start, 1 missing_name, 1 unknown_enum; the first: an event's layer "
        "is empty: events name their layer (GENERAL, ...)); the other 3 were taken"
    )
    window = {"start": minute(now - 60_000), "end": minute(now + 60_000), "step": "MINUTE"}

    def found(**condition: Any) -> list[dict[str, Any]]:
        given = {"paging": {"pageNum": 1, "pageSize": 15}, "time": window, **condition}
        answer = ask(url, CLI_EVENTS, {"condition": given})
        assert "errors" not in answer, answer
        events: list[dict[str, Any]] = answer["data"]["result"]["events"]
        return events

    source = {"service": "shop", "serviceInstance": "shop-1", "endpoint": None}
    expected = [
        {"uuid": "crash", "source": source, "name": "Crash", "type": "Error", "message": "", "parameters": [],
         "startTime": now + 5_000, "endTime": now + 9_000, "layer": "GENERAL"},
        {"uuid": "up", "source": source, "name": "Upgrade", "type": "Normal",
         "message": "Upgrade from 1.0 to 1.1",
         "parameters": [{"key": "from", "value": "1.0"}, {"key": "to", "value": "1.1"}],
         "startTime": now, "endTime": now + 30_000, "layer": "GENERAL"},
    ]  # fmt: skip
    eventually(lambda: found() == expected)
    # Three reports stored, one a row: the crash sent twice is stored once.
    storage = open_storage(node_config.storage)
    try:
        window_rows = RecordSearch(first_bucket=minute_bucket(now), last_bucket=minute_bucket(now + 60_000))
        stored = sorted(r.event_id for r in storage.records.search(EventRecord, window_rows))
    finally:
        storage.close()
    assert stored == [f"crash/{now + 5_000}/{now + 9_000}", f"up/0/{now + 30_000}", f"up/{now}/0"]
    assert found(uuid="up", time=None) == expected[1:]
    assert found(type="Error") == expected[:1]
    assert found(source={"service": "stock"}) == []
