"""Clients that try to wear a node down without its token: streams that hold
on, health watches of huge names, half-sent admin requests. Health checks and
agent calls keep answering at once, and the node's threads and memory stay
bounded (a real `skyoap node` process)."""

from __future__ import annotations

import contextlib
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from skyoap.edge.auth import METADATA_KEY
from skyoap.edge.limits import HEALTH_THREADS, RESERVE_THREADS
from skyoap.proto import register_pb2, register_pb2_grpc
from skyoap.proto.skywalking import common_pb2, tracing_pb2
from skyoap.runtime.scrape import read_metrics
from tests.integration.helpers import eventually
from tests.integration.telemetry_data import span
from tests.integration.test_node_process import ROOT, SKYOAP

MAX_CALLS = 10
TOKEN = "s3cret"
COLLECT = "/skywalking.v3.TraceSegmentReportService/collect"
REGISTER = "/skyoap.v1.Register/doServiceRegister"
CHECK = "/grpc.health.v1.Health/Check"
WATCH = "/grpc.health.v1.Health/Watch"
GRPC_CORE_THREADS = 8
"""Threads gRPC's core may add under load (its event engine's pool), beyond the pools we size."""
MOST_NEW_THREADS = MAX_CALLS + RESERVE_THREADS + HEALTH_THREADS + GRPC_CORE_THREADS
WATCH_NAME_BYTES = 3 * 1024 * 1024
WATCHES_PER_ROUND = 40
WATCH_ROUNDS = 4
RSS_PEAK_GROWTH_MB = 160
"""How far the node's RSS may rise while a round's 40 names (120 MiB) arrive at once."""
RSS_KEPT_MB = 100
"""How much of it may stay after the last round: the allocator's slack,
nothing kept per name (the rounds bring 480 MiB of names in all)."""
HALF_SENT = 200


@dataclass
class NodeProcess:
    proc: subprocess.Popen[str]
    address: str
    admin: str

    def status(self, field: str) -> int:
        """A field of /proc/<pid>/status: Threads, or VmRSS in kB."""
        text = Path(f"/proc/{self.proc.pid}/status").read_text()
        match = re.search(rf"^{field}:\s+(\d+)", text, re.MULTILINE)
        assert match, f"no {field} in /proc/{self.proc.pid}/status"
        return int(match.group(1))

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            assert self.proc.wait(30) == 0
        finally:
            self.proc.kill()


def start_node(tmp_path: Path, *args: str) -> NodeProcess:
    proc = subprocess.Popen(
        [
            *SKYOAP,
            "node",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--admin-port",
            "0",
            "--query-port",
            "0",
            "--embedded-path",
            str(tmp_path / "s.db"),
            "--max-concurrent-calls",
            str(MAX_CALLS),
            *args,
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.fullmatch(r"skyoap node listening on (\S+) admin (\S+) internal - query \S+\n", line)
    assert match, f"unexpected first line {line!r}"
    return NodeProcess(proc, match.group(1), match.group(2))


def health(address: str) -> Any:
    with grpc.insecure_channel(address) as channel:
        return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10).status


def agent_call(address: str, token: str | None = None) -> grpc.StatusCode:
    """The status of a service registration, with a deadline generous enough that
    only a node that left it waiting answers DEADLINE_EXCEEDED."""
    metadata = [(METADATA_KEY, token)] if token else None
    with grpc.insecure_channel(address) as channel:
        stub = register_pb2_grpc.RegisterStub(channel)
        try:
            stub.doServiceRegister(
                register_pb2.Services(services=[register_pb2.Service(serviceName="orders")]),
                timeout=10,
                metadata=metadata,
            )
        except grpc.RpcError as e:
            return e.code()
    return grpc.StatusCode.OK


def outcome(future: Any) -> grpc.StatusCode:
    """How a call ended (waiting for it)."""
    error = future.exception(timeout=120)
    return grpc.StatusCode.OK if error is None else error.code()


class Sending:
    """Sends ``message`` at once, then every ``interval_s`` until released:
    never idle. With no message, sends nothing until released: a request
    that never comes whole."""

    def __init__(self, message: Any = None, interval_s: float = 0.5) -> None:
        self._message = message
        self._interval_s = interval_s
        self._released = threading.Event()

    def __iter__(self) -> Iterator[Any]:
        if self._message is None:
            self._released.wait(120)
            return
        yield self._message
        while not self._released.wait(self._interval_s):
            yield self._message

    def release(self) -> None:
        self._released.set()


def segment() -> bytes:
    now = int(time.time() * 1000)
    entry = span(0, -1, tracing_pb2.Entry, now, 5, False, operationName="GET:/")
    return tracing_pb2.SegmentObject(
        traceId="t", traceSegmentId="s", service="shop", serviceInstance="shop-1", spans=[entry]
    ).SerializeToString()


def test_streams_that_hold_on_count_against_the_bound_and_are_closed_once_old(tmp_path: Path) -> None:
    node = start_node(tmp_path, "--stream-max-age-s", "8")
    senders: list[Sending] = []
    try:
        threads_before = node.status("Threads")
        with grpc.insecure_channel(node.address) as channel:
            collect = channel.stream_unary(
                COLLECT, request_serializer=bytes, response_deserializer=common_pb2.Commands.FromString
            )
            register = channel.stream_unary(REGISTER, request_serializer=bytes)
            reflect = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo
            calls, reflections = [], []
            # A third of the bound in client streams of segments that send one now and then, as
            # many unary calls whose request never comes...
            for _ in range(MAX_CALLS // 3):
                senders.append(Sending(segment()))
                calls.append(collect.future(iter(senders[-1]), timeout=120))
                senders.append(Sending())
                calls.append(register.future(iter(senders[-1]), timeout=120))
            # ...and twice the bound in reflection streams that ask again now and then.
            for _ in range(2 * MAX_CALLS):
                senders.append(Sending(reflection_pb2.ServerReflectionRequest(list_services="")))
                reflections.append(reflect(iter(senders[-1]), timeout=120))
            # While they come in, a health check answers, and so does an agent's call.
            assert health(node.address) == health_pb2.HealthCheckResponse.SERVING
            assert agent_call(node.address) in {grpc.StatusCode.OK, grpc.StatusCode.RESOURCE_EXHAUSTED}
            first: list[grpc.StatusCode] = []
            for answers in reflections:
                try:
                    next(answers)
                    first.append(grpc.StatusCode.OK)
                except grpc.RpcError as e:
                    first.append(e.code())
            held = first.count(grpc.StatusCode.OK)
            assert first.count(grpc.StatusCode.RESOURCE_EXHAUSTED) == len(first) - held

            # With the bound full, a health check still answers, and an agent's call is refused at once.
            assert health(node.address) == health_pb2.HealthCheckResponse.SERVING
            assert agent_call(node.address) is grpc.StatusCode.RESOURCE_EXHAUSTED
            threads = node.status("Threads")
            print(f"threads: {threads_before} before, {threads} with {held} reflection streams held")
            assert threads - threads_before <= MOST_NEW_THREADS

            # Each held call is closed once 8 s old, though it never went idle.
            ends = [outcome(f) for f in calls]
            for answers in (a for a, f in zip(reflections, first, strict=True) if f is grpc.StatusCode.OK):
                with pytest.raises(grpc.RpcError) as closed:
                    for _ in answers:
                        pass
                ends.append(closed.value.code())
            assert ends.count(grpc.StatusCode.CANCELLED) == MAX_CALLS
            assert ends.count(grpc.StatusCode.RESOURCE_EXHAUSTED) == len(ends) - MAX_CALLS
        # The bound is free again.
        eventually(lambda: agent_call(node.address) is grpc.StatusCode.OK)
    finally:
        for sender in senders:
            sender.release()
        node.stop()


def test_clients_without_the_token_grow_neither_threads_nor_memory(tmp_path: Path) -> None:
    node = start_node(tmp_path, "--auth-token", TOKEN)
    try:
        assert agent_call(node.address, TOKEN) is grpc.StatusCode.OK
        threads_before, rss_before_kb = node.status("Threads"), node.status("VmRSS")
        rss_after_round_kb = []
        with grpc.insecure_channel(node.address, options=[("grpc.max_send_message_length", -1)]) as channel:
            watch = health_pb2_grpc.HealthStub(channel).Watch
            for round in range(WATCH_ROUNDS):
                watches = [
                    watch(
                        health_pb2.HealthCheckRequest(service=f"{round}-{i}-".ljust(WATCH_NAME_BYTES, "x")),
                        timeout=120,
                    )
                    for i in range(WATCHES_PER_ROUND)
                ]
                first = []
                for answers in watches:
                    try:
                        first.append(health_pb2.HealthCheckResponse.ServingStatus.Name(next(answers).status))
                    except grpc.RpcError as e:
                        first.append(e.code().name)
                assert set(first) <= {"SERVICE_UNKNOWN", "RESOURCE_EXHAUSTED"}
                assert first.count("SERVICE_UNKNOWN") <= MAX_CALLS
                rss_after_round_kb.append(node.status("VmRSS"))
                for answers in watches[:-MAX_CALLS]:
                    answers.cancel()
            # The last round's watches stay open through what follows.
            held_watches = watches[-MAX_CALLS:]

            # Calls without the token are refused before anything of them is read, even
            # unary calls whose request never comes, and streams.
            silent = Sending()
            refused = [
                channel.stream_unary(REGISTER, request_serializer=bytes).future(iter(silent), timeout=60)
                for _ in range(2 * (MAX_CALLS + RESERVE_THREADS))
            ]
            refused += [
                channel.stream_unary(COLLECT, request_serializer=bytes).future(
                    iter([segment()] * 3), timeout=60
                )
                for _ in range(2 * MAX_CALLS)
            ]
            # Health calls are open to all: those whose request never comes are
            # cancelled within a second, each holding a thread of the health pool till then.
            half_health = [
                channel.stream_unary(CHECK, request_serializer=bytes).future(iter(silent), timeout=60)
                for _ in range(HEALTH_THREADS)
            ]
            half_health += [
                channel.stream_stream(WATCH, request_serializer=bytes)(iter(silent), timeout=60)
                for _ in range(HEALTH_THREADS)
            ]

            half_sent = []
            for _ in range(HALF_SENT):
                connection = socket.create_connection(tuple(node.admin.split(":")), timeout=60)  # type: ignore[arg-type]
                connection.sendall(b"GET /metrics HTTP/1.1\r\nHost: node\r\n")
                half_sent.append(connection)
            with urllib.request.urlopen(f"http://{node.admin}/healthz", timeout=10) as answer:
                assert answer.read() == b"ok\n"

            assert health(node.address) == health_pb2.HealthCheckResponse.SERVING
            assert agent_call(node.address, TOKEN) is grpc.StatusCode.OK
            threads, rss_peak_kb = node.status("Threads"), node.status("VmHWM")
            print(
                f"threads: {threads_before} before, {threads} with {HALF_SENT} half-sent admin requests; "
                f"RSS: {rss_before_kb >> 10} MB before, at most {rss_peak_kb >> 10} MB, after each round "
                f"{[kb >> 10 for kb in rss_after_round_kb]} MB"
            )
            assert threads - threads_before <= MOST_NEW_THREADS
            assert rss_peak_kb - rss_before_kb <= RSS_PEAK_GROWTH_MB * 1024
            assert rss_after_round_kb[-1] - rss_before_kb <= RSS_KEPT_MB * 1024

            # Each half-sent request is dropped: at once past the most read at once, the rest once late.
            deadline = time.monotonic() + 60
            for connection in half_sent:
                connection.settimeout(max(0.1, deadline - time.monotonic()))
                with contextlib.suppress(ConnectionResetError):
                    assert connection.recv(1) == b""
                connection.close()
            dropped = read_metrics(node.admin)
            crowded = dropped.value("skyoap_admin_dropped_total", reason="crowded")
            late = dropped.value("skyoap_admin_dropped_total", reason="header_timeout")
            assert crowded + late == HALF_SENT
            assert {outcome(f) for f in refused} == {grpc.StatusCode.UNAUTHENTICATED}
            assert {call.code() for call in half_health} == {grpc.StatusCode.CANCELLED}
            silent.release()
            for answers in held_watches:
                answers.cancel()
    finally:
        node.stop()
