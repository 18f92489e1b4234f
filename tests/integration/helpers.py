from __future__ import annotations

import contextlib
import io
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from skyoap.storage.api import I, StorageUnavailable
from skyoap.storage.config import StorageConfig, StorageKind
from skyoap.storage.select import open_storage

T = TypeVar("T")


def stored(config: StorageConfig, model: type[I]) -> list[I]:
    """What storage holds for ``model``, read through a connection of its own."""
    storage = open_storage(config)
    try:
        return list(storage.inventory.list(model))
    finally:
        storage.close()


WAIT_S = 120.0
"""How long a test waits for the state it asserts: long enough for a machine
three times slower than this one with both cores busy; a test that passes
returns as soon as the state is reached."""


def eventually(check: Callable[[], T], timeout_s: float = WAIT_S, interval_s: float = 0.1) -> T:
    """Calls ``check`` until it returns a true value (or stops raising
    AssertionError, or StorageUnavailable: a search can meet an index that a
    write is creating at that moment); fails with the last error after
    ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            result = check()
            if result:
                return result
            error: Exception = AssertionError(f"{check} stayed false")
        except (AssertionError, StorageUnavailable) as e:
            error = e
        if time.monotonic() > deadline:
            raise error
        time.sleep(interval_s)


def command(*argv: str) -> tuple[int, list[str]]:
    """What ``skyoap ARGV`` returns and prints, run in this process."""
    from skyoap.deploy.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue().splitlines()


def storage_argv(config: StorageConfig) -> list[str]:
    """The options that point a command at ``config``'s storage."""
    if config.kind is StorageKind.EMBEDDED:
        return ["--storage", "embedded", "--embedded-path", config.embedded_path]
    return [
        "--storage", "elasticsearch", "--es-hosts", config.es_hosts,
        "--es-index-prefix", config.es_index_prefix, "--redis-url", config.redis_url,
    ]  # fmt: skip


def storage_options(config: StorageConfig) -> dict[str, str]:
    """The options that point the Spark data source at ``config``'s storage."""
    if config.kind is StorageKind.EMBEDDED:
        return {"storage": "embedded", "embedded_path": config.embedded_path}
    return {
        "storage": "elasticsearch",
        "es_hosts": config.es_hosts,
        "es_index_prefix": config.es_index_prefix,
    }


def cpu_s(pid: int) -> float:
    """The CPU time a process has used, user and system."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")
