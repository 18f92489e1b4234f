"""The cardinality guards on every way a name arrives: the Register service's
names and ids, the callers a segment's references name, the bound on
services, and the guards' own memory."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from skyoap.model.inventory import (
    INVENTORY_TYPES,
    EndpointInventory,
    Inventory,
    NetworkAddressInventory,
    ServiceInstanceInventory,
    ServiceInventory,
)
from skyoap.model.metrics import ServiceInstanceRelationMetrics, ServiceRelationMetrics
from skyoap.model.spans import CROSS_PROCESS, Segment, Span, SpanKind, SpanRef
from skyoap.proto import register_pb2
from skyoap.receiver.cache import InventoryCache
from skyoap.receiver.cardinality import ALL, OTHER, Cardinality, GroupingRules, NameBound, services_from
from skyoap.receiver.registration import Limits, Registrar
from skyoap.receiver.segments import measure
from skyoap.receiver.services import RegisterService
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.worker import Worker
from tests.unit.fakes import Collect, MemoryInventoryDAO

NOW = 1_700_000_000_000


class Seeds:
    """What storage answers a bound's first sight of a scope, and which scopes were asked."""

    def __init__(self, stored: dict[str, list[str]] | None = None) -> None:
        self.stored = stored or {}
        self.asked: list[str] = []

    def __call__(self, scope: str) -> Sequence[str]:
        self.asked.append(scope)
        return self.stored.get(scope, [])


def guards(
    services: int = 100, instances: int = 100, endpoints: int = 100, addresses: int = 100, groups: str = ""
) -> tuple[Cardinality, dict[str, Seeds], Instruments]:
    instruments = Instruments()
    seeds = {kind: Seeds() for kind in ("service", "instance", "endpoint")}
    rules = GroupingRules()
    if groups:
        rules = GroupingRules.load(groups)
    cardinality = Cardinality(
        rules,
        NameBound("endpoint", endpoints, "--max-endpoints-per-service", instruments, seeds["endpoint"]),
        NameBound("instance", instances, "--max-instances-per-service", instruments, seeds["instance"]),
        NameBound("network address", addresses, "--max-network-addresses", instruments),
        NameBound("service", services, "--max-services", instruments, seeds["service"]),
    )
    return cardinality, seeds, instruments


# --- the Register service ----------------------------------------------------


class Agentside:
    """A Register service over a registrar whose chain is ``Collect`` workers;
    ``store`` gives what reached the chain ids, as L2 would."""

    def __init__(self, cardinality: Cardinality) -> None:
        self.dao = MemoryInventoryDAO()
        self.dao.install(INVENTORY_TYPES)
        self.cache = InventoryCache(self.dao, size=1000, miss_recheck_s=0, max_age_s=3600)
        self.chains: dict[type[Inventory], Collect[Inventory]] = {m: Collect() for m in INVENTORY_TYPES}
        limits = Limits(max_name_length=500, max_batch_items=99, max_properties_chars=99, resend_after_s=9)
        self.registrar = Registrar(self.cache, self.chain, limits, cardinality)
        self.service = RegisterService(self.registrar)

    def chain(self, model: type[Inventory]) -> Worker[Inventory]:
        return self.chains[model]

    def sent(self, model: type[Inventory]) -> list[Any]:
        return self.chains[model].items

    def store(self, model: type[Inventory]) -> None:
        items = self.chains[model].items
        first = self.dao.max_sequence(model) + 1
        rows = [replace(item, sequence=first + i) for i, item in enumerate(items)]
        self.dao.reserve_sequences(model, first, first + len(rows) - 1)
        self.dao.insert(model, rows)
        self.cache.learn(model, rows)
        items.clear()

    def services(self, names: list[str]) -> dict[str, int]:
        request = register_pb2.Services(services=[register_pb2.Service(serviceName=n) for n in names])
        answer = self.service.doServiceRegister(request, None)
        return {p.key: p.value for p in register_pb2.ServiceRegisterMapping.FromString(answer).services}


def test_register_folds_services_past_max_services_and_answers_the_id_of_other() -> None:
    cardinality, _, instruments = guards(services=3)
    side = Agentside(cardinality)
    names = [f"svc-{i}" for i in range(6)]
    assert side.services(names) == {}
    assert [s.name for s in side.sent(ServiceInventory)] == ["svc-0", "svc-1", OTHER]
    side.store(ServiceInventory)
    assert side.services(names) == {"svc-0": 1, "svc-1": 2, **dict.fromkeys(names[2:], 3)}
    assert side.sent(ServiceInventory) == []
    assert instruments.value("skyoap_cardinality_folded_total", kind="service") == 8


def test_register_bounds_the_instances_of_a_service_by_uuid() -> None:
    cardinality, _, instruments = guards(instances=2)
    side = Agentside(cardinality)
    side.services(["shop"])
    side.store(ServiceInventory)
    request = register_pb2.ServiceInstances(
        instances=[
            register_pb2.ServiceInstance(serviceId=1, instanceUUID=f"uuid-{i}", time=NOW) for i in range(4)
        ]
    )

    def register() -> dict[str, int]:
        answer = side.service.doServiceInstanceRegister(request, None)
        mapping = register_pb2.ServiceInstanceRegisterMapping.FromString(answer)
        return {p.key: p.value for p in mapping.serviceInstances}

    assert register() == {}
    sent = side.sent(ServiceInstanceInventory)
    assert [(i.name, i.instance_uuid, i.service_id) for i in sent] == [
        ("uuid-0", "uuid-0", 1),
        (OTHER, OTHER, 1),
    ]
    side.store(ServiceInstanceInventory)
    assert register() == {"uuid-0": 1, "uuid-1": 2, "uuid-2": 2, "uuid-3": 2}
    assert instruments.value("skyoap_cardinality_folded_total", kind="instance") == 6


def test_register_groups_and_bounds_endpoints_and_answers_by_the_names_given(tmp_path: Path) -> None:
    rules = tmp_path / "groups.txt"
    rules.write_text("/orders/{id}\n")
    cardinality, _, instruments = guards(endpoints=3, groups=str(rules))
    side = Agentside(cardinality)
    side.services(["shop"])
    side.store(ServiceInventory)
    names = ["/orders/1", "/orders/2", "/a", "/b", "/c"]
    request = register_pb2.Endpoints(
        endpoints=[register_pb2.Endpoint(serviceId=1, endpointName=n, **{"from": 1}) for n in names]
    )

    def register() -> dict[str, int]:
        answer = side.service.doEndpointRegister(request, None)
        return {e.endpointName: e.endpointId for e in answer.elements}

    assert register() == {}
    assert [e.name for e in side.sent(EndpointInventory)] == ["/orders/{id}", "/a", OTHER]
    side.store(EndpointInventory)
    assert register() == {"/orders/1": 1, "/orders/2": 1, "/a": 2, "/b": 3, "/c": 3}
    assert instruments.value("skyoap_cardinality_folded_total", kind="endpoint") == 4


def test_register_bounds_network_addresses() -> None:
    cardinality, _, _ = guards(addresses=2)
    side = Agentside(cardinality)
    request = register_pb2.NetAddresses(addresses=["db:1", "db:2", "db:3"])

    def register() -> dict[str, int]:
        answer = side.service.doNetworkAddressRegister(request, None)
        return {p.key: p.value for p in register_pb2.NetAddressMapping.FromString(answer).addressIds}

    assert register() == {}
    assert [a.name for a in side.sent(NetworkAddressInventory)] == ["db:1", OTHER]
    side.store(NetworkAddressInventory)
    assert register() == {"db:1": 1, "db:2": 2, "db:3": 2}


def test_a_bad_name_is_refused_before_it_counts_against_a_bound() -> None:
    cardinality, _, _ = guards(services=2)
    side = Agentside(cardinality)
    with pytest.raises(Exception, match="service name #0 is empty"):
        side.services([""])
    assert side.services(["a", "b"]) == {}
    assert [s.name for s in side.sent(ServiceInventory)] == ["a", OTHER]


# --- segments: services and the callers references name -----------------------


def entry(operation: str, refs: tuple[SpanRef, ...] = ()) -> Span:
    return Span(int(SpanKind.ENTRY), 3, NOW, NOW + 5, operation, "", False, False, refs, 0)


def segment(service: str, instance: str, *spans: Span) -> Segment:
    return Segment("t", f"s-{service}-{instance}", service, instance, tuple(spans), b"")


def test_the_callers_references_name_are_bounded_without_reading_storage() -> None:
    cardinality, seeds, instruments = guards(services=4, instances=2, endpoints=2)
    refs = tuple(
        SpanRef(CROSS_PROCESS, f"caller-{i}", f"caller-{i}-pod-{j}", f"/caller-{i}/{j}", "shop:80")
        for i in range(50)
        for j in range(3)
    )
    guarded = cardinality.segment(segment("shop", "shop-1", entry("/buy", refs)))
    metrics = measure([guarded])
    sources = {m.source for m in metrics if isinstance(m, ServiceRelationMetrics)}
    # "shop" took one of the four names: two callers, then (other).
    assert sources == {"caller-0", "caller-1", OTHER}
    instances = {
        (m.source_service, m.source_instance)
        for m in metrics
        if isinstance(m, ServiceInstanceRelationMetrics)
    }
    assert instances == {
        ("caller-0", "caller-0-pod-0"),
        ("caller-0", OTHER),
        ("caller-1", "caller-1-pod-0"),
        ("caller-1", OTHER),
        (OTHER, OTHER),
        (OTHER, "caller-2-pod-0"),
    }
    endpoints = {(r.parent_service, r.parent_endpoint) for s in guarded.spans for r in s.refs}
    assert {e for s, e in endpoints if s == OTHER} == {"/caller-2/0", OTHER}
    # Storage was read for the segment's own names only, never for a caller's.
    assert seeds["service"].asked == [ALL]
    assert seeds["instance"].asked == ["shop"]
    assert seeds["endpoint"].asked == ["shop"]
    assert instruments.value("skyoap_cardinality_folded_total", kind="service") == 48 * 3


def test_a_service_past_max_services_is_folded_with_its_instances_and_endpoints() -> None:
    cardinality, seeds, _ = guards(services=3, instances=2)
    seeds["service"].stored[ALL] = ["old"]
    out = [cardinality.segment(segment(f"svc-{i}", f"pod-{i}", entry(f"/e{i}"))) for i in range(4)]
    assert [(s.service, s.instance, s.spans[0].operation) for s in out] == [
        ("svc-0", "pod-0", "/e0"),
        (OTHER, "pod-1", "/e1"),
        (OTHER, OTHER, "/e2"),
        (OTHER, OTHER, "/e3"),
    ]
    assert cardinality.source("svc-9", "pod-9") == (OTHER, OTHER)
    assert cardinality.source("old", "") == ("old", "")


# --- the guards' own memory -----------------------------------------------------


def test_scopes_are_forgotten_past_the_names_held_and_read_again_from_storage() -> None:
    seeds = Seeds({f"svc-{i}": [f"stored-{i}-a", f"stored-{i}-b"] for i in range(100)})
    instruments = Instruments()
    bound = NameBound("endpoint", 3, "--max-endpoints-per-service", instruments, seeds, held=20)
    for i in range(100):
        assert bound.admit(f"svc-{i}", "new") == OTHER  # two stored, the third is (other)
        assert bound.scopes <= 20 // 4  # each scope holds 3 names and counts 1
    assert instruments.value("skyoap_cardinality_scopes_forgotten_total", kind="endpoint") == 95
    asked = len(seeds.asked)
    # A forgotten scope is read again: its stored names still count.
    assert bound.admit("svc-0", "stored-0-a") == "stored-0-a"
    assert bound.admit("svc-0", "newer") == OTHER
    assert len(seeds.asked) == asked + 1
    # A scope still held is not.
    assert bound.admit("svc-99", "newest") == OTHER
    assert len(seeds.asked) == asked + 1


def test_scopes_of_callers_alone_are_forgotten_too() -> None:
    bound = NameBound("instance", 10, "--max-instances-per-service", Instruments(), Seeds(), held=100)
    for i in range(10_000):
        bound.admit(f"caller-{i}", "pod", seed=False)
    assert bound.scopes == 50  # each holds one name and counts one


def test_services_are_seeded_from_the_stored_list() -> None:
    dao = MemoryInventoryDAO()
    dao.install(INVENTORY_TYPES)
    rows = [ServiceInventory(name=f"s{i}", sequence=i + 1) for i in range(5)]
    dao.reserve_sequences(ServiceInventory, 1, 5)
    dao.insert(ServiceInventory, rows)
    assert services_from(dao.list, 3)(ALL) == ["s0", "s1", "s2"]
