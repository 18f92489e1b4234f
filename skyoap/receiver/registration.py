"""Registration and heartbeats, in the project's own types: look a name up,
answer its id, or hand it to the worker chain and answer "no id yet". Every
name passes the cardinality guards first (``receiver/cardinality.py``): a name
past a bound is answered the id of its ``(other)`` entity."""

from __future__ import annotations

import enum
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import assert_never

from skyoap.edge.errors import InvalidRequest, UnknownReference
from skyoap.model.checks import CONTROL_CHARACTERS, control_character
from skyoap.model.inventory import (
    DetectPoint,
    EndpointInventory,
    Inventory,
    NetworkAddressInventory,
    ServiceInstanceInventory,
    ServiceInventory,
)
from skyoap.receiver.cache import InventoryCache, RecentKeys
from skyoap.receiver.cardinality import OTHER, Cardinality
from skyoap.runtime import clock
from skyoap.runtime.batching import BatchPolicy
from skyoap.runtime.budget import Overloaded
from skyoap.runtime.periodic import Periodic
from skyoap.runtime.worker import Worker
from skyoap.storage.api import StorageError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    max_name_length: int
    max_batch_items: int
    max_properties_chars: int
    resend_after_s: float
    """A name without an id is handed to the chain again only this long after
    the last time: agents ask every few seconds, and each ask would otherwise
    cost L2 a read and a write for a name already on its way."""


class Registrar:
    def __init__(
        self,
        cache: InventoryCache,
        entry: Callable[[type[Inventory]], Worker[Inventory]],
        limits: Limits,
        cardinality: Cardinality,
    ) -> None:
        self._cache = cache
        self._entry = entry
        self.limits = limits
        self._cardinality = cardinality
        self._recent = RecentKeys(limits.resend_after_s)

    def check_names(self, what: str, names: Sequence[str]) -> None:
        if len(names) > self.limits.max_batch_items:
            raise InvalidRequest(
                f"the call carries {len(names)} items ({what}); "
                f"at most {self.limits.max_batch_items} are allowed per call, split the batch"
            )
        longest = self.limits.max_name_length
        lengths = list(map(len, names))
        if lengths and (min(lengths) == 0 or max(lengths) > longest):  # the usual case costs two builtins
            for i, n in enumerate(lengths):
                if not n:
                    raise InvalidRequest(f"{what} #{i} is empty")
                if n > longest:
                    raise InvalidRequest(f"{what} #{i} has {n} characters; at most {longest} are allowed")
        if CONTROL_CHARACTERS.search("".join(names)):
            for i, name in enumerate(names):
                bad = control_character(f"{what} #{i}", name)
                if bad is not None:
                    raise InvalidRequest(bad)

    def check_services(self, what: str, service_ids: Sequence[int]) -> None:
        for i, service_id in enumerate(service_ids):
            if service_id <= 0 or self._cache.by_id(ServiceInventory, service_id) is None:
                raise UnknownReference(
                    f"{what} #{i} names service id {service_id}, which is not registered: "
                    "register the service first and use the id it answers"
                )

    def register(
        self, model: type[Inventory], keys: Sequence[str], make: Callable[[int], Inventory]
    ) -> dict[str, int]:
        """Answers the ids of those ``keys`` that have one. For the others,
        ``make(i)`` builds the item of ``keys[i]``, which goes to the chain unless
        it was sent moments ago; the caller asks again later."""
        ids = self._cache.ids(model, keys)
        if len(ids) < len(keys):
            new = [(key, make(i)) for i, key in enumerate(keys) if key not in ids]
            for _, item in new:  # all checked before any goes on: a bad batch changes nothing
                self.check_properties(item)
            entry = self._entry(model)
            now = time.monotonic()
            for key, item in new:
                if self._recent.claim(model, key, now):
                    entry.accept(item)
        return ids

    def check_properties(self, item: Inventory) -> None:
        size = sum(len(k) + len(v) for k, v in item.properties.items())
        if size > self.limits.max_properties_chars:
            raise InvalidRequest(
                f"{item.name!r} carries {size} characters of tags and properties; "
                f"at most {self.limits.max_properties_chars} are allowed"
            )

    def services(self, names: Sequence[str], properties: Callable[[int], dict[str, str]]) -> dict[str, int]:
        """The ids of ``names`` that have one, by the names given (a name past
        ``--max-services`` answers the id of the service ``(other)``)."""
        self.check_names("service name", names)
        guarded = self._cardinality.services(names)
        t = clock.now_ms()
        ids = self.register(
            ServiceInventory,
            guarded,
            lambda i: ServiceInventory(
                name=guarded[i], register_time=t, heartbeat_time=t, properties=properties(i)
            ),
        )
        return _by_given(names, guarded, ids)

    def instances(self, instances: Sequence[ServiceInstanceInventory]) -> dict[str, int]:
        """The ids of ``instances`` that have one, by the keys given."""
        self.check_names("instance UUID", [i.instance_uuid for i in instances])
        self.check_names("instance name", [i.name for i in instances])
        self.check_services("service instance", [i.service_id for i in instances])
        guarded = [self._instance(i) for i in instances]
        keys = [i.key() for i in guarded]
        ids = self.register(ServiceInstanceInventory, keys, guarded.__getitem__)
        return _by_given([i.key() for i in instances], keys, ids)

    def _instance(self, instance: ServiceInstanceInventory) -> ServiceInstanceInventory:
        """The instance, or its service's ``(other)`` instance past the bound.
        Rows are per UUID, so the UUID is what counts."""
        uuid = self._cardinality.instance(self._service_name(instance.service_id), instance.instance_uuid)
        if uuid == instance.instance_uuid:
            return instance
        return replace(instance, name=OTHER, instance_uuid=OTHER, properties={})

    def endpoints(self, endpoints: Sequence[EndpointInventory]) -> dict[str, int]:
        """The ids of ``endpoints`` that have one, by the keys given (grouped,
        then bounded: a name answers the id of its group or of ``(other)``)."""
        self.check_names("endpoint name", [e.name for e in endpoints])
        self.check_services("endpoint", [e.service_id for e in endpoints])
        guarded = []
        for e in endpoints:
            name = self._cardinality.endpoint(self._service_name(e.service_id), e.name)
            guarded.append(e if name == e.name else replace(e, name=name))
        keys = [e.key() for e in guarded]
        ids = self.register(EndpointInventory, keys, guarded.__getitem__)
        return _by_given([e.key() for e in endpoints], keys, ids)

    def addresses(self, addresses: Sequence[str]) -> dict[str, int]:
        self.check_names("network address", addresses)
        guarded = [self._cardinality.address(a) for a in addresses]
        t = clock.now_ms()
        ids = self.register(
            NetworkAddressInventory,
            guarded,
            lambda i: NetworkAddressInventory(name=guarded[i], register_time=t, heartbeat_time=t),
        )
        return _by_given(addresses, guarded, ids)

    def _service_name(self, service_id: int) -> str:
        """The name of a service ``check_services`` found."""
        service = self._cache.by_id(ServiceInventory, service_id)
        assert service is not None, "check_services first"
        return service.name

    def alive(self, service: str, instance: str, properties: dict[str, str]) -> bool:
        """Records that ``instance`` of ``service`` is alive, by names (SkyWalking's
        v3 protocol): the service's heartbeat goes on at once, registering it if
        new; the instance's needs the service id. Returns False if that id is not
        known yet: the caller must try again later."""
        self.check_names("service name", [service])
        self.check_names("instance name", [instance])
        service = self._cardinality.service(service)
        instance = self._cardinality.instance(service, instance)
        t = clock.now_ms()
        self._entry(ServiceInventory).accept(
            ServiceInventory(name=service, register_time=t, heartbeat_time=t)
        )
        service_id = self._service_id(service)
        if service_id is None:
            return False
        item = ServiceInstanceInventory(
            name=instance,
            service_id=service_id,
            instance_uuid=instance,
            register_time=t,
            heartbeat_time=t,
            properties=properties,
        )
        self.check_properties(item)
        self._entry(ServiceInstanceInventory).accept(item)
        return True

    def seen(self, service: str, instance: str) -> bool:
        """Registers ``instance`` of ``service`` by names if either is new, with
        no heartbeat for known ones (telemetry names its instance in every
        message; heartbeats are keepAlive's). Returns False if the service id is
        not known yet: the caller must try again later."""
        self.check_names("service name", [service])
        self.check_names("instance name", [instance])
        service = self._cardinality.service(service)
        self.services([service], lambda i: {})
        service_id = self._service_id(service)
        if service_id is None:
            return False
        t = clock.now_ms()
        self.instances(
            [
                ServiceInstanceInventory(
                    name=instance,
                    service_id=service_id,
                    instance_uuid=instance,
                    register_time=t,
                    heartbeat_time=t,
                )
            ]
        )
        return True

    def endpoints_by_name(self, service: str, names: Sequence[str]) -> bool:
        """Registers server-side endpoints of ``service`` by names; returns False
        if the service id is not known yet (try again later)."""
        self.check_names("service name", [service])
        service_id = self._service_id(self._cardinality.service(service))
        if service_id is None:
            return False
        t = clock.now_ms()
        self.endpoints(
            [
                EndpointInventory(
                    name=n,
                    service_id=service_id,
                    detect_point=DetectPoint.SERVER.code,
                    register_time=t,
                    heartbeat_time=t,
                )
                for n in names
            ]
        )
        return True

    def _service_id(self, name: str) -> int | None:
        return self._cache.ids(ServiceInventory, [name]).get(name)

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
        t = clock.now_ms()
        self._entry(ServiceInstanceInventory).accept(
            ServiceInstanceInventory(
                name=inst.name, service_id=inst.service_id, instance_uuid=inst.instance_uuid, heartbeat_time=t
            )
        )
        service = self._cache.by_id(ServiceInventory, inst.service_id)
        if service is not None:
            self._entry(ServiceInventory).accept(ServiceInventory(name=service.name, heartbeat_time=t))
        return True


def _by_given(given: Sequence[str], guarded: Sequence[str], ids: dict[str, int]) -> dict[str, int]:
    """The ids of the guarded keys, by the keys given."""
    if given is guarded or list(given) == list(guarded):
        return ids
    return {g: ids[k] for g, k in zip(given, guarded, strict=True) if k in ids}


class _Name(enum.Enum):
    """What a name waiting to be registered is."""

    INSTANCE = "instance"
    SEEN = "seen"
    """An instance that reported telemetry: its heartbeat time moves."""
    ENDPOINT = "endpoint"
    ADDRESS = "address"


class NamesByService:
    """Registers the names agents report. Instances and endpoints need their
    service's id, which L2 allocates moments after the service is first seen;
    until then they wait here and are tried again every ``retry_s``, at most
    ``size`` at a time."""

    def __init__(self, registrar: Registrar, retry_s: float = 0.5, size: int = 100_000) -> None:
        self._registrar = registrar
        self._size = size
        self._waiting: dict[tuple[str, _Name, str], dict[str, str]] = {}
        self._lock = threading.Lock()
        self._task = Periodic("v3-waiting-names", retry_s, self.retry, "registering names that waited")

    def instance(self, service: str, instance: str, properties: dict[str, str]) -> None:
        """``instance`` of ``service`` is alive (and has these properties)."""
        if not self._registrar.alive(service, instance, properties):
            self._wait((service, _Name.INSTANCE, instance), properties)

    def seen(self, service: str, instance: str) -> None:
        """``instance`` of ``service`` reported telemetry: registered if new."""
        if not self._try(lambda: self._registrar.seen(service, instance)):
            self._wait((service, _Name.SEEN, instance), {})

    def endpoints(self, service: str, names: Iterable[str]) -> None:
        names = sorted(set(names))
        if names and not self._try(lambda: self._registrar.endpoints_by_name(service, names)):
            for name in names:
                self._wait((service, _Name.ENDPOINT, name), {})

    def addresses(self, addresses: Sequence[str]) -> None:
        """Peers telemetry named, registered in calls of at most the batch limit."""
        for chunk in BatchPolicy(max_items=self._registrar.limits.max_batch_items).chunks(addresses):
            if not self._try(functools.partial(self._registrar.addresses, list(chunk))):
                for address in chunk:
                    self._wait(("", _Name.ADDRESS, address), {})

    @staticmethod
    def _try(register: Callable[[], object]) -> bool:
        """Whether ``register()`` did not say False (an id it needs is not
        there yet) nor fail because storage or the queues cannot take the
        names now: telemetry already taken must not fail for its names, they
        wait here instead."""
        try:
            return register() is not False
        except (StorageError, Overloaded) as e:
            log.debug("names wait to be registered: %s", e)
            return False

    def _wait(self, key: tuple[str, _Name, str], properties: dict[str, str]) -> None:
        with self._lock:
            if len(self._waiting) >= self._size and key not in self._waiting:
                log.warning("%d names wait for their service's id already; %s not kept", self._size, key)
                return
            self._waiting[key] = {**self._waiting.get(key, {}), **properties}

    def retry(self) -> None:
        with self._lock:
            waiting, self._waiting = self._waiting, {}
        for (service, kind, name), properties in waiting.items():
            match kind:
                case _Name.INSTANCE:
                    self.instance(service, name, properties)
                case _Name.SEEN:
                    self.seen(service, name)
                case _Name.ENDPOINT:
                    self.endpoints(service, [name])
                case _Name.ADDRESS:
                    self.addresses([name])
                case _:
                    assert_never(kind)

    def start(self) -> None:
        self._task.start()

    def close(self, timeout_s: float = 5.0) -> None:
        self._task.close(timeout_s)
