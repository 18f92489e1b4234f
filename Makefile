# The two commands of the README. Each does its own set-up (deploy/install.sh).
.PHONY: install install-node lock demo test test-busy lint bench profile screenshots

# What `make test` needs: the tools, Spark, Redis, Elasticsearch, the agents.
install:
	./deploy/install.sh all

# What `make demo` needs: Python alone.
install-node:
	./deploy/install.sh node

# Writes deploy/requirements/*.txt again after a change to pyproject.toml's
# requirements or an .in file there, keeping every pin that still fits;
# `deploy/lock.sh --upgrade` moves them all to the newest (CONTRIBUTING.md).
lock: install
	./deploy/lock.sh

# The main job: a mixed node on the embedded storage, simulated agents registering
# and heart-beating, and the registered inventory printed at the end.
demo: install-node
	.venv/bin/skyoap demo

lint: install
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy
	.venv/bin/lint-imports

# Every test: lint, types, unit tests, and integration tests against the real
# Redis and Elasticsearch the fixtures start.
test: lint
	.venv/bin/pytest

# The same tests while two CPU hogs (stress-ng, one per core of a 2-core machine)
# keep the cores busy: what holds only on an idle machine is no guarantee. The hogs
# are stopped when the tests end, pass or fail (the trap), and time out on their own.
BUSY_CPUS ?= 2
test-busy: lint
	stress-ng --cpu $(BUSY_CPUS) --timeout 3h --quiet & hog=$$!; \
	trap 'kill $$hog 2>/dev/null; wait $$hog 2>/dev/null' EXIT; trap 'exit 130' INT TERM; \
	.venv/bin/pytest

# Every benchmark, one after another, then the table in docs/benchmarks.md:
# about half an hour, on a machine doing nothing else.
BENCHMARKS = telemetry profile workers registration cluster_registration remote_hop topics query ui alarms
bench: install
	for b in $(BENCHMARKS); do .venv/bin/python -m bench.$$b || exit 1; done
	.venv/bin/python -m bench.report

# Where the node's CPU goes under bench.telemetry's load: the flame graph in
# docs/images/node-profile.svg and the table of stages in docs/benchmarks.md.
profile: install
	.venv/bin/python -m bench.profile

# The README's pictures of the web UI, taken by its tests in Chromium.
screenshots: install
	SKYOAP_SCREENSHOTS=docs/images .venv/bin/pytest tests/integration/test_ui_browser.py \
		tests/integration/test_virtual_layers.py tests/integration/test_profiling.py -k "ui"
