"""The receiver's sections of a node's configuration: what one agent call
may carry and how long it may take (limits), and how telemetry becomes
metrics (analysis)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from skyoap.layers import RULE_FILES
from skyoap.layers.spans import SlowThresholds, Thresholds
from skyoap.mal.rules import RuleError, RuleFile, read_rules
from skyoap.model.checks import TelemetryLimits
from skyoap.model.metrics import ApdexThresholds
from skyoap.model.spans import SEARCHABLE_LOG_TAGS, SEARCHABLE_TRACE_TAGS
from skyoap.receiver import sampling
from skyoap.receiver.prometheus import ScrapeConfigError, Target, read_scrape_config
from skyoap.runtime.config import option


@dataclass(frozen=True)
class LimitsConfig:
    """What one agent call may carry and how long it may take; more is refused
    with a status that says why."""

    call_deadline_s: float = option(
        5.0,
        "how long an agent call may take from its request's arrival (a stream's last message), "
        "whatever it waits on, before it is answered RESOURCE_EXHAUSTED or UNAVAILABLE; "
        "also how long a batch from another node waits for room in L2",
    )
    memory_limit_mb: int = option(
        256,
        "megabytes of accepted telemetry a node holds while it is combined, sent on or stored; "
        "calls that do not fit wait, then are refused whole",
    )

    max_name_length: int = option(500, "longest name (in characters) a registration may carry")
    max_properties_chars: int = option(16_384, "most characters of tags and properties one name may carry")
    max_batch_items: int = option(1000, "most names one registration call may carry")
    max_spans_per_segment: int = option(2000, "most spans one trace segment may carry")
    max_refs_per_span: int = option(500, "most references (parents) one span may carry")
    max_tags_per_item: int = option(128, "most tags one span or log line may carry")
    max_log_body_bytes: int = option(128 * 1024, "largest log body, in bytes")
    max_histogram_buckets: int = option(100, "most buckets one meter histogram may carry")
    endpoint_groups: str = option(
        "",
        "file of endpoint grouping rules: lines 'GROUP' ({name} matches one path segment) or "
        "'GROUP = REGEX', under optional [SERVICE] headers (docs/security.md#cardinality)",
    )
    max_services: int = option(
        10_000,
        "most services; past it new names count as the service (other), with their instances and endpoints",
    )
    max_endpoints_per_service: int = option(
        3000, "most endpoints a service has; past it new names count as the endpoint (other)"
    )
    max_instances_per_service: int = option(
        5000, "most instances a service has; past it new names count as the instance (other)"
    )
    max_network_addresses: int = option(
        50_000, "most peer addresses of all services; past it new ones count as the address (other)"
    )
    telemetry_max_age_s: float = option(
        3 * 86_400.0, "segments, logs and meters time-stamped longer ago than this are refused"
    )
    telemetry_max_ahead_s: float = option(
        600.0, "segments, logs and meters time-stamped further ahead of the node's clock are refused"
    )

    def items(self) -> TelemetryLimits:
        """The rules every item is checked against, at the edge and at the RemoteService."""
        return TelemetryLimits(
            self.max_name_length,
            int(self.telemetry_max_age_s * 1000),
            int(self.telemetry_max_ahead_s * 1000),
            self.max_properties_chars,
            self.max_spans_per_segment,
            self.max_refs_per_span,
            self.max_tags_per_item,
            self.max_log_body_bytes,
            self.max_histogram_buckets,
        )

    def check(self) -> None:
        if self.memory_limit_mb < 1:
            raise ValueError(f"--memory-limit-mb must be at least 1, not {self.memory_limit_mb}")
        if self.call_deadline_s <= 0:
            raise ValueError(
                f"--call-deadline-s must be above 0, not {self.call_deadline_s:g}: "
                "calls wait that long for room and for storage"
            )
        for name in (
            "max_spans_per_segment", "max_refs_per_span", "max_tags_per_item", "max_log_body_bytes",
            "max_histogram_buckets", "max_endpoints_per_service", "max_instances_per_service",
            "max_network_addresses", "max_services",
        ):  # fmt: skip
            value = getattr(self, name)
            if value < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1, not {value}")


SHIPPED = "shipped"
"""What ``--meter-rules`` names skyoap's own rule files by."""


@dataclass(frozen=True)
class AnalysisConfig:
    """How telemetry becomes metrics."""

    apdex_thresholds: str = option(
        "",
        "file of each service's apdex threshold in ms, as SkyWalking's service-apdex-threshold.yml: "
        "lines 'SERVICE: MS' and 'default: MS' (500 ms when not given)",
    )

    otlp_caller_wait_s: float = option(
        10.0,
        "how long an OTLP entry span waits for its parent span (of the service that called it), "
        "whose names its relations need; past it no relation is counted for it",
    )

    alias_refresh_s: float = option(
        10.0,
        "how often a node that takes agent traffic reads from storage the network address aliases "
        "other nodes learned (an entry span names the address its caller used; exit spans to it "
        "are then measured as calls to its service); what it learns itself it uses at once",
    )

    searchable_trace_tags: str = option(
        ",".join(SEARCHABLE_TRACE_TAGS),
        "span tag keys traces are searched by, comma separated (SkyWalking's searchableTracesTags): "
        "a segment's tags of these keys are stored with it, and queryBasicTraces finds it by them",
    )

    searchable_log_tags: str = option(
        ",".join(SEARCHABLE_LOG_TAGS),
        "log tag keys log lines are searched by, comma separated (SkyWalking's searchableLogsTags): "
        "a line's tags of these keys are stored to search by, and queryLogs finds it by them",
    )

    slow_db_access_threshold: str = option(
        "default:200,mongodb:100",
        "latency in ms past which a database statement is sampled as slow, by db.type, as "
        "SkyWalking's slowDBAccessThreshold: 'default:MS,TYPE:MS,...'",
    )

    slow_cache_read_threshold: str = option(
        "default:20,redis:10",
        "latency in ms past which a cache read is sampled as slow, by cache.type, as "
        "SkyWalking's slowCacheReadThreshold",
    )

    slow_cache_write_threshold: str = option(
        "default:20,redis:10",
        "latency in ms past which a cache write is sampled as slow, by cache.type, as "
        "SkyWalking's slowCacheWriteThreshold",
    )

    trace_sampling_settings: str = option(
        "",
        "SkyWalking's trace-sampling-policy-settings.yml, read as is: a default rate and per-service "
        "rates in 1/10000 of traces whose segments are stored, decided by the trace id alike on every "
        "node, and a duration in ms past which a segment is stored anyway; segments with errors are "
        "always stored, and every segment is measured; a file changed on disk is read again "
        "(none: every segment is stored)",
    )

    trace_sampling_reload_s: float = option(
        10.0, "how often the trace sampling settings file is looked at for changes"
    )

    meter_rules: str = option(
        "shipped",
        "the meter system's rule files, in SkyWalking's form (otel-rules, meter-analyzer-config), comma "
        "separated: files, or directories read with their subdirectories; 'shipped' stands for skyoap's "
        "own (hosts, PostgreSQL, Redis, MySQL and the Python agent's runtime); '' runs none",
    )

    scrape_config: str = option(
        "",
        "file of Prometheus exporters this node scrapes, in Prometheus's scrape_configs form (job_name, "
        "scrape_interval, static_configs, metrics_path, scheme, tls_config, basic_auth); what it scrapes "
        "goes to the meter rules, labelled as OpenTelemetry's Collector labels it",
    )

    def slow(self) -> SlowThresholds:
        """The thresholds of the ``--slow-*-threshold`` options; ValueError saying which is wrong."""
        return SlowThresholds(
            Thresholds.parse(self.slow_db_access_threshold, "--slow-db-access-threshold"),
            Thresholds.parse(self.slow_cache_read_threshold, "--slow-cache-read-threshold"),
            Thresholds.parse(self.slow_cache_write_threshold, "--slow-cache-write-threshold"),
        )

    def searchable_tags(self) -> frozenset[str]:
        """The keys of ``--searchable-trace-tags``."""
        return _keys(self.searchable_trace_tags)

    def log_tags(self) -> frozenset[str]:
        """The keys of ``--searchable-log-tags``."""
        return _keys(self.searchable_log_tags)

    def rule_files(self) -> list[RuleFile]:
        """The files of ``--meter-rules``; ValueError naming the file and rule that is wrong."""
        paths: list[Path] = []
        for item in (p.strip() for p in self.meter_rules.split(",")):
            if item == SHIPPED:
                paths += RULE_FILES
            elif item:
                paths.append(Path(item))
        try:
            return read_rules(paths)
        except RuleError as e:
            raise ValueError(f"--meter-rules: {e}") from None

    def scrape_targets(self) -> list[Target]:
        """The targets of ``--scrape-config``; ValueError saying what is wrong."""
        if not self.scrape_config:
            return []
        try:
            return read_scrape_config(Path(self.scrape_config))
        except ScrapeConfigError as e:
            raise ValueError(f"--scrape-config: {e}") from None

    def apdex(self) -> ApdexThresholds:
        """The thresholds of ``--apdex-thresholds``; ValueError for a file that cannot be read as one."""
        if not self.apdex_thresholds:
            return ApdexThresholds()
        path = Path(self.apdex_thresholds)
        try:
            text = path.read_text()
        except OSError as e:
            raise ValueError(f"--apdex-thresholds: cannot read {path}: {e.strerror}") from e
        return ApdexThresholds.parse(text, f"--apdex-thresholds {path}")

    def check(self) -> None:
        self.slow()
        self.rule_files()
        self.scrape_targets()
        if self.otlp_caller_wait_s <= 0:
            raise ValueError(f"--otlp-caller-wait-s must be above 0, not {self.otlp_caller_wait_s:g}")
        if self.alias_refresh_s <= 0:
            raise ValueError(f"--alias-refresh-s must be above 0, not {self.alias_refresh_s:g}")
        if self.trace_sampling_reload_s <= 0:
            raise ValueError(
                f"--trace-sampling-reload-s must be above 0, not {self.trace_sampling_reload_s:g}"
            )
        if self.trace_sampling_settings:
            sampling.load(Path(self.trace_sampling_settings))
        for flag, keys in (
            ("--searchable-trace-tags", self.searchable_tags()),
            ("--searchable-log-tags", self.log_tags()),
        ):
            for key in keys:
                if "=" in key:
                    raise ValueError(
                        f"{flag}: {key!r} is not a tag key (keys are comma separated, with no values)"
                    )


def _keys(text: str) -> frozenset[str]:
    """The comma-separated keys of ``text``, blanks dropped."""
    return frozenset(k.strip() for k in text.split(",") if k.strip())
