"""A node's gRPC server: the services of its role, health checking and reflection."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
from google.protobuf import descriptor
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection, reflection_pb2_grpc

from skyoap.edge.auth import RequiredMetadata
from skyoap.edge.binding import Binding, bind
from skyoap.edge.health import SERVICE_NAME as HEALTH_SERVICE
from skyoap.edge.health import Health
from skyoap.edge.limits import HEALTH_THREADS, CallLimits
from skyoap.edge.tls import ServerTls
from skyoap.runtime.budget import MemoryBudget

log = logging.getLogger(__name__)


class _CountedReflection(reflection.ReflectionServicer):
    """Reflection whose streams count against the bound and are closed when
    idle or too old, as our own streams are."""

    def __init__(self, names: tuple[str, ...], limits: CallLimits) -> None:
        super().__init__(names)
        self._limits = limits

    def ServerReflectionInfo(self, requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
        self._limits.admit(context)
        try:
            yield from super().ServerReflectionInfo(self._limits.watched(requests, context), context)
        finally:
            self._limits.leave()


def _listen(server: grpc.Server, host: str, port: int, tls: ServerTls | None) -> int:
    """Binds ``server`` to ``host``:``port``; returns the port bound."""
    try:
        # Older gRPC answers 0 for an address it cannot bind, newer raises.
        where = f"{host}:{port}"
        bound = (
            server.add_insecure_port(where)
            if tls is None
            else server.add_secure_port(where, tls.credentials())
        )
    except RuntimeError:
        bound = 0
    if bound == 0:
        raise OSError(f"cannot listen on {host}:{port}: the address is in use or not available")
    return bound


class GrpcServer:
    """Bound on construction (``port`` 0 picks a free port, read back from
    ``port``), so the node knows its address before it builds what routes to
    it; services are added next, and ``start`` opens it to calls."""

    def __init__(
        self,
        host: str,
        port: int,
        max_message_bytes: int,
        call_deadline_s: float = 5.0,
        limits: CallLimits | None = None,
        token: RequiredMetadata | None = None,
        tls: ServerTls | None = None,
        reflection: bool = True,
        budget: MemoryBudget | None = None,
        max_control_message_bytes: int | None = None,
        reuse_port: bool = False,
    ) -> None:
        """Each call answers within ``call_deadline_s`` of its request's arrival
        (``edge.binding.bind``), and ``limits`` bound the calls served at once
        and close idle streams (``edge/limits.py``). With ``token``, every
        call but health checks must carry its metadata (``edge/auth.py``); with ``tls``,
        the port speaks only TLS (``edge/tls.py``). ``reflection`` lists the
        services to whoever asks. A call reserves in ``budget`` what decoding
        its requests can cost before they are decoded; a request of a control
        service (``add``) may carry at most ``max_control_message_bytes``, any
        other ``max_message_bytes``. With ``reuse_port``, the worker processes
        of one node share the port (SO_REUSEPORT): the kernel hands each new
        connection to one of them."""
        self._reflection = reflection
        self.limits = limits or CallLimits(max_calls=128, stream_idle_s=60.0)
        self._binding = Binding(call_deadline_s, self.limits, budget)
        self._max_message_bytes = max_message_bytes
        self._max_control_message_bytes = min(
            max_message_bytes, max_control_message_bytes or max_message_bytes
        )
        self._executor = futures.ThreadPoolExecutor(
            max_workers=self.limits.threads, thread_name_prefix="grpc"
        )
        self._health_executor = futures.ThreadPoolExecutor(
            max_workers=HEALTH_THREADS, thread_name_prefix="grpc-health"
        )
        # No maximum_concurrent_rpcs: gRPC would count health checks against it
        # too, and refuse them while the bound is full.
        self.server = grpc.server(
            self._executor,
            interceptors=[token] if token else None,
            options=[
                ("grpc.max_receive_message_length", max_message_bytes),
                ("grpc.max_send_message_length", max_message_bytes),
                ("grpc.so_reuseport", int(reuse_port)),
                # Without probing, each stream's flow-control window stays at
                # gRPC's lookahead (and what the message being read needs);
                # with it, gRPC widens the window of a client that streams
                # faster than the node reads, and buffers what it sends.
                ("grpc.http2.bdp_probe", 0),
            ],
        )
        self.port = _listen(self.server, host, port, tls)
        self.health = Health(self.limits, self._health_executor, max_watches=self.limits.max_calls)
        self.server.add_generic_rpc_handlers((self.health.handler(),))
        self.services: list[str] = [HEALTH_SERVICE]
        self._started = False

    def add(
        self,
        service: descriptor.ServiceDescriptor,
        servicer: object,
        keep_undecodable: bool = False,
        control: bool = False,
    ) -> None:
        """Serves ``service`` with ``servicer`` (see ``edge.binding.bind``). A
        ``control`` service carries names and commands, never telemetry, so its
        requests are held to the smaller limit."""
        max_bytes = self._max_control_message_bytes if control else self._max_message_bytes
        self.services.append(bind(self.server, service, servicer, self._binding, max_bytes, keep_undecodable))

    def start(self) -> None:
        if self._reflection:
            reflection_pb2_grpc.add_ServerReflectionServicer_to_server(
                _CountedReflection((*self.services, reflection.SERVICE_NAME), self.limits), self.server
            )
        self.limits.start()
        self.server.start()
        self._started = True
        for name in ("", *self.services):
            self.health.set(name, health_pb2.HealthCheckResponse.SERVING)

    def refuse(self) -> None:
        """Answers NOT_SERVING to health checks from now on, still serving calls."""
        self.health.refuse()

    def close(self, timeout_s: float) -> None:
        """Stops listening and lets calls under way finish within ``timeout_s``;
        then joins the threads that served them."""
        self.refuse()
        if not self._started:
            # gRPC releases a bound port only by stopping a started server (a
            # node whose start failed halfway must not keep it).
            self.server.start()
        self.server.stop(timeout_s).wait(timeout_s + 1)
        self.limits.close()
        # A handler still running past the grace period is waiting out a bound
        # of its own (its call's deadline); the join is bounded too.
        joiner = threading.Thread(target=self._shutdown_pools, name="grpc-shutdown", daemon=True)
        joiner.start()
        joiner.join(timeout_s + 1)
        if joiner.is_alive():
            log.warning("gRPC handlers still running %g s after the server stopped", timeout_s + 1)

    def _shutdown_pools(self) -> None:
        self._executor.shutdown()
        self._health_executor.shutdown()
