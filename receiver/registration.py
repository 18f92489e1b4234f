"""Registration and heartbeats, in the project's own types: look a name up,
answer its id, or hand it to the worker chain and answer "no id yet"."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pipeline.inventory import (
    EndpointInventory,
    Inventory,
    NetworkAddressInventory,
    ServiceInstanceInventory,
    ServiceInventory,
)
from pipeline.worker import Worker
from receiver.cache import InventoryCache


class InvalidRequest(ValueError):
    """A request the caller must change; the message says what was wrong."""


class UnknownReference(LookupError):
    """A request that names an id this backend never gave out."""


@dataclass(frozen=True)
class Limits:
    max_name_length: int
    max_batch_items: int


def now_ms() -> int:
    return int(time.time() * 1000)


class Registrar:
    def __init__(
        self,
        cache: InventoryCache,
        entry: Callable[[type[Inventory]], Worker[Inventory]],
        limits: Limits,
    ) -> None:
        self._cache = cache
        self._entry = entry
        self.limits = limits

    def check_name(self, what: str, index: int, name: str) -> None:
        if not name:
            raise InvalidRequest(f"{what} #{index} is empty")
        if len(name) > self.limits.max_name_length:
            raise InvalidRequest(
                f"{what} #{index} has {len(name)} characters; "
                f"at most {self.limits.max_name_length} are allowed"
            )

    def check_batch(self, what: str, count: int) -> None:
        if count > self.limits.max_batch_items:
            raise InvalidRequest(
                f"{count} {what} in one call; "
                f"at most {self.limits.max_batch_items} are allowed, split the batch"
            )

    def check_service(self, service_id: int, index: int, what: str) -> ServiceInventory:
        service = self._cache.by_id(ServiceInventory, service_id) if service_id > 0 else None
        if service is None:
            raise UnknownReference(
                f"{what} #{index} names service id {service_id}, which is not registered: "
                "register the service first and use the id it answers"
            )
        return service

    def register(self, model: type[Inventory], items: Sequence[Inventory]) -> dict[str, int]:
        """Answers the ids of the keys of ``items`` that have one; hands the
        others to the chain (the caller asks again later)."""
        ids = self._cache.ids(model, [i.key() for i in items])
        entry = self._entry(model)
        for item in items:
            if item.key() not in ids:
                entry.accept(item)
        return ids

    def services(self, names: Sequence[tuple[str, dict[str, str]]]) -> dict[str, int]:
        self.check_batch("services", len(names))
        for i, (name, _) in enumerate(names):
            self.check_name("service name", i, name)
        t = now_ms()
        items = [ServiceInventory(name=n, register_time=t, heartbeat_time=t, properties=p) for n, p in names]
        return self.register(ServiceInventory, items)

    def instances(self, instances: Sequence[ServiceInstanceInventory]) -> dict[str, int]:
        self.check_batch("service instances", len(instances))
        for i, inst in enumerate(instances):
            self.check_name("instance UUID", i, inst.instance_uuid)
            self.check_name("instance name", i, inst.name)
            self.check_service(inst.service_id, i, "service instance")
        return self.register(ServiceInstanceInventory, instances)

    def endpoints(self, endpoints: Sequence[EndpointInventory]) -> dict[str, int]:
        self.check_batch("endpoints", len(endpoints))
        for i, ep in enumerate(endpoints):
            self.check_name("endpoint name", i, ep.name)
            self.check_service(ep.service_id, i, "endpoint")
        return self.register(EndpointInventory, endpoints)

    def addresses(self, addresses: Sequence[str]) -> dict[str, int]:
        self.check_batch("network addresses", len(addresses))
        for i, a in enumerate(addresses):
            self.check_name("network address", i, a)
        t = now_ms()
        items = [NetworkAddressInventory(name=a, register_time=t, heartbeat_time=t) for a in addresses]
        return self.register(NetworkAddressInventory, items)

    def ping(self, instance_id: int, instance_uuid: str) -> bool:
        """Records a heartbeat of instance ``instance_id`` (and of its service).
        Returns False when the id is unknown or belongs to another UUID: the
        agent must then register again.

        The heartbeat time is the backend's clock, not the agent's, so that a
        skewed agent clock cannot expire an instance early or keep it alive.
        """
        inst = self._cache.by_id(ServiceInstanceInventory, instance_id) if instance_id > 0 else None
        if inst is None or (instance_uuid and instance_uuid != inst.instance_uuid):
            return False
        t = now_ms()
        self._entry(ServiceInstanceInventory).accept(
            ServiceInstanceInventory(
                name=inst.name, service_id=inst.service_id, instance_uuid=inst.instance_uuid, heartbeat_time=t
            )
        )
        service = self._cache.by_id(ServiceInventory, inst.service_id)
        if service is not None:
            self._entry(ServiceInventory).accept(ServiceInventory(name=service.name, heartbeat_time=t))
        return True
