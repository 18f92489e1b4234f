"""SkyWalking's ``Entity`` input, whose metrics an expression reads (by
name), and its ``Scope``, the kinds of entity."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

GENERAL = "GENERAL"
"""SkyWalking's layer of services an agent reports from."""


class Scope(enum.Enum):
    """SkyWalking's ``Scope``, valued as the protocol spells it."""

    ALL = "All"
    SERVICE = "Service"
    SERVICE_INSTANCE = "ServiceInstance"
    ENDPOINT = "Endpoint"
    PROCESS = "Process"
    SERVICE_RELATION = "ServiceRelation"
    SERVICE_INSTANCE_RELATION = "ServiceInstanceRelation"
    ENDPOINT_RELATION = "EndpointRelation"
    PROCESS_RELATION = "ProcessRelation"


@dataclass(frozen=True, slots=True, kw_only=True)
class Entity:
    """The protocol's ``Entity``. Names are the source side; ``dest_*`` the
    destination of a relation. ``normal`` says whether a service runs an agent
    (True) or was only seen by others (a database, a peer address); clients
    send it, and an id built from a name carries it. The protocol's ``scope``
    field is left out: for metrics SkyWalking ignores it too and takes the
    scope from the metric's name (``queryAlarms`` reads it from the input)."""

    service_name: str | None = None
    normal: bool | None = None
    service_instance_name: str | None = None
    endpoint_name: str | None = None
    process_name: str | None = None
    dest_service_name: str | None = None
    dest_normal: bool | None = None
    dest_service_instance_name: str | None = None
    dest_endpoint_name: str | None = None
    dest_process_name: str | None = None

    def missing(self, scope: Scope) -> list[str]:
        """The protocol's names of the fields a metric of ``scope`` needs and this entity lacks."""
        return [name for name, attr in _NEEDS[scope] if getattr(self, attr) is None]

    def inferred_scope(self) -> Scope | None:
        """The most specific scope the names given fit, as SkyWalking infers
        it where a client leaves ``scope`` out: a relation's when a ``dest``
        name is given; None when no name is."""
        for scope, attr in _INFERRED_BY:
            if getattr(self, attr) is not None:
                return scope
        return None


def entity_of(given: Mapping[str, Any]) -> Entity:
    """The protocol's ``Entity`` input, as a resolver receives it."""
    return Entity(
        service_name=given.get("serviceName"),
        normal=given.get("normal"),
        service_instance_name=given.get("serviceInstanceName"),
        endpoint_name=given.get("endpointName"),
        process_name=given.get("processName"),
        dest_service_name=given.get("destServiceName"),
        dest_normal=given.get("destNormal"),
        dest_service_instance_name=given.get("destServiceInstanceName"),
        dest_endpoint_name=given.get("destEndpointName"),
        dest_process_name=given.get("destProcessName"),
    )


_SERVICE = ("serviceName", "service_name")
_INSTANCE = ("serviceInstanceName", "service_instance_name")
_ENDPOINT = ("endpointName", "endpoint_name")
_PROCESS = ("processName", "process_name")
_DEST_SERVICE = ("destServiceName", "dest_service_name")
_DEST_INSTANCE = ("destServiceInstanceName", "dest_service_instance_name")
_DEST_ENDPOINT = ("destEndpointName", "dest_endpoint_name")
_DEST_PROCESS = ("destProcessName", "dest_process_name")

_NEEDS: dict[Scope, tuple[tuple[str, str], ...]] = {
    # skyoap names services without the normal flag, so it is not required as
    # SkyWalking's Entity.isValid requires it; ids built for answers use it.
    Scope.ALL: (),
    Scope.SERVICE: (_SERVICE,),
    Scope.SERVICE_INSTANCE: (_SERVICE, _INSTANCE),
    Scope.ENDPOINT: (_SERVICE, _ENDPOINT),
    Scope.PROCESS: (_SERVICE, _INSTANCE, _PROCESS),
    Scope.SERVICE_RELATION: (_SERVICE, _DEST_SERVICE),
    Scope.SERVICE_INSTANCE_RELATION: (_SERVICE, _INSTANCE, _DEST_SERVICE, _DEST_INSTANCE),
    Scope.ENDPOINT_RELATION: (_SERVICE, _ENDPOINT, _DEST_SERVICE, _DEST_ENDPOINT),
    Scope.PROCESS_RELATION: (_SERVICE, _INSTANCE, _PROCESS, _DEST_SERVICE, _DEST_INSTANCE, _DEST_PROCESS),
}

_INFERRED_BY: tuple[tuple[Scope, str], ...] = (
    (Scope.PROCESS_RELATION, "dest_process_name"),
    (Scope.ENDPOINT_RELATION, "dest_endpoint_name"),
    (Scope.SERVICE_INSTANCE_RELATION, "dest_service_instance_name"),
    (Scope.SERVICE_RELATION, "dest_service_name"),
    (Scope.PROCESS, "process_name"),
    (Scope.ENDPOINT, "endpoint_name"),
    (Scope.SERVICE_INSTANCE, "service_instance_name"),
    (Scope.SERVICE, "service_name"),
)
"""The scope a name points to, the most specific first."""
