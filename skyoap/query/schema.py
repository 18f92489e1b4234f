"""SkyWalking's query protocol, 10.x (protocol commit 3e99edc), as a GraphQL
schema: the SDL files in ``sdl/`` (one per area, ``common.graphql`` holding
the root types the others extend), built schema-first with graphql-core:
resolvers bind to this schema's fields rather than declaring its types."""

from __future__ import annotations

import functools
from importlib import resources
from importlib.resources.abc import Traversable

import graphql

SDL_DIR = "sdl"
ROOT_FILE = "common.graphql"
"""Declares ``schema``, ``Query`` and ``Mutation``; read first."""


def sdl_files() -> list[Traversable]:
    """The schema's SDL files in the order they are joined: the root file,
    then the others by name, so the built schema is the same on every host."""
    folder = resources.files(__package__) / SDL_DIR
    files = [f for f in folder.iterdir() if f.name.endswith(".graphql")]
    return sorted(files, key=lambda f: (f.name != ROOT_FILE, f.name))


@functools.cache
def load_schema() -> graphql.GraphQLSchema:
    """The query protocol's schema, built once per process."""
    return graphql.build_schema("\n".join(f.read_text(encoding="utf-8") for f in sdl_files()))
