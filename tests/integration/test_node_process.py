"""`skyoap node` and `skyoap demo` as an operator runs them: separate processes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from skyoap.agent import Agent

SKYOAP = [sys.executable, "-m", "skyoap.deploy.cli"]
ROOT = Path(__file__).resolve().parents[2]


def start_node(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [
            *SKYOAP,
            "node",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--query-port",
            "0",
            "--embedded-path",
            str(tmp_path / "s.db"),
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.fullmatch(r"skyoap node listening on (\S+) admin - internal - query http://\S+\n", line)
    assert match, f"unexpected first line {line!r}; stderr: {proc.stderr.read() if proc.stderr else ''}"
    return proc, match.group(1)


def test_a_node_serves_agents_health_and_reflection_then_stops_on_sigterm(tmp_path: Path) -> None:
    proc, address = start_node(tmp_path)
    try:
        agent = Agent(address, "checkout", retry_interval_s=0.05)
        assert agent.register().service_id == 1
        agent.close()
        with grpc.insecure_channel(address) as ch:
            health = health_pb2_grpc.HealthStub(ch)
            for service in ("", "skyoap.v1.Register", "skyoap.v1.ServiceInstancePing"):
                status = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status
                assert status == health_pb2.HealthCheckResponse.SERVING
            answers = reflection_pb2_grpc.ServerReflectionStub(ch).ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5
            )
            names = {s.name for a in answers for s in a.list_services_response.service}
        assert {"skyoap.v1.Register", "skyoap.v1.ServiceInstancePing", "grpc.health.v1.Health"} <= names
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    # What it stored survives the restart: the same name gets the same id.
    proc, address = start_node(tmp_path)
    try:
        agent = Agent(address, "checkout", retry_interval_s=0.05)
        assert agent.register().service_id == 1
        assert Agent(address, "payments", retry_interval_s=0.05).register().service_id == 2
        agent.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


def test_a_bad_option_is_refused_with_a_clear_message() -> None:
    out = subprocess.run([*SKYOAP, "node", "--role", "leader"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2
    assert "argument --role: 'leader' is not one of: receiver, aggregator, mixed" in out.stderr


def test_the_demo_registers_its_fleet_and_prints_the_inventory() -> None:
    out = subprocess.run(
        [*SKYOAP, "demo", "--services", "3", "--instances", "2", "--duration-s", "0.5", "--traces", "30"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "SKYOAP_PORT": "0"},
    )
    assert out.returncode == 0, out.stderr
    assert "services (3)" in out.stdout
    assert "service instances (6)" in out.stdout
    assert "endpoints (6)" in out.stdout
    # The agents' databases, and the services the traces call (each trace goes
    # through up to three services, starting at service trace % 3).
    assert "network addresses (5)" in out.stdout
    assert "services over the last 15 minutes" in out.stdout
    calls = dict(
        re.findall(r"^(demo-service-\d)\s+(\d+)\s", out.stdout.split("services over")[1], re.MULTILINE)
    )
    assert calls == {"demo-service-0": "10", "demo-service-1": "20", "demo-service-2": "30"}
    assert re.search(r"^1\s+demo-service-\d\s+2\s+2\s", out.stdout, re.MULTILINE)
    assert out.stdout.splitlines()[-1] == (
        "To look at it in a browser: `skyoap demo --serve`, then open http://127.0.0.1:12800/"
    )


def test_the_served_demo_keeps_its_node_and_web_ui_up_until_interrupted(tmp_path: Path) -> None:
    errors = tmp_path / "stderr"
    demo = subprocess.Popen(
        [*SKYOAP, "demo", "--serve", "--query-port", "0", "--services", "2", "--instances", "1",
         "--traces", "10"],
        stdout=subprocess.PIPE, stderr=errors.open("w"), text=True, cwd=ROOT,
        env={**os.environ, "SKYOAP_PORT": "0"},
    )  # fmt: skip
    try:
        assert demo.stdout is not None
        line = demo.stdout.readline()
        found = re.fullmatch(r"the web UI: (http://127\.0\.0\.1:\d+/)  \(Ctrl-C stops the demo\)\n", line)
        assert found, line + errors.read_text()
        with urllib.request.urlopen(found[1], timeout=30) as page:
            assert b"<title>skyoap</title>" in page.read()
        request = urllib.request.Request(
            f"{found[1]}graphql",
            data=json.dumps({"query": 'query { s: listServices(layer: "GENERAL") { name } }'}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert json.loads(answer.read()) == {
                "data": {"s": [{"name": "demo-service-0"}, {"name": "demo-service-1"}]}
            }
        demo.send_signal(signal.SIGINT)
        out, _ = demo.communicate(timeout=120)
        assert demo.returncode == 0, errors.read_text()
        assert "services (2)" in out
    finally:
        demo.kill()
