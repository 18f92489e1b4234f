"""Cluster membership: which nodes there are, and which take L1 results (the
remote targets). Standalone (one node) or on Redis, where every node registers
with a time-to-live that its own heartbeat renews."""

from __future__ import annotations

import enum
import json
import logging
import uuid
from dataclasses import asdict, dataclass, fields
from typing import Protocol

import redis

from skyoap.runtime.periodic import Periodic
from skyoap.storage.redis.connect import connect

log = logging.getLogger(__name__)


class Role(enum.Enum):
    RECEIVER = "receiver"
    """Takes agent traffic and does L1; never a routing target."""
    AGGREGATOR = "aggregator"
    """Takes L1 results from other nodes, does L2 and persists."""
    MIXED = "mixed"
    """Both."""

    @property
    def is_target(self) -> bool:
        return self is not Role.RECEIVER

    @property
    def takes_agents(self) -> bool:
        return self is not Role.AGGREGATOR


@dataclass(frozen=True, order=True)
class RemoteNode:
    address: str
    """``host:port`` of the node's agent port: its name in routing."""
    is_self: bool = False
    internal: str = ""
    """``host:port`` where its RemoteService listens."""
    identity: str = ""
    """The name its cluster certificate must carry ("" without cluster TLS)."""
    incarnation: str = ""
    """The run of its process (``new_incarnation``): a node restarted at the
    same address is another node to its senders ("" when unknown)."""


def new_incarnation() -> str:
    """A name for one run of a node's process, picked at its start. What a
    node took from others lives in its memory, so a restarted node is a new
    incarnation: batches its previous run may have taken are not sent to it."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Member:
    name: str
    role: str
    address: str
    started_at: float
    """Seconds since the epoch."""
    admin: str = ""
    """``host:port`` of the node's /metrics, if it serves one."""
    internal: str = ""
    """``host:port`` of its RemoteService, if it takes L1 results."""
    identity: str = ""
    """The name its cluster certificate carries, with cluster TLS on."""
    incarnation: str = ""
    """The run of the node's process; its RemoteService acks name it too."""


class ClusterNodesQuery(Protocol):
    def remote_nodes(self) -> list[RemoteNode]:
        """The live nodes that take L1 results, this node included if it does."""


class StandaloneCluster:
    """One node that routes to itself."""

    def __init__(self, me: Member) -> None:
        self._me = me
        self._self = RemoteNode(me.address, is_self=True)

    def remote_nodes(self) -> list[RemoteNode]:
        return [self._self]

    def members(self) -> list[Member]:
        return [self._me]

    def start(self) -> None:
        pass

    def close(self, timeout_s: float = 0.0) -> None:
        pass


# Expiry times come from Redis's clock, so nodes' clocks need not agree.
_HEARTBEAT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
return now
"""
_LIVE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for _, name in ipairs(gone) do
  redis.call('ZREM', KEYS[1], name)
  redis.call('HDEL', KEYS[2], name)
end
local names = redis.call('ZRANGE', KEYS[1], 0, -1)
if #names == 0 then return {} end
return redis.call('HMGET', KEYS[2], unpack(names))
"""


class RedisCluster:
    """Registers this node (``me``) in Redis and renews the registration every
    ``heartbeat_s``; a node whose registration is ``expiry_s`` old is gone, and
    the next query drops it. ``me`` None only reads (``skyoap cluster status``).
    With ``require_identity`` (cluster TLS on), a member whose record names no
    certificate identity is never a remote target."""

    def __init__(
        self,
        url: str,
        key_prefix: str,
        me: Member | None = None,
        heartbeat_s: float = 2.0,
        expiry_s: float = 6.0,
        require_identity: bool = False,
        ca: str = "",
    ) -> None:
        if me is not None and expiry_s <= heartbeat_s:
            raise ValueError(
                f"the cluster expiry ({expiry_s:g} s) must be longer than the heartbeat ({heartbeat_s:g} s)"
            )
        self._redis = connect(url, ca)
        self._alive_key = f"{key_prefix}:cluster:alive"
        self._info_key = f"{key_prefix}:cluster:members"
        self._me = me
        self._require_identity = require_identity
        self._refused: set[str] = set()
        self._expiry_ms = int(expiry_s * 1000)
        self._beat = self._redis.register_script(_HEARTBEAT)
        self._live = self._redis.register_script(_LIVE)
        self._renewal = Periodic(
            "cluster-heartbeat", heartbeat_s, self.heartbeat, f"the cluster heartbeat to {self._describe()}"
        )

    def heartbeat(self) -> None:
        assert self._me is not None
        self._beat(
            keys=[self._alive_key, self._info_key],
            args=[self._me.name, self._expiry_ms, json.dumps(asdict(self._me))],
        )

    def members(self) -> list[Member]:
        """Every live node, sorted by role then name."""
        raw = self._live(keys=[self._alive_key, self._info_key])
        members = [_member(json.loads(r)) for r in raw if r is not None]
        return sorted(members, key=lambda m: (m.role, m.name))

    def remote_nodes(self) -> list[RemoteNode]:
        """One node per address: of two records of one address (a node
        restarted under another name before its old record expired), the
        later start, since the earlier run is gone."""
        mine = self._me.address if self._me else None
        nodes: dict[str, RemoteNode] = {}
        for m in sorted(self.members(), key=lambda m: m.started_at):
            if not Role(m.role).is_target:
                continue
            if self._require_identity and not m.identity:
                if m.name not in self._refused:
                    self._refused.add(m.name)
                    log.warning(
                        "not routing to %s (%s): its membership names no cluster certificate identity",
                        m.name,
                        m.internal or m.address,
                    )
                continue
            nodes[m.address] = RemoteNode(
                m.address, m.address == mine, m.internal or m.address, m.identity, m.incarnation
            )
        return list(nodes.values())

    def start(self) -> None:
        """Registers now (failing loudly if Redis cannot be reached), then keeps renewing."""
        try:
            self.heartbeat()
        except redis.RedisError as e:
            raise OSError(f"cannot register in the cluster at {self._describe()}: {e}") from e
        self._renewal.start()

    def close(self, timeout_s: float = 5.0) -> None:
        """Stops renewing and leaves the cluster at once (a killed node leaves by expiry)."""
        self._renewal.close(timeout_s)
        if self._me is not None:
            try:
                self._redis.zrem(self._alive_key, self._me.name)
                self._redis.hdel(self._info_key, self._me.name)
            except redis.RedisError as e:
                log.warning("could not leave the cluster cleanly (%s); the registration expires by itself", e)
        self._redis.close()

    def _describe(self) -> str:
        kw = self._redis.connection_pool.connection_kwargs
        return f"redis {kw.get('host')}:{kw.get('port')}"


_MEMBER_FIELDS = frozenset(f.name for f in fields(Member))


def _member(record: dict[str, object]) -> Member:
    """A member from its record; fields a later version added are left out,
    so that nodes of two versions can share a cluster while it is upgraded."""
    return Member(**{k: v for k, v in record.items() if k in _MEMBER_FIELDS})  # type: ignore[arg-type]
