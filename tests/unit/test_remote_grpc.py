"""The remote hop over gRPC, in process on port 0: the client streams, the
RemoteService hands items to the worker they name and refuses bad messages."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace

import grpc
import pytest

from skyoap.deploy.servers import free_port
from skyoap.edge.auth import AgentToken
from skyoap.edge.server import GrpcServer
from skyoap.model import sketch
from skyoap.model.inventory import (
    INVENTORY_TYPES,
    EndpointInventory,
    ServiceInstanceInventory,
    ServiceInventory,
)
from skyoap.model.metrics import (
    METRICS_TYPES,
    MeterMetrics,
    ServiceMetrics,
    minute_bucket,
)
from skyoap.model.stream import Stage, StreamData, StreamTypes, worker_id
from skyoap.proto import remote_pb2
from skyoap.receiver.config import LimitsConfig
from skyoap.remote.grpc_client import CALL, CALL_BATCHED, GrpcRemoteClient, encode, encode_batch
from skyoap.remote.service import RemoteService
from skyoap.runtime.budget import MemoryBudget
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.retry import RetryPolicy
from skyoap.runtime.worker import Workers
from tests.unit.fakes import Collect, FillsTheBudget

L2 = worker_id(ServiceInventory, Stage.L2)
LIMITS = LimitsConfig().items()


def wait_for(check, timeout_s: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.fixture
def target() -> Iterator[tuple[str, Collect[StreamData], Instruments]]:
    workers = Workers()
    collect = Collect[StreamData](L2)
    workers.register(collect)
    instruments = Instruments()
    server = GrpcServer("127.0.0.1", 0, max_message_bytes=1 << 22)
    server.add(
        remote_pb2.DESCRIPTOR.services_by_name["RemoteService"],
        RemoteService(workers, StreamTypes(INVENTORY_TYPES), instruments, limits=LIMITS),
        keep_undecodable=True,
    )
    server.start()
    yield f"127.0.0.1:{server.port}", collect, instruments
    server.close(0)


def test_items_pushed_to_a_client_reach_the_named_worker_in_order(
    target: tuple[str, Collect[StreamData], Instruments],
) -> None:
    address, collect, server_instruments = target
    instruments = Instruments()
    client = GrpcRemoteClient(address, instruments, buffer_size=5000, give_back=lambda items: None)
    client.start()
    items = [ServiceInventory(name=f"s{i}", heartbeat_time=i, properties={"i": str(i)}) for i in range(3000)]
    for item in items:
        client.push(L2, item)
    wait_for(lambda: len(collect.items) == 3000)
    assert collect.items == items
    client.close(5)
    assert instruments.value("skyoap_remote_sent_total", target=address) == 3000
    assert instruments.value("skyoap_remote_unconfirmed_total", target=address) == 0
    assert server_instruments.value("skyoap_remote_service_received_total") == 3000


def test_bad_messages_are_counted_and_the_stream_goes_on(
    target: tuple[str, Collect[StreamData], Instruments],
) -> None:
    address, collect, instruments = target
    good = encode(L2, ServiceInventory(name="good")).SerializeToString()
    wrong_shape = remote_pb2.RemoteMessage(
        nextWorkerId=L2, streamDataId=1, remoteData=remote_pb2.RemoteData(dataStrings=["only one"])
    ).SerializeToString()
    instance_for_service_worker = encode(
        L2, ServiceInstanceInventory(name="i", service_id=1, instance_uuid="u")
    ).SerializeToString()
    messages = [
        good,
        remote_pb2.RemoteMessage(
            nextWorkerId=999 * 16 + 3, streamDataId=999
        ).SerializeToString(),  # unknown stream
        encode(
            worker_id(ServiceInventory, Stage.L1), ServiceInventory(name="x")
        ).SerializeToString(),  # no such worker
        instance_for_service_worker,  # a worker of another stream
        b"\xff\xff\xff\xff",  # not a RemoteMessage
        wrong_shape,
        good,
    ]
    with grpc.insecure_channel(address) as channel:
        call = channel.stream_unary(CALL, response_deserializer=remote_pb2.RemoteAck.FromString)
        ack = call(iter(messages), timeout=10)
    assert (ack.received, ack.rejected) == (2, 5)
    assert [i.key() for i in collect.items] == ["good", "good"]
    assert instruments.value("skyoap_remote_service_rejected_total") == 5


def test_a_client_whose_target_left_gives_back_what_it_held() -> None:
    address = f"127.0.0.1:{free_port()}"  # nobody listens
    given_back: list[tuple[int, StreamData]] = []
    instruments = Instruments()
    client = GrpcRemoteClient(address, instruments, buffer_size=100, give_back=given_back.extend)
    client.start()
    items = [(L2, ServiceInventory(name=f"s{i}")) for i in range(20)]
    for wid, item in items:
        client.push(wid, item)
    time.sleep(0.3)  # let it try and fail
    client.leave()
    unconfirmed = instruments.value("skyoap_remote_unconfirmed_total", target=address)
    assert unconfirmed == 0  # nothing was sent: it never connected
    assert given_back == items


def test_a_batch_whose_columns_do_not_add_up_is_refused_whole(
    target: tuple[str, Collect[StreamData], Instruments],
) -> None:
    address, collect, instruments = target
    good = encode_batch([(L2, ServiceInventory(name="a")), (L2, ServiceInventory(name="b"))])
    short = encode_batch([(L2, ServiceInventory(name="c"))])
    del short.strings[-1]  # one string fewer than its count says
    with grpc.insecure_channel(address) as channel:
        call = channel.stream_unary(CALL_BATCHED, response_deserializer=remote_pb2.RemoteAck.FromString)
        ack = call(iter([good.SerializeToString(), short.SerializeToString(), b"\xff"]), timeout=10)
    assert (ack.received, ack.rejected) == (2, 2)
    assert [i.key() for i in collect.items] == ["a", "b"]
    assert instruments.value("skyoap_remote_service_rejected_total") == 2


def test_a_batch_sent_again_is_taken_once(target: tuple[str, Collect[StreamData], Instruments]) -> None:
    address, collect, instruments = target
    first = encode_batch([(L2, ServiceInventory(name="a"))], sender_id="receiver-1", sequence=7)
    other_sender = encode_batch([(L2, ServiceInventory(name="a"))], sender_id="receiver-2", sequence=7)
    with grpc.insecure_channel(address) as channel:
        call = channel.stream_unary(CALL_BATCHED, response_deserializer=remote_pb2.RemoteAck.FromString)
        acks = [
            call(iter([b.SerializeToString() for b in stream]), timeout=10)
            for stream in ([first], [first, other_sender])
        ]
    assert [(a.received, a.rejected) for a in acks] == [(1, 0), (2, 0)]  # the resent batch is confirmed
    assert [i.key() for i in collect.items] == ["a", "a"]  # once from each sender
    assert instruments.value("skyoap_remote_service_duplicate_batches_total") == 1


def test_a_stream_refused_halfway_is_sent_again_and_every_item_is_taken_once() -> None:
    """The target takes the first batch of a stream, then has no room for the
    second (RESOURCE_EXHAUSTED): the client sends the stream's batches again
    until there is room, and the target drops the one it took."""
    workers = Workers()
    server_instruments = Instruments()
    budget = MemoryBudget(10**9, server_instruments)
    collect = FillsTheBudget[StreamData](budget, fill_at=500, worker_id=L2)
    workers.register(collect)
    server = GrpcServer("127.0.0.1", 0, max_message_bytes=1 << 22)
    server.add(
        remote_pb2.DESCRIPTOR.services_by_name["RemoteService"],
        RemoteService(
            workers, StreamTypes(INVENTORY_TYPES), server_instruments, budget, wait_s=0.05, limits=LIMITS
        ),
        keep_undecodable=True,
    )
    server.start()
    instruments = Instruments()
    address = f"127.0.0.1:{server.port}"
    client = GrpcRemoteClient(address, instruments, buffer_size=5000, give_back=lambda items: None)
    try:
        items = [ServiceInventory(name=f"s{i}") for i in range(1500)]  # three batches of 500
        for item in items:
            client.push(L2, item)
        client.start()
        wait_for(lambda: instruments.value("skyoap_remote_resent_total", target=address) > 0)
        assert len(collect.items) == 500
        collect.make_room()
        wait_for(lambda: len(collect.items) == 1500)
        client.close(5)
        assert collect.items == items
        assert server_instruments.value("skyoap_remote_service_duplicate_batches_total") >= 1
        assert server_instruments.value("skyoap_memory_shed_total") >= 1
        assert instruments.value("skyoap_remote_unconfirmed_total", target=address) == 0
    finally:
        server.close(0)


def test_with_an_agent_token_a_client_that_sends_it_is_served_and_a_call_without_it_is_refused() -> None:
    workers = Workers()
    collect = Collect[StreamData](L2)
    workers.register(collect)
    server = GrpcServer("127.0.0.1", 0, max_message_bytes=1 << 22, token=AgentToken("s3cret"))
    server.add(
        remote_pb2.DESCRIPTOR.services_by_name["RemoteService"],
        RemoteService(workers, StreamTypes(INVENTORY_TYPES), Instruments(), limits=LIMITS),
        keep_undecodable=True,
    )
    server.start()
    address = f"127.0.0.1:{server.port}"
    try:
        with grpc.insecure_channel(address) as channel:
            call = channel.stream_unary(CALL_BATCHED, request_serializer=bytes, response_deserializer=bytes)
            with pytest.raises(grpc.RpcError) as refused:
                call(iter([b""]), timeout=5)
            assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert collect.items == []

        client = GrpcRemoteClient(
            address, Instruments(), buffer_size=100, give_back=lambda items: None, token="s3cret"
        )
        client.start()
        items = [ServiceInventory(name=f"s{i}") for i in range(10)]
        for item in items:
            client.push(L2, item)
        wait_for(lambda: len(collect.items) == 10)
        assert collect.items == items
        client.close(5)
    finally:
        server.close(0)


def test_items_no_receiver_sends_are_refused_with_the_rule_they_break() -> None:
    """What a client of the internal port could craft: each would make L2
    merge or store what no agent can make it store."""
    workers = Workers()
    sinks = {m: Collect[StreamData](worker_id(m, Stage.L2)) for m in (*INVENTORY_TYPES, *METRICS_TYPES)}
    for sink in sinks.values():
        workers.register(sink)
    service = RemoteService(
        workers, StreamTypes((*INVENTORY_TYPES, *METRICS_TYPES)), Instruments(), limits=LIMITS
    )
    now_ms = int(time.time() * 1000)
    minute = minute_bucket(now_ms)
    full = sketch.of_latencies([5, 5, 5])
    good_metric = ServiceMetrics(
        time_bucket=minute, service="svc", calls=3, latency_sum_ms=15, histogram=full
    )
    good_instance = ServiceInstanceInventory(name="i", service_id=1, instance_uuid="i", heartbeat_time=now_ms)
    day = 86_400_000
    items: list[StreamData] = [
        good_metric,
        replace(good_metric, histogram=(3, 0, 0)),
        replace(good_metric, errors=4),
        replace(good_metric, time_bucket=202613991234),
        replace(good_metric, service="a\x1fb"),
        good_instance,
        replace(good_instance, heartbeat_time=now_ms + day, active=False),
        replace(good_instance, active=False),
        EndpointInventory(name="/e", service_id=0, detect_point=1),
        MeterMetrics(
            time_bucket=minute, service="svc", instance="i", name="m", labels="", samples=1,
            last_time=now_ms, buckets={str(b): "1" for b in range(101)},
        ),
    ]  # fmt: skip
    batch = encode_batch([(worker_id(type(i), Stage.L2), i) for i in items])
    reasons = service._take_batch(batch)
    assert reasons[0] is None and reasons[5] is None
    assert [r.split(":")[0] if r else None for r in reasons] == [
        None, "inconsistent", "inconsistent", "inconsistent", "control_character",
        None, "time_out_of_range", "inconsistent", "inconsistent", "over_limit",
    ]  # fmt: skip
    assert reasons[1] == (
        f"inconsistent: service_metrics 'svc' at {minute}: its latency sketch has 3 numbers, "
        "not (bucket, count) pairs"
    )
    assert (
        reasons[3]
        == "inconsistent: the time bucket of service_metrics 202613991234 is not a minute (yyyyMMddHHmm)"
    )
    assert str(reasons[7]).startswith("inconsistent: service instance 'i' arrives inactive")
    assert reasons[9] == (
        f"over_limit: buckets of meter_metrics 'svc i m ' at {minute}: 101, more than the 100 allowed "
        "(--max-histogram-buckets)"
    )
    assert sinks[ServiceMetrics].items == [good_metric]
    assert sinks[ServiceInstanceInventory].items == [good_instance]
    assert all(not sinks[m].items for m in (EndpointInventory, MeterMetrics))


def serve(service: RemoteService, port: int = 0) -> GrpcServer:
    server = GrpcServer("127.0.0.1", port, max_message_bytes=1 << 22)
    server.add(remote_pb2.DESCRIPTOR.services_by_name["RemoteService"], service, keep_undecodable=True)
    server.start()
    return server


def overlapping_streams(
    wait_s: float, until: Callable[[Instruments], bool]
) -> tuple[list[remote_pb2.RemoteAck | grpc.StatusCode], list[StreamData], Instruments]:
    """Sends batch 1 of one sender on a stream, and again on a second stream
    while the first still waits for room; gives room once ``until``. Returns
    each stream's answer, what the workers got and the node's metrics."""
    workers = Workers()
    collect = Collect[StreamData](L2)
    workers.register(collect)
    instruments = Instruments()
    budget = MemoryBudget(10**9, instruments)
    budget.add(10**9)  # no room
    service = RemoteService(
        workers, StreamTypes(INVENTORY_TYPES), instruments, budget, wait_s=wait_s, limits=LIMITS
    )
    server = serve(service)
    batch = encode_batch([(L2, ServiceInventory(name="a"))], sender_id="receiver-1", sequence=1)
    answers: list[remote_pb2.RemoteAck | grpc.StatusCode] = []
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            call = channel.stream_unary(CALL_BATCHED, response_deserializer=remote_pb2.RemoteAck.FromString)
            first = call.future(iter([batch.SerializeToString()]), timeout=30)
            wait_for(lambda: instruments.value("skyoap_memory_waited_total") == 1)
            second = call.future(iter([batch.SerializeToString()]), timeout=30)
            # The second copy waits for the first (fixed) or for room itself.
            wait_for(
                lambda: (
                    instruments.value("skyoap_remote_service_overlapping_batches_total") == 1
                    or instruments.value("skyoap_memory_waited_total") == 2
                )
            )
            wait_for(lambda: until(instruments))
            budget.add(-(10**9))
            for future in (first, second):
                try:
                    answers.append(future.result())
                except grpc.RpcError as e:
                    answers.append(e.code())
    finally:
        server.close(0)
    return answers, collect.items, instruments


def test_two_streams_carrying_one_batch_at_once_hand_it_over_once() -> None:
    """A sender gave up on a stream whose batch still waited for room and sent
    the batch again on a new stream: exactly one of the two hands it over,
    and both confirm it."""
    answers, items, instruments = overlapping_streams(wait_s=10, until=lambda _: True)
    assert [(a.received, a.rejected) for a in answers if isinstance(a, remote_pb2.RemoteAck)] == [
        (1, 0),
        (1, 0),
    ]
    assert [i.key() for i in items] == ["a"]
    assert instruments.value("skyoap_remote_service_duplicate_batches_total") == 1


def test_a_batch_refused_on_one_stream_is_taken_from_the_stream_that_waited_for_it() -> None:
    """The first copy finds no room and is refused: its claim is released,
    and the copy that waited for it is taken."""
    answers, items, instruments = overlapping_streams(
        wait_s=2, until=lambda i: i.value("skyoap_memory_shed_total") >= 1
    )
    assert answers[0] is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert isinstance(answers[1], remote_pb2.RemoteAck)
    assert (answers[1].received, answers[1].rejected) == (1, 0)
    assert [i.key() for i in items] == ["a"]
    assert instruments.value("skyoap_remote_service_duplicate_batches_total") == 0


def test_a_client_whose_target_restarted_sends_the_new_run_only_what_the_old_one_never_had() -> None:
    """The target's first run takes the first batch of a stream, has no room
    for the next (the stream fails) and dies; a second run comes up on the
    same port. The client's batches addressed to the first run are refused
    by the second and counted unconfirmed, never taken twice; what it never
    sent goes to the second run."""
    port = free_port()
    address = f"127.0.0.1:{port}"
    instruments1 = Instruments()
    budget = MemoryBudget(10**9, instruments1)
    first = FillsTheBudget[StreamData](budget, fill_at=500, worker_id=L2)  # never makes room
    second = Collect[StreamData](L2)
    workers1, workers2, instruments2 = Workers(), Workers(), Instruments()
    workers1.register(first)
    workers2.register(second)
    types = StreamTypes(INVENTORY_TYPES)
    server = serve(
        RemoteService(workers1, types, instruments1, budget, 0.05, limits=LIMITS, incarnation="run-1"), port
    )
    instruments = Instruments()
    client = GrpcRemoteClient(
        address, instruments, buffer_size=5000, give_back=lambda items: None,
        reconnect=RetryPolicy(attempts=None, first_delay_s=0.05, multiplier=1.0, max_delay_s=0.05),
        incarnation="run-1",
    )  # fmt: skip
    items = [ServiceInventory(name=f"s{i}") for i in range(1500)]  # three batches of 500
    later = [ServiceInventory(name=f"later{i}") for i in range(100)]
    try:
        for item in items:
            client.push(L2, item)
        client.start()
        wait_for(lambda: instruments.value("skyoap_remote_resent_total", target=address) > 0)
        server.close(0)
        server = serve(RemoteService(workers2, types, instruments2, limits=LIMITS, incarnation="run-2"), port)
        wait_for(lambda: instruments.value("skyoap_remote_target_restarts_total", target=address) == 1)
        for item in later:
            client.push(L2, item)
        unconfirmed = int(instruments.value("skyoap_remote_unconfirmed_total", target=address))
        wait_for(lambda: len(second.items) == len(items) - unconfirmed + len(later))
        client.close(5)
    finally:
        server.close(0)
    assert first.items == items[:500]
    assert unconfirmed in (1000, 1500)  # the failed stream's batches: two, or all three if gRPC had asked
    assert second.items == items[unconfirmed:] + later
    assert instruments2.value("skyoap_remote_service_misaddressed_streams_total") == 1
    assert instruments.value("skyoap_remote_sent_total", target=address) == 1500 - unconfirmed + 100
