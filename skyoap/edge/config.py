"""The server section of a node's configuration: where agents connect, what a
call may be (its size, how many at once, how long a stream lives), who may
call (the agent token, TLS), the admin port and the worker processes."""

from __future__ import annotations

from dataclasses import dataclass

from skyoap.runtime.config import option


@dataclass(frozen=True)
class ServerConfig:
    host: str = option("0.0.0.0", "address the gRPC server binds")
    port: int = option(11800, "gRPC port for agents (0 picks a free one)")
    internal_port: int = option(
        11801,
        "gRPC port where aggregator and mixed nodes of a cluster take L1 results from other nodes "
        "(0 picks a free one; a standalone node opens none)",
    )
    advertised_host: str = option("127.0.0.1", "address other nodes use to reach this one")
    max_message_bytes: int = option(4 * 1024 * 1024, "largest gRPC message the node accepts")
    max_control_message_bytes: int = option(
        1024 * 1024,
        "largest message of a call that carries names or commands, not telemetry (registration, "
        "keep-alives, pings, configuration and profiling polls); a larger one is refused undecoded",
    )
    max_concurrent_calls: int = option(
        128,
        "most agent and node calls (streams included) served at once; past it a call is answered "
        "RESOURCE_EXHAUSTED (health checks are not counted)",
    )
    stream_idle_s: float = option(60.0, "a client stream that sends nothing for this long is closed")
    stream_max_age_s: float = option(
        600.0, "a stream (client streams, reflection, health watches) open this long is closed"
    )
    auth_token: str = option(
        "",
        "SkyWalking's agent token: every call but health checks must carry it as the gRPC metadata "
        "'authentication' (empty: none needed)",
    )
    tls_cert: str = option(
        "", "PEM certificate chain the agent port serves over TLS (read again when the file changes)"
    )
    tls_key: str = option("", "PEM private key of --tls-cert")
    admin_host: str = option("127.0.0.1", "address the admin HTTP server binds (its /metrics is open)")
    admin_port: int = option(-1, "HTTP port of /metrics and /healthz (-1: off, 0: a free one)")
    processes: int = option(
        1,
        "worker processes the node runs, one per core at most: each a member of the cluster with its "
        "own L1, L2 and memory budget, all sharing the agent port; worker K takes --internal-port + K "
        "(0: free ports), worker 0 serves the query port, and the admin port covers them all; more "
        "than one needs --cluster redis and --storage elasticsearch (docs/operations.md)",
        name="workers",
    )

    def check(self) -> None:
        if self.processes < 1:
            raise ValueError(f"--workers must be at least 1, not {self.processes}")
        if self.max_concurrent_calls < 1:
            raise ValueError(f"--max-concurrent-calls must be at least 1, not {self.max_concurrent_calls}")
        if self.stream_idle_s <= 0:
            raise ValueError(f"--stream-idle-s must be above 0, not {self.stream_idle_s:g}")
        if self.stream_max_age_s <= 0:
            raise ValueError(f"--stream-max-age-s must be above 0, not {self.stream_max_age_s:g}")
        check_metadata("--auth-token", self.auth_token)
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ValueError("--tls-cert and --tls-key go together: give both or neither")


def check_metadata(option: str, value: str) -> None:
    if value and not (value.isascii() and value.isprintable()):
        raise ValueError(
            f"{option} must be printable ASCII: it travels as gRPC metadata, which carries nothing else"
        )
