#!/usr/bin/env bash
# Installs what a command needs on a fresh Debian machine, skipping what is there.
#   deploy/install.sh node   Python alone: a virtualenv with skyoap (`make demo`).
#   deploy/install.sh all    also the tools and Spark at the versions of deploy/requirements/dev.txt,
#                            Redis (Debian's redis-server), PostgreSQL, stress-ng, promtool and
#                            Prometheus's exporters (Debian's binaries), Chromium
#                            (Debian's, for the web UI's tests), Elasticsearch (Elastic's zip from Maven
#                            Central, run with the machine's Java) and the agents the tests run (`make test`).
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
case "$what" in
  node | all) ;;
  *) echo "usage: deploy/install.sh [node|all]" >&2; exit 2 ;;
esac

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
needs() { command -v "$1" >/dev/null 2>&1 || { echo "$1 is needed ($2)" >&2; exit 1; }; }

needs python3 "Python 3.11+"
req=deploy/requirements

# Every virtualenv installs with the locked pip.
new_venv() {
  [ -x "$1/bin/python" ] || python3 -m venv "$1"
  "$1/bin/python" -m pip install -q "$(grep '^pip==' "$req/dev.txt")"
}
# A virtualenv at $1 holding the lock $2, installed again when the lock is
# newer than what the virtualenv holds.
locked_venv() {
  local venv=$1 lock=$2
  if [ ! -f "$venv/.installed" ] || [ "$lock" -nt "$venv/.installed" ]; then
    new_venv "$venv"
    "$venv/bin/pip" install -q -r "$lock"
    touch "$venv/.installed"
  fi
}

# `make demo` (node) installs skyoap as a user would, with the newest
# dependencies its ranges allow. `make test` (all) installs the locked
# toolchain first (deploy/requirements/dev.txt: every package at an exact
# version), then skyoap under that lock with the locked build backend, so every
# machine judges the code with the same tools. The stamp names what is
# installed; a newer pyproject.toml or lock, or a changed accelerator source
# (compiled at install), installs again.
stamp=.venv/.installed-$what
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ "$req/dev.txt" -nt "$stamp" ] \
    || [ skyoap/receiver/_scan.c -nt "$stamp" ]; then
  if [ "$what" = node ]; then
    new_venv .venv
    .venv/bin/pip install -q -e .
  else
    locked_venv .venv "$req/dev.txt"
    .venv/bin/pip install -q --no-build-isolation -c "$req/dev.txt" -e ".[dev]"
  fi
  touch "$stamp"
fi
done_in() { echo "deploy/install.sh $what: done in ${SECONDS} s" >&2; }
[ "$what" = node ] && { done_in; exit 0; }

# stress-ng keeps the cores busy for `make test-busy`; the web UI's tests drive
# Debian's Chromium through Playwright, which downloads no browser of its own.
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v stress-ng >/dev/null 2>&1 || missing+=(stress-ng)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing+=(postgresql)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]}" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
needs java "Java 17+, for Elasticsearch and Spark"
needs mvn "Maven, which fetches Elasticsearch"

# SkyWalking's own Python agent, in a virtualenv of its own, for the tests that
# check that agents built for SkyWalking report to skyoap unchanged; with the
# Redis and PostgreSQL clients its plugins instrument (the query tests' services
# call Redis and PostgreSQL). OpenTelemetry's Python SDK and OTLP exporter, for
# the tests that check that programs instrumented with OpenTelemetry report to
# skyoap unchanged. Each at the versions of its lock.
locked_venv .venv-agent "$req/agent.txt"
locked_venv .venv-otel "$req/otel.txt"

# Prometheus's promtool (Debian's), the PromQL service's tests' client: the
# binary alone, unpacked from Debian's package (installing that would start a
# Prometheus server).
# Prometheus's exporters (Debian's) alike, the binaries alone: the meter
# layers' tests scrape them (hosts, PostgreSQL, Redis, MySQL).
unpack() {  # unpack PACKAGE FILE...: each of the package's usr/bin FILEs into .tools
  local package=$1 unpacked; shift
  unpacked=$(mktemp -d)
  (cd "$unpacked" && { apt-get download "$package" >/dev/null 2>&1 || { as_root apt-get update -qq && apt-get download "$package" >/dev/null; }; })
  dpkg-deb -x "$unpacked"/"$package"_*.deb "$unpacked/files"
  mkdir -p .tools
  for file in "$@"; do cp "$unpacked/files/usr/bin/$file" ".tools/$file"; done
  rm -rf "$unpacked"
}
[ -x .tools/promtool ] || unpack prometheus promtool
for exporter in node postgres redis mysqld; do
  [ -x ".tools/prometheus-$exporter-exporter" ] || unpack "prometheus-$exporter-exporter" "prometheus-$exporter-exporter"
done

.venv/bin/python -c 'from skyoap.deploy.servers import elasticsearch_home; print("elasticsearch at", elasticsearch_home())' >&2
done_in
