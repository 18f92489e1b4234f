"""A settings file a node runs with: read at start, where an error refuses the
start; read again when it changes on disk, where an error keeps what is in
force and says so (in the log, and in the counter the caller names)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from skyoap.runtime.instruments import Instruments
from skyoap.runtime.periodic import Periodic

log = logging.getLogger(__name__)

T = TypeVar("T")


class WatchedFile(Generic[T]):
    """The settings ``load`` reads from ``path`` (it raises ValueError saying
    what is wrong), looked at for changes every ``interval_s``; an error
    when read again is counted in ``errors`` (a counter's name)."""

    def __init__(
        self,
        path: Path,
        load: Callable[[Path], T],
        instruments: Instruments,
        interval_s: float,
        errors: tuple[str, str],
        describe: Callable[[T], str] = lambda _: "",
    ) -> None:
        self.path = path
        self._load = load
        self._describe = describe
        self._settings = load(path)
        self._stamp = self._stat()
        self._errors = instruments.counter(*errors)
        self._task = Periodic(f"watching {path.name}", interval_s, self.refresh, f"reading {path} again")

    def __call__(self) -> T:
        """The settings in force."""
        return self._settings

    def _stat(self) -> tuple[int, int] | None:
        try:
            s = os.stat(self.path)
        except OSError:
            return None
        return s.st_mtime_ns, s.st_size

    def refresh(self) -> bool:
        """Reads the file again if it changed; whether the settings changed."""
        stamp = self._stat()
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            settings = self._load(self.path)
        except ValueError as e:
            self._errors.inc()
            log.error("%s; the settings read before stay in force (%s)", e, self._describe(self._settings))
            return False
        self._settings = settings
        log.info("%s read again: %s", self.path, self._describe(settings))
        return True

    def start(self) -> None:
        self._task.start()

    def close(self, timeout_s: float = 5.0) -> None:
        self._task.close(timeout_s)
