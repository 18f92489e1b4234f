"""The web UI a node serves on its query port: ``GET /`` and ``GET /ui/NAME``,
files shipped in the package (``skyoap/query/ui/``), written here, with no
build step. Its pages ask the node's own GraphQL endpoint what SkyWalking's
UI asks (``ui/api.js``)."""

from __future__ import annotations

import functools
import importlib.resources
import re

from skyoap.query.status import Page

CONTENT_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}

UI_HEADERS = {
    # Everything comes from the node itself: no outside script, style or font.
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}

_NAME = re.compile(r"[a-z][a-z0-9_-]*\.(html|js|css|svg)")
"""A file's name: no directory, nothing hidden."""


@functools.cache
def ui_file(name: str) -> Page | None:
    """The UI's file ``name``, None if the UI has none by that name."""
    if not _NAME.fullmatch(name):
        return None
    path = importlib.resources.files(__package__).joinpath("ui", name)
    if not path.is_file():
        return None
    suffix = name[name.rindex(".") :]
    return Page(CONTENT_TYPES[suffix], path.read_bytes())
