"""The Elasticsearch connection, index installation and bulk writes shared by the DAOs."""

from __future__ import annotations

import datetime
import enum
import functools
import hashlib
import logging
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import elasticsearch
from elasticsearch import Elasticsearch, helpers
from elasticsearch.serializer import OrjsonSerializer

from skyoap.model.metrics import day_of
from skyoap.model.stream import ColumnType, StreamData
from skyoap.model.topics import Position
from skyoap.runtime import deadline
from skyoap.runtime.batching import BatchPolicy
from skyoap.runtime.retry import RetryPolicy
from skyoap.runtime.tracebacks import drop_locals
from skyoap.storage.api import Equal, StorageError, StorageUnavailable
from skyoap.storage.config import StorageConfig

log = logging.getLogger(__name__)

_ES_TYPES: dict[ColumnType, dict[str, Any]] = {
    ColumnType.STRING: {"type": "keyword"},
    ColumnType.INT: {"type": "long"},
    ColumnType.BOOL: {"type": "boolean"},
    ColumnType.FLOAT: {"type": "double"},
    ColumnType.INTS: {"type": "long", "index": False},
    ColumnType.TEXT: {"type": "text", "index": False},
    ColumnType.MAP: {"type": "object", "enabled": False},
    ColumnType.STRINGS: {"type": "keyword"},  # an array of keywords, each found by a term
    # Stored as TEXT was (an index of an earlier release keeps it so), and
    # indexed by its words in a field of its own, which put_mapping can add.
    ColumnType.WORDS: {"type": "text", "index": False, "fields": {"words": {"type": "text"}}},
}

BULK = BatchPolicy(max_items=1000, max_bytes=20 * 1024 * 1024)
"""One bulk request's size; a write of more is sent in several."""

_SETTINGS = {"number_of_shards": 1, "number_of_replicas": 0, "refresh_interval": "1s"}


def mapping_of(model: type[StreamData]) -> dict[str, Any]:
    return {"dynamic": "strict", "properties": {c.name: _ES_TYPES[c.type] for c in model.stored_columns()}}


POSITION_FIELDS: dict[str, Any] = {
    "topic_partition": {"type": "integer"},
    "topic_offset": {"type": "long"},
    "published_ms": {"type": "long"},
}
"""A record's or a row version's place on its topic, in its document."""


def position_fields(p: Position) -> dict[str, int]:
    return {"topic_partition": p.partition, "topic_offset": p.offset, "published_ms": p.published_ms}


def position_of(source: Mapping[str, Any]) -> Position | None:
    partition = source.get("topic_partition")
    return None if partition is None else Position(partition, source["topic_offset"], source["published_ms"])


def with_position(row: dict[str, Any], position: Position | None) -> dict[str, Any]:
    """A document's source: its row, and its place on its topic when it has one."""
    return row if position is None else {**row, **position_fields(position)}


def doc_id(key: str) -> str:
    """The document id of a row: its key, or a digest of it where the key is
    longer than the 512 bytes Elasticsearch allows."""
    raw = key.encode()
    return key if len(raw) <= 512 else "sha256:" + hashlib.sha256(raw).hexdigest()


def where_query(first_bucket: int, last_bucket: int, where: Mapping[str, Equal]) -> dict[str, Any]:
    """A bucket range and string fields equal to a value (or to one of a tuple's)."""
    filters: list[dict[str, Any]] = [{"range": {"time_bucket": {"gte": first_bucket, "lte": last_bucket}}}]
    filters += [
        {"term": {name: value}} if isinstance(value, str) else {"terms": {name: list(value)}}
        for name, value in where.items()
    ]
    return {"bool": {"filter": filters}}


MAX_PERIODS_NAMED = 62
"""A search over more periods than this goes to every index of the time series."""


class Period(enum.Enum):
    """How much time one index of a time series holds. Its name ends with
    the period's first day, ``{base}-{yyyymmdd}``, so that the indices a time
    range needs, and those older than a day, are known from their names."""

    DAY = "day"
    MONTH = "month"

    def start(self, day: datetime.date) -> datetime.date:
        return day.replace(day=1) if self is Period.MONTH else day

    def after(self, start: datetime.date) -> datetime.date:
        """The first day of the next period."""
        if self is Period.MONTH:
            return (start.replace(day=28) + datetime.timedelta(days=4)).replace(day=1)
        return start + datetime.timedelta(days=1)

    def index(self, base: str, bucket: int) -> str | None:
        """The index of ``base`` holding time bucket ``bucket``; None for a bucket of no real day."""
        suffix = _suffix(self, bucket)
        return None if suffix is None else f"{base}-{suffix}"

    def indices(self, base: str, first_bucket: int, last_bucket: int) -> str:
        """The indices of ``base`` holding the buckets ``first_bucket..last_bucket``, comma separated."""
        first, last = day_of(first_bucket), day_of(last_bucket)
        names: list[str] = []
        if first is not None and last is not None:
            start = self.start(first)
            while start <= last and len(names) <= MAX_PERIODS_NAMED:
                names.append(f"{base}-{start:%Y%m%d}")
                start = self.after(start)
        if not names or len(names) > MAX_PERIODS_NAMED:
            return f"{base}-*"
        return ",".join(names)

    def before(self, names: Iterable[str], day: datetime.date) -> list[str]:
        """Those of the indices ``names`` whose whole period lies before ``day``."""
        old = []
        for name in names:
            start = day_of(int(suffix)) if (suffix := name.rsplit("-", 1)[-1]).isdigit() else None
            if start is not None and self.after(start) <= day:
                old.append(name)
        return old


@functools.lru_cache(maxsize=4096)
def _suffix(period: Period, bucket: int) -> str | None:
    """The name ending of ``period``'s index holding ``bucket`` (cached: every row written asks)."""
    day = day_of(bucket)
    return None if day is None else f"{period.start(day):%Y%m%d}"


BUSY_STATUSES = frozenset({429, 502, 503, 504})
"""Statuses of a server that may take the same request later."""


def raise_if_busy(failures: list[dict[str, Any]], what: str) -> None:
    """Raises StorageUnavailable when some of a bulk's items were refused only
    because the server was busy, so that the writer's retry policy tries again."""
    busy = [f for f in failures if f.get("status") in BUSY_STATUSES]
    if busy:
        first = busy[0].get("error")
        raise StorageUnavailable(
            f"Elasticsearch was busy while {what}: {len(busy)} items refused, e.g. {first}"
        )


def _credentials(config: StorageConfig) -> dict[str, Any]:
    """How the node authenticates to Elasticsearch and checks its certificate;
    raises ValueError for options that do not go together."""
    if config.es_api_key and config.es_username:
        raise ValueError("give --es-api-key or --es-username, not both")
    if bool(config.es_username) != bool(config.es_password):
        raise ValueError("--es-username and --es-password go together")
    found: dict[str, Any] = {}
    if config.es_api_key:
        found["api_key"] = config.es_api_key
    elif config.es_username:
        found["basic_auth"] = (config.es_username, config.es_password)
    if config.es_ca:
        if not os.path.isfile(config.es_ca):
            raise ValueError(f"--es-ca {config.es_ca} is not a file")
        found["ca_certs"] = config.es_ca
    return found


@contextmanager
def translated_errors(what: str) -> Iterator[None]:
    """Turns client errors into the storage error hierarchy, saying what failed.
    The client's error has the locals of its frames cleared: urllib3 keeps
    the error in a frame of its own traceback, a cycle that would hold the
    request's body and rows until the cyclic collector runs."""
    try:
        yield
    except elasticsearch.ApiError as e:
        drop_locals(e)
        raise _translated(e, what) from e
    except (elasticsearch.ConnectionError, elasticsearch.ConnectionTimeout) as e:
        drop_locals(e)
        raise StorageUnavailable(f"Elasticsearch is unreachable while {what}: {e}") from e


def _translated(e: elasticsearch.ApiError, what: str) -> StorageError:
    if isinstance(e, elasticsearch.AuthenticationException):
        return StorageError(
            f"Elasticsearch refused the node's credentials while {what} (401): "
            "check --es-username and --es-password, or --es-api-key"
        )
    if isinstance(e, elasticsearch.AuthorizationException):
        return StorageError(
            f"Elasticsearch does not let the node's user do this: {what} (403): "
            "it needs to create, write and read the indices of its prefix"
        )
    err = StorageUnavailable if e.meta.status in BUSY_STATUSES else StorageError
    return err(f"Elasticsearch refused {what}: {e}")


SHARDS_STARTING = RetryPolicy(attempts=12, first_delay_s=0.1, multiplier=2.0, max_delay_s=2.0)
"""Pauses of a search that met an index whose shards are not started yet:
about ten seconds in all (at most fifteen), within the call's deadline if
there is one."""

_SEARCHES = frozenset({"search", "count", "msearch"})
_UNSTARTED = frozenset({"search_phase_execution_exception", "no_shard_available_action_exception"})


def _shards_unavailable(e: elasticsearch.ApiError) -> bool:
    """Whether Elasticsearch answered 503 because no copy of some shard was
    started: an index a write is creating at this moment (at every change of
    day, a new index per model), or one being recovered."""
    error = e.body.get("error") if isinstance(e.body, dict) else None
    return e.meta.status == 503 and isinstance(error, dict) and error.get("type") in _UNSTARTED


class CompactOrjsonSerializer(OrjsonSerializer):
    """orjson from 3.12 on returns each document in the buffer it grew while
    writing it, never trimmed: at least 4 KB, and up to sixteen times the
    document. A bulk request keeps every document it carries, as bytes,
    until it is answered, and a write to a storage that does not answer
    builds them again at each try; so each is copied to its exact size,
    which costs little beside writing it."""

    def dumps(self, data: Any) -> bytes:
        return bytes(memoryview(super().dumps(data)))


class _Client(Elasticsearch):
    """The client, whose searches wait for the shards of an index being
    created to start (``SHARDS_STARTING``) rather than fail: a search that
    matches such an index is answered 503 until its primary shard started,
    which a busy machine takes seconds to do, and the transport's own retries
    come without a pause. Searches only: nothing is written twice."""

    def perform_request(self, method: str, path: str, **kwargs: Any) -> Any:
        if kwargs.get("endpoint_id") not in _SEARCHES:
            return super().perform_request(method, path, **kwargs)
        failures = 0
        while True:
            try:
                return super().perform_request(method, path, **kwargs)
            except elasticsearch.ApiError as e:
                failures += 1
                if not _shards_unavailable(e) or failures >= (SHARDS_STARTING.attempts or 1):
                    raise
                pause = SHARDS_STARTING.delay_s(failures)
                if deadline.remaining(pause) < pause:
                    raise  # the call answers by its deadline
                log.debug("%s %s: shards not started yet, asking again in %.2f s", method, path, pause)
                time.sleep(pause)


class ElasticsearchClient:
    """One client per node, shared by its DAOs (the client is thread-safe).

    Reads (``es``) are idempotent and the transport retries them. Writes
    (``writes``, ``bulk``) are tried once: the transport's retries and the bulk
    helper's are off for them, and a busy or unreachable server raises
    StorageUnavailable for the writer's retry policy (``runtime/retry.py``),
    the one layer that retries a write."""

    def __init__(
        self,
        hosts: str,
        index_prefix: str,
        request_timeout_s: float = 30.0,
        credentials: Mapping[str, Any] | None = None,
    ) -> None:
        """``credentials``: the client's ``basic_auth``, ``api_key`` and
        ``ca_certs`` (see ``of``)."""
        self.es: Elasticsearch = _Client(
            [h.strip() for h in hosts.split(",") if h.strip()],
            request_timeout=request_timeout_s,
            retry_on_timeout=True,
            max_retries=3,
            serializer=CompactOrjsonSerializer(),
            **(credentials or {}),
        )
        self.writes = self.es.options(max_retries=0, retry_on_timeout=False)
        self.prefix = index_prefix
        self._closed = False

    @classmethod
    def of(cls, config: StorageConfig) -> ElasticsearchClient:
        """The client the storage options describe, credentials included;
        raises ValueError for options that do not go together."""
        return cls(config.es_hosts, config.es_index_prefix, config.es_request_timeout_s, _credentials(config))

    def index(self, name: str) -> str:
        return f"{self.prefix}_{name}"

    def create_index(self, name: str, mappings: Mapping[str, Any]) -> None:
        """Creates the index, or adds the fields it lacks to one that exists
        (an index created by an earlier release)."""
        index = self.index(name)
        with translated_errors(f"creating index {index}"):
            if self.es.indices.exists(index=index):
                self.es.indices.put_mapping(index=index, properties=mappings["properties"])
                return
            try:
                self.es.indices.create(index=index, mappings=dict(mappings), settings=_SETTINGS)
            except elasticsearch.BadRequestError as e:
                if e.error != "resource_already_exists_exception":  # another node created it first
                    raise

    def put_template(self, name: str, mappings: Mapping[str, Any]) -> None:
        """Indices named ``{prefix}_{name}-*`` are created with ``mappings`` by
        the first write into them; those that exist get the fields they lack
        (indices created by an earlier release)."""
        with translated_errors(f"installing the index template of {self.index(name)}"):
            self.es.indices.put_index_template(
                name=self.index(name),
                index_patterns=[f"{self.index(name)}-*"],
                template={"settings": _SETTINGS, "mappings": dict(mappings)},
            )
            self.es.indices.put_mapping(
                index=f"{self.index(name)}-*", properties=mappings["properties"], allow_no_indices=True
            )

    def has_indices(self) -> bool:
        """Whether any index of this prefix exists (reading, creating nothing)."""
        pattern = f"{self.prefix}_*"
        with translated_errors(f"looking for the indices {pattern}"):
            return bool(self.es.indices.get(index=pattern, allow_no_indices=True, expand_wildcards="all"))

    def refresh(self, name: str) -> None:
        with translated_errors(f"refreshing {self.index(name)}"):
            self.es.indices.refresh(index=self.index(name))

    def bulk(self, actions: Iterable[dict[str, Any]], what: str) -> list[dict[str, Any]]:
        """Writes ``actions`` in bulk and returns the items that failed, each as
        ``{"status": int, "_id": str, "error": ...}``, busy ones (429) included:
        the caller decides what to try again (``raise_if_busy``)."""
        failures = []
        with translated_errors(what):
            for ok, info in helpers.streaming_bulk(
                self.writes,
                actions,
                chunk_size=BULK.max_items,
                max_chunk_bytes=BULK.max_bytes or 100 * 1024 * 1024,  # ES refuses requests over 100 MB
                max_retries=0,
                raise_on_error=False,
                raise_on_exception=True,
                yield_ok=False,
            ):
                if not ok:
                    failures.append(next(iter(info.values())))
        return failures

    def close(self) -> None:
        """Closes the connections; idempotent (every DAO sharing the client closes it)."""
        if not self._closed:
            self._closed = True
            self.es.close()


class DeadlineReads:
    """The reads an agent's call waits on: the client's connections, one try
    each of at most ``limit_s``, or of what is left of the current call's
    deadline, and none once that has passed."""

    def __init__(self, client: ElasticsearchClient, limit_s: float) -> None:
        self._once = client.es.options(max_retries=0, retry_on_timeout=False)
        self._limit_s = limit_s

    def es(self) -> Elasticsearch:
        left = deadline.remaining(self._limit_s)
        if left <= 0:
            raise StorageUnavailable("the call's deadline passed before Elasticsearch could be read")
        return self._once.options(request_timeout=left)
