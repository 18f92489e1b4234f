"""How an alarm names what it is about, as the alarm rules write it and the
query endpoint reads it: SkyWalking's scope ids (``AlarmScope``), the ids of
an alarm's entity and of a relation's destination (``id0``, ``id1``), and
its tags as stored and searched (``key=value``)."""

from __future__ import annotations

import enum
from collections.abc import Iterable

from skyoap.vocabulary import ids
from skyoap.vocabulary.entity import Entity, Scope


class AlarmScope(enum.Enum):
    """The protocol's ``Scope`` values an alarm is raised for, by SkyWalking's
    scope ids (DefaultScopeDefine; what ``AlarmRecord.scope`` holds)."""

    Service = 1
    ServiceInstance = 2
    Endpoint = 3
    ServiceRelation = 4
    ServiceInstanceRelation = 5
    EndpointRelation = 6

    @classmethod
    def of(cls, scope: Scope) -> AlarmScope | None:
        """The alarm scope of ``scope``; None for one alarms are never raised for."""
        return cls.__members__.get(scope.value)

    @property
    def scope(self) -> Scope:
        return Scope(self.name)

    @property
    def defined_name(self) -> str:
        """SkyWalking's name of the scope in an alarm's message: ``SERVICE_INSTANCE``."""
        return self.scope.name

    @property
    def relation(self) -> bool:
        return self.value >= AlarmScope.ServiceRelation.value


def entity_ids(scope: Scope, e: Entity) -> tuple[str, str]:
    """SkyWalking's ``id0`` and ``id1``: the entity's id, and a relation's
    destination's ("" for an entity that is not a relation); a missing
    ``normal`` is read as true."""
    source = _end_id(scope, e.service_name, e.normal, e.service_instance_name, e.endpoint_name)
    alarm = AlarmScope.of(scope)
    if alarm is None or not alarm.relation:
        return source, ""
    return source, _end_id(
        scope, e.dest_service_name, e.dest_normal, e.dest_service_instance_name, e.dest_endpoint_name
    )


def _end_id(
    scope: Scope, service: str | None, normal: bool | None, instance: str | None, endpoint: str | None
) -> str:
    reporting = normal is not False
    if scope in (Scope.SERVICE_INSTANCE, Scope.SERVICE_INSTANCE_RELATION):
        return ids.instance_id(service or "", reporting, instance or "")
    if scope in (Scope.ENDPOINT, Scope.ENDPOINT_RELATION):
        return ids.endpoint_id(service or "", reporting, endpoint or "")
    return ids.service_id(service or "", reporting)


def tag_term(key: str, value: str) -> str:
    """A tag as an alarm stores it and a search names it."""
    return f"{key}={value}"


def tag_terms(tags: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    """An alarm's tags as stored: their terms, sorted."""
    return tuple(sorted(tag_term(k, v) for k, v in tags))
