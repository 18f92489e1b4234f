"""The network address aliases a node measures exit spans through
(SkyWalking's ``NetworkAddressAliasCache``): which service and instance an
address callers use stands for, so that the caller's side of a call lands on
the same relation as the callee's.

An alias is learned where an entry span names the address its caller used,
which is often another receiver than the one that takes the caller's exit
span. So every node that analyses spans holds the aliases it learned itself,
used at once, and every ``refresh_s`` reads what the others learned from
storage, where each sighting is stored as a ``NetworkAddressAlias`` metric.
At start it reads every alias storage keeps (the day rows, which live
longest), so that aliases survive restarts.

The cache holds at most ``most`` aliases (the guards' bound on addresses,
``--max-network-addresses``): past it, the alias seen least recently is
forgotten, counted, and learned again at its next sighting."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Protocol

from skyoap.model.inventory import OTHER
from skyoap.model.metrics import Downsampling, M, NetworkAddressAlias
from skyoap.runtime import clock
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.periodic import Periodic
from skyoap.storage.api import StorageError

log = logging.getLogger(__name__)

LOOKBACK_MS = 120_000
"""How far before the last read a refresh reads again. A sighting is stored
under its span's minute, seconds after the span ended (the agent's report,
L1's flush, the remote hop, L2's round); one stored later than this after
its minute (an agent or a storage that was away) is read with a later
sighting of its address."""
MINUTE_ROWS_FOR_MS = 3_600_000
"""A refresh that follows a read longer ago than this (storage was away)
reads the day rows: the minute rows of the gap may be past their time to live."""


class AliasReads(Protocol):
    """What the cache reads of storage (``MetricsDAO.latest``)."""

    def latest(self, model: type[M], level: Downsampling, first_bucket: int, by: str) -> list[M]: ...


class AliasCache:
    """The aliases of one node, by address. ``get`` is lock-free: every exit
    span asks."""

    def __init__(
        self,
        reads: AliasReads,
        most: int,
        refresh_s: float,
        instruments: Instruments,
        now_ms: Callable[[], int] = clock.now_ms,
    ) -> None:
        self._reads = reads
        self._most = most
        self._now_ms = now_ms
        self._aliases: OrderedDict[str, NetworkAddressAlias] = OrderedDict()
        """Least recently seen first."""
        self._lock = threading.Lock()
        self._read_at_ms: int | None = None
        """When the last read that succeeded began; None: nothing read yet."""
        self._task = Periodic(
            "alias-refresh", refresh_s, self.refresh, "reading the aliases other nodes learned"
        )
        instruments.gauge("skyoap_aliases", "network address aliases the node holds").set_function(
            lambda: len(self._aliases)
        )
        self._forgotten = instruments.counter(
            "skyoap_aliases_forgotten_total",
            "network address aliases forgotten past --max-network-addresses (the least recently seen; "
            "learned again at their next sighting)",
        )

    def get(self, address: str) -> NetworkAddressAlias | None:
        return self._aliases.get(address)

    def learn(self, aliases: Iterable[NetworkAddressAlias]) -> None:
        """Takes each sighting later than the one held of its address."""
        with self._lock:
            for alias in aliases:
                if alias.address == OTHER:  # stands for many addresses: no alias
                    continue
                held = self._aliases.get(alias.address)
                if held is None or held.recency() < alias.recency():
                    self._aliases[alias.address] = alias
                    self._aliases.move_to_end(alias.address)
            while len(self._aliases) > self._most:
                self._aliases.popitem(last=False)
                self._forgotten.inc()

    def refresh(self) -> int:
        """Learns what storage holds since the last read (everything it keeps
        at the first); returns how many rows were read."""
        began = self._now_ms()
        since = self._read_at_ms
        if since is None or began - since > MINUTE_ROWS_FOR_MS:
            first = 0 if since is None else Downsampling.DAY.bucket_of(since)
            rows = self._reads.latest(NetworkAddressAlias, Downsampling.DAY, first, "address")
        else:
            first = Downsampling.MINUTE.bucket_of(since - LOOKBACK_MS)
            rows = self._reads.latest(NetworkAddressAlias, Downsampling.MINUTE, first, "address")
        # The latest sightings last, so that they are the last forgotten.
        self.learn(sorted(rows, key=NetworkAddressAlias.recency))
        self._read_at_ms = began
        return len(rows)

    def start(self) -> None:
        """Reads every alias storage keeps, then refreshes every ``refresh_s``.
        If storage does not answer, the node starts without them, and the
        first refresh that reads reads them all."""
        try:
            log.info("%d network address aliases read from storage", self.refresh())
        except StorageError as e:
            log.warning(
                "cannot read the network address aliases yet (%r): reading them at the next refresh", e
            )
        self._task.start()

    def close(self, timeout_s: float = 5.0) -> None:
        self._task.close(timeout_s)
