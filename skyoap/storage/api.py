"""The storage interfaces the pipeline calls. Implementations sit beside this
module (``storage/elasticsearch``, ``storage/embedded``, ``storage/redis``)."""

from __future__ import annotations

import abc
import contextlib
import datetime
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from skyoap.model.inventory import Inventory
from skyoap.model.metrics import Downsampling, Metrics
from skyoap.model.records import RECORD_MODELS, Record
from skyoap.model.stream import ColumnType, StreamData
from skyoap.model.topics import Bounds, Fetched, Position, Reservation, Retention, TopicRecord, Where

I = TypeVar("I", bound=Inventory)  # noqa: E741
M = TypeVar("M", bound=Metrics)
R = TypeVar("R", bound=Record)
S = TypeVar("S", bound=StreamData, covariant=True)
V = TypeVar("V")

Equal = str | tuple[str, ...]
"""What a read's string column must hold: a value, or any of a tuple of values."""


def check_where(model: type[StreamData], where: Mapping[str, V] | None) -> Mapping[str, V]:
    """``where`` if it names only string columns of ``model``; a ValueError
    that lists them otherwise."""
    names = {c.name for c in model.columns() if c.type is ColumnType.STRING}
    unknown = sorted(set(where or {}) - names)
    if unknown:
        raise ValueError(
            f"{model.MODEL} has no column {', '.join(unknown)}; filter by one of {', '.join(sorted(names))}"
        )
    return where or {}


def check_columns(model: type[StreamData], columns: Sequence[str]) -> Sequence[str]:
    """``columns`` if each is a string column of ``model``; a ValueError that lists them otherwise."""
    check_where(model, dict.fromkeys(columns, ""))
    return columns


def each_position(positions: Sequence[Position] | None, count: int) -> Sequence[Position | None]:
    """The topic position of each of ``count`` items written (None for each
    when they are not published)."""
    return positions if positions is not None else [None] * count


class StorageError(RuntimeError):
    """A storage operation failed. ``retriable`` says whether the same call may
    succeed later (server busy or unreachable) or never will."""

    retriable = False


class StorageUnavailable(StorageError):
    retriable = True


@dataclass(frozen=True)
class Stored(Generic[S]):
    """A row as read, with the version an update must still match."""

    item: S
    version: object
    rounds: Mapping[str, int] = field(default_factory=dict)
    """Metrics rows: the last persistence round of each writer that the row's
    value includes (see ``MetricsWrite``)."""
    position: Position | None = None
    """Where this version of the row is on its topic (None: not on it)."""


@dataclass
class InsertOutcome:
    inserted: list[str] = field(default_factory=list)
    """Keys now stored with the sequence they were given."""
    key_taken: list[str] = field(default_factory=list)
    """Keys another writer stored first: read and combine them instead."""


class InventoryDAO(Protocol):
    def install(self, models: Sequence[type[Inventory]]) -> None:
        """Creates the indices or tables of ``models`` where missing."""

    def get_many(self, model: type[I], keys: Sequence[str]) -> dict[str, Stored[I]]:
        """The stored rows of ``keys`` (absent keys are left out); reads what was
        written before, with no refresh delay."""

    def get_by_sequence(self, model: type[I], sequence: int) -> I | None: ...

    def update(
        self,
        model: type[I],
        rows: Sequence[tuple[Stored[I], I]],
        positions: Sequence[Position] | None = None,
    ) -> list[str]:
        """Replaces each stored row with its new value (at its topic position)
        if the row is unchanged since it was read; returns the keys that
        changed meanwhile."""

    def insert(
        self, model: type[I], items: Sequence[I], positions: Sequence[Position] | None = None
    ) -> InsertOutcome:
        """Inserts new rows (at their topic positions), whose sequences were
        reserved. A key is never stored twice."""

    def reserve_sequences(self, model: type[Inventory], first: int, last: int) -> bool:
        """Records that ids ``first..last`` of ``model``'s scope are handed out,
        if ``first`` is above every id reserved before; returns False (and
        reserves nothing) otherwise, which means the allocator is behind storage,
        e.g. because Redis lost its data. This fence, kept in storage, is what
        makes an id impossible to hand out twice whatever the allocator does."""

    def max_sequence(self, model: type[Inventory]) -> int:
        """The largest id reserved for ``model`` (no stored row has a larger one), 0 if none."""

    def list(self, model: type[I], limit: int = 10_000) -> list[I]:
        """Rows ordered by sequence."""

    def names_of_service(self, model: type[Inventory], service_id: int, limit: int) -> Sequence[str]:
        """The names of up to ``limit`` rows of ``model`` (instances or
        endpoints) whose ``service_id`` is given, in the order they got ids."""

    def stale(
        self, model: type[I], cutoff_ms: int, limit: int = 10_000, active: bool | None = True
    ) -> Sequence[Stored[I]]:
        """Rows whose heartbeat is older than ``cutoff_ms``: the active ones,
        the inactive ones (``active=False``) or all (None)."""

    def remove(self, model: type[I], rows: Sequence[Stored[I]]) -> Sequence[str]:
        """Deletes each row if it is unchanged since it was read; returns the
        keys that changed meanwhile (and stay). A removed row's id is never
        handed out again (the fence stays)."""

    def close(self) -> None: ...


class SequenceAllocator(Protocol):
    """The global lock and the id sequences, one of each per scope."""

    def lock(self, scope: str) -> contextlib.AbstractContextManager[None]: ...

    def allocate(self, scope: str, count: int, stored_max: Callable[[], int]) -> list[int]:
        """``count`` fresh ids of ``scope``. When the allocator has lost its state
        it starts again above ``stored_max()``, the largest id storage holds."""

    def raise_floor(self, scope: str, floor: int) -> None:
        """Makes sure the next id allocated is above ``floor``."""

    def close(self) -> None: ...


APPLIED_ROUNDS = "applied_rounds"
"""The stored column of a metrics row's ``rounds``."""


@dataclass(frozen=True)
class MetricsWrite(Generic[M]):
    """A metrics row to write: ``value`` over the row ``stored`` it was merged
    with (None: the key had no row), recording ``rounds``.

    ``rounds`` maps each writer to the last of its persistence rounds the value
    includes. A writer that does not know whether a write landed (a timeout)
    reads the row again and finds out from its round there, so it never adds
    a delta twice."""

    stored: Stored[M] | None
    value: M
    rounds: Mapping[str, int]
    position: Position | None = None
    """Where the value is on the metrics topic."""


@dataclass
class PutOutcome:
    """What became of each row of a ``put`` that returned; every key not
    listed was written."""

    retry: list[str] = field(default_factory=list)
    """Keys certainly not written, because their row changed since it was read
    (or storage was busy): read, merge and write them again."""
    failed: dict[str, str] = field(default_factory=dict)
    """Keys storage refused for good, with the reason."""


class MetricsDAO(Protocol):
    """Metrics rows, one table or index per model and downsampling level."""

    def install(self, models: Sequence[type[Metrics]]) -> None: ...

    def get_many(self, model: type[M], level: Downsampling, keys: Sequence[str]) -> dict[str, Stored[M]]:
        """The stored rows of ``keys`` with their rounds (absent keys are left
        out), with no refresh delay."""

    def put(self, model: type[M], level: Downsampling, rows: Sequence[MetricsWrite[M]]) -> PutOutcome:
        """Writes each new value over the row it was merged with, if that row is
        unchanged since it was read; a value merged with no row is written only
        if the key is still absent. A row's write never lands after a later
        write of the same row did (each is conditional on the version read).

        A StorageError raised here leaves every row's outcome unknown: some or
        all may have been written (a request that timed out may still land)."""

    def query(
        self,
        model: type[M],
        level: Downsampling,
        first_bucket: int,
        last_bucket: int,
        where: Mapping[str, Equal] | None = None,
        limit: int = 10_000,
    ) -> list[M]:
        """Rows with ``first_bucket <= time_bucket <= last_bucket`` whose string
        columns equal ``where``'s values (one of them, for a tuple), newest
        bucket first: ``limit`` at most, whatever the most one search of the
        storage answers."""

    def distinct(
        self, model: type[Metrics], level: Downsampling, first_bucket: int, columns: Sequence[str]
    ) -> set[tuple[str, ...]]:
        """The distinct values of the string ``columns`` in the rows from
        ``first_bucket`` on: the entities measured since."""

    def latest(self, model: type[M], level: Downsampling, first_bucket: int, by: str) -> list[M]:
        """The newest row of each value of the string column ``by`` among the
        rows from ``first_bucket`` on (SkyWalking's ``loadLastUpdate``: what
        changed since), all of them, in no order."""

    def expire(self, model: type[Metrics], level: Downsampling, keep_from: datetime.date) -> int:
        """Removes the rows of the days before ``keep_from``; returns how many
        were removed. A storage may keep some longer (Elasticsearch drops
        whole indices, each of a day or a month: ``PERIODS``), never shorter."""

    def close(self) -> None: ...


@dataclass(frozen=True, kw_only=True)
class RecordSearch:
    """Which records a search matches, in what order, and which of them it reads."""

    first_bucket: int | None = None
    last_bucket: int | None = None
    """Minutes, both included. None for both: every day stored, for a search
    by an indexed column (``trace_id``) that must not scan."""
    equal: Mapping[str, str | int | bool] = field(default_factory=dict)
    """Columns (string, integer or boolean) and the value each must equal."""
    one_of: Mapping[str, Sequence[str | int | bool]] = field(default_factory=dict)
    """Columns (string, integer or boolean) and the values one of which each
    must equal; a column given no value matches no record."""
    any_of: Sequence[Mapping[str, Sequence[str | int | bool]]] = ()
    """Alternatives a record must match at least one of (none given: no such
    condition), each columns and their values as in ``one_of``: a search by
    a value in either of two columns, or by pairs of values, stays one."""
    at_least: Mapping[str, int] = field(default_factory=dict)
    at_most: Mapping[str, int] = field(default_factory=dict)
    """Integer columns and their bounds, included."""
    tags: Sequence[str] = ()
    """Values the record's tags column (``Record.TAGS``) must each hold."""
    contains: Mapping[str, Sequence[str]] = field(default_factory=dict)
    lacks: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """WORDS columns and the keywords each must hold, or must not hold: in
    Elasticsearch a keyword is a phrase of whole words, in SQLite a piece of
    the text; both ignore case."""
    order_by: str = "time_bucket"
    """An integer column; records equal in it come in the order of their keys."""
    descending: bool = True
    offset: int = 0
    limit: int = 1000

    def check(self, model: type[StreamData]) -> None:
        """ValueError naming a column ``model`` lacks or whose type does not fit its use."""
        types = {c.name: c.type for c in model.stored_columns()}

        def need(names: Iterable[str], allowed: tuple[ColumnType, ...], use: str) -> None:
            for name in names:
                if types.get(name) not in allowed:
                    kinds = ", ".join(t.value for t in allowed)
                    raise ValueError(f"{model.MODEL} has no column {name} of type {kinds} to {use}")

        scalars = (ColumnType.STRING, ColumnType.INT, ColumnType.BOOL)
        need(self.equal, scalars, "match a value")
        for values in (self.one_of, *self.any_of):
            need(values, scalars, "match one of several values")
            if any(isinstance(v, str) for v in values.values()):
                raise ValueError("a record search takes a column's values as a list, not as one string")
        if any(not alternative for alternative in self.any_of):
            raise ValueError("an alternative of a record search names no column: it would match every record")
        need([*self.at_least, *self.at_most, self.order_by], (ColumnType.INT,), "bound or sort by")
        need([getattr(model, "TAGS", "tags")] if self.tags else [], (ColumnType.STRINGS,), "search by tag")
        need([*self.contains, *self.lacks], (ColumnType.WORDS,), "search by keyword")
        if (self.first_bucket is None) != (self.last_bucket is None):
            raise ValueError("a record search bounds both ends of its time range or neither")
        if self.offset < 0 or self.limit < 0:
            raise ValueError(
                f"a record search reads from offset {self.offset}, at most {self.limit}: not below 0"
            )


class RecordDAO(Protocol):
    """Records, partitioned by day."""

    def install(self, models: Sequence[type[Record]]) -> None: ...

    def insert(
        self, model: type[R], items: Sequence[R], positions: Sequence[Position] | None = None
    ) -> dict[str, str]:
        """Stores ``items``; one already stored under the same key is replaced
        (an agent sending a segment again stores it once). ``positions`` (one
        per item) put each on the model's topic in the same write. Returns
        the keys storage refused, with the reason."""

    def query(
        self,
        model: type[R],
        first_bucket: int,
        last_bucket: int,
        where: Mapping[str, str] | None = None,
        limit: int = 1000,
    ) -> list[R]:
        """Records of the minutes ``first_bucket..last_bucket`` whose string
        columns equal ``where``'s values, newest first."""

    def search(self, model: type[R], search: RecordSearch) -> list[R]:
        """The records ``search`` matches, found by storage (its indices, not
        a scan of what it holds) and read within the current call's deadline;
        ValueError for a search naming columns ``model`` lacks."""

    def tag_values(
        self, model: type[Record], first_bucket: int, last_bucket: int, limit: int, prefix: str = ""
    ) -> list[str]:
        """Up to ``limit`` distinct values starting with ``prefix`` of the
        tags column (``Record.TAGS``) among the records of the minutes
        ``first_bucket..last_bucket``, in order."""

    def close(self) -> None: ...


class OffsetOutOfRange(StorageError):
    """A read asked for offsets retention has removed (or not yet written)."""

    def __init__(self, topic: str, partition: int, offset: int, start: int, end: int) -> None:
        super().__init__(
            f"offset {offset} of {topic}/{partition} is not readable: the partition holds "
            f"offsets {start} to {end - 1}"
            + (" (retention removed the older ones)" if offset < start else " (it has no such offset yet)")
        )
        self.topic, self.partition, self.offset, self.start, self.end = topic, partition, offset, start, end


class OffsetRanges(Protocol):
    """Offsets of topic partitions, handed out in ranges, so that writers on
    several nodes place records on one partition without a lock.

    A writer reserves a range, writes its records at those offsets, and
    completes the range once they are readable. A partition's *watermark* is
    the first offset of its lowest open range, or its next offset when none is
    open: every offset below it is readable or never will be."""

    def reserve(self, topic: str, partition: int, count: int, floor: Callable[[], int]) -> Reservation:
        """``count`` offsets at the end of the partition; a partition not yet
        known (or forgotten) counts on from ``floor()``."""

    def complete(self, reservations: Sequence[Reservation]) -> list[Reservation]:
        """Closes ranges whose records are readable (or will never be written);
        returns those passed over meanwhile, whose records must be written
        again at new ranges."""

    def watermark(self, topic: str, partition: int) -> int | None:
        """None when the partition is not known yet."""

    def close(self) -> None: ...


class TopicDAO(Protocol):
    """Partitioned topics, read by offset, whose ends move only over what is
    readable, and their retention.

    A topic's entries are the stored records and rows themselves
    (``Topic.tables``), written with their positions by the DAO that stores
    them. A row updated in place leaves its position: the version it held is
    first kept in the topic's history (``keep``)."""

    def install(self, topics: Mapping[str, int]) -> None:
        """Creates the topics (name → partition count) that do not exist yet.
        A topic keeps the partition count it was first created with."""

    def keep(self, topic: str, versions: Sequence[TopicRecord]) -> None:
        """Writes ``versions`` of rows into the topic's history at their
        positions (written again, a version is stored once) and makes them
        readable before it returns."""

    def advance(self, topic: str, ends: Mapping[int, int]) -> None:
        """Moves each partition's end up to ``ends[partition]`` (never down):
        the records below it were made readable (``make_readable``)."""

    def make_readable(self, topic: str) -> None:
        """Makes the records written so far readable (Elasticsearch refreshes)."""

    def next_offset(self, topic: str, partition: int) -> int:
        """The offset after the highest one the partition holds or its end
        passed: where offset ranges count on from after their state was lost."""

    def bounds(self, topic: str) -> list[Bounds]:
        """Every partition's readable offsets (an empty list for a topic never installed)."""

    def read(
        self, topic: str, partition: int, offset: int, limit: int, where: Where | None = None
    ) -> Fetched:
        """Up to ``limit`` records from ``offset`` on, below the partition's end;
        only those matching ``where``, found by the storage itself. Raises
        OffsetOutOfRange when ``offset`` is below the start or above the end."""

    def trim(self, topic: str, retention: Retention, now_ms: int) -> dict[int, int]:
        """Removes what ``retention`` no longer keeps; returns the records removed per partition."""

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        """The first readable offset whose record was published at or after
        ``timestamp_ms``; None when no readable record is that recent."""

    def close(self) -> None: ...


class TopicRetention(abc.ABC):
    """A topic's retention, written once for every storage, which supplies
    the primitives. A topic of records keeps what storage keeps of them: the
    days past the cutoff are dropped whole. A topic of row versions moves
    each partition's start past what is older than the cutoff, or past the
    offsets over the bound, then drops its history of those days (rows stay
    stored, below the start, until their own time to live)."""

    def trim(self, topic: str, retention: Retention, now_ms: int) -> dict[int, int]:
        """Applies ``retention`` at ``now_ms``; returns the offsets each partition lost."""
        cutoff_ms = now_ms - int(retention.max_age_s * 1000)
        if topic in RECORD_MODELS:
            return self._drop_days(topic, cutoff_ms)
        removed = {}
        for b in self.bounds(topic):
            start = retention.start(b, self._first_since(topic, b, cutoff_ms))
            if start > b.start:
                removed[b.partition] = self._move_start(topic, b.partition, start) - b.start
        self._drop_history(topic, cutoff_ms)
        return removed

    @abc.abstractmethod
    def bounds(self, topic: str) -> list[Bounds]: ...

    @abc.abstractmethod
    def _first_since(self, topic: str, b: Bounds, timestamp_ms: int) -> int | None:
        """The first readable offset of ``b``'s partition published at or after ``timestamp_ms``."""

    @abc.abstractmethod
    def _move_start(self, topic: str, partition: int, start: int) -> int:
        """Moves the partition's start up to ``start`` (never down, never past
        its end); returns the start it has now."""

    @abc.abstractmethod
    def _drop_days(self, topic: str, cutoff_ms: int) -> dict[int, int]:
        """Drops a topic of records' days before ``cutoff_ms``'s, each
        partition's start moved first to the lowest offset left; returns the
        records each partition lost."""

    @abc.abstractmethod
    def _drop_history(self, topic: str, cutoff_ms: int) -> None:
        """Drops the versions a topic of rows kept before ``cutoff_ms``."""


class StateStore(Protocol):
    """Small JSON documents replaced only if unchanged since they were read
    (compare-and-swap): the consumer groups' shared state."""

    def load(self, name: str) -> tuple[dict[str, Any] | None, object]:
        """The document and its version (None and a version for a missing one)."""

    def swap(self, name: str, version: object, value: dict[str, Any]) -> bool:
        """Stores ``value`` if the document is still at ``version``; False otherwise."""

    def names(self) -> list[str]: ...

    def close(self) -> None: ...
