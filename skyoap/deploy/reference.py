"""docs/configuration.md, written from the commands and the option
declarations themselves, so that it cannot drift from ``--help``:
``python -m skyoap.deploy.reference`` writes it, and a test fails when it is
not current."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from skyoap.deploy.cli import build_parser
from skyoap.deploy.options import sections_of
from skyoap.wiring.config import NodeConfig

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"

INTRO = """\
# Configuration

Generated from the option declarations by `python -m skyoap.deploy.reference`
(a test fails when this page is not current). Every option of `skyoap node`
is also an environment variable: the option wins over the variable, the
variable over the default. Give passwords, tokens and URLs that carry a
password as variables: a command line is readable by every user of the
machine ([security](security.md#credentials)).
"""


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _commands() -> list[str]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    lines = ["## Commands", "", "| command | what it does |", "| --- | --- |"]
    lines += [f"| `skyoap {a.dest}` | {_cell(a.help)} |" for a in sub._choices_actions]
    lines += [
        "",
        "`skyoap demo` takes the node's options too; `inventory`, `query`, `consumer`,",
        "`dashboards` and `spark` take the storage section's, to say which storage they use.",
        "`skyoap COMMAND --help` lists each command's own arguments.",
    ]
    return lines


def render() -> str:
    lines = [INTRO, *_commands()]
    for title, options in sections_of(NodeConfig):
        lines += ["", f"## Options: {title}", "", "| option | variable | default | what it sets |"]
        lines.append("| --- | --- | --- | --- |")
        for o in options:
            default = o.shown(o.field.default)
            shown = f"`{_cell(default)}`" if default != "" else "(none)"
            lines.append(f"| `{o.flag}` | `{o.env}` | {shown} | {_cell(o.help)} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    PAGE.write_text(render())
    print(f"wrote {PAGE}", file=sys.stderr)


if __name__ == "__main__":
    main()
