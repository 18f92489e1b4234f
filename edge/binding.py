"""Binding servicers to a gRPC server so that bad input gets a clear status.

gRPC's generated bindings answer a request that does not decode with a bare
INTERNAL "Exception deserializing request!". Binding through the service
descriptor instead lets the handler answer INVALID_ARGUMENT with what was wrong
(for example a name that is not UTF-8), and maps the project's own errors to
statuses in one place.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import grpc
from google.protobuf import descriptor, message, message_factory

from edge.errors import InvalidRequest, UnknownReference
from edge.limits import CallLimits
from runtime import deadline
from runtime.budget import Overloaded
from runtime.buffer import BufferClosed
from runtime.ratelimit import RateLimitedLog
from storage.api import StorageError

log = logging.getLogger(__name__)
_internal_log = RateLimitedLog(log)


class Undecodable:
    __slots__ = ("reason", "type_name")

    def __init__(self, type_name: str, reason: str) -> None:
        self.type_name = type_name
        self.reason = reason

    def describe(self) -> str:
        return f"the request is not a valid {self.type_name} message ({self.reason}); strings must be UTF-8"


def _deserializer(cls: type[message.Message]) -> Callable[[bytes], Any]:
    def deserialize(data: bytes) -> Any:
        try:
            return cls.FromString(data)
        except message.DecodeError as e:
            return Undecodable(cls.DESCRIPTOR.full_name, str(e).split(": ")[-1])

    return deserialize


def _serializer(cls: type[message.Message]) -> Callable[[Any], bytes]:
    def serialize(answer: Any) -> bytes:
        # A handler may answer bytes it encoded itself (receiver/wire.py).
        return answer if isinstance(answer, bytes) else cls.SerializeToString(answer)

    return serialize


def abort_for(context: grpc.ServicerContext, error: Exception) -> None:
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
    fn: Callable[[Any, grpc.ServicerContext], Any],
    deadline_s: float,
    limits: CallLimits,
) -> Callable[[Iterator[Any], grpc.ServicerContext], Any]:
    """Served as a client stream of one message, so that the call counts
    against ``limits`` while its request comes, and one that never comes is
    closed as idle (gRPC would hold a thread for it, uncounted, unbounded)."""

    def handle(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
        limits.admit(context)
        try:
            watched = limits.watched(requests, context)
            try:
                request = next(watched, None)
            except grpc.RpcError:
                # Cancelled, by the client or as idle: nobody hears it; an abort
                # (unlike returning nothing) leaves gRPC nothing to serialize.
                context.abort(grpc.StatusCode.CANCELLED, "the request did not come")
            finally:
                watched.close()
            if request is None:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the call ended before its request came")
            if isinstance(request, Undecodable):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.describe())
            with deadline.call():
                deadline.start(deadline_s)
                try:
                    return fn(request, context)
                except Exception as e:
                    abort_for(context, e)
        finally:
            limits.leave()

    return handle


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
    keep_undecodable: bool,
    deadline_s: float,
    limits: CallLimits,
) -> Callable[..., Any]:
    def handle(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
        limits.admit(context)
        requests = _deadline_once_received(limits.watched(requests, context), deadline_s)
        with deadline.call():
            try:
                return fn(requests if keep_undecodable else _refusing_undecodable(requests), context)
            except grpc.RpcError as e:
                if not context.is_active():
                    return None  # cancelled: by the client, or as idle; nobody hears an answer
                abort_for(context, e)
            except Exception as e:
                abort_for(context, e)
            finally:
                limits.leave()

    return handle


def bind(
    server: grpc.Server,
    service: descriptor.ServiceDescriptor,
    servicer: object,
    deadline_s: float,
    limits: CallLimits,
    keep_undecodable: bool = False,
) -> str:
    """Serves the methods of ``service`` with the servicer's methods of the same
    name (one the servicer lacks answers UNIMPLEMENTED); returns the full service
    name. A message that does not decode ends its call with INVALID_ARGUMENT;
    with ``keep_undecodable``, client-streaming handlers get it in their stream
    as an ``Undecodable`` instead, to count it and go on. Whatever a call
    waits on ends by its deadline, ``deadline_s`` after its request (the last
    of its stream) came (``runtime/deadline.py``). Every call counts
    against ``limits``, and a client stream idle for too long is closed."""
    handlers = {}
    for method in service.methods:
        request_cls = message_factory.GetMessageClass(method.input_type)
        response_cls = message_factory.GetMessageClass(method.output_type)
        fn = getattr(servicer, method.name, None)
        if fn is None:
            continue
        kwargs = {
            "request_deserializer": _deserializer(request_cls),
            "response_serializer": _serializer(response_cls),
        }
        if method.client_streaming and not method.server_streaming:
            handlers[method.name] = grpc.stream_unary_rpc_method_handler(
                _stream_in(fn, keep_undecodable, deadline_s, limits), **kwargs
            )
        elif not method.client_streaming and not method.server_streaming:
            handlers[method.name] = grpc.stream_unary_rpc_method_handler(
                _unary(fn, deadline_s, limits), **kwargs
            )
        else:
            raise NotImplementedError(f"{method.full_name}: server streaming is not used by skyoap")
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    return service.full_name
