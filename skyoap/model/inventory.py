"""Inventory: the names agents register (services, instances, endpoints,
network addresses), each given a sequence id dense from 1 within its scope."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import ClassVar, Self

from skyoap.model.checks import TelemetryLimits, consistent
from skyoap.model.stream import StreamData

OTHER = "(other)"
"""The catch-all entity names past a cardinality bound are folded into
(``receiver/cardinality.py``): a name that stands for many."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Inventory(StreamData):
    """A registered name. ``sequence`` is 0 until L2 has allocated the id."""

    SCOPE: ClassVar[str]
    """The sequence scope: ids are unique and dense within it."""

    name: str
    sequence: int = 0
    register_time: int = 0
    """Milliseconds since the epoch."""
    heartbeat_time: int = 0
    """Milliseconds since the epoch of the latest sign of life."""
    active: bool = True
    properties: Mapping[str, str] = field(default_factory=dict)

    def combine(self, other: Self) -> Self:
        """Merges two sightings of the same name: the latest heartbeat wins, the
        earliest registration time stays, properties are merged with the later
        sighting's values winning, and an allocated sequence is never lost."""
        older, newer = (self, other) if other.heartbeat_time >= self.heartbeat_time else (other, self)
        registered = [t for t in (self.register_time, other.register_time) if t]
        return replace(
            self,
            sequence=self.sequence or other.sequence,
            register_time=min(registered) if registered else 0,
            heartbeat_time=newer.heartbeat_time,
            active=newer.active,
            properties={**older.properties, **newer.properties},
        )

    def check(self, limits: TelemetryLimits, now_ms: int) -> None:
        # Messages are built only for a refusal: every item from another node passes here.
        limits.name(lambda: f"{self.SCOPE.replace('_', ' ')} name", self.name)
        consistent(self.sequence >= 0, lambda: f"{self.describe()} has the id {self.sequence}")
        limits.not_ahead(lambda: f"the heartbeat of {self.describe()}", self.heartbeat_time, now_ms)
        limits.not_ahead(lambda: f"the registration of {self.describe()}", self.register_time, now_ms)
        limits.properties(lambda: f"the properties of {self.describe()}", self.properties)
        consistent(
            self.active,
            lambda: (
                f"{self.describe()} arrives inactive: only its aggregator's housekeeping makes a "
                "name inactive, and a heartbeat makes it active again"
            ),
        )

    def describe(self) -> str:
        return f"{self.SCOPE.replace('_', ' ')} {self.name!r}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceInventory(Inventory):
    STREAM_ID = 1
    MODEL = "service_inventory"
    SCOPE = "service"

    def key(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceInstanceInventory(Inventory):
    STREAM_ID = 2
    MODEL = "service_instance_inventory"
    SCOPE = "service_instance"

    service_id: int
    instance_uuid: str

    def key(self) -> str:
        return f"{self.service_id}_{self.instance_uuid}"

    def check(self, limits: TelemetryLimits, now_ms: int) -> None:
        Inventory.check(self, limits, now_ms)  # dataclasses with slots cannot use super()
        consistent(
            self.service_id >= 1, lambda: f"instance {self.name!r} names the service id {self.service_id}"
        )
        limits.name("instance uuid", self.instance_uuid)


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointInventory(Inventory):
    STREAM_ID = 3
    MODEL = "endpoint_inventory"
    SCOPE = "endpoint"

    service_id: int
    detect_point: int
    """``DetectPoint.code``: 0 client, 1 server, 2 proxy."""

    def key(self) -> str:
        return f"{self.service_id}_{self.detect_point}_{self.name}"

    def check(self, limits: TelemetryLimits, now_ms: int) -> None:
        Inventory.check(self, limits, now_ms)
        consistent(
            self.service_id >= 1, lambda: f"endpoint {self.name!r} names the service id {self.service_id}"
        )
        consistent(
            self.detect_point in DETECT_POINT_CODES,
            lambda: f"endpoint {self.name!r} has the detect point {self.detect_point}",
        )


class DetectPoint(enum.Enum):
    """Which side saw a call (SkyWalking's ``DetectPoint``)."""

    SERVER = "server"
    """The callee's entry span, from its reference to the caller."""
    CLIENT = "client"
    """The caller's exit span; the callee is named by the peer address it called."""
    PROXY = "proxy"

    @property
    def code(self) -> int:
        """Its number in SkyWalking's protocol, and in an endpoint's key."""
        return _DETECT_POINT_CODES[self]


_DETECT_POINT_CODES = {DetectPoint.CLIENT: 0, DetectPoint.SERVER: 1, DetectPoint.PROXY: 2}
DETECT_POINT_CODES = frozenset(_DETECT_POINT_CODES.values())


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkAddressInventory(Inventory):
    STREAM_ID = 4
    MODEL = "network_address_inventory"
    SCOPE = "network_address"

    def key(self) -> str:
        return self.name


INVENTORY_TYPES: tuple[type[Inventory], ...] = (
    ServiceInventory,
    ServiceInstanceInventory,
    EndpointInventory,
    NetworkAddressInventory,
)
