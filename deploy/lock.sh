#!/usr/bin/env bash
# Writes the locks of what `make test` installs (deploy/requirements/*.txt):
# the development and test toolchain (pyproject.toml's dev extra, with the
# installer and build backend of tools.in) and the agents' virtualenvs
# (agent.in, otel.in), every package they pull at an exact version, for
# Python 3.11 and newer on any platform.
#   deploy/lock.sh             keeps every pin that still fits (after a change to
#                              pyproject.toml or an .in file)
#   deploy/lock.sh --upgrade   the newest versions the requirements allow
# `make lock` runs the first; CONTRIBUTING.md says when to run the second.
set -euo pipefail
cd "$(dirname "$0")/.."
uv=.venv/bin/uv
[ -x "$uv" ] || { echo "run deploy/install.sh all first: it installs uv, which writes the locks" >&2; exit 1; }
compile() {
  "$uv" pip compile --quiet --universal --python-version 3.11 --custom-compile-command "make lock" "$@"
}
req=deploy/requirements
compile "$@" pyproject.toml "$req/tools.in" --extra dev -o "$req/dev.txt"
compile "$@" "$req/agent.in" -o "$req/agent.txt"
compile "$@" "$req/otel.in" -o "$req/otel.txt"
