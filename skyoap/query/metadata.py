"""Metadata: the services, instances and endpoints agents registered, as
SkyWalking's metadata queries (v2, and the v1 ones its CLI still sends)
answer them.

Every service that runs an agent is in the GENERAL layer. The databases,
caches and message brokers they call are services of the layers known by
their callers (``layers.KNOWN_BY_CALLERS``: VIRTUAL_DATABASE, VIRTUAL_CACHE
and VIRTUAL_MQ), known from their metrics: those called within ``--inactive-instance-ttl-days``; a
broker's topics and queues are its endpoints. Hosts and database servers
are services of the layers of meters (``layers.METERED``: OS_LINUX, MYSQL,
POSTGRESQL, REDIS), known from the meters their rules made within that
time, an exporter's target an instance. Any other peer nobody
reports from is no service here; it is a node of the topology
(``topology.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skyoap.layers import KNOWN_BY_CALLERS, METERED
from skyoap.model.inventory import EndpointInventory, ServiceInstanceInventory, ServiceInventory
from skyoap.model.metrics import (
    DatabaseAccessMetrics,
    Downsampling,
    MeterMetrics,
    MQEndpointAccessMetrics,
    ServiceMeterMetrics,
)
from skyoap.query.context import QueryContext
from skyoap.runtime import clock
from skyoap.vocabulary import ids
from skyoap.vocabulary.duration import Duration
from skyoap.vocabulary.entity import GENERAL

DAY_MS = 86_400_000

GROUP_SEPARATOR = "::"
"""``group::short`` names a service of a group, as in SkyWalking."""

MAX_SERVICES = 9_999
"""The most services a listing reads; past it, a listing says so. One more
is asked for, and Elasticsearch answers at most 10,000 hits a search."""

MAX_INSTANCES = 9_999
"""The most instances (of every service) a listing reads, as ``MAX_SERVICES``."""

MAX_ENDPOINTS = 1_000
"""The most endpoints ``findEndpoint`` answers (its ``limit`` is capped to it)."""

LANGUAGES = frozenset({"JAVA", "DOTNET", "NODEJS", "PYTHON", "RUBY", "GO", "LUA", "PHP"})
"""The protocol's ``Language`` values besides UNKNOWN."""


def _service(service: ServiceInventory) -> dict[str, Any]:
    group, separator, short = service.name.partition(GROUP_SEPARATOR)
    return {
        "id": ids.service_id(service.name, True),
        "name": service.name,
        "group": group if separator else "",
        "shortName": short if separator else service.name,
        "layers": [GENERAL],
        "normal": True,
    }


def _services(context: QueryContext) -> list[ServiceInventory]:
    services = context.inventory.list(ServiceInventory, MAX_SERVICES + 1)
    if len(services) > MAX_SERVICES:
        raise ValueError(f"more than {MAX_SERVICES} services are registered: search by name instead")
    return sorted(services, key=lambda s: s.name)


def _stored_service(context: QueryContext, name: str) -> ServiceInventory | None:
    found = context.inventory.get_many(ServiceInventory, [name]).get(name)
    return found.item if found else None


def _virtual(name: str, layer: str) -> dict[str, Any]:
    return {"id": ids.service_id(name, False), "name": name, "group": "", "shortName": name,
            "layers": [layer], "normal": False}  # fmt: skip


def _virtual_names(context: QueryContext, layer: str, first_day: int | None = None) -> list[str]:
    """The services of a virtual layer called since ``first_day`` (a day
    bucket; by default, within ``--inactive-instance-ttl-days``)."""
    if first_day is None:
        first_day = _first_day(context)
    found = context.metrics.distinct(KNOWN_BY_CALLERS[layer], Downsampling.DAY, first_day, ("service",))
    return sorted(name for (name,) in found)


def _first_day(context: QueryContext) -> int:
    """The day bucket ``--inactive-instance-ttl-days`` ago."""
    return Downsampling.DAY.bucket_of(clock.now_ms() - context.ttl.inactive_instance_days * DAY_MS)


def _metered(context: QueryContext) -> dict[str, list[str]]:
    """The services of each layer of meters (``layers.METERED``) measured
    within ``--inactive-instance-ttl-days``, by name."""
    first_day = _first_day(context)
    found: dict[str, set[str]] = {layer: set() for layer in METERED}
    for model in (ServiceMeterMetrics, MeterMetrics):
        for layer, name in context.metrics.distinct(model, Downsampling.DAY, first_day, ("layer", "service")):
            if layer in found:
                found[layer].add(name)
    return {layer: sorted(names) for layer, names in found.items()}


def _metered_service(name: str, layers: list[str]) -> dict[str, Any]:
    return {**_virtual(name, layers[0]), "id": ids.service_id(name, True), "layers": layers, "normal": True}


def _metered_instances(context: QueryContext, service: str) -> list[str]:
    """The instances of a service of a layer of meters measured lately."""
    found = context.metrics.distinct(
        MeterMetrics, Downsampling.DAY, _first_day(context), ("layer", "service", "instance")
    )
    return sorted(instance for layer, name, instance in found if name == service and layer in METERED)


def list_layers(context: QueryContext) -> list[str]:
    layers = [GENERAL] if _services(context) else []
    layers += [layer for layer in KNOWN_BY_CALLERS if _virtual_names(context, layer)]
    return layers + [layer for layer, names in _metered(context).items() if names]


def list_services(context: QueryContext, layer: str | None = None) -> list[dict[str, Any]]:
    """The services of ``layer``: those that report (GENERAL), those known
    from their callers (a virtual layer) or from their meters (a layer of
    meters); of every layer when none is given."""
    if layer is not None and layer in KNOWN_BY_CALLERS:
        return [_virtual(name, layer) for name in _virtual_names(context, layer)]
    if layer is not None and layer in METERED:
        return [_metered_service(name, [layer]) for name in _metered(context)[layer]]
    if layer not in (None, GENERAL):
        return []
    found = [_service(s) for s in _services(context)]
    if layer is None:
        found += [
            _virtual(n, virtual) for virtual in KNOWN_BY_CALLERS for n in _virtual_names(context, virtual)
        ]
        found += [
            _metered_service(n, [metered]) for metered, names in _metered(context).items() for n in names
        ]
    return found


def all_databases(context: QueryContext, duration: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The databases called since the Duration's first day, each with the
    ``db.type`` its callers name (SkyWalking's ``getAllDatabases``)."""
    first_day = Downsampling.DAY.bucket_of(int(Duration.of(duration).start_time.timestamp() * 1000))
    found = context.metrics.distinct(DatabaseAccessMetrics, Downsampling.DAY, first_day, ("service", "type"))
    types: dict[str, str] = {}
    for name, kind in found:
        types[name] = max(types.get(name, ""), kind)
    return [{"id": ids.service_id(n, False), "name": n, "type": types[n]} for n in sorted(types)]


def all_services(
    context: QueryContext, duration: Mapping[str, Any], group: str | None = None
) -> list[dict[str, Any]]:
    """v1's ``getAllServices``: every service (of ``group``, when given)."""
    Duration.of(duration)  # checked as SkyWalking checks it, though every service is listed
    services = [_service(s) for s in _services(context)]
    return [s for s in services if group is None or s["group"] == group]


def search_services(context: QueryContext, duration: Mapping[str, Any], keyword: str) -> list[dict[str, Any]]:
    return [s for s in all_services(context, duration) if keyword in s["name"]]


def find_service(context: QueryContext, serviceName: str) -> dict[str, Any] | None:
    """The service of that name: one that reports, else a database, cache or
    broker called lately (SkyWalking's CLI finds every service by its name)."""
    service = _stored_service(context, serviceName)
    if service:
        return _service(service)
    return _metered_by_name(context, serviceName) or _virtual_service(context, serviceName)


def _metered_by_name(context: QueryContext, name: str) -> dict[str, Any] | None:
    layers = [layer for layer, names in _metered(context).items() if name in names]
    return _metered_service(name, layers) if layers else None


def search_service(context: QueryContext, serviceCode: str) -> dict[str, Any] | None:
    return find_service(context, serviceName=serviceCode)


def get_service(context: QueryContext, serviceId: str) -> dict[str, Any] | None:
    """The service ``serviceId`` names: one that reports (``.1``), or one of
    a virtual layer called lately (``.0``)."""
    name, normal = ids.read_service_id(serviceId, "serviceId")
    if normal:
        service = _stored_service(context, name)
        return _service(service) if service else _metered_by_name(context, name)
    return _virtual_service(context, name)


def _virtual_service(context: QueryContext, name: str) -> dict[str, Any] | None:
    layers = [layer for layer in KNOWN_BY_CALLERS if name in _virtual_names(context, layer)]
    return {**_virtual(name, layers[0]), "layers": layers} if layers else None


def _instance(service: str, instance: ServiceInstanceInventory) -> dict[str, Any]:
    properties = instance.properties
    language = properties.get("language", "").upper()
    return {
        "id": ids.instance_id(service, True, instance.name),
        "name": instance.name,
        "attributes": [{"name": k, "value": v} for k, v in sorted(properties.items())],
        "language": language if language in LANGUAGES else "UNKNOWN",
        "instanceUUID": instance.instance_uuid,
    }


def _instances_of(context: QueryContext, service_name: str) -> list[ServiceInstanceInventory]:
    service = _stored_service(context, service_name)
    if service is None:
        return []
    instances = context.inventory.list(ServiceInstanceInventory, MAX_INSTANCES + 1)
    if len(instances) > MAX_INSTANCES:
        raise ValueError(f"more than {MAX_INSTANCES} instances are registered: skyoap lists no more")
    return sorted((i for i in instances if i.service_id == service.sequence), key=lambda i: i.name)


def list_instances(
    context: QueryContext, duration: Mapping[str, Any], serviceId: str
) -> list[dict[str, Any]]:
    """The instances of a service alive within the Duration (a heartbeat since its start)."""
    since_ms = int(Duration.of(duration).start_time.timestamp() * 1000)
    name = ids.service_name(serviceId)
    alive = [i for i in _instances_of(context, name) if i.heartbeat_time >= since_ms]
    if not alive:
        return [_metered_instance(name, i) for i in _metered_instances(context, name)]
    return [_instance(name, i) for i in alive]


def _metered_instance(service: str, name: str) -> dict[str, Any]:
    """An instance of a layer of meters: an exporter's target."""
    return {"id": ids.instance_id(service, True, name), "name": name, "attributes": [],
            "language": "UNKNOWN", "instanceUUID": name}  # fmt: skip


def list_instances_by_name(
    context: QueryContext, duration: Mapping[str, Any], service: Mapping[str, Any]
) -> list[dict[str, Any]]:
    return list_instances(context, duration, ids.service_id(service["serviceName"], True))


def get_instance(context: QueryContext, instanceId: str) -> dict[str, Any] | None:
    service_name, name = ids.instance_names(instanceId)
    found = [i for i in _instances_of(context, service_name) if i.name == name]
    if found:
        return _instance(service_name, found[0])
    return (
        _metered_instance(service_name, name) if name in _metered_instances(context, service_name) else None
    )


def find_endpoint(
    context: QueryContext,
    serviceId: str,
    limit: int,
    keyword: str | None = None,
    duration: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The service's endpoints whose names hold ``keyword``, by name, at most
    ``limit`` (capped to ``MAX_ENDPOINTS``). Every registered endpoint is
    listed whatever the Duration: skyoap removes those unused for
    ``--unused-endpoint-ttl-days``."""
    if duration is not None:
        Duration.of(duration)
    if limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit}")
    name, normal = ids.read_service_id(serviceId, "serviceId")
    if normal:
        service = _stored_service(context, name)
        if service is None:
            return []
        names = context.inventory.names_of_service(EndpointInventory, service.sequence, 10 * MAX_ENDPOINTS)
    else:
        names = _topics(context, name)
    matching = sorted({n for n in names if not keyword or keyword in n})[: min(limit, MAX_ENDPOINTS)]
    return [{"id": ids.endpoint_id(name, normal, n), "name": n} for n in matching]


def _topics(context: QueryContext, broker: str) -> list[str]:
    """The topics and queues of a broker (a VIRTUAL_MQ service's endpoints)
    its producers and consumers used within ``--inactive-instance-ttl-days``."""
    first_day = Downsampling.DAY.bucket_of(clock.now_ms() - context.ttl.inactive_instance_days * DAY_MS)
    found = context.metrics.distinct(
        MQEndpointAccessMetrics, Downsampling.DAY, first_day, ("service", "endpoint")
    )
    return [endpoint for service, endpoint in found if service == broker]


def find_endpoint_by_name(
    context: QueryContext,
    service: Mapping[str, Any],
    limit: int,
    keyword: str | None = None,
    duration: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    service_id = ids.service_id(service["serviceName"], True)
    return find_endpoint(context, service_id, limit, keyword, duration)


def search_endpoint(context: QueryContext, keyword: str, serviceId: str, limit: int) -> list[dict[str, Any]]:
    return find_endpoint(context, serviceId, limit, keyword)


def endpoint_info(context: QueryContext, endpointId: str) -> dict[str, Any] | None:
    """The endpoint an id names, if its service registered it, or a topic
    of a broker used lately."""
    service_id, _, _ = endpointId.partition("_")
    service_name, normal = ids.read_service_id(service_id, "endpointId")
    _, name = ids.endpoint_names(endpointId)
    if normal:
        service = _stored_service(context, service_name)
        keys = [f"{service.sequence}_{point}_{name}" for point in (1, 0, 2)] if service else []
        if not keys or not context.inventory.get_many(EndpointInventory, keys):
            return None
    elif name not in _topics(context, service_name):
        return None
    return {"id": endpointId, "name": name, "serviceId": service_id, "serviceName": service_name}


def metrics_ttl(context: QueryContext) -> dict[str, int]:
    ttl = context.ttl
    cold = {"coldMinute": -1, "coldHour": -1, "coldDay": -1}
    return {
        "metadata": ttl.inactive_instance_days,
        "minute": ttl.minute_metrics_days,
        "hour": ttl.hour_metrics_days,
        "day": ttl.day_metrics_days,
        **cold,
    }


def records_ttl(context: QueryContext) -> dict[str, int]:
    days = context.ttl.records_days
    kinds = ("normal", "trace", "zipkinTrace", "log", "browserErrorLog")
    cold = "coldNormal", "coldTrace", "coldZipkinTrace", "coldLog", "coldBrowserErrorLog"
    return {**dict.fromkeys(kinds, days), **dict.fromkeys(cold, -1)}
