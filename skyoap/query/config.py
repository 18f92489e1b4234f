"""The query endpoint's section of a node's configuration: where it listens,
how many queries it runs at once and for how long, what one may be, and who
may ask (TLS, HTTP basic auth, a bearer token)."""

from __future__ import annotations

from dataclasses import dataclass

from skyoap.runtime.config import option

OFF = -1
"""``--query-port`` of a node that serves no queries."""


@dataclass(frozen=True)
class QueryConfig:
    host: str = option(
        "0.0.0.0", "address the query endpoint (GraphQL, POST /graphql) binds", name="query_host"
    )
    port: int = option(
        12800,
        "HTTP port of SkyWalking's query protocol, POST /graphql, where SkyWalking's UI, its CLI and "
        "Grafana ask (-1: off, 0: a free one)",
        name="query_port",
    )
    promql_port: int = option(
        -1,
        "HTTP port of SkyWalking's PromQL service, Prometheus's query API (/api/v1/query, ...), where "
        "Grafana's Prometheus data source and promtool ask, under the query endpoint's TLS, "
        "credentials and bounds (-1: off, 0: a free one; SkyWalking's docs use 9090)",
    )
    threads: int = option(
        8, "threads that run queries (each reads storage while it runs)", name="query_threads"
    )
    max_waiting: int = option(
        32,
        "queries that may wait for a thread while every one is busy; past them a query is answered "
        "503 at once",
        name="query_max_waiting",
    )
    deadline_s: float = option(
        10.0,
        "how long a query may take once its request has come, waiting for a thread included; past "
        "it the query is answered with an error saying so, and its reads of storage stop (a "
        "request's body must come within as long: past it, 408)",
        name="query_deadline_s",
    )
    max_body_bytes: int = option(
        1024 * 1024,
        "largest request body the query endpoint reads; a larger one is answered 413",
        name="query_max_body_bytes",
    )
    max_depth: int = option(
        15,
        "most levels of fields a query may nest (the standard introspection query has 15); a deeper "
        "one is refused before it runs",
        name="query_max_depth",
    )
    max_connections: int = option(
        256,
        "most connections the query port holds at once; one more is answered 503 and closed (the node "
        "lowers it to half the descriptors free at start, keeping the rest for agents)",
        name="query_max_connections",
    )
    max_connections_per_peer: int = option(
        64,
        "most connections the query port holds from one address (a UI server or proxy in front of the "
        "node is one); one more is answered 503 and closed",
        name="query_max_connections_per_peer",
    )
    header_timeout_s: float = option(
        10.0,
        "how long a new connection may take to send its first request's head (and its TLS handshake); "
        "past it the connection is closed",
        name="query_header_timeout_s",
    )
    idle_timeout_s: float = option(
        60.0,
        "how long a connection may stay open with no request under way (and a later request's head "
        "unfinished); past it the connection is closed",
        name="query_idle_timeout_s",
    )
    max_fields: int = option(
        5000,
        "most fields one query may ask for, each alias and each spread of a fragment counted; a query "
        "with more is refused before it is validated",
        name="query_max_fields",
    )
    max_tokens: int = option(
        50_000,
        "most tokens (names, punctuation, values) one query may hold; past them it is refused as it is read",
        name="query_max_tokens",
    )
    max_answer_bytes: int = option(
        16 * 2**20,
        "largest answer the query endpoint sends; a query whose answer would be larger stops when it "
        "passes the bound and is answered with an error saying so",
        name="query_max_answer_bytes",
    )
    tls_cert: str = option(
        "",
        "PEM certificate chain the query endpoint serves over HTTPS (read again when the file changes)",
        name="query_tls_cert",
    )
    tls_key: str = option("", "PEM private key of --query-tls-cert", name="query_tls_key")
    username: str = option(
        "", "user of HTTP basic auth on the query endpoint, with --query-password", name="query_username"
    )
    password: str = option(
        "",
        "password of --query-username (give it as SKYOAP_QUERY_PASSWORD: a command line is readable "
        "by every user of the machine)",
        name="query_password",
    )
    token: str = option(
        "",
        "bearer token the query endpoint takes as 'Authorization: Bearer TOKEN', alone or besides "
        "basic auth (give it as SKYOAP_QUERY_TOKEN)",
        name="query_token",
    )

    @property
    def enabled(self) -> bool:
        return self.port != OFF

    def check(self) -> None:
        if self.port < OFF:
            raise ValueError(f"--query-port must be -1 (off), 0 (a free port) or a port, not {self.port}")
        for flag, value in (
            ("--query-threads", self.threads),
            ("--query-max-body-bytes", self.max_body_bytes),
            ("--query-max-depth", self.max_depth),
            ("--query-max-fields", self.max_fields),
            ("--query-max-tokens", self.max_tokens),
            ("--query-max-answer-bytes", self.max_answer_bytes),
            ("--query-max-connections", self.max_connections),
            ("--query-max-connections-per-peer", self.max_connections_per_peer),
        ):
            if value < 1:
                raise ValueError(f"{flag} must be at least 1, not {value}")
        if self.max_waiting < 0:
            raise ValueError(f"--query-max-waiting must be 0 or more, not {self.max_waiting}")
        for flag, seconds in (
            ("--query-deadline-s", self.deadline_s),
            ("--query-header-timeout-s", self.header_timeout_s),
            ("--query-idle-timeout-s", self.idle_timeout_s),
        ):
            if seconds <= 0:
                raise ValueError(f"{flag} must be above 0, not {seconds:g}")
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ValueError("--query-tls-cert and --query-tls-key go together: give both or neither")
        self._check_credentials()

    def _check_credentials(self) -> None:
        if bool(self.username) != bool(self.password):
            raise ValueError("--query-username and --query-password go together: give both or neither")
        if ":" in self.username:
            raise ValueError(
                "--query-username may not hold ':': basic auth ends the user name at the first one"
            )
        if self.token and not (self.token.isascii() and self.token.isprintable() and " " not in self.token):
            raise ValueError(
                "--query-token must be printable ASCII without spaces: it travels in an HTTP header"
            )
