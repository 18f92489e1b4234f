"""Binding servicers to a gRPC server so that bad input gets a clear status,
and no request is decoded before the node has room for it.

gRPC's generated bindings decode a request as soon as it arrives, on the
server's one polling thread, and answer one that does not decode with a bare
INTERNAL "Exception deserializing request!". Binding through the service
descriptor instead hands the handler's thread the request's bytes: a request
larger than its method takes is refused unread, the memory decoding it can
cost (``edge/decoding.py``) is reserved in the node's budget first, and one
that does not decode is answered INVALID_ARGUMENT with what was wrong (for
example a name that is not UTF-8). The project's own errors map to statuses
in one place.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import descriptor, message, message_factory

from skyoap.edge.decoding import DecodeCost
from skyoap.edge.errors import InvalidRequest, UnknownReference
from skyoap.edge.limits import CallLimits
from skyoap.runtime import deadline
from skyoap.runtime.budget import MemoryBudget, Overloaded
from skyoap.runtime.buffer import BufferClosed
from skyoap.runtime.ratelimit import RateLimitedLog
from skyoap.runtime.tracebacks import detach, drop_locals
from skyoap.storage.api import StorageError

log = logging.getLogger(__name__)
_internal_log = RateLimitedLog(log)


class Undecodable:
    __slots__ = ("reason", "type_name")

    def __init__(self, type_name: str, reason: str) -> None:
        self.type_name = type_name
        self.reason = reason

    def describe(self) -> str:
        return f"the request is not a valid {self.type_name} message ({self.reason}); strings must be UTF-8"


class TooLarge(Exception):
    """A request larger than its method takes; answered RESOURCE_EXHAUSTED, as
    gRPC answers one past the server's largest message."""


def _received(method: str, max_bytes: int) -> Callable[[bytes], bytes | TooLarge]:
    """gRPC's deserializer: the request's bytes, still undecoded."""

    def receive(data: bytes) -> bytes | TooLarge:
        if len(data) > max_bytes:
            return TooLarge(
                f"a request of {len(data)} bytes is more than the {max_bytes} bytes {method} takes; "
                "send less per message"
            )
        return data

    return receive


class Decoder:
    """Decodes a method's requests in the thread serving the call, once the
    call has reserved what decoding can cost in ``budget``."""

    def __init__(self, cls: type[message.Message], budget: MemoryBudget | None, wait_s: float) -> None:
        self._cls = cls
        self._cost = DecodeCost(cls)
        self._budget = budget
        self._wait_s = wait_s

    def __call__(self, data: bytes | TooLarge) -> Any:
        if isinstance(data, TooLarge):
            raise data
        if self._budget is not None:
            self._budget.reserve(self._cost.of(data), self._wait_s)
        try:
            return self._cls.FromString(data)
        except message.DecodeError as e:
            return Undecodable(self._cls.DESCRIPTOR.full_name, str(e).split(": ")[-1])

    def strictly(self, data: bytes | TooLarge) -> Any:
        """The request, or InvalidRequest if it does not decode."""
        request = self(data)
        if isinstance(request, Undecodable):
            raise InvalidRequest(request.describe())
        return request


def _serializer(cls: type[message.Message]) -> Callable[[Any], bytes]:
    def serialize(answer: Any) -> bytes:
        # A handler may answer bytes it encoded itself (receiver/wire.py).
        return answer if isinstance(answer, bytes) else cls.SerializeToString(answer)

    return serialize


def abort_for(context: grpc.ServicerContext, error: Exception) -> None:
    if isinstance(error, TooLarge):
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(error))
    if isinstance(error, InvalidRequest):
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
    if isinstance(error, UnknownReference):
        context.abort(grpc.StatusCode.NOT_FOUND, str(error))
    if isinstance(error, Overloaded):
        _internal_log.warning("overloaded", "a call was shed: %s", error)
        context.abort(
            grpc.StatusCode.RESOURCE_EXHAUSTED, f"the node is overloaded ({error}); try again later"
        )
    if isinstance(error, BufferClosed):
        context.abort(
            grpc.StatusCode.UNAVAILABLE, "the node is shutting down; try another node or again later"
        )
    if isinstance(error, StorageError) and error.retriable:
        _internal_log.warning("storage", "a call failed, storage is unavailable: %s", error)
        context.abort(grpc.StatusCode.UNAVAILABLE, f"storage is unavailable, try again later: {error}")
    _internal_log.error(type(error).__name__, "a call failed: %r", error)
    context.abort(grpc.StatusCode.INTERNAL, f"the backend failed to handle the call: {error}")


def _unary(
    fn: Callable[[Any, grpc.ServicerContext], Any], decode: Decoder, binding: Binding
) -> Callable[[Iterator[Any], grpc.ServicerContext], Any]:
    """Served as a client stream of one message, so that the call counts
    against ``limits`` while its request comes, and one that never comes is
    closed as idle (gRPC would hold a thread for it, uncounted, unbounded)."""

    def handle(received: Iterator[bytes | TooLarge], context: grpc.ServicerContext) -> Any:
        limits = binding.limits
        limits.admit(context)
        try:
            watched = limits.watched(received, context)
            try:
                data = next(watched, None)
            except grpc.RpcError:
                # Cancelled, by the client or as idle: nobody hears it; an abort
                # (unlike returning nothing) leaves gRPC nothing to serialize.
                context.abort(grpc.StatusCode.CANCELLED, "the request did not come")
            finally:
                watched.close()
            if data is None:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the call ended before its request came")
                return None  # abort raised
            with deadline.call(), _call_memory(binding.budget):
                deadline.start(binding.deadline_s)
                try:
                    # The decoded request is no local of this frame: once
                    # ``fn`` is done nothing holds it, before the budget lets
                    # go of what it reserved for it.
                    return fn(decode.strictly(data), context)
                except Exception as e:
                    drop_locals(e)
                    abort_for(context, e)
        finally:
            limits.leave()

    return handle


def _call_memory(budget: MemoryBudget | None) -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext() if budget is None else budget.call()


def _refusing_undecodable(requests: Iterator[Any]) -> Iterator[Any]:
    for request in requests:
        if isinstance(request, Undecodable):
            raise InvalidRequest(request.describe())
        yield request


def _deadline_once_received(requests: Iterator[Any], deadline_s: float) -> Iterator[Any]:
    """The requests of a stream; the call's deadline starts when the last has come."""
    yield from requests
    deadline.start(deadline_s)


def _stream_in(
    fn: Callable[[Iterator[Any], grpc.ServicerContext], Any],
    decode: Decoder,
    keep_undecodable: bool,
    binding: Binding,
) -> Callable[..., Any]:
    def handle(received: Iterator[bytes | TooLarge], context: grpc.ServicerContext) -> Any:
        limits = binding.limits
        limits.admit(context)
        try:
            requests = _deadline_once_received(
                map(decode, limits.watched(received, context)), binding.deadline_s
            )
            with deadline.call(), _call_memory(binding.budget):
                try:
                    return fn(requests if keep_undecodable else _refusing_undecodable(requests), context)
                except grpc.RpcError as e:
                    detach(e)
                    if not context.is_active():
                        return None  # cancelled: by the client, or as idle; nobody hears an answer
                    abort_for(context, e)
                except Exception as e:
                    drop_locals(e)
                    abort_for(context, e)
        finally:
            limits.leave()

    return handle


@dataclass(frozen=True)
class Binding:
    """What every method of a server's services is bound with."""

    deadline_s: float
    """Whatever a call waits on ends by its deadline, this long after its
    request (the last of its stream) came (``runtime/deadline.py``)."""
    limits: CallLimits
    """Every call counts against them, and a client stream idle for too long is closed."""
    budget: MemoryBudget | None = None
    """Where a call reserves what decoding its requests can cost, before decoding them."""


def bind(
    server: grpc.Server,
    service: descriptor.ServiceDescriptor,
    servicer: object,
    binding: Binding,
    max_message_bytes: int,
    keep_undecodable: bool = False,
) -> str:
    """Serves the methods of ``service`` with the servicer's methods of the same
    name (one the servicer lacks answers UNIMPLEMENTED); returns the full service
    name. A request of more than ``max_message_bytes`` ends its call with
    RESOURCE_EXHAUSTED, unread, and so does one whose decoding finds no room
    in the budget in time. A message that does not decode ends its call with
    INVALID_ARGUMENT; with ``keep_undecodable``, client-streaming handlers get
    it in their stream as an ``Undecodable`` instead, to count it and go on."""
    handlers = {}
    for method in service.methods:
        request_cls = message_factory.GetMessageClass(method.input_type)
        response_cls = message_factory.GetMessageClass(method.output_type)
        fn = getattr(servicer, method.name, None)
        if fn is None:
            continue
        kwargs = {
            "request_deserializer": _received(method.full_name, max_message_bytes),
            "response_serializer": _serializer(response_cls),
        }
        decode = Decoder(request_cls, binding.budget, binding.deadline_s)
        if method.client_streaming and not method.server_streaming:
            handlers[method.name] = grpc.stream_unary_rpc_method_handler(
                _stream_in(fn, decode, keep_undecodable, binding), **kwargs
            )
        elif not method.client_streaming and not method.server_streaming:
            handlers[method.name] = grpc.stream_unary_rpc_method_handler(
                _unary(fn, decode, binding), **kwargs
            )
        else:
            raise NotImplementedError(f"{method.full_name}: server streaming is not used by skyoap")
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    return service.full_name
