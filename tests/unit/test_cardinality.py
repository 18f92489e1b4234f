"""Endpoint grouping rules and name bounds, on their own."""

from __future__ import annotations

from pathlib import Path

import pytest

from skyoap.receiver.cardinality import OTHER, GroupingRules, NameBound
from skyoap.runtime.instruments import Instruments
from skyoap.storage.api import StorageUnavailable


def rules_of(tmp_path: Path, text: str) -> GroupingRules:
    path = tmp_path / "groups.txt"
    path.write_text(text)
    return GroupingRules.load(str(path))


def test_a_placeholder_matches_one_path_segment_and_service_rules_come_first(tmp_path: Path) -> None:
    rules = rules_of(
        tmp_path,
        "/orders/{id}\nGET:/users/{id}/cart\n/a.b/{x}\n[billing]\n/orders/{id} = /orders/[0-9]+(/.*)?\n",
    )
    assert rules.group("shop", "/orders/17") == "/orders/{id}"
    assert rules.group("shop", "/orders/17/items") == "/orders/17/items"  # one segment only
    assert rules.group("shop", "GET:/users/ada/cart") == "GET:/users/{id}/cart"
    assert rules.group("shop", "/aXb/1") == "/aXb/1"  # the rest of the group is literal
    assert rules.group("billing", "/orders/17/items") == "/orders/{id}"
    assert rules.group("billing", "/orders/x") == "/orders/{id}"  # then the rules for every service


def test_a_rules_file_that_cannot_be_used_says_where(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as e:
        rules_of(tmp_path, "# fine\n/ok/{id}\n/bad = /x(\n")
    assert str(e.value).startswith(f"{tmp_path / 'groups.txt'} line 3: '/x(' is not a regular expression")
    with pytest.raises(ValueError) as e:
        rules_of(tmp_path, "/ok/{id}\n = /x/.*\n")
    assert str(e.value) == f"{tmp_path / 'groups.txt'} line 2: a rule names no group before ' = '"
    with pytest.raises(ValueError, match="cannot read the endpoint groups /nowhere"):
        GroupingRules.load("/nowhere")


def test_names_past_the_bound_are_folded_and_counted_and_a_seed_counts_first() -> None:
    instruments = Instruments()
    seeds = {"shop": ["a", "b"]}
    bound = NameBound("endpoint", 4, "--max-endpoints-per-service", instruments, lambda s: seeds.get(s, []))
    assert [bound.admit("shop", n) for n in ["a", "c", "d", "e", "b", OTHER]] == [
        "a",
        "c",
        OTHER,
        OTHER,
        "b",
        OTHER,
    ]
    assert [bound.admit("cart", n) for n in ["x", "y", "z", "w"]] == ["x", "y", "z", OTHER]
    assert instruments.value("skyoap_cardinality_folded_total", kind="endpoint") == 3


def test_a_scope_storage_cannot_list_counts_from_what_arrives() -> None:
    def unavailable(scope: str) -> list[str]:
        raise StorageUnavailable("connection refused")

    bound = NameBound("instance", 2, "--max-instances-per-service", Instruments(), unavailable)
    assert [bound.admit("shop", n) for n in ["a", "b"]] == ["a", OTHER]
