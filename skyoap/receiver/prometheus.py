"""Prometheus exporters scraped by the node itself: the targets of a file
in the form of Prometheus's ``scrape_configs``, read every interval, their
samples labelled as OpenTelemetry's Collector labels what its Prometheus
receiver scrapes, and handed to the meter rules. So the rules SkyWalking
ships for exporters behind a Collector apply unchanged, with no Collector:

- ``job_name`` the scrape job's name (the Collector's ``service.name``),
  ``service_instance_id`` the target (``host:port``, its
  ``service.instance.id``), ``node_identifier_host_name`` and
  ``net_host_name`` the target's host, ``net_host_port`` its port and
  ``http_scheme`` the scheme;
- a series' own labels and the target's (``static_configs``' ``labels``)
  beside them, winning over those where names meet;
- a histogram as OTLP carries it: ``<name>`` with each bucket's own count
  (not the running total Prometheus serves) by its upper bound ``le``
  (``Infinity`` the last), ``<name>_count`` and ``<name>_sum``; a summary
  as ``<name>`` by ``quantile``, ``<name>_count`` and ``<name>_sum``.

    scrape_configs:
      - job_name: vm-monitoring
        scrape_interval: 15s
        static_configs:
          - targets: ['10.0.0.5:9100']
            labels: {host_name: db-host}
"""

from __future__ import annotations

import base64
import hashlib
import logging
import math
import re
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from skyoap.mal import families as f
from skyoap.mal.evaluation import Batch
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.periodic import Periodic

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024 * 1024
"""The largest exposition read from a target; a larger one fails its scrape."""


class ScrapeConfigError(ValueError):
    """A scrape config this node does not take; the message says where and why."""


@dataclass(frozen=True)
class Target:
    job: str
    address: str
    """``host:port``."""
    labels: Mapping[str, str]
    """The target's own labels (``static_configs``' ``labels``)."""
    interval_s: float
    timeout_s: float
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    tls: ssl.SSLContext | None = field(default=None, compare=False)

    @property
    def host(self) -> str:
        return self.address.rsplit(":", 1)[0].strip("[]")

    @property
    def port(self) -> str:
        return self.address.rsplit(":", 1)[1] if ":" in self.address else ""


_DURATION = re.compile(r"((?P<h>\d+)h)?((?P<m>\d+)m(?!s))?((?P<s>\d+)s)?((?P<ms>\d+)ms)?")


def seconds(text: str, where: str) -> float:
    """A Prometheus duration (``15s``, ``1m``, ``1m30s``, ``500ms``) in seconds."""
    found = _DURATION.fullmatch(str(text).strip())
    if not text or found is None or not any(found.groupdict().values()):
        raise ScrapeConfigError(f"{where}: {text!r} is not a duration such as 15s or 1m")
    parts = {k: int(v) for k, v in found.groupdict().items() if v}
    value = parts.get("h", 0) * 3600 + parts.get("m", 0) * 60 + parts.get("s", 0) + parts.get("ms", 0) / 1000
    if value <= 0:
        raise ScrapeConfigError(f"{where}: {text!r} is not a duration above 0")
    return value


def read_scrape_config(path: Path) -> list[Target]:
    """The targets of a scrape config file; ScrapeConfigError saying which
    job and key are wrong."""
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ScrapeConfigError(f"{path}: not a YAML scrape config: {e}") from None
    if not isinstance(document, Mapping) or not isinstance(document.get("scrape_configs"), list):
        raise ScrapeConfigError(f"{path}: a scrape config has a list of scrape_configs")
    defaults = document.get("global") or {}
    interval = seconds(defaults.get("scrape_interval", "1m"), f"{path}: global.scrape_interval")
    timeout = seconds(defaults.get("scrape_timeout", "10s"), f"{path}: global.scrape_timeout")
    targets: list[Target] = []
    jobs: set[str] = set()
    for i, job in enumerate(document["scrape_configs"]):
        name = job.get("job_name") if isinstance(job, Mapping) else None
        if not isinstance(name, str) or not name:
            raise ScrapeConfigError(f"{path}: scrape config {i + 1} has no job_name")
        if name in jobs:
            raise ScrapeConfigError(f"{path}: job {name} is named twice")
        jobs.add(name)
        targets += _job(job, f"{path}: job {name}", interval, timeout)
    return targets


_JOB_KEYS = frozenset({
    "job_name", "scrape_interval", "scrape_timeout", "metrics_path", "scheme", "static_configs", "tls_config",
    "basic_auth", "params", "honor_labels",
})  # fmt: skip


def _job(job: Mapping[str, Any], where: str, interval_s: float, timeout_s: float) -> list[Target]:
    unknown = sorted(set(job) - _JOB_KEYS)
    if unknown:
        raise ScrapeConfigError(
            f"{where}: {', '.join(unknown)}: not taken here (of {', '.join(sorted(_JOB_KEYS))})"
        )
    interval = (
        seconds(job["scrape_interval"], f"{where}: scrape_interval")
        if "scrape_interval" in job
        else interval_s
    )
    timeout = (
        seconds(job["scrape_timeout"], f"{where}: scrape_timeout") if "scrape_timeout" in job else timeout_s
    )
    timeout = min(timeout, interval)
    scheme = job.get("scheme", "http")
    if scheme not in ("http", "https"):
        raise ScrapeConfigError(f"{where}: scheme {scheme!r} is neither http nor https")
    path = job.get("metrics_path", "/metrics")
    params = job.get("params") or {}
    query = urllib.parse.urlencode(
        [(k, v) for k, values in params.items() for v in (values if isinstance(values, list) else [values])]
    )
    headers = _basic_auth(job.get("basic_auth"), where)
    tls = _tls(job.get("tls_config"), where) if scheme == "https" or job.get("tls_config") else None
    targets = []
    for group in job.get("static_configs") or []:
        labels = {str(k): str(v) for k, v in (group.get("labels") or {}).items()}
        for address in group.get("targets") or []:
            if not re.fullmatch(r"(\[[0-9a-fA-F:]+\]|[^:/\s]+):\d+", str(address)):
                raise ScrapeConfigError(f"{where}: target {address!r} is not host:port")
            url = f"{scheme}://{address}{path}" + (f"?{query}" if query else "")
            targets.append(
                Target(job["job_name"], str(address), labels, interval, timeout, url, headers, tls)
            )
    return targets


def _basic_auth(auth: Any, where: str) -> dict[str, str]:
    if not auth:
        return {}
    if not isinstance(auth, Mapping) or "username" not in auth:
        raise ScrapeConfigError(f"{where}: basic_auth has a username and a password or password_file")
    password = auth.get("password", "")
    if "password_file" in auth:
        try:
            password = Path(auth["password_file"]).read_text(encoding="utf-8").strip()
        except OSError as e:
            raise ScrapeConfigError(f"{where}: basic_auth.password_file: {e}") from None
    token = base64.b64encode(f"{auth['username']}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def _tls(config: Any, where: str) -> ssl.SSLContext:
    config = config or {}
    try:
        context = ssl.create_default_context(cafile=config.get("ca_file"))
        if config.get("cert_file"):
            context.load_cert_chain(config["cert_file"], config.get("key_file"))
    except (OSError, ssl.SSLError) as e:
        raise ScrapeConfigError(f"{where}: tls_config: {e}") from None
    if config.get("insecure_skip_verify"):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def samples_of(text: str, target: Target, now_ms: int) -> Batch:
    """The families of one scrape of ``target`` (an exposition ``text``), as
    the Collector would hand them on."""
    resource = {
        "job_name": target.job, "service_name": target.job, "service_instance_id": target.address,
        "net_host_name": target.host, "net_host_port": target.port, "node_identifier_host_name": target.host,
        "http_scheme": target.url.split(":", 1)[0],
    }  # fmt: skip
    common = {**resource, **target.labels}
    found: dict[str, list[f.Sample]] = {}

    def add(name: str, labels: Mapping[str, str], value: float, timestamp: Any) -> None:
        if math.isnan(value):
            return
        tags = {**common, **labels}
        time_ms = int(float(timestamp) * 1000) if timestamp is not None else now_ms
        found.setdefault(name, []).append(f.Sample(name, f.labels_of(tags), float(value), time_ms))

    for family in text_string_to_metric_families(text):
        if family.type == "histogram":
            _histogram(family.name, family.samples, add)
            continue
        for s in family.samples:
            labels = dict(s.labels)
            if family.type == "summary" and "quantile" in labels:
                labels["quantile"] = f.java_double(float(labels["quantile"]))
            add(s.name, labels, s.value, s.timestamp)
    return Batch({name: f.Family(tuple(samples)) for name, samples in found.items()})


def _histogram(name: str, samples: Iterable[Any], add: Callable[..., None]) -> None:
    """A histogram's buckets, each its own count by its upper bound (as OTLP
    has them), its count and its sum."""
    series: dict[tuple[tuple[str, str], ...], list[tuple[float, float, float | None]]] = {}
    for s in samples:
        labels = {k: v for k, v in s.labels.items() if k != "le"}
        if s.name == f"{name}_bucket" and "le" in s.labels:
            series.setdefault(tuple(sorted(labels.items())), []).append(
                (float(s.labels["le"]), s.value, s.timestamp)
            )
        else:
            add(s.name, labels, s.value, s.timestamp)
    for key, buckets in series.items():
        running = 0.0
        for bound, total, timestamp in sorted(buckets):
            add(name, {**dict(key), "le": f.java_double(bound)}, total - running, timestamp)
            running = total


def owner(target: Target, scrapers: Sequence[str]) -> str:
    """Which of ``scrapers`` (the names of a cluster's nodes that take agents)
    scrapes ``target``: the one whose name hashed with the target's URL is
    greatest. Each target has one; a node that leaves moves only its own, and
    a node that joins takes only those it now wins."""

    def weight(name: str) -> bytes:
        return hashlib.blake2b(f"{name}\x1f{target.url}".encode(), digest_size=8).digest()

    return max(scrapers, key=weight)


class Shares:
    """Whether this node scrapes a target, as its cluster's nodes share them
    (``owner``); the members are read again every ``refresh_s``. A series'
    samples so reach one node, where its counters' windows are kept; when
    a target moves, its new scraper's rates start again at its second scrape."""

    def __init__(self, me: str, scrapers: Callable[[], Sequence[str]], refresh_s: float = 1.0) -> None:
        self._me = me
        self._scrapers = scrapers
        self._refresh_s = refresh_s
        self._known: tuple[float, Sequence[str]] = (-math.inf, ())
        self._lock = threading.Lock()

    def mine(self, target: Target) -> bool:
        with self._lock:
            read_at, names = self._known
            if time.monotonic() - read_at >= self._refresh_s:
                try:
                    names = self._scrapers() or [self._me]
                except Exception as e:  # the membership unreadable: the share last read holds
                    log.warning("the cluster's members could not be read (%r); targets shared as before", e)
                    names = names or [self._me]
                self._known = (time.monotonic(), names)
        return owner(target, names) == self._me


class Scraper:
    """Scrapes each target every interval on a thread of its own and hands
    each scrape's samples to ``take``; in a cluster, the targets ``shares``
    gives this node. A scrape that fails is counted; the log tells when a
    target starts failing and when it comes back."""

    def __init__(
        self,
        targets: Iterable[Target],
        take: Callable[[Batch], None],
        instruments: Instruments,
        shares: Shares | None = None,
    ) -> None:
        self.targets = list(targets)
        self._take = take
        self._shares = shares
        self._tasks = [
            Periodic(f"scrape-{t.job}-{t.address}", t.interval_s, self._scraper(t), "a scrape")
            for t in self.targets
        ]
        self._scrapes = instruments.counter(
            "skyoap_scrapes_total", "scrapes of exporters", ["job", "outcome"]
        )
        self._samples = instruments.counter("skyoap_scrape_samples_total", "samples scraped", ["job"])
        self._down: set[str] = set()
        self._lock = threading.Lock()

    def start(self) -> None:
        for task in self._tasks:
            task.start()

    def close(self, timeout_s: float = 5.0) -> None:
        """Stops the scrapes, each waiting up to ``timeout_s`` for one under way. Idempotent."""
        for task in self._tasks:
            task.close(timeout_s)

    def _scraper(self, target: Target) -> Callable[[], object]:
        return lambda: self.scrape(target) if self._shares is None or self._shares.mine(target) else None

    def scrape(self, target: Target) -> Batch | None:
        """One scrape of ``target``: what it handed on, or None if it failed."""
        started = time.time()
        try:
            text = _read(target)
            batch = samples_of(text, target, int(started * 1000))
        except (OSError, ValueError, urllib.error.URLError) as e:
            self._scrapes.labels(job=target.job, outcome="failed").inc()
            self._state(target, f"{type(e).__name__}: {e}")
            return None
        self._scrapes.labels(job=target.job, outcome="scraped").inc()
        self._samples.labels(job=target.job).inc(sum(len(fam.samples) for fam in batch.families.values()))
        self._state(target, None)
        self._take(batch)
        return batch

    def _state(self, target: Target, failure: str | None) -> None:
        key = target.url
        with self._lock:
            was_down = key in self._down
            if failure is not None and not was_down:
                self._down.add(key)
                log.warning(
                    "scraping %s (job %s) failed: %s; told again when it comes back",
                    target.url,
                    target.job,
                    failure,
                )
            elif failure is None and was_down:
                self._down.discard(key)
                log.warning("scraping %s (job %s) works again", target.url, target.job)


def _read(target: Target) -> str:
    request = urllib.request.Request(
        target.url, headers={"Accept": "text/plain;version=0.0.4", "User-Agent": "skyoap", **target.headers}
    )
    with urllib.request.urlopen(request, timeout=target.timeout_s, context=target.tls) as response:
        body: bytes = response.read(MAX_BODY_BYTES + 1)
    if len(body) > MAX_BODY_BYTES:
        raise ValueError(f"the exposition is larger than {MAX_BODY_BYTES} bytes")
    return body.decode("utf-8")
