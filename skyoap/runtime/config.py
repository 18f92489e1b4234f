"""Typed configuration: each concern is a frozen dataclass section whose fields
carry their help text, loaded once at start-up and passed down explicitly
(``deploy/options.py`` makes every field a ``--option`` and a ``SKYOAP_``
variable)."""

from __future__ import annotations

import dataclasses
import enum
import re
from dataclasses import field
from typing import Any


def option(default: Any, help: str, *, name: str | None = None) -> Any:
    """A configuration field; ``name`` is its option's name where that is not
    the field's own (``--storage`` for ``StorageConfig.kind``)."""
    return field(default=default, metadata={"help": help, "option": name})


def section(config_type: type[Any], title: str) -> Any:
    """A field holding a whole section; ``title`` heads its options in ``--help``."""
    return field(default_factory=config_type, metadata={"section": title})


def option_name(f: dataclasses.Field[Any]) -> str:
    return f.metadata.get("option") or f.name


_SECRET_WORDS = ("password", "token", "secret", "api_key")
_SECRET_URLS = frozenset({"redis_url", "es_hosts"})
"""URLs that may carry a user and password (``redis://USER:PASSWORD@HOST``)."""

MASKED = "******"


def is_secret(name: str) -> bool:
    """Whether option ``name`` (``auth_token``, or ``--auth-token``) may hold a
    credential: such values are passed to child processes in the environment
    (readable by the same user only), never on their command line, and are
    masked wherever the configuration is shown."""
    name = name.lstrip("-").replace("-", "_").lower()
    return name in _SECRET_URLS or any(f"_{word}_" in f"_{name}_" for word in _SECRET_WORDS)


def effective(config: Any) -> dict[str, str]:
    """Every option of ``config`` (sections, or one section) as text, named
    ``section.option`` (``query.query_port``); a credential given is
    ``MASKED``, as is the user and password a URL carries."""
    shown: dict[str, str] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        name = option_name(f)
        if "section" in f.metadata:
            shown.update({f"{f.name}.{k}": v for k, v in effective(value).items()})
        elif name in _SECRET_URLS:
            shown[name] = ",".join(re.sub(r"//[^/@]*@", f"//{MASKED}@", url) for url in str(value).split(","))
        elif is_secret(name) and value:
            shown[name] = MASKED
        else:
            shown[name] = str(value.value if isinstance(value, enum.Enum) else value)
    return shown
