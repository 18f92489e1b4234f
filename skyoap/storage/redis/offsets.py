"""Offsets of topic partitions, handed out in ranges by Redis, without a lock.

A writer reserves a range of a partition's offsets (one script call per
partition and bulk), writes its records at those offsets, and completes the
range once they are durable and readable. A partition's high watermark is the
first offset of its lowest range still open, or its next offset when none is:
readers stop there, so they never pass a record that becomes readable later.

Each range has a lease. A writer that died leaves its range open until the
lease ends; the next reading of the watermark then closes it, and the
watermark moves on. A writer whose lease ended, or whose partition's *epoch*
changed (Redis lost its data and the partition was set up again from what
storage holds), is told so when it completes: its range was passed over, so
it writes those records again at a new range (by their ids, so each is stored
once, at its new offset). So a record is never left behind the watermark;
at worst a reader sees it twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

import redis

from skyoap.model.topics import Reservation
from skyoap.storage.api import StorageUnavailable
from skyoap.storage.redis.connect import connect

# KEYS: next, open (sorted set of range starts), leases (start -> "end:deadline ms"), epoch.
# ARGV: count, lease ms. Returns {start, epoch}, or {-1} when the partition is not set up.
_RESERVE = """
local epoch = redis.call('GET', KEYS[4])
if not epoch or redis.call('EXISTS', KEYS[1]) == 0 then return {-1} end
local count = tonumber(ARGV[1])
local start = redis.call('INCRBY', KEYS[1], count) - count
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[2], start, start)
redis.call('HSET', KEYS[3], start, (start + count) .. ':' .. (now + tonumber(ARGV[2])))
return {start, epoch}
"""
# KEYS: next, epoch. ARGV: floor, new epoch. Sets the partition up unless it is.
_SET_UP = """
if redis.call('EXISTS', KEYS[2]) == 1 and redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
redis.call('SET', KEYS[1], math.max(current, tonumber(ARGV[1])))
redis.call('SET', KEYS[2], ARGV[2])
return 1
"""
# KEYS: open, leases, epoch. ARGV: epoch, starts... Returns the starts no longer open.
_COMPLETE = """
local passed = {}
local same = redis.call('GET', KEYS[3]) == ARGV[1]
for i = 2, #ARGV do
  if same and redis.call('ZREM', KEYS[1], ARGV[i]) == 1 then
    redis.call('HDEL', KEYS[2], ARGV[i])
  else
    table.insert(passed, ARGV[i])
  end
end
return passed
"""
# KEYS: next, open, leases. Closes the lowest ranges whose lease ended; returns
# the watermark.
_WATERMARK = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
while true do
  local lowest = redis.call('ZRANGE', KEYS[2], 0, 0)
  if #lowest == 0 then return tonumber(redis.call('GET', KEYS[1]) or '-1') end
  local lease = redis.call('HGET', KEYS[3], lowest[1]) or '0:0'
  local deadline = tonumber(string.match(lease, ':(%d+)$'))
  if deadline > now then return tonumber(lowest[1]) end
  redis.call('ZREM', KEYS[2], lowest[1])
  redis.call('HDEL', KEYS[3], lowest[1])
end
"""


class RedisOffsetRanges:
    def __init__(self, url: str, key_prefix: str = "skyoap", lease_s: float = 120.0, ca: str = "") -> None:
        """``lease_s``: how long a writer may take between reserving a range
        and completing it; longer than any write may take, so that a range is
        passed over only when its writer is gone."""
        self._redis = connect(url, ca)
        self._prefix = key_prefix
        self._lease_ms = int(lease_s * 1000)
        self._reserve = self._redis.register_script(_RESERVE)
        self._set_up = self._redis.register_script(_SET_UP)
        self._complete = self._redis.register_script(_COMPLETE)
        self._watermark = self._redis.register_script(_WATERMARK)

    def _keys(self, topic: str, partition: int, *names: str) -> list[str]:
        return [f"{self._prefix}:topic:{topic}:{partition}:{name}" for name in names]

    def reserve(self, topic: str, partition: int, count: int, floor: Callable[[], int]) -> Reservation:
        """``count`` offsets at the end of the partition. A partition Redis
        does not know (new, or its data was lost) is set up first, counting on
        from ``floor()``: the offset after the highest one storage holds."""
        if count < 1:
            raise ValueError(f"a range holds at least one offset, not {count}")
        keys = self._keys(topic, partition, "next", "open", "leases", "epoch")
        try:
            for _ in range(2):
                answer = self._reserve(keys=keys, args=[count, self._lease_ms])
                if int(answer[0]) >= 0:
                    start, epoch = int(answer[0]), answer[1].decode()
                    return Reservation(topic, partition, start, start + count, epoch)
                self._set_up(keys=[keys[0], keys[3]], args=[floor(), uuid.uuid4().hex])
        except redis.RedisError as e:
            raise StorageUnavailable(f"Redis at {self._describe()} failed: {e}") from e
        raise StorageUnavailable(f"partition {topic}/{partition} vanished from Redis while it was set up")

    def complete(self, reservations: Sequence[Reservation]) -> list[Reservation]:
        """Closes the ranges whose records are durable and readable; returns
        those that were passed over meanwhile (their lease ended, or the
        partition was set up again): write their records again at new ranges."""
        by_partition: dict[tuple[str, int, str], list[Reservation]] = {}
        for r in reservations:
            by_partition.setdefault((r.topic, r.partition, r.epoch), []).append(r)
        passed: list[Reservation] = []
        try:
            for (topic, partition, epoch), ranges in by_partition.items():
                starts = {r.start: r for r in ranges}
                keys = self._keys(topic, partition, "open", "leases", "epoch")
                gone = self._complete(keys=keys, args=[epoch, *starts])
                passed += [starts[int(s)] for s in gone]
        except redis.RedisError as e:
            raise StorageUnavailable(f"Redis at {self._describe()} failed: {e}") from e
        return passed

    def watermark(self, topic: str, partition: int) -> int | None:
        """The partition's high watermark: every offset below it is readable or
        will never be; None when Redis does not know the partition."""
        keys = self._keys(topic, partition, "next", "open", "leases")
        try:
            mark = int(self._watermark(keys=keys))
        except redis.RedisError as e:
            raise StorageUnavailable(f"Redis at {self._describe()} failed: {e}") from e
        return None if mark < 0 else mark

    def _describe(self) -> str:
        kw = self._redis.connection_pool.connection_kwargs
        return f"{kw.get('host')}:{kw.get('port')}"

    def close(self) -> None:
        self._redis.close()
