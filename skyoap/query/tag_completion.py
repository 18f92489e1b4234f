"""Tag autocompletion: the keys, and a key's values, of the ``key=value``
tags of the records stored in a Duration (trace segments, alarms)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skyoap.model.records import Record
from skyoap.query.context import QueryContext
from skyoap.query.paging import Window

MAX_TAG_VALUES = 100
"""The most values a key's autocompletion answers."""

MAX_TAGS_READ = 10_000
"""The most distinct ``key=value`` tags read for the keys' autocompletion."""


def tag_keys(context: QueryContext, model: type[Record], duration: Mapping[str, Any]) -> list[str]:
    """The keys of the tags of ``model``'s records in ``duration``."""
    window = Window.of(duration)
    stored = context.records.tag_values(model, window.first_bucket, window.last_bucket, MAX_TAGS_READ)
    return sorted({tag.partition("=")[0] for tag in stored})


def tag_values(
    context: QueryContext, model: type[Record], key: str, duration: Mapping[str, Any]
) -> list[str]:
    """The values of ``key`` among the tags of ``model``'s records in
    ``duration``, at most ``MAX_TAG_VALUES``."""
    window = Window.of(duration)
    prefix = f"{key}="
    stored = context.records.tag_values(
        model, window.first_bucket, window.last_bucket, MAX_TAG_VALUES, prefix
    )
    return [tag[len(prefix) :] for tag in stored]
