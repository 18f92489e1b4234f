"""Clients that try to wear down a node's query port: hundreds of
connections that send half a request's head or nothing, from one address
and from many, on a node whose process may open only 512 descriptors. An
agent's trace report and an authenticated query keep answering at once, the
connections are bounded and refused early, and those that never finish their
head are closed in time (a real `skyoap node` process)."""

from __future__ import annotations

import contextlib
import os
import re
import resource
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from skyoap.runtime.scrape import read_metrics
from tests.integration.helpers import eventually
from tests.integration.test_hostile_clients import COLLECT, segment
from tests.integration.test_node_process import ROOT, SKYOAP
from tests.integration.test_query_endpoint import VERSION, ask

DESCRIPTORS = 512
SLOW = 600
TOKEN = "t0ken"


@dataclass
class NodeProcess:
    proc: subprocess.Popen[str]
    address: str
    admin: str
    query_url: str

    def refused(self, reason: str) -> float:
        return read_metrics(self.admin).value("skyoap_query_refused_total", reason=reason)

    def gauge(self, name: str) -> float:
        return read_metrics(self.admin).value(name)


def few_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (DESCRIPTORS, DESCRIPTORS))


@contextlib.contextmanager
def node(tmp_path: Path, *args: str) -> Iterator[NodeProcess]:
    proc = subprocess.Popen(
        [
            *SKYOAP, "node", "--host", "127.0.0.1", "--port", "0", "--admin-port", "0",
            "--query-host", "0.0.0.0", "--query-port", "0", "--embedded-path", str(tmp_path / "s.db"), *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "SKYOAP_QUERY_TOKEN": TOKEN},
        preexec_fn=few_descriptors,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline()
    match = re.fullmatch(r"skyoap node listening on (\S+) admin (\S+) internal - query (\S+)\n", line)
    assert match, f"unexpected first line {line!r}; stderr: {proc.stderr.read()}"
    started = NodeProcess(proc, match.group(1), match.group(2), match.group(3))
    try:
        yield started
    finally:
        proc.terminate()
        _, errors = proc.communicate(timeout=60)
        assert proc.returncode == 0, errors
        assert "Too many open files" not in errors


@pytest.fixture(autouse=True)
def many_descriptors_here() -> None:
    """The test's own process opens the slow connections."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))


@contextlib.contextmanager
def slow_connections(url: str, sources: list[str]) -> Iterator[list[socket.socket]]:
    """``SLOW`` connections spread over ``sources``, every other one sending
    half a request's head and then nothing, the others nothing at all."""
    port = int(url.split(":")[2].split("/")[0])
    opened = []
    try:
        for i in range(SLOW):
            sock = socket.socket()
            sock.bind((sources[i % len(sources)], 0))
            sock.connect(("127.0.0.1", port))
            if i % 2:
                with contextlib.suppress(OSError):  # a refused one may be closed already
                    sock.send(b"POST /graphql HTTP/1.1\r\nHost: skyoap\r\nContent-Type: appl")
            opened.append(sock)
        yield opened
    finally:
        for sock in opened:
            sock.close()


def agent_reports(address: str) -> bool:
    with grpc.insecure_channel(address) as channel:
        collect = channel.stream_unary(COLLECT, request_serializer=bytes, response_deserializer=bytes)
        collect(iter([segment()]), timeout=10)
    return True


def query_answers(url: str) -> bool:
    reply = ask(url, "{ version }", headers={"Authorization": f"Bearer {TOKEN}"})
    return (reply.status, reply.body) == (200, {"data": {"version": VERSION}})


def test_slow_connections_from_one_address_hold_only_its_share(tmp_path: Path) -> None:
    with node(tmp_path, "--query-header-timeout-s", "60") as n:
        with slow_connections(n.query_url, ["127.0.0.2"]):
            eventually(lambda: n.refused("peer_connections") == SLOW - 64)
            assert n.gauge("skyoap_query_connections") == 64
            assert agent_reports(n.address)
            assert query_answers(n.query_url)
            assert n.gauge("skyoap_query_connections") == 64  # the slow ones still held meanwhile
        eventually(lambda: n.gauge("skyoap_query_connections") == 0)
        assert n.refused("peer_connections") == SLOW - 64
        assert n.refused("connections") == 0


def test_slow_connections_from_many_addresses_are_bounded_then_closed(tmp_path: Path) -> None:
    with node(tmp_path, "--query-header-timeout-s", "3") as n:
        most = n.gauge("skyoap_query_connections_limit")
        print(f"the query port holds at most {most:.0f} connections under ulimit -n {DESCRIPTORS}")
        assert 64 < most < DESCRIPTORS // 2
        sources = [f"127.0.0.{i}" for i in range(2, 12)]  # 60 each: within the bound per address
        with slow_connections(n.query_url, sources):
            eventually(lambda: n.refused("connections") > 0)
            assert agent_reports(n.address)
            eventually(lambda: n.refused("connections") + n.refused("header_timeout") == SLOW)
            assert n.gauge("skyoap_query_connections") == 0
            assert query_answers(n.query_url)
        assert n.refused("peer_connections") == 0
        assert n.refused("header_timeout") >= most
