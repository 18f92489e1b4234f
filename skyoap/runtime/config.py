"""Typed configuration: each concern is a frozen dataclass section whose fields
carry their help text, loaded once at start-up and passed down explicitly
(``deploy/options.py`` makes every field a ``--option`` and a ``SKYOAP_``
variable)."""

from __future__ import annotations

import dataclasses
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
