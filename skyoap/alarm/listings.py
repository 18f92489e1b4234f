"""The entities each rule of a round of alarms watches: listed once for each
model and window, with each one's routing key, bucket and name, and which of
them a rule covers."""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import numpy as np

from skyoap.alarm.evaluation import Watched, entity_name, entity_names, entity_of_names
from skyoap.alarm.settings import Rule
from skyoap.model.metrics import SEP
from skyoap.mqe.arithmetic import Flags
from skyoap.mqe.vectorized import Frames, Population
from skyoap.storage.api import MetricsDAO
from skyoap.vocabulary.duration import Duration
from skyoap.vocabulary.entity import Entity


@dataclass(eq=False)
class Listing:
    """The entities of a scope with rows in a window, as a round of alarms
    takes them: each one's routing key (``entity_key``), alarm bucket and
    name, where it is by key, and whether this node evaluates its bucket."""

    population: Population
    keys: list[str]
    place: dict[str, int]
    """By key."""
    buckets: list[int]
    mine: Flags
    names: list[str]
    """SkyWalking's names of the entities, which rules include and exclude by."""

    @functools.cached_property
    def _by_name(self) -> dict[str, list[int]]:
        found: dict[str, list[int]] = {}
        for i, name in enumerate(self.names):
            found.setdefault(name, []).append(i)
        return found

    def covered(self, rule: Rule) -> Flags:
        """The entities ``rule`` watches (``Rule.covers``)."""
        everyone = len(self.keys)
        named = rule.include_names or rule.exclude_names
        if not (named or rule.include_names_regex or rule.exclude_names_regex):
            return np.ones(everyone, np.bool_)
        out = np.zeros(everyone, np.bool_)
        if rule.include_names:  # no other name is covered: look those up
            for name in rule.include_names:
                for i in self._by_name.get(name, ()):
                    out[i] = rule.covers(name)
            return out
        for i, name in enumerate(self.names):
            out[i] = rule.covers(name)
        return out


class Listings:
    """The entities each rule of a round watches, listed once for each model
    and window start (``evaluation.entities``), each entity's bucket and name
    found once for the round."""

    def __init__(
        self, frames: Frames, metrics: MetricsDAO, bucket_of: Callable[[str], int], owned: Collection[int]
    ) -> None:
        self._frames, self._metrics, self._bucket_of, self._owned = frames, metrics, bucket_of, owned
        self._listed: dict[tuple[Any, int], Listing] = {}
        self._entities: dict[tuple[Any, bool, str], tuple[Entity, int, str]] = {}
        """Each entity, its bucket and its name, by scope, normal flag and key
        (an instance and an endpoint may have the same key, and a database
        the name of a service)."""

    def of(self, w: Watched, duration: Duration) -> Listing:
        found = self._listed.get((w.metric.model, duration.start_bucket))
        if found is None:
            found = self._listed[(w.metric.model, duration.start_bucket)] = self._list(w, duration)
        return found

    def _list(self, w: Watched, duration: Duration) -> Listing:
        assert w.metric.model is not None
        names = entity_names(self._metrics, w, duration)
        keys = [SEP.join(n) for n in names]
        known = [
            self._entities.get((w.scope, w.metric.normal, k)) or self._entity(w, k, n)
            for k, n in zip(keys, names, strict=True)
        ]
        population = self._frames.population([e for e, _, _ in known], w.metric.model, names)
        buckets = [b for _, b, _ in known]
        mine = np.fromiter((b in self._owned for b in buckets), np.bool_, len(buckets))
        place = {k: i for i, k in enumerate(keys)}
        return Listing(population, keys, place, buckets, mine, [name for _, _, name in known])

    def _entity(self, w: Watched, key: str, names: tuple[str, ...]) -> tuple[Entity, int, str]:
        e = entity_of_names(w, names)
        found = self._entities[(w.scope, w.metric.normal, key)] = (
            e,
            self._bucket_of(key),
            entity_name(w.scope, e),
        )
        return found
