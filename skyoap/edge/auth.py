"""Who may call. With ``--auth-token`` set, every call to the agent port must
carry the gRPC metadata ``authentication: <token>``, as SkyWalking's agents
send it when ``SW_AGENT_AUTHENTICATION`` is set (``AgentToken``). The internal
port, where nodes hand each other L1 results, takes only calls carrying the
cluster's own secret as ``skyoap-cluster-secret`` (``ClusterSecret``), never
the agent token: an agent that holds the token must not be able to write what
L2 merges. A call without the metadata, or with another value, is answered
UNAUTHENTICATED before anything of it is read, reflection included. Health
checks stay open. Nodes send the secret to each other (``SendingMetadata``).

Who may query (``HttpAuth``, on the query and PromQL ports). With
``--query-username`` and ``--query-password`` a request must carry them as
HTTP basic auth (SkyWalking's CLI sends its ``--username`` and ``--password``
so); with ``--query-token``, ``Authorization: Bearer TOKEN``; with both,
either will do. A request without them, or with others, is answered 401
with a challenge for each scheme the node takes, before its body is read.

Every secret is compared in constant time."""

from __future__ import annotations

import base64
import binascii
import enum
import hmac
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import grpc

METADATA_KEY = "authentication"
CLUSTER_METADATA_KEY = "skyoap-cluster-secret"
HEALTH = "/grpc.health.v1.Health/"


class RequiredMetadata(grpc.ServerInterceptor):
    """Installed on a server (``grpc.server(interceptors=[required])``), it sees
    every call before its handler does and refuses those without ``key: secret``."""

    KEY: str
    MISSING: str
    WRONG: str

    def __init__(self, secret: str) -> None:
        self._secret = secret.encode()

    def refusal(self, metadata: Sequence[tuple[str, str | bytes]] | None) -> str | None:
        """Why a call with ``metadata`` is refused, if it is."""
        given = next((v for k, v in metadata or () if k == self.KEY), None)
        if given is None:
            return self.MISSING
        given_bytes = given if isinstance(given, bytes) else str(given).encode()
        if not hmac.compare_digest(given_bytes, self._secret):
            return self.WRONG
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


class AgentToken(RequiredMetadata):
    """SkyWalking's agent token, on the agent port."""

    KEY = METADATA_KEY
    MISSING = (
        f"this node requires an agent token: send it as the gRPC metadata '{METADATA_KEY}' "
        "(SkyWalking's agents: SW_AGENT_AUTHENTICATION)"
    )
    WRONG = "the agent token is not the one this node requires"


class ClusterSecret(RequiredMetadata):
    """The cluster's secret, on the internal port."""

    KEY = CLUSTER_METADATA_KEY
    MISSING = (
        "this port takes calls from the nodes of its cluster only: they send the cluster's secret "
        f"(--cluster-secret) as the gRPC metadata '{CLUSTER_METADATA_KEY}'; agents call the agent port"
    )
    WRONG = "the cluster secret is not this cluster's (--cluster-secret)"


class _CallDetails(NamedTuple):
    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: Any
    compression: Any


class SendingMetadata(grpc.UnaryUnaryClientInterceptor, grpc.StreamUnaryClientInterceptor):
    """Adds ``key: value`` to every call of a channel:
    ``grpc.intercept_channel(channel, SendingMetadata(key, value))``."""

    def __init__(self, key: str, value: str) -> None:
        self._metadata = (key, value)

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


class SendingToken(SendingMetadata):
    """Adds the agent token to every call of a channel, as an agent sends it."""

    def __init__(self, token: str) -> None:
        super().__init__(METADATA_KEY, token)


class SendingClusterSecret(SendingMetadata):
    """Adds the cluster's secret to every call of a node's channel to another node."""

    def __init__(self, secret: str) -> None:
        super().__init__(CLUSTER_METADATA_KEY, secret)


REALM = "skyoap"


class Scheme(enum.Enum):
    BASIC = "Basic"
    BEARER = "Bearer"


class HttpAuth:
    def __init__(self, username: str = "", password: str = "", token: str = "") -> None:
        if not (username or token):
            raise ValueError("HttpAuth needs a user and password, a token, or both")
        self._user = (username.encode(), password.encode()) if username else None
        self._token = token.encode() if token else None

    @property
    def schemes(self) -> list[Scheme]:
        return [s for s, on in ((Scheme.BASIC, self._user), (Scheme.BEARER, self._token)) if on]

    @property
    def challenges(self) -> list[str]:
        """The ``WWW-Authenticate`` values of a 401."""
        return [f'{s.value} realm="{REALM}"' for s in self.schemes]

    def refusal(self, authorization: str | None) -> str | None:
        """Why a request whose ``Authorization`` header is ``authorization`` is refused, if it is."""
        if not authorization:
            return self._missing()
        if not (authorization.isascii() and authorization.isprintable()):
            # Credentials of either scheme are ASCII; the header's other bytes
            # reach here as surrogates that cannot even be compared.
            return "the Authorization header holds bytes other than printable ASCII: no credentials do"
        scheme, _, credentials = authorization.strip().partition(" ")
        credentials = credentials.strip()
        if scheme.lower() == "basic" and self._user is not None:
            return self._basic(credentials, self._user)
        if scheme.lower() == "bearer" and self._token is not None:
            if hmac.compare_digest(credentials.encode(), self._token):
                return None
            return "the bearer token is not the one this node requires (--query-token)"
        taken = " or ".join(s.value for s in self.schemes)
        return f"this node takes {taken} authorization on its query endpoint, not {scheme or 'that'}"

    def _missing(self) -> str:
        ways = []
        if self._user is not None:
            ways.append("HTTP basic auth (SkyWalking's CLI: --username and --password)")
        if self._token is not None:
            ways.append("the header 'Authorization: Bearer TOKEN'")
        return f"this node's query endpoint requires credentials: send {' or '.join(ways)}"

    @staticmethod
    def _basic(credentials: str, expected: tuple[bytes, bytes]) -> str | None:
        try:
            decoded = base64.b64decode(credentials.encode(), validate=True)
        except (binascii.Error, ValueError):
            return "the basic auth credentials are not base64 of 'user:password'"
        user, colon, password = decoded.partition(b":")
        if not colon:
            return "the basic auth credentials are not base64 of 'user:password'"
        # Both compared, whichever differs: how long a refusal takes says nothing of which.
        same_user = hmac.compare_digest(user, expected[0])
        same_password = hmac.compare_digest(password, expected[1])
        if same_user & same_password:
            return None
        return "the user or password is not the one this node requires (--query-username, --query-password)"
