"""Command-line options generated from the configuration dataclasses: every field
becomes ``--field-name``, defaulting to ``$SKYOAP_FIELD_NAME`` when that is set."""

from __future__ import annotations

import argparse
import dataclasses
import enum
import os
import typing
from typing import Any, TypeVar

C = TypeVar("C")

ENV_PREFIX = "SKYOAP_"


def _parser_for(tp: Any) -> Any:
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        choices = {m.value: m for m in tp}

        def parse_enum(text: str) -> Any:
            try:
                return choices[text]
            except KeyError:
                raise argparse.ArgumentTypeError(f"{text!r} is not one of: {', '.join(choices)}") from None

        return parse_enum
    return tp


def add_options(parser: argparse.ArgumentParser, config_type: type[Any]) -> None:
    hints = typing.get_type_hints(config_type)
    for f in dataclasses.fields(config_type):
        tp = hints[f.name]
        env = ENV_PREFIX + f.name.upper()
        parse = _parser_for(tp)
        default = f.default
        if env in os.environ:
            try:
                default = parse(os.environ[env])
            except (ValueError, argparse.ArgumentTypeError) as e:
                parser.error(f"${env}: {e}")
        shown = default.value if isinstance(default, enum.Enum) else default
        choices = (
            f" ({', '.join(m.value for m in tp)})"
            if isinstance(tp, type) and issubclass(tp, enum.Enum)
            else ""
        )
        parser.add_argument(
            "--" + f.name.replace("_", "-"),
            dest=f.name,
            type=parse,
            default=default,
            metavar=f.name.split("_")[-1].upper(),
            help=f"{f.metadata.get('help', '')}{choices} [${env}, default: {shown}]",
        )


def config_from(args: argparse.Namespace, config_type: type[C]) -> C:
    names = {f.name for f in dataclasses.fields(config_type)}  # type: ignore[arg-type]
    return config_type(**{k: v for k, v in vars(args).items() if k in names})
