#!/usr/bin/env bash
# Installs what a command needs on a fresh Debian machine, skipping what is there.
#   deploy/install.sh node   Python alone: a virtualenv with skyoap (`make demo`).
#   deploy/install.sh all    also the tools, Spark, Redis (Debian's redis-server), PostgreSQL, stress-ng, promtool,
#                            Chromium (Debian's, for the web UI's tests), Elasticsearch (Elastic's zip from Maven Central, run with the
#                            machine's Java) and the agents the tests run (`make test`).
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
case "$what" in
  node) extras="" ;;
  all) extras="[dev]" ;;
  *) echo "usage: deploy/install.sh [node|all]" >&2; exit 2 ;;
esac

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
needs() { command -v "$1" >/dev/null 2>&1 || { echo "$1 is needed ($2)" >&2; exit 1; }; }

needs python3 "Python 3.11+"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# The stamp names what is installed; a newer pyproject.toml, or a changed
# accelerator source (compiled at install), installs again.
stamp=.venv/.installed-$what
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ skyoap/receiver/_scan.c -nt "$stamp" ]; then
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e ".$extras"
  touch "$stamp"
fi
[ "$what" = node ] && exit 0

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
# call Redis and PostgreSQL).
if [ ! -x .venv-agent/bin/python ]; then
  python3 -m venv .venv-agent
fi
if [ ! -f .venv-agent/.installed-3 ]; then
  .venv-agent/bin/pip install -q apache-skywalking==1.2.0 redis==4.5.1 "psycopg[binary]==3.1.20"
  touch .venv-agent/.installed-3
fi

# OpenTelemetry's Python SDK and OTLP exporter, for the tests that check that
# programs instrumented with OpenTelemetry report to skyoap unchanged.
if [ ! -x .venv-otel/bin/python ]; then
  python3 -m venv .venv-otel
  .venv-otel/bin/pip install -q opentelemetry-sdk==1.45.2 opentelemetry-exporter-otlp-proto-grpc==1.45.2
fi

# Prometheus's promtool (Debian's), the PromQL service's tests' client: the
# binary alone, unpacked from Debian's package (installing that would start a
# Prometheus server).
if [ ! -x .tools/promtool ]; then
  unpacked=$(mktemp -d)
  (cd "$unpacked" && { apt-get download prometheus >/dev/null 2>&1 || { as_root apt-get update -qq && apt-get download prometheus >/dev/null; }; })
  dpkg-deb -x "$unpacked"/prometheus_*.deb "$unpacked/files"
  mkdir -p .tools
  cp "$unpacked/files/usr/bin/promtool" .tools/promtool
  rm -rf "$unpacked"
fi

.venv/bin/python -c 'from skyoap.deploy.servers import elasticsearch_home; print("elasticsearch at", elasticsearch_home())' >&2
