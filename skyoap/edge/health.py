"""gRPC health checking (``grpc.health.v1.Health``) that no client can grow.

grpc_health's own servicer keeps, for every service name a ``Watch`` ever
named, an entry that outlives the call, so clients sending long names grow
the node's memory without end; and its watches are not bounded. Here the
names are the node's services alone, fixed once it starts: a watch of any
other name is answered SERVICE_UNKNOWN and keeps nothing of the name; at
most ``max_watches`` watches are open at once (past it: RESOURCE_EXHAUSTED),
each ended once ``CallLimits.stream_max_age_s`` old. Both methods run on a
pool of their own, so that health checks answer while every other thread
of the server is busy; a call whose request does not come within
``REQUEST_WAIT_S`` is cancelled, one whose request does not decode is
answered INVALID_ARGUMENT, and a watch holds no thread while it waits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any, TypeAlias

import grpc
from grpc_health.v1 import health_pb2

from skyoap.edge.binding import Decoder, Undecodable
from skyoap.edge.limits import CallLimits

SERVICE_NAME = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
REQUEST_WAIT_S = 1.0
"""How long a health call may wait for its request: a client sends it at once."""
Status: TypeAlias = int
"""A ``HealthCheckResponse.ServingStatus``."""
_Send = Callable[[Any], None]
_decode = Decoder(health_pb2.HealthCheckRequest, budget=None, wait_s=0.0)


class _OnPool:
    """A handler's behaviour, run on ``pool`` (gRPC reads these attributes)."""

    def __init__(self, fn: Callable[..., Any], pool: futures.ThreadPoolExecutor, non_blocking: bool) -> None:
        self._fn = fn
        self.experimental_thread_pool = pool
        self.experimental_non_blocking = non_blocking

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn(*args, **kwargs)


class _Watch:
    __slots__ = ("name", "send")

    def __init__(self, name: str | None, send: _Send) -> None:
        self.name = name
        """The service watched; None for a name the node does not serve."""
        self.send = send


class Health:
    def __init__(self, limits: CallLimits, pool: futures.ThreadPoolExecutor, max_watches: int) -> None:
        self._limits = limits
        self._pool = pool
        self._max_watches = max_watches
        self._lock = threading.Lock()
        self._statuses: dict[str, Status] = {}
        self._watches: set[_Watch] = set()
        self._refusing = False

    @property
    def watches(self) -> int:
        with self._lock:
            return len(self._watches)

    def handler(self) -> grpc.GenericRpcHandler:
        kwargs = {
            "request_deserializer": bytes,  # decoded in the call's thread (``_request``)
            "response_serializer": health_pb2.HealthCheckResponse.SerializeToString,
        }
        return grpc.method_handlers_generic_handler(
            SERVICE_NAME,
            {
                # Request-streaming, so that the wait for the request is ours to bound.
                "Check": grpc.stream_unary_rpc_method_handler(
                    _OnPool(self._check, self._pool, non_blocking=False), **kwargs
                ),
                "Watch": grpc.stream_stream_rpc_method_handler(
                    _OnPool(self._watch, self._pool, non_blocking=True), **kwargs
                ),
            },
        )

    def set(self, service: str, status: Status) -> None:
        """Declares ``service`` (only these names are ever kept) and tells its watchers."""
        with self._lock:
            if self._refusing:
                return
            self._statuses[service] = status
            # Sent under the lock, so that each watcher hears the changes in order.
            for watch in self._watches:
                if watch.name == service:
                    watch.send(health_pb2.HealthCheckResponse(status=status))

    def refuse(self) -> None:
        """NOT_SERVING for every service from now on."""
        for name in list(self._statuses):
            self.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        with self._lock:
            self._refusing = True

    def _request(
        self, requests: Iterator[bytes], context: grpc.ServicerContext
    ) -> health_pb2.HealthCheckRequest:
        """The call's one request; a call whose request does not come within
        ``REQUEST_WAIT_S`` is cancelled, so that it holds a thread of the
        health pool no longer."""
        watched = self._limits.watched(requests, context, idle_s=REQUEST_WAIT_S)
        try:
            request = next(watched, None)
        except grpc.RpcError:
            context.abort(grpc.StatusCode.CANCELLED, "the request did not come")
        finally:
            watched.close()
        if request is None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the call ended before its request came")
            raise AssertionError("abort raises")
        decoded = _decode(request)
        if isinstance(decoded, Undecodable):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, decoded.describe())
        return decoded

    def _check(
        self, requests: Iterator[bytes], context: grpc.ServicerContext
    ) -> health_pb2.HealthCheckResponse:
        request = self._request(requests, context)
        # No lock: a dict's get is atomic, and a check must not wait on a watcher's send.
        status = self._statuses.get(request.service)
        if status is None:
            context.abort(grpc.StatusCode.NOT_FOUND, "the node serves no service of that name")
        return health_pb2.HealthCheckResponse(status=status)

    def _watch(
        self,
        requests: Iterator[bytes],
        context: grpc.ServicerContext,
        send_response_callback: _Send,
    ) -> None:
        request = self._request(requests, context)
        held = self._limits.hold(context)
        watch = _Watch(None, send_response_callback)

        def ended() -> None:
            self._limits.release(held)
            with self._lock:
                self._watches.discard(watch)

        if not context.add_callback(ended):
            ended()  # the call is over already
            return
        with self._lock:
            full = len(self._watches) >= self._max_watches
            if not full:
                status = self._statuses.get(request.service)
                # The node's names are fixed once it serves: an unknown one
                # never becomes known, so nothing of it is kept.
                if status is not None:
                    watch.name = request.service
                self._watches.add(watch)
                answer = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN if status is None else status
                watch.send(health_pb2.HealthCheckResponse(status=answer))
        if full:
            context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"the node serves at most {self._max_watches} health watches at once; "
                "try again later, or use Check",
            )
