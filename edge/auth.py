"""SkyWalking's agent token. With ``--auth-token`` set, every call to the
node's services must carry the gRPC metadata ``authentication: <token>``, as
SkyWalking's agents send it when ``SW_AGENT_AUTHENTICATION`` is set; a call
without it, or with another, is answered UNAUTHENTICATED before anything of
it is read. Health checks stay open. Nodes send the token to each other too
(``SendingToken``)."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any, NamedTuple

import grpc

METADATA_KEY = "authentication"


class AgentToken:
    def __init__(self, token: str) -> None:
        self._token = token.encode()

    def check(self, context: grpc.ServicerContext) -> None:
        """Answers UNAUTHENTICATED unless the call carries the token."""
        given = next((v for k, v in context.invocation_metadata() if k == METADATA_KEY), None)
        if given is None:
            context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                f"this node requires an agent token: send it as the gRPC metadata '{METADATA_KEY}' "
                "(SkyWalking's agents: SW_AGENT_AUTHENTICATION)",
            )
        given_bytes = given if isinstance(given, bytes) else str(given).encode()
        if not hmac.compare_digest(given_bytes, self._token):
            context.abort(
                grpc.StatusCode.UNAUTHENTICATED, "the agent token is not the one this node requires"
            )


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
