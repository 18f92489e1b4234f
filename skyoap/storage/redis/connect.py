"""How every part of a node reaches Redis: the URL carries the user and
password (``redis://USER:PASSWORD@HOST:PORT/DB``, ``rediss://`` for TLS).
Credentials Redis refuses stop the node at start, saying so (``verify``)."""

from __future__ import annotations

from typing import Any

import redis


def connect(url: str, ca: str = "") -> redis.Redis:
    """A client of the Redis at ``url`` (it connects at its first command);
    with ``ca``, Redis's TLS certificate is checked against that CA."""
    options: dict[str, Any] = {"socket_timeout": 5, "socket_connect_timeout": 5}
    if ca:
        if not url.startswith("rediss://"):
            raise ValueError("--redis-ca checks a TLS certificate: give a rediss:// URL with it")
        options["ssl_ca_certs"] = ca
    return redis.Redis.from_url(url, **options)


def verify(url: str, ca: str = "") -> None:
    """Raises ValueError, saying what to check, when the Redis at ``url``
    refuses its credentials; one that cannot be reached now is left to the
    retries of those that use it."""
    client = connect(url, ca)
    try:
        client.ping()
    except redis.AuthenticationError as e:
        kw = client.connection_pool.connection_kwargs
        raise ValueError(
            f"Redis at {kw.get('host')}:{kw.get('port')} refused the credentials of --redis-url ({e}): "
            "give them as redis://USER:PASSWORD@HOST:PORT/DB (no user: redis://:PASSWORD@...)"
        ) from None
    except redis.RedisError:
        pass
    finally:
        client.close()
