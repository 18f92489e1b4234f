"""SkyWalking's ids of services, instances and endpoints, built from their
names as SkyWalking's ``IDManager`` builds them, so that an id skyoap answers
is the one a client derives or sends back."""

from __future__ import annotations

import base64

BLANK_NAME = "_blank"


def _encode(name: str) -> str:
    return base64.b64encode(name.encode()).decode("ascii")


def service_id(name: str, normal: bool) -> str:
    """``encode(name).1`` for a normal service (one that runs an agent), ``.0``
    otherwise; a blank name is read as ``_blank``."""
    return f"{_encode(name if name.strip() else BLANK_NAME)}.{int(normal)}"


def instance_id(service: str, normal: bool, instance: str) -> str:
    return f"{service_id(service, normal)}_{_encode(instance)}"


def endpoint_id(service: str, normal: bool, endpoint: str) -> str:
    return f"{service_id(service, normal)}_{_encode(endpoint)}"
