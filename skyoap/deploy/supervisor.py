"""``skyoap node --workers N``: one node as N worker processes, for as many
cores (the GIL gives one process one core of Python).

Each worker is a whole node of the cluster (``wiring.node.Node`` with its
``process``): its own L1, L2, remote clients, memory budget, internal port
and membership. All of them serve the one agent port, as gRPC's
multiprocessing example does it: the parent holds the port with
SO_REUSEPORT, each worker's gRPC server binds it with the same option, and
the kernel hands each new connection to one of them. Workers are spawned,
not forked, so that no gRPC object or thread of the parent's is in them.

The parent is the node to its operator: it prints the node's line once
every worker serves, answers the admin port for all of them (its
``/metrics`` reads each worker's own, on a free port of ``--admin-host``, and
labels each sample with its ``process``; ``/healthz`` is 200 while every
worker serves), starts a worker that exits on its own again (at once after
a long run, after a pause that grows while it keeps dying soon after its
start), and at SIGTERM or SIGINT stops every worker the way a node stops
(each drains into storage) and waits for all of them."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess

from skyoap.edge.admin import AdminServer
from skyoap.query.config import OFF
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.process import WORKER_LOG_FORMAT, prepare
from skyoap.runtime.ratelimit import RateLimitedLog
from skyoap.runtime.retry import RetryPolicy
from skyoap.runtime.scrape import PROCESS, exposition, read_text
from skyoap.storage.api import StorageError
from skyoap.wiring.config import NodeConfig

log = logging.getLogger(__name__)

RESTART = RetryPolicy(attempts=None, first_delay_s=0.5, multiplier=2.0, max_delay_s=30.0)
"""The pause before a worker that died soon after its start is started
again, growing with each such death in a row."""
STEADY_S = 30.0
"""A worker that ran this long before it died is started again at once."""
READ_S = 2.0
"""How long the parent's /metrics waits for each worker's."""


@dataclass(frozen=True)
class Serving:
    """What a worker tells the parent once it serves."""

    pid: int
    admin: str | None
    """``host:port`` where the parent reads its /metrics."""
    internal: str | None
    query_url: str | None
    query_port: int | None


def serve(config: NodeConfig, index: int, parent: Connection, log_level: str) -> None:
    """A worker process: its node, until SIGTERM, SIGINT or the parent's end."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    from skyoap.wiring.node import Node

    prepare(log_level, WORKER_LOG_FORMAT)
    try:
        node = Node(config, process=index).start()
    except Exception as e:
        if not isinstance(e, ValueError | OSError | StorageError):
            log.exception("worker %d could not start", index)
        parent.send(str(e))
        sys.exit(2)
    admin = _local(config.server.admin_host, node.admin_port) if node.admin_port else None
    parent.send(Serving(os.getpid(), admin, node.internal_address, node.query_url, node.query_port))
    threading.Thread(target=_until_gone, args=(parent, stop), name="parent-watch", daemon=True).start()
    try:
        stop.wait()
    finally:
        node.close()


def _until_gone(parent: Connection, stop: threading.Event) -> None:
    """Sets ``stop`` when the parent is gone (it sends nothing; a killed
    parent's end closes), so that no worker outlives its node."""
    with contextlib.suppress(EOFError, OSError):
        parent.recv()
    stop.set()


def _local(host: str, port: int) -> str:
    """Where this machine reaches a server bound to ``host``."""
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def reserve_port(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (a free port for 0) with SO_REUSEPORT,
    not listening: it holds the port, and tells its number, while workers
    come and go on it."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as e:
        raise OSError(f"cannot listen on {host}:{port}: {e}") from e
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {e.strerror}") from e
    return sock


@dataclass
class _Worker:
    index: int
    process: BaseProcess | None = None
    conn: Connection | None = None
    """The parent's end of the pipe to the process."""
    serving: Serving | None = None
    started_at: float = 0.0
    restarts: int = 0
    quick_deaths: int = 0
    """Deaths in a row, each less than ``STEADY_S`` after its start."""
    restart_at: float | None = None
    error: str = ""
    """Why its run could not start, as it said."""
    ended: str = ""
    """How its last run ended."""

    def describe(self) -> str:
        restarts = f", restarts: {self.restarts}" if self.restarts else ""
        if self.serving is not None:
            return f"worker {self.index}: pid {self.serving.pid}, serving{restarts}"
        if self.process is not None:
            return f"worker {self.index}: pid {self.process.pid}, starting{restarts}"
        return f"worker {self.index}: {self.ended}{restarts}"


class Supervisor:
    """The parent of a node's worker processes. ``start`` returns once every
    worker serves (or raises, having stopped them, when one could not
    start); ``close`` stops them. ``stop`` is set by the signals that stop
    the node: a worker that exits once it is set is not started again."""

    def __init__(self, config: NodeConfig, log_level: str, stop: threading.Event) -> None:
        config.check()
        self.config = config
        self._log_level = log_level
        self._stop = stop
        self.instruments = Instruments()
        self._restarts = self.instruments.counter(
            "skyoap_node_worker_restarts_total",
            "times a worker process that exited on its own was started again",
            [PROCESS],
        )
        self._up = self.instruments.gauge(
            "skyoap_node_worker_up", "1 if the worker process's /metrics was read for this scrape", [PROCESS]
        )
        self._unread = RateLimitedLog(log)
        self._context = multiprocessing.get_context("spawn")
        self._workers = [_Worker(k) for k in range(config.server.processes)]
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()
        self._watcher: threading.Thread | None = None
        self._reserved: socket.socket | None = None
        self._admin: AdminServer | None = None
        self._query_port = config.query.port
        self._closed = False
        self.port = 0

    @property
    def address(self) -> str:
        return f"{self.config.server.advertised_host}:{self.port}"

    @property
    def admin_port(self) -> int | None:
        return self._admin.port if self._admin else None

    @property
    def internal_address(self) -> str | None:
        """Each worker's internal address, comma separated."""
        found = [w.serving.internal for w in self._workers if w.serving and w.serving.internal]
        return ",".join(found) or None

    @property
    def query_url(self) -> str | None:
        first = self._workers[0].serving
        return first.query_url if first else None

    def start(self) -> Supervisor:
        s = self.config.server
        try:
            self._reserved = reserve_port(s.host, s.port)
            self.port = self._reserved.getsockname()[1]
            if s.admin_port >= 0:
                self._admin = AdminServer(
                    s.admin_host, s.admin_port, self.instruments, self._health, self._exposition
                )
                self._admin.start()
            for worker in self._workers:
                self._spawn(worker)
            self._until_all_serve()
        except BaseException:
            self.close()
            raise
        self._watcher = threading.Thread(target=self._watch, name="worker-supervisor", daemon=True)
        self._watcher.start()
        return self

    def _config_of(self, index: int) -> NodeConfig:
        """Worker ``index``'s configuration: the shared agent port, its own
        internal port, an admin port for the parent, the query port for
        worker 0 alone (at the port its first run bound)."""
        s = self.config.server
        return self.config.with_options(
            port=self.port,
            internal_port=s.internal_port + index if s.internal_port > 0 else 0,
            admin_port=0 if s.admin_port >= 0 else -1,
            query_port=self._query_port if index == 0 else OFF,
        )

    def _spawn(self, worker: _Worker) -> None:
        conn, child = self._context.Pipe()
        process = self._context.Process(
            target=serve,
            args=(self._config_of(worker.index), worker.index, child, self._log_level),
            name=f"worker-{worker.index}",
            daemon=True,  # stopped (SIGTERM) if the parent exits without its close
        )
        process.start()
        child.close()
        with self._lock:
            worker.process, worker.conn, worker.serving = process, conn, None
            worker.started_at, worker.restart_at = time.monotonic(), None
        log.info("worker %d started (pid %d)", worker.index, process.pid)

    def _until_all_serve(self) -> None:
        while not all(w.serving for w in self._workers):
            pending = [w for w in self._workers if not w.serving]
            wait([o for w in pending for o in self._waitables(w)])
            for w in pending:
                self._receive(w)
                if w.serving is None and w.process is not None and not w.process.is_alive():
                    raise OSError(f"worker {w.index} did not start: {w.error or _ending(w.process)}")

    @staticmethod
    def _waitables(worker: _Worker) -> list[Connection | int]:
        found: list[Connection | int] = [worker.process.sentinel] if worker.process else []
        return found + ([worker.conn] if worker.conn else [])

    def _receive(self, worker: _Worker) -> None:
        """Takes what the worker told (that it serves, or why it could not start)."""
        if worker.conn is None or not worker.conn.poll():
            return
        try:
            message = worker.conn.recv()
        except (EOFError, OSError):  # it exited
            worker.conn.close()
            worker.conn = None
            return
        if isinstance(message, Serving):
            with self._lock:
                worker.serving = message
            if worker.index == 0 and message.query_port is not None:
                self._query_port = message.query_port  # a restart serves queries where the first run did
            log.info("worker %d serves (pid %d)", worker.index, message.pid)
        else:
            worker.error = str(message)

    def _watch(self) -> None:
        """Starts again each worker that exits on its own, until the node stops."""
        while not self._stop.is_set():
            due = [w.restart_at for w in self._workers if w.restart_at is not None]
            timeout_s = max(0.0, min(due) - time.monotonic()) if due else None
            wait([self._wake_r, *(o for w in self._workers for o in self._waitables(w))], timeout_s)
            for w in self._workers:
                if self._stop.is_set():
                    return
                self._receive(w)
                if w.process is not None and not w.process.is_alive():
                    self._died(w)
                elif w.restart_at is not None and time.monotonic() >= w.restart_at:
                    self._start_again(w)

    def _start_again(self, worker: _Worker) -> None:
        worker.restarts += 1
        self._restarts.labels(str(worker.index)).inc()
        try:
            self._spawn(worker)
        except OSError as e:  # no process could be made (memory, descriptors): later, then
            worker.quick_deaths += 1
            pause_s = RESTART.delay_s(worker.quick_deaths)
            log.error("worker %d could not be started (%s); trying again in %.1f s", worker.index, e, pause_s)
            worker.restart_at = time.monotonic() + pause_s

    def _died(self, worker: _Worker) -> None:
        assert worker.process is not None
        ran_s = time.monotonic() - worker.started_at
        worker.quick_deaths = 0 if ran_s >= STEADY_S else worker.quick_deaths + 1
        pause_s = RESTART.delay_s(worker.quick_deaths) if worker.quick_deaths else 0.0
        how = _ending(worker.process) + (f" ({worker.error})" if worker.error else "")
        log.error(
            "worker %d (pid %d) %s after %.1f s; starting it again in %.1f s",
            worker.index, worker.process.pid, how, ran_s, pause_s,
        )  # fmt: skip
        if worker.conn is not None:
            worker.conn.close()
        with self._lock:
            worker.process, worker.conn, worker.serving, worker.error = None, None, None, ""
            worker.restart_at = time.monotonic() + pause_s
            worker.ended = f"{how}, starting again"

    def _health(self) -> tuple[bool, str]:
        with self._lock:
            serving = sum(1 for w in self._workers if w.serving)
            lines = [w.describe() for w in self._workers]
        ok = serving == len(self._workers) and not self._stop.is_set()
        state = "ok" if ok else ("stopping" if self._stop.is_set() else "not serving")
        return ok, "\n".join([f"{state}: {serving} of {len(lines)} workers serve", *lines])

    def _exposition(self, names: Iterable[str]) -> bytes:
        """The parent's own series and every worker's, each labelled with its
        process: the families of the sample ``names`` alone, if any."""
        names = set(names)
        with self._lock:
            admins = {str(w.index): w.serving.admin for w in self._workers if w.serving and w.serving.admin}
        with ThreadPoolExecutor(max_workers=max(1, len(admins)), thread_name_prefix="metrics-read") as pool:
            read = dict(
                zip(admins, pool.map(lambda admin: self._read(admin, names), admins.values()), strict=True)
            )
        texts = {process: text for process, text in read.items() if text is not None}
        for w in self._workers:
            self._up.labels(str(w.index)).set(1 if str(w.index) in texts else 0)
        registry = self.instruments.registry
        return exposition(registry.restricted_registry(names) if names else registry, texts)

    def _read(self, admin: str, names: Iterable[str]) -> str | None:
        try:
            return read_text(admin, READ_S, names)
        except (OSError, ValueError) as e:  # a worker stopping or starting again
            self._unread.warning(admin, "cannot read a worker's /metrics at %s: %s", admin, e)
            return None

    def close(self) -> None:
        """Stops every worker with SIGTERM and waits until each has closed
        (each within its own bounds); idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        os.write(self._wake_w, b"x")
        if self._watcher is not None:
            self._watcher.join()
        running = [w for w in self._workers if w.process is not None and w.process.is_alive()]
        for w in running:
            assert w.process is not None
            w.process.terminate()
        for w in running:
            assert w.process is not None
            w.process.join()
            if w.process.exitcode not in (0, -signal.SIGTERM):  # SIGTERM: it was stopped while it started
                log.error("worker %d (pid %d) %s at its close", w.index, w.process.pid, _ending(w.process))
        for w in self._workers:
            if w.conn is not None:
                w.conn.close()
        if self._admin is not None:
            self._admin.close()
        if self._reserved is not None:
            self._reserved.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
        log.info("node of %d workers stopped (pid %d)", len(self._workers), os.getpid())


def _ending(process: BaseProcess) -> str:
    code = process.exitcode
    if code is None:
        return "is running"
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"
