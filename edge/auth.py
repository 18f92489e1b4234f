"""SkyWalking's agent token. With ``--auth-token`` set, every call to the
node's services must carry the gRPC metadata ``authentication: <token>``, as
SkyWalking's agents send it when ``SW_AGENT_AUTHENTICATION`` is set; a call
without it, or with another, is answered UNAUTHENTICATED before anything of
it is read, reflection included. Health checks stay open. Nodes send the
token to each other too (``SendingToken``)."""

from __future__ import annotations

import hmac
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import grpc

METADATA_KEY = "authentication"
HEALTH = "/grpc.health.v1.Health/"


class AgentToken(grpc.ServerInterceptor):
    """Installed on a server (``grpc.server(interceptors=[token])``), it sees
    every call before its handler does."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    def refusal(self, metadata: Sequence[tuple[str, str | bytes]] | None) -> str | None:
        """Why a call with ``metadata`` is refused, if it is."""
        given = next((v for k, v in metadata or () if k == METADATA_KEY), None)
        if given is None:
            return (
                f"this node requires an agent token: send it as the gRPC metadata '{METADATA_KEY}' "
                "(SkyWalking's agents: SW_AGENT_AUTHENTICATION)"
            )
        given_bytes = given if isinstance(given, bytes) else str(given).encode()
        if not hmac.compare_digest(given_bytes, self._token):
            return "the agent token is not the one this node requires"
        return None

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(details)
        if details.method.startswith(HEALTH):
            return handler
        refusal = self.refusal(details.invocation_metadata)
        if refusal is None:
            return handler

        def refuse(request: object, context: grpc.ServicerContext) -> None:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, refusal)

        # A request-streaming handler reads nothing before it refuses: gRPC
        # runs a unary handler only once the request came, and a client that
        # never sends it would hold a thread. A method the node does not
        # serve is refused alike, so that none is revealed.
        if handler is None or handler.response_streaming:
            return grpc.stream_stream_rpc_method_handler(refuse)
        return grpc.stream_unary_rpc_method_handler(refuse)


class _CallDetails(NamedTuple):
    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: Any
    compression: Any


class SendingToken(grpc.UnaryUnaryClientInterceptor, grpc.StreamUnaryClientInterceptor):
    """Adds the token to every call of a channel: ``grpc.intercept_channel(channel, SendingToken(t))``."""

    def __init__(self, token: str) -> None:
        self._metadata = (METADATA_KEY, token)

    def _with_token(self, details: grpc.ClientCallDetails) -> _CallDetails:
        return _CallDetails(
            details.method,
            details.timeout,
            [*(details.metadata or ()), self._metadata],
            details.credentials,
            details.wait_for_ready,
            details.compression,
        )

    def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: grpc.ClientCallDetails, request: Any
    ) -> Any:
        return continuation(self._with_token(details), request)

    def intercept_stream_unary(
        self, continuation: Callable[..., Any], details: grpc.ClientCallDetails, requests: Any
    ) -> Any:
        return continuation(self._with_token(details), requests)
