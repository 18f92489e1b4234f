"""The locks ``make test`` installs from: each pins one version of every
package that pyproject.toml's extras or the agents' ``.in`` files pull, a
version they allow, and this run has exactly those."""

from __future__ import annotations

from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.locks import DEV_LOCK, REQUIREMENTS, pins, project, requirements


def outside(wanted: list[Requirement], lock: str) -> list[str]:
    """The requirements of ``wanted`` that ``lock`` pins no allowed version of."""
    pinned = pins(REQUIREMENTS / lock)
    found = []
    for r in wanted:
        version = pinned.get(canonicalize_name(r.name))
        if version is None or not r.specifier.contains(version, prereleases=True):
            found.append(f"{r} ({lock} has {version})")
    return found


def test_the_dev_lock_pins_an_allowed_version_of_everything_make_test_installs() -> None:
    groups = project()
    wanted, extras, seen = list(groups[""]), ["dev"], set()
    while extras:  # skyoap[dev] and the extras of skyoap it names
        extra = extras.pop()
        seen.add(extra)
        for r in groups[extra]:
            if r.name == "skyoap":
                extras += sorted(r.extras - seen)
            elif r.marker is None or r.marker.evaluate():
                wanted.append(r)
    assert seen == {"dev", "spark"}
    missing = outside(wanted, "dev.txt")
    assert missing == [], f"pyproject.toml changed since the lock: run `make lock` ({', '.join(missing)})"


@pytest.mark.parametrize("venv", ["agent", "otel"])
def test_the_agents_locks_pin_what_their_in_files_ask_for(venv: str) -> None:
    wanted = requirements(REQUIREMENTS / f"{venv}.in")
    assert wanted, venv
    missing = outside(wanted, f"{venv}.txt")
    assert missing == [], f"{venv}.in changed since the lock: run `make lock` ({', '.join(missing)})"


def test_this_run_judges_the_code_with_the_locked_toolchain() -> None:
    installed = {canonicalize_name(d.metadata["Name"]): Version(d.version) for d in metadata.distributions()}
    differ = [
        f"{name} {installed.get(name, 'missing')} (locked {version})"
        for name, version in pins(DEV_LOCK).items()
        if installed.get(name) != version
    ]
    assert differ == [], f"install the lock (deploy/install.sh all: make test does): {', '.join(differ)}"
