"""Who may query. With ``--query-username`` and ``--query-password`` a request
must carry them as HTTP basic auth (SkyWalking's CLI sends its ``--username``
and ``--password`` so); with ``--query-token``, ``Authorization: Bearer
TOKEN``; with both, either will do. Secrets are compared in constant time.
A request without them, or with others, is answered 401 with a challenge
for each scheme the node takes, before its body is read."""

from __future__ import annotations

import base64
import binascii
import enum
import hmac

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
