"""The locks of what ``make test`` installs (``deploy/requirements/*.txt``,
written by ``make lock``), read as pip reads them here."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ROOT / "deploy" / "requirements"
DEV_LOCK = REQUIREMENTS / "dev.txt"


def requirements(path: Path) -> list[Requirement]:
    """The requirement lines of a lock or an ``.in`` file that apply to this
    interpreter and platform."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    found = [Requirement(line) for line in lines if line]
    return [r for r in found if r.marker is None or r.marker.evaluate()]


def pins(lock: Path) -> dict[NormalizedName, Version]:
    """Each package of ``lock`` with the one version it pins."""
    pinned = {}
    for r in requirements(lock):
        (spec,) = r.specifier
        assert spec.operator == "==", f"{lock.name}: {r} is not pinned to one version"
        pinned[canonicalize_name(r.name)] = Version(spec.version)
    return pinned


def project() -> dict[str, list[Requirement]]:
    """pyproject.toml's requirements: the package's own (``""``) and each extra's."""
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    groups = {"": table["dependencies"], **table["optional-dependencies"]}
    return {extra: [Requirement(text) for text in texts] for extra, texts in groups.items()}
