"""A skyoap process's start-up, the same for a node in one process and for
each worker the supervisor starts: the allocator and the collector tuned
before any thread starts, logging in one format, the descriptor limit
raised. And what a serving node offers whoever started it, whether it runs
in this process (``Node``) or in workers (``Supervisor``)."""

from __future__ import annotations

import logging
from typing import Protocol

from skyoap.runtime import descriptors
from skyoap.runtime.collector import tune_collector
from skyoap.runtime.malloc import tune_allocator

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s"
WORKER_LOG_FORMAT = LOG_FORMAT.replace("[%(threadName)s]", "[%(processName)s %(threadName)s]")
"""A worker's lines name it, since the workers of one node log to one stream."""


def prepare(log_level: str, log_format: str = LOG_FORMAT) -> None:
    """Readies this process; call it before any thread starts."""
    tune_allocator()
    tune_collector()
    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO), format=log_format)
    descriptors.raise_limit()


class Serving(Protocol):
    """A started node: where it listens (the ports are real even when 0 was
    asked for), and how to stop it."""

    @property
    def address(self) -> str: ...

    @property
    def admin_port(self) -> int | None: ...

    @property
    def internal_address(self) -> str | None: ...

    @property
    def query_url(self) -> str | None: ...

    def close(self) -> None: ...
