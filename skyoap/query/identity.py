"""What a client asks first: which server this is, its clock and time zone,
and whether it is healthy."""

from __future__ import annotations

import functools
from importlib import metadata

from skyoap.query.context import QueryContext
from skyoap.runtime import clock

PROTOCOL_VERSION = "10.4.0"
"""SkyWalking's release whose query protocol the schema renders. Clients pick
the queries they send by its major and minor (SkyWalking's CLI parses
``^(\\d+)\\.(\\d+)`` from ``version``), so the version answered starts with it."""

TIMEZONE = "+0000"
"""Every time bucket of skyoap is UTC; clients send durations in this zone."""


@functools.cache
def server_version() -> str:
    """``10.4.0-skyoap-<skyoap's version>``."""
    try:
        own = metadata.version("skyoap")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        own = "unknown"
    return f"{PROTOCOL_VERSION}-skyoap-{own}"


def version(context: QueryContext) -> str:
    return server_version()


def time_info(context: QueryContext) -> dict[str, object]:
    return {"timezone": TIMEZONE, "currentTimestamp": clock.now_ms()}


def health(context: QueryContext) -> dict[str, object]:
    """Healthy, as SkyWalking's OAP answers it: a node that answers queries is up."""
    return {"score": 0, "details": ""}
