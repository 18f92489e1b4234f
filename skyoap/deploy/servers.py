"""Fetches and runs the real servers skyoap uses, on loopback and free ports:
Elasticsearch (Elastic's zip from Maven Central, run with the machine's Java)
and Redis (Debian's redis-server); and finds the browser the web UI's tests
and benchmark drive (Debian's chromium). Tests, benchmarks and local clusters
start them through here."""

from __future__ import annotations

import base64
import logging
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Self

log = logging.getLogger(__name__)

ES_VERSION = "8.19.21"
ES_ARTIFACT = f"org.elasticsearch.distribution.integ-test-zip:elasticsearch:{ES_VERSION}:zip"
MAVEN_COPY = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy"
"""The goal that fetches it, at a fixed version (``dependency:copy`` alone runs
whichever version Maven Central has newest)."""
UNPRIVILEGED_UID = 65534  # nobody: Elasticsearch refuses to run as root


class ServerError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def chromium_path() -> str:
    """Debian's Chromium, which Playwright drives in place of a browser of its own."""
    found = shutil.which("chromium")
    if not found:
        raise ServerError("chromium is needed (Debian's package): run deploy/install.sh all")
    return found


def cache_dir() -> Path:
    """Where downloads are kept. Not under /root when running as root, because
    Elasticsearch runs as an unprivileged user that must read its files."""
    if "SKYOAP_CACHE_DIR" in os.environ:
        return Path(os.environ["SKYOAP_CACHE_DIR"])
    return Path("/var/cache/skyoap") if os.geteuid() == 0 else Path.home() / ".cache" / "skyoap"


def java_home() -> Path:
    if os.environ.get("JAVA_HOME"):
        return Path(os.environ["JAVA_HOME"])
    java = shutil.which("java")
    if java is None:
        raise ServerError("no java on PATH and JAVA_HOME is not set: Elasticsearch needs Java 17 or newer")
    return Path(java).resolve().parent.parent


def elasticsearch_home() -> Path:
    """The unpacked Elasticsearch distribution, fetched from Maven Central with
    ``mvn dependency:copy`` on first use."""
    home = cache_dir() / f"elasticsearch-{ES_VERSION}"
    if (home / "bin" / "elasticsearch").exists():
        return home
    cache_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        log.info("fetching Elasticsearch %s from Maven Central", ES_VERSION)
        mvn = shutil.which("mvn")
        if mvn is None:
            raise ServerError("Maven (mvn) is needed to fetch Elasticsearch from Maven Central")
        subprocess.run(
            [mvn, "-q", "-B", MAVEN_COPY, f"-Dartifact={ES_ARTIFACT}", f"-DoutputDirectory={tmp}"],
            check=True,
        )
        with zipfile.ZipFile(Path(tmp) / f"elasticsearch-{ES_VERSION}.zip") as z:
            z.extractall(tmp)
        unpacked = Path(tmp) / f"elasticsearch-{ES_VERSION}"
        for p in unpacked.rglob("*"):  # zipfile drops the execute bits
            if p.parent.name == "bin" or p.suffix == ".sh":
                p.chmod(0o755)
        for d in (unpacked, *[p for p in unpacked.rglob("*") if p.is_dir()]):
            d.chmod(0o755)
        unpacked.rename(home)
    cache_dir().chmod(0o755)
    return home


class _Process:
    def __init__(self, name: str, workdir: Path) -> None:
        self.name = name
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    def _spawn(self, argv: list[str], env: dict[str, str] | None = None, as_nobody: bool = False) -> None:
        if as_nobody and os.geteuid() == 0:
            argv = [
                "setpriv",
                f"--reuid={UNPRIVILEGED_UID}",
                f"--regid={UNPRIVILEGED_UID}",
                "--clear-groups",
                *argv,
            ]
        out = (self.workdir / "stdout.log").open("wb")
        self.proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=self.workdir
        )

    def output_tail(self, lines: int = 30) -> str:
        log_file = self.workdir / "stdout.log"
        return (
            "\n".join(log_file.read_text(errors="replace").splitlines()[-lines:]) if log_file.exists() else ""
        )

    def _wait_until(self, ready: Callable[[], bool], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise ServerError(f"{self.name} exited with {self.proc.returncode}:\n{self.output_tail()}")
            if ready():
                return
            time.sleep(0.25)
        self.stop()
        raise ServerError(f"{self.name} was not ready after {timeout_s:g} s:\n{self.output_tail()}")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)

    def start(self, timeout_s: float) -> Self:
        raise NotImplementedError

    def restart(self, sig: int = signal.SIGKILL, down_s: float = 0.0, timeout_s: float = 120.0) -> Self:
        """Stops the process with ``sig``, waits ``down_s`` and starts it again
        on the same port (and data, if it keeps any), as after a crash
        (SIGKILL) or an operator's restart (SIGTERM)."""
        self.kill(sig)
        assert self.proc is not None
        self.proc.wait(60)
        time.sleep(down_s)
        return self.start(timeout_s)

    def stop(self, timeout_s: float = 30.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.kill(signal.SIGTERM)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill(signal.SIGKILL)
            self.proc.wait()


class ElasticsearchServer(_Process):
    """A single-node Elasticsearch listening on 127.0.0.1, with security off,
    or on (``secured``): HTTPS with a certificate of a CA its own
    ``elasticsearch-certutil`` makes (``ca_path``), and one user of the file
    realm, ``username`` with ``password``, a superuser."""

    def __init__(
        self,
        port: int | None = None,
        heap_mb: int = 512,
        settings: dict[str, object] | None = None,
        secured: bool = False,
    ) -> None:
        """``settings`` are added to the node's (``thread_pool.write.queue_size``, ...)."""
        super().__init__("elasticsearch", Path(tempfile.mkdtemp(prefix="skyoap-es-")))
        self.port = port or free_port()
        self.heap_mb = heap_mb
        self.settings = settings or {}
        self.secured = secured
        self.username, self.password = "skyoap", "elastic-s3cret"
        self.ca_path = self.workdir / "config" / "certs" / "ca" / "ca.crt"
        self._transport_port = free_port()

    @property
    def url(self) -> str:
        return f"{'https' if self.secured else 'http'}://127.0.0.1:{self.port}"

    def _secure(self, home: Path, conf: Path, env: dict[str, str]) -> dict[str, object]:
        """Makes the CA, the node's certificate and the user; returns the settings that use them."""
        certs = conf / "certs"
        certs.mkdir()
        certutil = str(home / "bin" / "elasticsearch-certutil")
        for argv, archive in (
            ([certutil, "ca", "--pem", "--silent", "--out", str(certs / "ca.zip")], "ca.zip"),
            (
                [
                    certutil, "cert", "--pem", "--silent", "--ca-cert", str(self.ca_path),
                    "--ca-key", str(certs / "ca" / "ca.key"), "--ip", "127.0.0.1", "--dns", "localhost",
                    "--out", str(certs / "node.zip"),
                ],
                "node.zip",
            ),
        ):  # fmt: skip
            subprocess.run(argv, env=env, check=True, capture_output=True, timeout=120)
            with zipfile.ZipFile(certs / archive) as z:
                z.extractall(certs)
        users = str(home / "bin" / "elasticsearch-users")
        subprocess.run(
            [users, "useradd", self.username, "-p", self.password, "-r", "superuser"],
            env=env,
            check=True,
            capture_output=True,
            timeout=120,
        )
        return {
            "xpack.security.enabled": "true",
            "xpack.security.http.ssl.enabled": "true",
            "xpack.security.http.ssl.key": certs / "instance" / "instance.key",
            "xpack.security.http.ssl.certificate": certs / "instance" / "instance.crt",
            "xpack.security.http.ssl.certificate_authorities": self.ca_path,
        }

    def start(self, timeout_s: float = 120.0) -> ElasticsearchServer:
        """Starts the server on its data directory, made empty the first time."""
        home = elasticsearch_home()
        conf = self.workdir / "config"
        env = {
            **os.environ,
            "ES_JAVA_HOME": str(java_home()),
            "ES_PATH_CONF": str(conf),
            "ES_TMPDIR": str(self.workdir / "tmp"),
            "ES_JAVA_OPTS": f"-Xms{self.heap_mb}m -Xmx{self.heap_mb}m",
        }
        security: dict[str, object] = {"xpack.security.enabled": "false"}
        if not conf.exists():
            shutil.copytree(home / "config", conf)
            for sub in ("data", "logs", "tmp"):
                (self.workdir / sub).mkdir()
            if self.secured:
                self._security = self._secure(home, conf, env)
            if os.geteuid() == 0:
                for p in (self.workdir, *self.workdir.rglob("*")):
                    os.chown(p, UNPRIVILEGED_UID, UNPRIVILEGED_UID)
        if self.secured:
            security = self._security
        settings = {
            "http.port": self.port,
            "transport.port": self._transport_port,
            "network.host": "127.0.0.1",
            "discovery.type": "single-node",
            **security,
            "path.data": self.workdir / "data",
            "path.logs": self.workdir / "logs",
            # Shared machines often have little free disk; never go read-only for it.
            "cluster.routing.allocation.disk.threshold_enabled": "false",
            "action.destructive_requires_name": "false",
            **self.settings,
        }
        argv = [str(home / "bin" / "elasticsearch")] + [f"-E{k}={v}" for k, v in settings.items()]
        self._spawn(argv, env, as_nobody=True)
        self._wait_until(self._healthy, timeout_s)
        log.info("Elasticsearch %s listening on %s", ES_VERSION, self.url)
        return self

    def _healthy(self) -> bool:
        request = urllib.request.Request(f"{self.url}/_cluster/health?wait_for_status=yellow&timeout=1s")
        context = None
        if self.secured:
            token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
            context = ssl.create_default_context(cafile=str(self.ca_path))
        try:
            with urllib.request.urlopen(request, timeout=3, context=context):
                return True
        except OSError:
            return False

    def stop(self, timeout_s: float = 30.0) -> None:
        super().stop(timeout_s)
        shutil.rmtree(self.workdir, ignore_errors=True)


class RedisServer(_Process):
    """A Redis with no persistence, listening on 127.0.0.1."""

    def __init__(self, port: int | None = None, password: str = "") -> None:
        """With ``password``, clients must give it (``requirepass``)."""
        super().__init__("redis", Path(tempfile.mkdtemp(prefix="skyoap-redis-")))
        self.port = port or free_port()
        self.password = password

    @property
    def url(self) -> str:
        """With the password in it, if the server requires one."""
        credentials = f":{self.password}@" if self.password else ""
        return f"redis://{credentials}127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 30.0) -> RedisServer:
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        if not Path(binary).exists():
            raise ServerError(
                "redis-server is not installed: run deploy/install.sh (apt-get install redis-server)"
            )
        self._spawn(
            [
                binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                *(["--requirepass", self.password] if self.password else []),
            ]
        )  # fmt: skip
        self._wait_until(self._answers, timeout_s)
        return self

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                # A server that requires a password answers: it is up.
                return s.recv(16).startswith((b"+PONG", b"-NOAUTH"))
        except OSError:
            return False

    def stop(self, timeout_s: float = 10.0) -> None:
        super().stop(timeout_s)
        shutil.rmtree(self.workdir, ignore_errors=True)


TOOLS = Path(__file__).resolve().parents[2] / ".tools"
"""Where deploy/install.sh unpacks Debian's binaries that run beside no
service of their own (promtool, Prometheus's exporters)."""


class ExporterServer(_Process):
    """One of Prometheus's exporters (Debian's ``prometheus-KIND-exporter``,
    unpacked into ``.tools``), serving ``/metrics`` on 127.0.0.1, with the
    ``args`` and ``env`` that point it at what it exports."""

    def __init__(self, kind: str, *args: str, env: dict[str, str] | None = None) -> None:
        super().__init__(f"{kind} exporter", Path(tempfile.mkdtemp(prefix=f"skyoap-{kind}-exporter-")))
        self.binary = TOOLS / f"prometheus-{kind}-exporter"
        self.args = args
        self.env = env or {}
        self.port = free_port()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> ExporterServer:
        if not self.binary.exists():
            raise ServerError(f"{self.binary} is missing: run deploy/install.sh, which unpacks Debian's")
        argv = [str(self.binary), f"--web.listen-address={self.address}", *self.args]
        self._spawn(argv, {**os.environ, **self.env})
        self._wait_until(self._serves, timeout_s)
        return self

    def metrics(self) -> str:
        """What it serves now."""
        with urllib.request.urlopen(f"http://{self.address}/metrics", timeout=10) as response:
            text: str = response.read().decode()
        return text

    def _serves(self) -> bool:
        try:
            return bool(self.metrics())
        except OSError:
            return False

    def stop(self, timeout_s: float = 10.0) -> None:
        super().stop(timeout_s)
        shutil.rmtree(self.workdir, ignore_errors=True)


class PostgresServer(_Process):
    """A PostgreSQL (Debian's) on a database of its own, listening on
    127.0.0.1 with trust authentication, no data kept past ``stop``: what
    the tests of services that query a database call."""

    def __init__(self, port: int | None = None) -> None:
        super().__init__("postgres", Path(tempfile.mkdtemp(prefix="skyoap-postgres-")))
        self.port = port or free_port()

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def start(self, timeout_s: float = 60.0) -> PostgresServer:
        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"))
        if not found:
            raise ServerError(
                "PostgreSQL is not installed: run deploy/install.sh (apt-get install postgresql)"
            )
        bin_dir, data = found[-1].parent, self.workdir / "data"
        if not data.exists():
            if os.geteuid() == 0:  # PostgreSQL refuses to run as root
                os.chown(self.workdir, UNPRIVILEGED_UID, UNPRIVILEGED_UID)
            initdb = [
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
            ]
            self._spawn(initdb, as_nobody=True)
            assert self.proc is not None
            if self.proc.wait(timeout_s) != 0:
                raise ServerError(f"initdb failed:\n{self.output_tail()}")
        argv = [
            str(bin_dir / "postgres"), "-D", str(data), "-p", str(self.port), "-k", str(self.workdir),
            "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
        ]  # fmt: skip
        self._spawn(argv, as_nobody=True)
        self._wait_until(self._answers, timeout_s)
        return self

    def _answers(self) -> bool:
        return (self.workdir / f".s.PGSQL.{self.port}").exists() and _listening(self.port)

    def stop(self, timeout_s: float = 10.0) -> None:
        super().stop(timeout_s)
        shutil.rmtree(self.workdir, ignore_errors=True)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False
