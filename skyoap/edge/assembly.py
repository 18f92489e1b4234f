"""A node's gRPC servers, built from its server section: the agents' and,
given the guard and TLS its cluster asks for, the internal one."""

from __future__ import annotations

from skyoap.edge.auth import AgentToken, RequiredMetadata
from skyoap.edge.config import ServerConfig
from skyoap.edge.limits import CallLimits
from skyoap.edge.server import GrpcServer
from skyoap.edge.tls import ServerTls
from skyoap.runtime.budget import MemoryBudget


def grpc_server(
    config: ServerConfig,
    port: int,
    deadline_s: float,
    budget: MemoryBudget,
    guard: RequiredMetadata | None,
    tls: ServerTls | None,
    *,
    reflection: bool = True,
    reuse_port: bool = False,
) -> GrpcServer:
    """A server on ``port`` whose calls are bounded as ``config`` says and
    must carry what ``guard`` requires."""
    return GrpcServer(
        config.host,
        port,
        config.max_message_bytes,
        deadline_s,
        CallLimits(config.max_concurrent_calls, config.stream_idle_s, config.stream_max_age_s),
        guard,
        tls,
        reflection,
        budget,
        config.max_control_message_bytes,
        reuse_port,
    )


def agent_server(
    config: ServerConfig, deadline_s: float, budget: MemoryBudget, *, reuse_port: bool
) -> GrpcServer:
    """The server agents call: the agent token and TLS of ``config``."""
    token = AgentToken(config.auth_token) if config.auth_token else None
    tls = ServerTls(config.tls_cert, config.tls_key) if config.tls_cert else None
    return grpc_server(config, config.port, deadline_s, budget, token, tls, reuse_port=reuse_port)
