# The two commands of the README. Each does its own set-up (deploy/install.sh).
.PHONY: install demo test lint bench

install:
	./deploy/install.sh

# The main job: a mixed node on the embedded storage, simulated agents registering
# and heart-beating, and the registered inventory printed at the end.
demo: install
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

bench: install
	.venv/bin/python -m bench.registration
