"""A real browser for the web UI's tests: Debian's Chromium, headless, driven
through Playwright (which downloads no browser of its own here), and where
each test's screenshots go."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, ViewportSize, sync_playwright

from skyoap.deploy.servers import chromium_path

VIEWPORT: ViewportSize = {"width": 1366, "height": 800}
"""A laptop's screen."""


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where screenshots go: ``SKYOAP_SCREENSHOTS`` (``make screenshots`` points
    it at docs/images), or the test's own directory."""
    where = Path(os.environ.get("SKYOAP_SCREENSHOTS") or tmp_path)
    where.mkdir(parents=True, exist_ok=True)
    return where


def open_page(page: Page, url: str, name: str) -> None:
    """Opens ``url`` and waits until the page named ``name`` has been drawn."""
    redrawn(page, name, lambda: page.goto(url))


def redrawn(page: Page, name: str, action: Callable[[], object]) -> None:
    """Does ``action`` and waits until the page named ``name`` has been drawn
    anew (the frame marks the page it drew last, and is busy while it draws)."""
    if page.url.startswith("http"):
        page.evaluate("document.querySelector('main')?.removeAttribute('data-shown')")
    action()
    page.wait_for_selector(f"main[data-shown='{name}']:not([aria-busy])")
    errors = page.locator("main p.error")
    assert errors.count() == 0, errors.first.text_content()
