"""Command-line options generated from the configuration sections: every field
becomes ``--option-name``, defaulting to ``$SKYOAP_OPTION_NAME`` when that is
set, and ``--help`` lists them under their section's title."""

from __future__ import annotations

import argparse
import dataclasses
import enum
import os
import typing
from typing import Any, TypeVar

from skyoap.runtime.config import is_secret, option_name

C = TypeVar("C")

ENV_PREFIX = "SKYOAP_"


def env_name(name: str) -> str:
    """The variable that sets option ``name`` (``--auth-token`` -> ``SKYOAP_AUTH_TOKEN``)."""
    return ENV_PREFIX + name.lstrip("-").replace("-", "_").upper()


def split_secrets(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """``argv`` without the options that may hold credentials (``--opt value``
    or ``--opt=value``), and those options as ``SKYOAP_`` variables."""
    kept: list[str] = []
    env: dict[str, str] = {}
    args = iter(argv)
    for arg in args:
        name, eq, value = arg.partition("=")
        if not (arg.startswith("--") and is_secret(name)):
            kept.append(arg)
        elif eq:
            env[env_name(name)] = value
        else:
            env[env_name(name)] = next(args, "")
    return kept, env


_SWITCH = {"on": True, "true": True, "off": False, "false": False}


def _parse_switch(text: str) -> bool:
    try:
        return _SWITCH[text.lower()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of: on, off") from None


def _parser_for(tp: Any) -> Any:
    if tp is bool:
        return _parse_switch
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        choices = {m.value: m for m in tp}

        def parse_enum(text: str) -> Any:
            try:
                return choices[text]
            except KeyError:
                raise argparse.ArgumentTypeError(f"{text!r} is not one of: {', '.join(choices)}") from None

        return parse_enum
    return tp


def _sections(config_type: type[Any]) -> list[tuple[str | None, str, type[Any]]]:
    """``(field, title, section type)`` for each section of ``config_type``; a
    type with no sections is one section of its own (field None)."""
    hints = typing.get_type_hints(config_type)
    found: list[tuple[str | None, str, type[Any]]] = [
        (f.name, f.metadata["section"], hints[f.name])
        for f in dataclasses.fields(config_type)
        if "section" in f.metadata
    ]
    return found or [(None, config_type.__name__.removesuffix("Config").lower(), config_type)]


@dataclasses.dataclass(frozen=True)
class Option:
    """One field of a section, as ``--help`` and docs/configuration.md show it."""

    field: dataclasses.Field[Any]
    type: Any

    @property
    def name(self) -> str:
        return option_name(self.field)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()

    @property
    def help(self) -> str:
        choices = ""
        if isinstance(self.type, type) and issubclass(self.type, enum.Enum):
            choices = f" ({', '.join(m.value for m in self.type)})"
        return f"{self.field.metadata.get('help', '')}{choices}"

    def shown(self, value: Any) -> object:
        """``value`` as it is written on the command line."""
        if isinstance(value, enum.Enum):
            return value.value
        if self.type is bool:
            return "on" if value else "off"
        return value


def options_of(section: type[Any]) -> list[Option]:
    hints = typing.get_type_hints(section)
    return [Option(f, hints[f.name]) for f in dataclasses.fields(section)]


def sections_of(config_type: type[Any]) -> list[tuple[str, list[Option]]]:
    """Each section's title and options, in ``--help``'s order."""
    return [(title, options_of(section)) for _, title, section in _sections(config_type)]


def _add_section(
    group: argparse._ArgumentGroup, parser: argparse.ArgumentParser, options: list[Option]
) -> None:
    for o in options:
        parse = _parser_for(o.type)
        default = o.field.default
        if o.env in os.environ:
            try:
                default = parse(os.environ[o.env])
            except (ValueError, argparse.ArgumentTypeError) as e:
                parser.error(f"${o.env}: {e}")
        group.add_argument(
            o.flag,
            dest=o.name,
            type=parse,
            default=default,
            metavar="on|off" if o.type is bool else o.name.split("_")[-1].upper(),
            help=f"{o.help} [${o.env}, default: {o.shown(default)}]",
        )


def add_options(parser: argparse.ArgumentParser, config_type: type[Any]) -> None:
    """Adds ``config_type``'s options to ``parser``, a group per section."""
    for title, options in sections_of(config_type):
        _add_section(parser.add_argument_group(f"{title} options"), parser, options)


def config_from(args: argparse.Namespace, config_type: type[C]) -> C:
    """The configuration ``args`` (parsed with ``add_options``) describe."""

    def build(section: type[Any]) -> Any:
        return section(**{f.name: getattr(args, option_name(f)) for f in dataclasses.fields(section)})

    sections = _sections(config_type)
    if sections[0][0] is None:
        return typing.cast(C, build(config_type))
    return config_type(**{str(name): build(section) for name, _, section in sections})
