"""SkyWalking's ids of services, instances and endpoints, built from their
names as SkyWalking's ``IDManager`` builds them, so that an id skyoap answers
is the one a client derives or sends back; and read back into the names,
with an error naming the argument an id came in when it is not one."""

from __future__ import annotations

import base64
import binascii

BLANK_NAME = "_blank"


def encode(name: str) -> str:
    return base64.b64encode(name.encode()).decode("ascii")


def service_id(name: str, normal: bool) -> str:
    """``encode(name).1`` for a normal service (one that runs an agent), ``.0``
    otherwise; a blank name is read as ``_blank``."""
    return f"{encode(name if name.strip() else BLANK_NAME)}.{int(normal)}"


def instance_id(service: str, normal: bool, instance: str) -> str:
    return f"{service_id(service, normal)}_{encode(instance)}"


def endpoint_id(service: str, normal: bool, endpoint: str) -> str:
    return f"{service_id(service, normal)}_{encode(endpoint)}"


class BadId(ValueError):
    """An id that is not one skyoap answers."""


def _decode(part: str, what: str, given: str) -> str:
    try:
        return base64.b64decode(part, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise BadId(
            f"{what} {given[:100]!r} is not an id skyoap gave: ids come from listServices, "
            "listInstances and findEndpoint (a service's is the base64 of its name, then .1 or .0)"
        ) from None


def read_service_id(service_id: str, what: str = "serviceId") -> tuple[str, bool]:
    """The name and the normal flag in a service id, ``base64(name).1`` or ``.0``."""
    encoded, dot, normal = service_id.rpartition(".")
    if not dot or normal not in ("0", "1"):
        raise BadId(
            f"{what} {service_id[:100]!r} is not an id skyoap gave: a service's id is the base64 of its "
            "name then .1 (a service that reports) or .0"
        )
    return _decode(encoded, what, service_id), normal == "1"


def service_name(service_id: str, what: str = "serviceId") -> str:
    """The name in a service id."""
    return read_service_id(service_id, what)[0]


def _pair(given: str, what: str) -> tuple[str, str]:
    service_id, sep, encoded = given.partition("_")
    if not sep:
        raise BadId(
            f"{what} {given[:100]!r} is not an id skyoap gave: it is its service's id, _, then the "
            "base64 of its name"
        )
    return service_name(service_id, what), _decode(encoded, what, given)


def instance_names(instance_id: str, what: str = "serviceInstanceId") -> tuple[str, str]:
    """The service's and the instance's names in an instance id."""
    return _pair(instance_id, what)


def endpoint_names(endpoint_id: str, what: str = "endpointId") -> tuple[str, str]:
    """The service's and the endpoint's names in an endpoint id."""
    return _pair(endpoint_id, what)


def profile_task_id(service: str, create_time: int) -> str:
    """A profiling task's id, as SkyWalking makes it: its creation time (ms) and its service's id."""
    return f"{create_time}_{service_id(service, True)}"


def profile_task_service(task_id: str) -> str | None:
    """The service a profiling task's id names; None for an id skyoap did not give."""
    _, _, of_service = task_id.partition("_")
    try:
        return service_name(of_service)
    except BadId:
        return None
