"""The protocol's by-name conditions (``ServiceCondition``,
``InstanceCondition``, ``EndpointCondition``) as the ids the other queries
take: ``queryLogsByName`` is ``queryLogs`` of those ids, and so on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skyoap.vocabulary import ids

UNDEFINED = "UNDEFINED"
"""SkyWalking's layer of a node its metadata does not list: a service known
only from its callers, or ``User``."""


def service_id(condition: Mapping[str, Any]) -> str:
    """The id of the service a ``ServiceCondition`` (or an instance's or an
    endpoint's) names: a service that reports unless its layer is one of
    SkyWalking's for services known only from their callers (``UNDEFINED``,
    ``VIRTUAL_DATABASE`` and the other ``VIRTUAL_`` ones), as SkyWalking reads it."""
    layer = condition.get("layer")
    normal = not layer or not (layer == UNDEFINED or layer.startswith("VIRTUAL_"))
    return ids.service_id(condition["serviceName"], normal)


def endpoint_id(condition: Mapping[str, Any]) -> str:
    return f"{service_id(condition)}_{ids.encode(condition['endpointName'])}"


def with_ids(condition: Mapping[str, Any]) -> dict[str, Any]:
    """``condition`` with its ``service``, ``instance`` and ``endpoint`` (by
    name) as ``serviceId``, ``serviceInstanceId`` and ``endpointId``."""
    out = {k: v for k, v in condition.items() if k not in ("service", "instance", "endpoint")}
    if condition.get("service"):
        out["serviceId"] = service_id(condition["service"])
    if condition.get("instance"):
        instance = condition["instance"]
        out["serviceInstanceId"] = f"{service_id(instance)}_{ids.encode(instance['instanceName'])}"
    if condition.get("endpoint"):
        out["endpointId"] = endpoint_id(condition["endpoint"])
    return out
