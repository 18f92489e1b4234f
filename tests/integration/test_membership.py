"""Cluster membership on a real Redis: what the receivers route to when a
node restarted, and records of a later version."""

from __future__ import annotations

import json
import uuid

import redis

from skyoap.deploy.servers import RedisServer
from skyoap.remote.cluster import Member, RedisCluster, RemoteNode


def test_a_node_restarted_under_another_name_is_routed_to_as_its_new_run(redis_server: RedisServer) -> None:
    """Its earlier run's record has not expired yet: the later start wins."""
    prefix = f"m{uuid.uuid4().hex[:8]}"
    earlier = Member("agg-a", "aggregator", "10.0.0.1:11800", 100.0, "", "10.0.0.1:11801", "", "run-1")
    later = Member("agg-b", "aggregator", "10.0.0.1:11800", 200.0, "", "10.0.0.1:11801", "", "run-2")
    other = Member("agg-c", "aggregator", "10.0.0.2:11800", 150.0, "", "10.0.0.2:11801", "", "run-3")
    clusters = [RedisCluster(redis_server.url, prefix, m, 0.3, 60) for m in (later, other, earlier)]
    reader = RedisCluster(redis_server.url, prefix)
    try:
        for c in clusters:
            c.heartbeat()
        assert sorted(reader.remote_nodes()) == [
            RemoteNode("10.0.0.1:11800", internal="10.0.0.1:11801", incarnation="run-2"),
            RemoteNode("10.0.0.2:11800", internal="10.0.0.2:11801", incarnation="run-3"),
        ]
    finally:
        for c in (*clusters, reader):
            c.close(0)


def test_a_record_with_fields_of_a_later_version_is_read_without_them(redis_server: RedisServer) -> None:
    prefix = f"m{uuid.uuid4().hex[:8]}"
    me = Member("agg", "aggregator", "10.0.0.1:11800", 100.0, "", "10.0.0.1:11801", "", "run-1")
    cluster = RedisCluster(redis_server.url, prefix, me, 0.3, 60)
    reader = RedisCluster(redis_server.url, prefix)
    try:
        cluster.heartbeat()
        with redis.Redis.from_url(redis_server.url) as r:
            raw = r.hget(f"{prefix}:cluster:members", "agg")
            assert isinstance(raw, bytes)
            r.hset(f"{prefix}:cluster:members", "agg", json.dumps({**json.loads(raw), "zone": "eu-1"}))
        assert reader.members() == [me]
    finally:
        cluster.close(0)
        reader.close(0)
