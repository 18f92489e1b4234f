"""Records' ``key=value`` tags (trace segments', log lines', alarms'): the
tags a search names, and their completion (the keys, and a key's values,
of the tags of the records stored in a Duration)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from skyoap.model.records import Record
from skyoap.query.context import QueryContext
from skyoap.query.paging import Window

MAX_TAGS = 20
"""The most tags one search filters by: each is a condition of its own in
storage's query (SQLite refuses a tree of a thousand)."""

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


def searched(tags: Iterable[Mapping[str, Any] | None], kind: str, completion: str) -> tuple[str, ...]:
    """Each tag (``{key, value}``) a search of ``kind`` records names, as they
    are stored: ``key=value``; a tag given as null is left out. ValueError for
    a tag with no value (``completion`` lists a key's values), or past ``MAX_TAGS``."""
    given = [tag for tag in tags if tag is not None]
    if len(given) > MAX_TAGS:
        raise ValueError(f"a search filters by at most {MAX_TAGS} tags, not {len(given)}")
    for tag in given:
        if tag.get("value") is None:
            raise ValueError(
                f"{kind} tag {tag['key']!r} has no value: {kind}s are searched by a key and its value "
                f"({completion} lists a key's values)"
            )
    return tuple(f"{tag['key']}={tag['value']}" for tag in given)
