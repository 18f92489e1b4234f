"""The web UI a node serves on its query port: ``GET /`` and ``GET /ui/NAME``,
files shipped in the package (``skyoap/query/ui/static/``), written here, with no
build step. Its pages ask the node's own GraphQL endpoint what SkyWalking's
UI asks (``static/api.js``); what they show of each layer they read from
``/ui/layers.json``, made of the layers' own files (``skyoap/layers/``)."""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import json
import re

from skyoap.layers import LAYERS
from skyoap.query.status import Page

CONTENT_TYPES = {
    ".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml",
    ".json": "application/json",
}  # fmt: skip

UI_HEADERS = {
    # Everything comes from the node itself: no outside script, style or font;
    # and no other site may frame a page, so none can dress it up to be clicked.
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'"
    ),
    "Cache-Control": "no-cache",
}

_NAME = re.compile(r"[a-z][a-z0-9_-]*\.(html|js|css|svg)")
"""A file's name: no directory, nothing hidden."""


@functools.cache
def ui_files() -> dict[str, Page]:
    """Every file of the UI by its name, read once."""
    folder = importlib.resources.files(__package__).joinpath("static")
    files = {
        f.name: Page(CONTENT_TYPES[f.name[f.name.rindex(".") :]], f.read_bytes())
        for f in folder.iterdir()
        if f.is_file() and _NAME.fullmatch(f.name)
    }
    return {**files, "layers.json": Page(CONTENT_TYPES[".json"], _layers())}


def _layers() -> bytes:
    """What the pages show of each layer, in the order of ``LAYERS``."""
    called = [
        {"layer": layer.name, **dataclasses.asdict(layer.called)}
        for layer in LAYERS
        if layer.called is not None
    ]
    return json.dumps({"called": called}, separators=(",", ":")).encode()
