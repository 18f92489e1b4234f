"""Commit subjects say what changed in at most 72 characters
(CONTRIBUTING.md), checked from the commit after which every subject kept
to it."""

from __future__ import annotations

import subprocess

from tests.locks import ROOT

KEPT_SINCE = "e69ee13"
MOST = 72


def test_every_commit_subject_since_the_rule_fits_in_72_characters() -> None:
    done = subprocess.run(
        ["git", "log", "--format=%h %s", f"{KEPT_SINCE}..HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, f"the tests run in a clone of skyoap's repository: {done.stderr}"
    longer = [line for line in done.stdout.splitlines() if len(line.split(" ", 1)[1]) > MOST]
    assert longer == [], f"subjects of more than {MOST} characters: reword them before they land"
