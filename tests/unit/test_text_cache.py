"""The cache of what is parsed from clients' texts, bounded by the text it holds."""

from __future__ import annotations

import graphql

from skyoap.runtime.cache import TextCache


def test_parses_are_kept_by_their_text_within_a_bound_of_characters() -> None:
    kept: TextCache[graphql.DocumentNode] = TextCache(chars=60)
    first, second, third = "{ version }".ljust(20), "{ checkHealth { score } }", "{ listLayers }".ljust(20)
    for query in (first, second):
        kept.put(query, graphql.parse(query))
    assert kept.get(first) is not None  # 45 characters kept; `first` is now the latest asked
    kept.put(third, graphql.parse(third))  # 65: the least recently asked goes
    assert (kept.get(first), kept.get(second), kept.get(third)) == (
        graphql.parse(first),
        None,
        graphql.parse(third),
    )
    assert kept.held_chars == 40
    large = "{ version }".ljust(31)  # more than half the bound: never kept
    kept.put(large, graphql.parse(large))
    assert (kept.get(large), kept.held_chars) == (None, 40)
