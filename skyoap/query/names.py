"""The names in the ids clients send back: SkyWalking's ids of services,
instances and endpoints (``ids.py``) read the other way."""

from __future__ import annotations

import base64
import binascii


class BadId(ValueError):
    """An id that is not one skyoap answers."""


def _decode(part: str, what: str, given: str) -> str:
    try:
        return base64.b64decode(part, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise BadId(
            f"{what} {given[:100]!r} is not an id skyoap gave: ids come from listServices, "
            "listInstances and findEndpoint (a service's is the base64 of its name, then .1 or .0)"
        ) from None


def service_name(service_id: str, what: str = "serviceId") -> str:
    """The name in a service id, ``base64(name).1`` or ``.0``."""
    encoded, dot, normal = service_id.rpartition(".")
    if not dot or normal not in ("0", "1"):
        raise BadId(
            f"{what} {service_id[:100]!r} is not an id skyoap gave: a service's id is the base64 of its "
            "name then .1 (a service that reports) or .0"
        )
    return _decode(encoded, what, service_id)


def _pair(given: str, what: str) -> tuple[str, str]:
    service_id, sep, encoded = given.partition("_")
    if not sep:
        raise BadId(
            f"{what} {given[:100]!r} is not an id skyoap gave: it is its service's id, _, then the "
            "base64 of its name"
        )
    return service_name(service_id, what), _decode(encoded, what, given)


def instance_names(instance_id: str) -> tuple[str, str]:
    """The service's and the instance's names in an instance id."""
    return _pair(instance_id, "serviceInstanceId")


def endpoint_names(endpoint_id: str) -> tuple[str, str]:
    """The service's and the endpoint's names in an endpoint id."""
    return _pair(endpoint_id, "endpointId")
