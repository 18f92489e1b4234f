"""The global lock and the sequence allocator on Redis.

Redis makes allocation fast and serialises writers, but it is not what keeps ids
unique: every block it hands out is reserved in storage before use, and storage
refuses a block that is not above every block reserved before (see
``InventoryDAO.reserve_sequences``); the persistent worker then raises the
floor here and allocates again. So when Redis loses its data (flushed,
restarted empty), the worst case is a retry and a gap, never an id handed out
twice.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator

import redis

from skyoap.storage.api import StorageError, StorageUnavailable
from skyoap.storage.redis.connect import connect

log = logging.getLogger(__name__)

# Allocates only while the counter exists: a missing counter means Redis lost
# its data, and counting again from 0 would hand out ids already stored.
_ALLOCATE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
return redis.call('INCRBY', KEYS[1], ARGV[1])
"""
# Sets the counter to ARGV[1] unless it is already at least that.
_RAISE = """
local current = tonumber(redis.call('GET', KEYS[1]) or '-1')
if current < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end
return 1
"""


class LockTimeout(StorageError):
    retriable = True


class RedisSequenceAllocator:
    def __init__(
        self,
        url: str,
        key_prefix: str = "skyoap",
        ca: str = "",
        lock_ttl_s: float = 30.0,
        lock_wait_s: float = 30.0,
    ) -> None:
        self._redis = connect(url, ca)
        self._prefix = key_prefix
        self._lock_ttl_s = lock_ttl_s
        self._lock_wait_s = lock_wait_s
        self._allocate = self._redis.register_script(_ALLOCATE)
        self._raise = self._redis.register_script(_RAISE)

    def _key(self, kind: str, scope: str) -> str:
        return f"{self._prefix}:{kind}:{scope}"

    @contextlib.contextmanager
    def lock(self, scope: str) -> Iterator[None]:
        """redis-py's Lock: a token only its holder can delete, and a time to
        live so that a holder that died frees it."""
        key = self._key("lock", scope)
        # Polled every 5 ms, not redis-py's 100: the lock is held for one
        # storage round, and every registration waits on it.
        lock = self._redis.lock(
            key, timeout=self._lock_ttl_s, sleep=0.005, blocking_timeout=self._lock_wait_s
        )
        try:
            if not lock.acquire():
                raise LockTimeout(f"could not take the global lock {key} in {self._lock_wait_s:g} s")
        except redis.RedisError as e:
            raise StorageUnavailable(f"Redis at {self._describe()} failed: {e}") from e
        try:
            yield
        finally:
            try:
                lock.release()
            except redis.RedisError as e:  # LockNotOwnedError too: it expired, or Redis lost it
                log.warning(
                    "could not release lock %s (%s); it expires within %g s", key, e, self._lock_ttl_s
                )

    def allocate(self, scope: str, count: int, stored_max: Callable[[], int]) -> list[int]:
        key = self._key("sequence", scope)
        try:
            last = int(self._allocate(keys=[key], args=[count]))
            if last < 0:
                floor = stored_max()
                log.warning("sequence %s is missing in Redis; recovering it from storage at %d", key, floor)
                self._raise(keys=[key], args=[floor])
                last = int(self._allocate(keys=[key], args=[count]))
        except redis.RedisError as e:
            raise StorageUnavailable(f"Redis at {self._describe()} failed: {e}") from e
        if last < 0:
            raise StorageUnavailable(f"sequence {key} vanished again while it was being recovered")
        return list(range(last - count + 1, last + 1))

    def raise_floor(self, scope: str, floor: int) -> None:
        try:
            self._raise(keys=[self._key("sequence", scope)], args=[floor])
        except redis.RedisError as e:
            raise StorageUnavailable(f"Redis at {self._describe()} failed: {e}") from e

    def _describe(self) -> str:
        kw = self._redis.connection_pool.connection_kwargs
        return f"{kw.get('host')}:{kw.get('port')}"

    def close(self) -> None:
        self._redis.close()
