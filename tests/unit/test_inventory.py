from __future__ import annotations

import pytest

from skyoap.model.inventory import EndpointInventory, ServiceInstanceInventory, ServiceInventory
from skyoap.model.stream import Stage, StreamTypes, UndecodableData, worker_id


def test_combine_keeps_the_latest_heartbeat_and_the_earliest_registration() -> None:
    a = ServiceInventory(name="s", register_time=100, heartbeat_time=500, properties={"a": "1", "b": "old"})
    b = ServiceInventory(name="s", register_time=300, heartbeat_time=900, properties={"b": "new", "c": "3"})
    for merged in (a.combine(b), b.combine(a)):
        assert merged.register_time == 100
        assert merged.heartbeat_time == 900
        assert dict(merged.properties) == {"a": "1", "b": "new", "c": "3"}


def test_combine_never_loses_an_allocated_sequence() -> None:
    stored = ServiceInventory(name="s", sequence=7, heartbeat_time=1)
    incoming = ServiceInventory(name="s", heartbeat_time=2)
    assert stored.combine(incoming).sequence == 7
    assert incoming.combine(stored).sequence == 7


def test_a_newer_heartbeat_reactivates_an_inactive_row() -> None:
    stored = ServiceInstanceInventory(
        name="i", service_id=1, instance_uuid="u", sequence=3, heartbeat_time=10, active=False
    )
    ping = ServiceInstanceInventory(name="i", service_id=1, instance_uuid="u", heartbeat_time=20)
    assert stored.combine(ping).active is True
    stale = ServiceInstanceInventory(name="i", service_id=1, instance_uuid="u", heartbeat_time=5)
    assert stored.combine(stale).active is False


def test_keys_identify_names_within_their_scope() -> None:
    assert ServiceInventory(name="a_b").key() == "a_b"
    assert ServiceInstanceInventory(name="x", service_id=4, instance_uuid="u-1").key() == "4_u-1"
    assert EndpointInventory(name="GET:/x", service_id=4, detect_point=1).key() == "4_1_GET:/x"


def test_remote_data_round_trips() -> None:
    item = ServiceInstanceInventory(
        name="i",
        service_id=9,
        instance_uuid="u",
        sequence=5,
        register_time=1,
        heartbeat_time=2,
        active=False,
        properties={"host": "h", "pid": "42"},
    )
    strings, longs = item.to_remote()
    assert strings == ["i", "u", "host", "h", "pid", "42"]
    assert longs == [5, 1, 2, 0, 9, 2]
    assert ServiceInstanceInventory.from_remote(strings, longs) == item
    empty = ServiceInventory(name="s")
    assert ServiceInventory.from_remote(*empty.to_remote()) == empty


def test_remote_data_of_the_wrong_shape_is_refused() -> None:
    shape = "takes 2 strings and 5 integers, then 1 map sizes, 0 list lengths and their entries"
    with pytest.raises(UndecodableData, match=f"{shape}; got 1 strings and 6 integers"):
        ServiceInstanceInventory.from_remote(["i"], [1, 2, 3, 4, 5, 0])
    with pytest.raises(UndecodableData, match=f"{shape}; got 3 strings and 6 integers"):
        ServiceInstanceInventory.from_remote(["i", "u", "k"], [1, 2, 3, 4, 5, 1])  # a key without its value
    with pytest.raises(UndecodableData, match="got 2 strings and 5 integers"):
        ServiceInstanceInventory.from_remote(["i", "u"], [1, 2, 3, 4, 5])  # no map size


def test_stream_and_worker_ids_are_fixed_by_type_and_stage() -> None:
    assert worker_id(ServiceInventory, Stage.L1) == 17
    assert worker_id(ServiceInventory, Stage.L2) == 19
    assert worker_id(EndpointInventory, Stage.REMOTE) == 50
    types = StreamTypes([ServiceInventory, EndpointInventory])
    assert types.get(3) is EndpointInventory
    assert types.get(99) is None
    with pytest.raises(ValueError, match="both declare STREAM_ID 1"):
        StreamTypes([ServiceInventory, type("Other", (ServiceInventory,), {"STREAM_ID": 1})])


def test_recent_keys_forget_after_their_time_and_stay_bounded() -> None:
    from skyoap.receiver.cache import RecentKeys

    recent = RecentKeys(ttl_s=10, size=4)
    assert recent.claim(ServiceInventory, "a", now=0.0) is True
    assert recent.claim(ServiceInventory, "a", now=5.0) is False
    assert recent.claim(ServiceInventory, "a", now=10.0) is True
    for i, key in enumerate("bcdefg"):
        assert recent.claim(ServiceInventory, key, now=11.0 + i) is True
    assert len(recent._seen) <= 4
    assert recent.claim(ServiceInventory, "g", now=17.0) is False  # the newest are kept


def test_a_cached_id_is_asked_of_storage_again_once_it_is_older_than_the_max_age() -> None:
    from skyoap.receiver.cache import InventoryCache
    from tests.unit.fakes import MemoryInventoryDAO

    dao = MemoryInventoryDAO()
    kept = InventoryCache(dao, size=10, miss_recheck_s=0, max_age_s=3600)
    aged = InventoryCache(dao, size=10, miss_recheck_s=0, max_age_s=0)
    for cache in (kept, aged):
        cache.learn(ServiceInventory, [ServiceInventory(name="a", sequence=1)])
    # Time to live removed "a" from storage: only the cache still names it.
    assert kept.ids(ServiceInventory, ["a"]) == {"a": 1}
    assert aged.ids(ServiceInventory, ["a"]) == {}
    # Registered again, it has a new id, which the aged cache finds.
    dao.reserve_sequences(ServiceInventory, 2, 2)
    dao.insert(ServiceInventory, [ServiceInventory(name="a", sequence=2)])
    assert aged.ids(ServiceInventory, ["a"]) == {"a": 2}
    assert kept.ids(ServiceInventory, ["a"]) == {"a": 1}
