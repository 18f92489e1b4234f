"""docs/configuration.md says what the code declares."""

from __future__ import annotations

from skyoap.deploy.reference import PAGE, render


def test_the_configuration_page_is_current() -> None:
    stale = "run `python -m skyoap.deploy.reference` and commit docs/configuration.md"
    assert PAGE.read_text() == render(), stale
