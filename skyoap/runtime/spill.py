"""The spill directory: what a node could not hand to storage when it closed,
kept on its local disk for its next start (or any node's start on the same
directory and storage) to store.

A spill is one JSON file, written whole or not at all (a temporary file,
fsync, rename, fsync of the directory) and readable by its owner only. A file
is taken by one process at a time (``flock`` on a lock file beside it, which
a rewrite does not replace), so two nodes sharing the directory never apply
the same spill twice at once. Each file names the storage it belongs to; a
node leaves the files of other storages alone."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from prometheus_client import Counter

from skyoap.runtime.instruments import Instruments

log = logging.getLogger(__name__)

SUFFIX = ".spill.json"
T = TypeVar("T")


class Spill:
    """One spill file this process holds (locked) until it is done with it."""

    def __init__(self, directory: SpillDir, path: Path, lock_fd: int) -> None:
        self._dir = directory
        self.path = path
        self._lock_fd: int | None = lock_fd

    def save(self, content: dict[str, Any]) -> int:
        """Replaces the file's content atomically; returns its size in bytes."""
        return self._dir.write_atomically(self.path, {"storage": self._dir.storage, **content})

    def read(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.path.read_text())
        return data

    def done(self) -> None:
        """Removes the file (its content is stored) and lets go of it."""
        self.path.unlink(missing_ok=True)
        self._dir.fsync_dir()
        lock = _lock_path(self.path)
        lock.unlink(missing_ok=True)  # after the data: a process that locks it then finds nothing
        self.release()

    def release(self) -> None:
        """Lets go of the file, leaving it for the next start."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None


def _lock_path(path: Path) -> Path:
    return path.with_name(path.name.removesuffix(SUFFIX) + ".lock")


class SpillDir:
    """``storage`` names the storage the spills belong to (its kind and where
    it is); a file of another storage is never taken."""

    def __init__(self, path: str | Path, storage: str) -> None:
        self.path = Path(path)
        self.storage = storage

    def create(self, name: str) -> Spill:
        """A new spill file of ``name`` (a worker's name), locked, not yet written."""
        self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.path / f"{name}.{uuid.uuid4().hex[:16]}{SUFFIX}"
        spill = self._lock(path, must_exist=False)
        assert spill is not None, "a new file's lock is nobody else's"
        return spill

    def take(self, name: str) -> list[Spill]:
        """The spill files of ``name`` for this storage that no other process
        holds, locked for this one."""
        if not self.path.is_dir():
            return []
        taken = []
        for path in sorted(self.path.glob(f"{name}.*{SUFFIX}")):
            spill = self._lock(path, must_exist=True)
            if spill is None:
                continue
            try:
                storage = spill.read().get("storage")
            except (OSError, ValueError) as e:
                log.error("spill file %s cannot be read, left as it is: %s", path, e)
                spill.release()
                continue
            if storage != self.storage:
                spill.release()  # another storage's, for a node of that storage
                continue
            taken.append(spill)
        return taken

    def _lock(self, path: Path, must_exist: bool) -> Spill | None:
        lock = _lock_path(path)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        if must_exist and not path.exists():  # another process stored it meanwhile
            lock.unlink(missing_ok=True)
            os.close(fd)
            return None
        return Spill(self, path, fd)

    def write_atomically(self, path: Path, content: dict[str, Any]) -> int:
        data = json.dumps(content, separators=(",", ":")).encode()
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        self.fsync_dir()
        return len(data)

    def fsync_dir(self) -> None:
        """Makes a rename or removal in the directory survive a crash of the machine."""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class WorkerSpill:
    """One worker's use of the spill directory (``None``: no ``--spill-dir``):
    at close, what storage did not take is kept in a file, or dropped and
    counted; at a later start, the files earlier starts kept are taken."""

    def __init__(
        self, directory: SpillDir | None, worker: str, instruments: Instruments, dropped: Counter
    ) -> None:
        """``dropped`` counts what the worker drops at close."""
        self._dir = directory
        self._worker = worker
        self._dropped = dropped
        self._spilled = instruments.counter(
            "skyoap_spilled_total",
            "rows or records a worker could not store at close, kept in --spill-dir for the next start",
            ["worker", "reason"],
        )
        self.applied = instruments.counter(
            "skyoap_spill_applied_total",
            "spilled rows or records a worker stored at a later start",
            ["worker"],
        ).labels(worker=worker)

    def keep(self, content: dict[str, Any], count: int, what: str, nbytes: int, reason: str) -> bool:
        """Writes ``content``, ``count`` of ``what`` (about ``nbytes`` in
        memory), to a new spill file; without a directory, or if the file
        cannot be written, they are dropped, counted and logged with their
        size. Returns whether they were kept."""
        why = "no --spill-dir is set"
        if self._dir is not None:
            try:
                spill = self._dir.create(self._worker)
                size = spill.save(content)
                spill.release()
            except OSError as e:
                why = f"the spill file could not be written: {e}"
            else:
                self._spilled.labels(worker=self._worker, reason=reason).inc(count)
                log.warning(
                    "%s: storage did not take %d %s at close; %d bytes kept in %s for the next start",
                    self._worker, count, what, size, spill.path,
                )  # fmt: skip
                return True
        self._dropped.inc(count)
        log.error(
            "%s: storage did not take %d %s (about %d bytes) at close, and %s: they are lost",
            self._worker, count, what, nbytes, why,
        )  # fmt: skip
        return False

    def take(self, model: str, read: Callable[[dict[str, Any]], T]) -> list[tuple[Spill, T]]:
        """The files earlier starts of the worker kept for this storage, each
        locked and read with ``read``; a file of another model, or one ``read``
        refuses (KeyError, TypeError, ValueError), is left as it is."""
        taken = []
        for spill in self._dir.take(self._worker) if self._dir else []:
            try:
                content = spill.read()
                if content["model"] != model:
                    raise ValueError(f"it holds {content['model']}")
                taken.append((spill, read(content)))
            except (KeyError, TypeError, ValueError) as e:
                log.error(
                    "%s: spill file %s is not one this worker wrote, left as it is: %r",
                    self._worker,
                    spill.path,
                    e,
                )
                spill.release()
                continue
            log.info("%s: storing what %s holds", self._worker, spill.path)
        return taken
