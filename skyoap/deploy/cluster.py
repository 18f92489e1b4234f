"""A local cluster: Redis, Elasticsearch and any number of receiver, aggregator
and mixed nodes, each its own process on its own ports, started and stopped by
``skyoap cluster …``. What it started is written to a state file, so that later
commands (add, remove, down) find it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from skyoap.deploy.options import split_secrets
from skyoap.deploy.servers import ElasticsearchServer, RedisServer, ServerError

ROOT = Path(__file__).resolve().parents[1]
_LISTENING = re.compile(r"skyoap node listening on (\S+) admin (\S+) internal (\S+) query (\S+)")


@dataclass
class NodeProcess:
    role: str
    pid: int
    address: str
    admin: str
    log: str
    internal: str = "-"
    """``host:port`` of its RemoteService (aggregators and mixed nodes)."""
    query: str = "-"
    """The URL of its query endpoint (SkyWalking's query protocol)."""

    @property
    def name(self) -> str:
        return f"{self.role}@{self.address}"


@dataclass
class ServerProcess:
    pid: int
    url: str
    workdir: str


@dataclass
class ClusterState:
    redis_url: str
    es_hosts: str
    prefix: str
    node_options: list[str] = field(default_factory=list)
    nodes: list[NodeProcess] = field(default_factory=list)
    servers: dict[str, ServerProcess] = field(default_factory=dict)
    """The servers this cluster started itself (``up``), to stop with it."""
    cluster_secret: str = ""
    """What its nodes send each other on the internal port, handed to each
    node in SKYOAP_CLUSTER_SECRET (a command line is readable by everyone)."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a child of this process that exited is a zombie until reaped
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return True


def _stop_pid(pid: int, sig: int, timeout_s: float) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while _alive(pid):
        if time.monotonic() > deadline:
            os.killpg(pid, signal.SIGKILL)
            deadline += 10
        time.sleep(0.05)


class LocalCluster:
    """Nodes as separate processes on this machine, sharing one Redis and one
    Elasticsearch. ``node_options`` are passed to every ``skyoap node``."""

    def __init__(self, workdir: Path, state: ClusterState) -> None:
        self.workdir = workdir
        self.state = state

    @property
    def state_file(self) -> Path:
        return self.workdir / "cluster.json"

    @staticmethod
    def _workdir(workdir: Path) -> None:
        """Only its owner may enter it: it holds the cluster's credentials and logs."""
        workdir.mkdir(parents=True, exist_ok=True, mode=0o700)

    @classmethod
    def create(
        cls,
        workdir: Path,
        redis_url: str,
        es_hosts: str,
        node_options: list[str] | None = None,
        prefix: str | None = None,
    ) -> LocalCluster:
        cls._workdir(workdir)
        state = ClusterState(redis_url, es_hosts, prefix or f"c{uuid.uuid4().hex[:8]}", node_options or [])
        state.cluster_secret = secrets.token_urlsafe(32)
        cluster = cls(workdir, state)
        cluster.save()
        return cluster

    @classmethod
    def up(cls, workdir: Path, node_options: list[str] | None = None) -> LocalCluster:
        """Starts a Redis and an Elasticsearch of its own, then nothing else."""
        if (workdir / "cluster.json").exists():
            raise ServerError(f"a cluster is already described in {workdir}: `skyoap cluster down` it first")
        redis = RedisServer().start()
        es = ElasticsearchServer().start()
        cluster = cls.create(workdir, redis.url, es.url, node_options, prefix="skyoap")
        assert redis.proc is not None and es.proc is not None
        cluster.state.servers = {
            "redis": ServerProcess(redis.proc.pid, redis.url, str(redis.workdir)),
            "elasticsearch": ServerProcess(es.proc.pid, es.url, str(es.workdir)),
        }
        cluster.save()
        return cluster

    @classmethod
    def load(cls, workdir: Path) -> LocalCluster:
        path = workdir / "cluster.json"
        if not path.exists():
            raise ServerError(f"no cluster in {workdir}: start one with `skyoap cluster up`")
        raw = json.loads(path.read_text())
        state = ClusterState(
            raw["redis_url"],
            raw["es_hosts"],
            raw["prefix"],
            raw["node_options"],
            [NodeProcess(**n) for n in raw["nodes"]],
            {k: ServerProcess(**v) for k, v in raw["servers"].items()},
            # A state file of an earlier release has none: its next nodes get one.
            raw.get("cluster_secret") or secrets.token_urlsafe(32),
        )
        return cls(workdir, state)

    def save(self) -> None:
        """Writes the state file readable by its owner only (it holds the
        cluster's credentials): created 0600, never briefly readable by
        others, and replaced whole."""
        tmp = self.state_file.with_name(f".cluster.json.{uuid.uuid4().hex[:8]}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps(asdict(self.state), indent=2))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.state_file)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def nodes(self, role: str | None = None) -> list[NodeProcess]:
        return [n for n in self.state.nodes if role is None or n.role == role]

    def add(
        self, role: str, *extra: str, timeout_s: float = 60.0, env: Mapping[str, str] | None = None
    ) -> NodeProcess:
        """Starts one node of ``role`` (with ``env`` added to its environment)
        and waits until it listens."""
        index = sum(1 for n in self.state.nodes if n.role == role)
        log_path = self.workdir / f"{role}-{index}-{uuid.uuid4().hex[:6]}.log"
        # Credentials go in the child's environment, which only this user can
        # read, never on its command line, which anyone can (ps, /proc).
        options, hidden = split_secrets([
            "--es-hosts", self.state.es_hosts, "--redis-url", self.state.redis_url,
            *self.state.node_options, *extra,
        ])  # fmt: skip
        argv = [
            sys.executable, "-m", "skyoap.deploy.cli", "node",
            "--role", role, "--cluster", "redis", "--storage", "elasticsearch",
            "--host", "127.0.0.1", "--port", "0", "--internal-port", "0", "--admin-port", "0",
            "--query-port", "0",
            "--es-index-prefix", self.state.prefix, "--redis-key-prefix", self.state.prefix,
            # In the cluster's own directory, shared by its nodes (a spill is taken by one at a time).
            "--spill-dir", str(self.workdir.resolve() / "spill"),
            *options,
        ]  # fmt: skip
        with log_path.open("wb") as out:
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                start_new_session=True,
                env={
                    **os.environ,
                    "SKYOAP_CLUSTER_SECRET": self.state.cluster_secret,
                    **hidden,  # a --cluster-secret the operator gave wins
                    **(env or {}),
                },
            )
        deadline = time.monotonic() + timeout_s
        while True:
            match = _LISTENING.search(log_path.read_text(errors="replace"))
            if match:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-20:])
                raise ServerError(f"the {role} node did not start:\n{tail}")
            time.sleep(0.05)
        node = NodeProcess(
            role, proc.pid, match.group(1), match.group(2), str(log_path), match.group(3), match.group(4)
        )
        self.state.nodes.append(node)
        self.save()
        return node

    def exited(self, node: NodeProcess) -> bool:
        """Whether ``node``'s process has ended (on its own: a crash)."""
        return not _alive(node.pid)

    def remove(self, node: NodeProcess, kill: bool = False, timeout_s: float = 30.0) -> None:
        """Stops ``node``: SIGTERM (it leaves the cluster and drains), or SIGKILL."""
        _stop_pid(node.pid, signal.SIGKILL if kill else signal.SIGTERM, timeout_s)
        self.state.nodes.remove(node)
        self.save()

    def down(self, timeout_s: float = 60.0) -> None:
        """Stops every node (all at once: each aggregator lingers while receivers
        re-route), then the servers this cluster started, and forgets it."""
        for node in self.state.nodes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.pid, signal.SIGTERM)
        for node in list(self.state.nodes):
            self.remove(node, timeout_s=timeout_s)
        for server in self.state.servers.values():
            _stop_pid(server.pid, signal.SIGTERM, 30)
            subprocess.run(["rm", "-rf", server.workdir], check=False)
        self.state_file.unlink(missing_ok=True)
