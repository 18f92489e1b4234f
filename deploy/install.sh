#!/usr/bin/env bash
# Installs everything skyoap needs on a fresh Debian machine, skipping what is there:
# Redis (Debian's redis-server), stress-ng, a virtualenv with the project and its tools, and
# Elasticsearch (Elastic's zip from Maven Central, run with the machine's Java).
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# stress-ng keeps the cores busy for `make test-busy`.
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v stress-ng >/dev/null 2>&1 || missing+=(stress-ng)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]}" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
for tool in java mvn python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "$tool is needed (Java 17+, Maven, Python 3.11+)" >&2; exit 1; }
done

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
stamp=.venv/.installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[dev]'
  touch "$stamp"
fi

# SkyWalking's own Python agent, in a virtualenv of its own, for the tests that
# check that agents built for SkyWalking report to skyoap unchanged.
if [ ! -x .venv-agent/bin/python ]; then
  python3 -m venv .venv-agent
  .venv-agent/bin/pip install -q apache-skywalking==1.2.0
fi

# OpenTelemetry's Python SDK and OTLP exporter, for the tests that check that
# programs instrumented with OpenTelemetry report to skyoap unchanged.
if [ ! -x .venv-otel/bin/python ]; then
  python3 -m venv .venv-otel
  .venv-otel/bin/pip install -q opentelemetry-sdk==1.45.2 opentelemetry-exporter-otlp-proto-grpc==1.45.2
fi

.venv/bin/python -c 'from deploy.servers import elasticsearch_home; print("elasticsearch at", elasticsearch_home())' >&2
