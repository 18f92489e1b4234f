"""A node's file descriptors: every connection holds one, on every port, and
once the process has none left gRPC cannot take an agent's connection. So a
node raises its limit at start, and ports that any client can reach (the
query port) hold at most a share of what is left, the rest kept for agents,
storage and the cluster."""

from __future__ import annotations

import logging
import os
import resource

log = logging.getLogger(__name__)

QUERY_SHARE = 0.5
"""The share of the descriptors free at start the query port may hold."""


def raise_limit() -> int:
    """Raises the soft limit on open descriptors to the hard one (as servers
    do at start: the soft default of 1,024 is for interactive shells);
    returns the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError) as e:
            log.warning("the limit on open descriptors stays %d: %s", soft, e)
    return soft


def limit() -> int:
    """The soft limit on open descriptors."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def open_now() -> int:
    """Descriptors this process holds."""
    return len(os.listdir("/proc/self/fd"))


def share(wanted: int, reserved: int) -> int:
    """At most ``wanted``, and no more than ``QUERY_SHARE`` of the descriptors
    free now less ``reserved`` (what other ports of the node hold at most)."""
    most = limit()
    if most == resource.RLIM_INFINITY:
        return wanted
    free = max(0, most - open_now() - reserved)
    return max(1, min(wanted, int(free * QUERY_SHARE)))
