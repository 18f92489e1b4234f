"""Cardinality guards: what keeps the number of entities bounded whatever the
agents name. Every entity gets an inventory row and minute, hour and day
metric rows, so an agent that names endpoints by raw URL (``/orders/1``,
``/orders/2``, ...) would otherwise grow storage without end.

Applied at the receiver before anything is measured or registered:

- endpoint grouping rules (``--endpoint-groups FILE``) rename a matching
  endpoint to its group (``/orders/{id}``);
- there are at most ``--max-services`` services, each has at most
  ``--max-endpoints-per-service`` endpoints and ``--max-instances-per-service``
  instances, and all services together at most ``--max-network-addresses``
  peer addresses. Past a bound, a new name is counted and folded into one
  catch-all entity, ``(other)``, itself one of the bounded names: never a new
  row. A service folded into ``(other)`` takes its instances and endpoints
  there too, where they count against ``(other)``'s bounds.

Every way a name reaches a row or a metric goes through these guards: the
segments, logs and meters of SkyWalking's v3 protocol and of OTLP, the callers
a segment's references name, and the ``Register`` service's names and ids.

A receiver learns which names a service has from storage the first time it
sees the service, so a restart does not admit a new set of names. It keeps
the names of at most ``MAX_HELD_NAMES`` per kind: past that, the scopes that
changed least recently are forgotten and read from storage again at their next
sight, so that the guards' own memory stays bounded whatever agents name."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from skyoap.model.inventory import OTHER, Inventory, ServiceInventory
from skyoap.model.spans import ENTRY, EXIT, Segment, SpanRef
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.ratelimit import RateLimitedLog
from skyoap.storage.api import StorageError

log = logging.getLogger(__name__)

RESEED_AFTER_S = 30.0
"""A service whose names storage could not list is asked again after this long."""
MAX_HELD_NAMES = 500_000
"""How many names one bound holds across its scopes (each scope counts one
more), which bounds the guards' memory whatever agents name. A deployment
with more names than that in active services pays one storage read each time
a forgotten service is seen again; a service's stored names still count."""
ALL = ""
"""The scope of a bound over every service (services, peer addresses)."""


@dataclass(frozen=True)
class GroupingRule:
    service: str | None
    """The service it applies to; None: every service."""
    pattern: re.Pattern[str]
    group: str


class GroupingRules:
    """Endpoint grouping rules, read from a file of lines:

    - ``GROUP``: a name in which each ``{placeholder}`` stands for one path
      segment (anything but ``/``), e.g. ``/orders/{id}`` or ``GET:/users/{id}/cart``;
    - ``GROUP = REGEX``: the endpoints the regular expression matches whole;
    - ``[SERVICE]``: the rules below apply to that service only (``[*]``: to every service);
    - blank lines and lines starting with ``#`` are skipped.

    An endpoint takes the group of the first rule of its service that
    matches, else of the first rule for every service; else it keeps its name."""

    def __init__(self, rules: Sequence[GroupingRule] = ()) -> None:
        self._by_service: dict[str | None, list[GroupingRule]] = {}
        for rule in rules:
            self._by_service.setdefault(rule.service, []).append(rule)

    def __bool__(self) -> bool:
        return bool(self._by_service)

    @classmethod
    def load(cls, path: str) -> GroupingRules:
        """Raises ValueError naming the file and line of what is wrong."""
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except OSError as e:
            raise ValueError(f"cannot read the endpoint groups {path}: {e.strerror}") from None
        rules = []
        service: str | None = None
        for number, raw in enumerate(lines, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("[") and line.endswith("]"):
                name = line[1:-1].strip()
                service = None if name == "*" else name
                continue
            if line.startswith("="):
                raise ValueError(f"{path} line {number}: a rule names no group before ' = '")
            group, sep, regex = line.partition(" = ")
            group = group.strip()
            try:
                pattern = re.compile(regex.strip() if sep else _placeholders(group))
            except re.error as e:
                raise ValueError(
                    f"{path} line {number}: {regex.strip()!r} is not a regular expression: {e}"
                ) from None
            rules.append(GroupingRule(service, pattern, group))
        return cls(rules)

    def group(self, service: str, endpoint: str) -> str:
        for rules in (self._by_service.get(service, ()), self._by_service.get(None, ())):
            for rule in rules:
                if rule.pattern.fullmatch(endpoint):
                    return rule.group
        return endpoint


def _placeholders(group: str) -> str:
    """The regular expression of a group whose ``{name}``s each match one path segment."""
    parts = re.split(r"\{[^{}/]*\}", group)
    return "[^/]+".join(re.escape(p) for p in parts)


class NameBound:
    """At most ``bound`` distinct names per scope (a service, or ``ALL``),
    ``OTHER`` among them once the others are taken. ``seed`` lists the names
    a scope already has in storage. At most ``held`` names are kept across
    scopes: past it, the scope that gained a name least recently is
    forgotten (and read from storage again at its next seeded sight)."""

    def __init__(
        self,
        kind: str,
        bound: int,
        option: str,
        instruments: Instruments,
        seed: Callable[[str], Sequence[str]] | None = None,
        held: int = MAX_HELD_NAMES,
    ) -> None:
        self._kind = kind
        self._bound = bound
        self._option = option
        self._seed = seed
        self._held_most = held
        self._held = 0
        self._names: OrderedDict[str, set[str]] = OrderedDict()
        self._reseed_at: dict[str, float] = {}
        self._lock = threading.Lock()
        self._folded = instruments.counter(
            "skyoap_cardinality_folded_total",
            f"names past a bound counted under the catch-all entity {OTHER}",
            ["kind"],
        ).labels(kind=kind)
        self._forgotten = instruments.counter(
            "skyoap_cardinality_scopes_forgotten_total",
            "scopes whose names a bound stopped holding to keep its memory bounded "
            "(read from storage again when seen again)",
            ["kind"],
        ).labels(kind=kind)
        self._log = RateLimitedLog(log, interval_s=60.0)

    def held(self, scope: str) -> set[str] | None:
        """The names the scope holds, read without the lock (a name in it is
        admitted as it is); None for a scope not held, or to be read from
        storage again."""
        return None if scope in self._reseed_at else self._names.get(scope)

    @property
    def scopes(self) -> int:
        """How many scopes the bound holds names of."""
        return len(self._names)

    def admit(self, scope: str, name: str, seed: bool = True) -> str:
        """``name`` if the scope has it or room for it, else ``OTHER``. Without
        ``seed`` a scope seen for the first time is not read from storage (it
        is at its next sight with it): what a call waits on must not wait for
        storage."""
        names = self._names.get(scope)
        if names is not None and name in names:  # the usual case: no lock
            return name
        with self._lock:
            names = self._scope(scope) if seed else self._names.get(scope) or self._unseeded(scope)
            if name in names:
                return name
            if len(names) < self._bound - 1 or (name == OTHER and len(names) < self._bound):
                self._add(scope, names, name)
                return name
            if OTHER not in names:
                self._add(scope, names, OTHER)
        self._folded.inc()
        self._log.warning(
            f"{self._kind}:{scope}",
            "%s%s has %d %ss, the most %s allows: new ones are counted as %s",
            "service " if scope else "",
            scope or "all services",
            self._bound,
            self._kind,
            self._option,
            OTHER,
        )
        return OTHER

    def _add(self, scope: str, names: set[str], name: str) -> None:
        names.add(name)
        self._held += 1
        self._names.move_to_end(scope)
        self._forget_past_held(scope)

    def _forget_past_held(self, keep: str) -> None:
        """Forgets the scopes that gained a name least recently (never ``keep``)
        while more than ``held`` names are held."""
        while self._held > self._held_most and len(self._names) > 1:
            oldest = next(iter(self._names))
            if oldest == keep:
                self._names.move_to_end(keep)
                continue
            self._held -= len(self._names.pop(oldest)) + 1
            self._reseed_at.pop(oldest, None)
            self._forgotten.inc()

    def _unseeded(self, scope: str) -> set[str]:
        self._reseed_at[scope] = time.monotonic()  # read from storage at the next seeded sight
        return self._put(scope, set())

    def _put(self, scope: str, names: set[str]) -> set[str]:
        """Holds ``names`` as the scope's (replacing what it held)."""
        self._held += len(names) + 1 - (len(self._names[scope]) + 1 if scope in self._names else 0)
        self._names[scope] = names
        self._names.move_to_end(scope)
        self._forget_past_held(scope)
        return names

    def _scope(self, scope: str) -> set[str]:
        """The scope's names, read from storage at first sight (and again
        after ``RESEED_AFTER_S`` if storage could not answer)."""
        names = self._names.get(scope)
        retry_at = self._reseed_at.get(scope)
        if names is not None and (retry_at is None or retry_at > time.monotonic()):
            return names
        known = set(names or ())
        try:
            if self._seed is not None:
                known.update(self._seed(scope))
            self._reseed_at.pop(scope, None)
        except StorageError as e:
            self._reseed_at[scope] = time.monotonic() + RESEED_AFTER_S
            log.warning(
                "cannot list the %ss of %s yet (%s): counting from what arrives", self._kind, scope, e
            )
        return self._put(scope, known)


class Cardinality:
    """The guards a receiver applies to what agents name."""

    def __init__(
        self,
        groups: GroupingRules,
        endpoints: NameBound,
        instances: NameBound,
        addresses: NameBound,
        services: NameBound,
    ) -> None:
        self._groups = groups
        self._endpoints = endpoints
        self._instances = instances
        self._addresses = addresses
        self._services = services

    def service(self, name: str, seed: bool = True) -> str:
        return self._services.admit(ALL, name, seed)

    def services(self, names: Sequence[str]) -> Sequence[str]:
        """``service`` of each of ``names``: ``names`` itself when the bound
        holds them all, as it nearly always does."""
        held = self._services.held(ALL)
        if held is not None and held.issuperset(names):
            return names
        return [self.service(n) for n in names]

    def endpoint(self, service: str, name: str, seed: bool = True) -> str:
        """``name`` grouped and bounded among the endpoints of ``service`` (a
        name the service guard left)."""
        if self._groups:
            name = self._groups.group(service, name)
        return self._endpoints.admit(service, name, seed)

    def instance(self, service: str, name: str, seed: bool = True) -> str:
        """``name`` bounded among the instances of ``service`` (a name the service guard left)."""
        return self._instances.admit(service, name, seed)

    def address(self, name: str) -> str:
        return self._addresses.admit(ALL, name)

    def source(self, service: str, instance: str) -> tuple[str, str]:
        """The service and instance telemetry comes from, guarded (an empty instance stays empty)."""
        service = self.service(service)
        return service, self.instance(service, instance) if instance else ""

    def segment(self, segment: Segment) -> Segment:
        """The segment with its service and instance, its entry spans'
        endpoints and the addresses of its exit spans and references guarded,
        and the callers its references name (they make relation metrics);
        itself when nothing changes, as for nearly every segment."""
        service = self.service(segment.service)
        if service == segment.service and self._all_known(segment):
            return segment
        spans = list(segment.spans)
        for i, span in enumerate(spans):
            if span.kind == ENTRY and span.operation:
                endpoint = self.endpoint(service, span.operation)
                if endpoint != span.operation:
                    spans[i] = span = span._replace(operation=endpoint)
            elif span.kind == EXIT and span.peer:
                peer = self.address(span.peer)
                if peer != span.peer:
                    spans[i] = span = span._replace(peer=peer)
            if span.refs:
                refs = tuple(self._reference(r) for r in span.refs)
                if refs != span.refs:
                    spans[i] = span._replace(refs=refs)
        instance = self.instance(service, segment.instance)
        if (
            service == segment.service
            and instance == segment.instance
            and all(a is b for a, b in zip(spans, segment.spans, strict=True))
        ):
            return segment
        return replace(segment, service=service, instance=instance, spans=tuple(spans))

    def _all_known(self, segment: Segment) -> bool:
        """Whether every name of the segment is one its bound holds already,
        found without a call or a lock: what nearly every segment is."""
        service = segment.service
        endpoints, addresses = self._endpoints.held(service), self._addresses.held(ALL)
        instances, services = self._instances.held(service), self._services.held(ALL)
        if self._groups or endpoints is None or addresses is None or instances is None or services is None:
            return False
        if segment.instance not in instances:
            return False
        for span in segment.spans:
            if span.kind == ENTRY:
                if span.operation and span.operation not in endpoints:
                    return False
            elif span.kind == EXIT and span.peer and span.peer not in addresses:
                return False
            for ref in span.refs:
                if (ref.address and ref.address not in addresses) or (
                    ref.parent_service and not self._knows_caller(ref)
                ):
                    return False
        return True

    def _knows_caller(self, ref: SpanRef) -> bool:
        if ref.parent_service not in (self._services.held(ALL) or ()):
            return False
        instances = self._instances.held(ref.parent_service)
        endpoints = self._endpoints.held(ref.parent_service)
        return (not ref.parent_instance or (instances is not None and ref.parent_instance in instances)) and (
            not ref.parent_endpoint or (endpoints is not None and ref.parent_endpoint in endpoints)
        )

    def _reference(self, ref: SpanRef) -> SpanRef:
        """The reference with its address and its caller's names guarded, with
        the names this receiver knows: neither the list of services nor the
        caller's scope is read from storage while the call waits."""
        _, service, instance, endpoint, address = ref
        if service:
            service = self.service(service, seed=False)
            if instance:
                instance = self.instance(service, instance, seed=False)
            if endpoint:
                endpoint = self.endpoint(service, endpoint, seed=False)
        if address:
            address = self.address(address)
        if (service, instance, endpoint, address) == ref[1:]:
            return ref
        return ref._replace(
            parent_service=service, parent_instance=instance, parent_endpoint=endpoint, address=address
        )


def seed_from(
    names_of_service: Callable[[type[Inventory], int, int], Sequence[str]],
    service_id: Callable[[str], int | None],
    model: type[Inventory],
    bound: int,
) -> Callable[[str], Sequence[str]]:
    """Lists a service's stored names of ``model`` (none while the service has no id)."""

    def seed(service: str) -> Sequence[str]:
        sid = service_id(service)
        return () if sid is None else names_of_service(model, sid, bound)

    return seed


LISTED_AT_MOST = 10_000
"""The most rows one listing of storage answers (Elasticsearch's result window)."""


def services_from(
    list_rows: Callable[[type[ServiceInventory], int], Sequence[ServiceInventory]], bound: int
) -> Callable[[str], Sequence[str]]:
    """Lists the stored services' names (the first ``LISTED_AT_MOST`` of them)."""

    def seed(scope: str) -> Sequence[str]:
        return [s.name for s in list_rows(ServiceInventory, min(bound, LISTED_AT_MOST))]

    return seed
