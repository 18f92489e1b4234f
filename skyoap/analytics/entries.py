"""A topic's entries as Spark reads them, in Arrow record batches: the columns
of Kafka's source (``topic``, ``partition``, ``offset``, ``timestamp``: when it
was published, ``key``, ``value``: the stored record or row as JSON), then a
typed column for each field of the topic's records or rows.

A topic of rows holds several models: its typed columns are the union of
theirs, null where a model has no such field, and ``model`` (and ``level``
for metrics) says which one an entry is. A field named like one of Kafka's
columns is prefixed with the topic's name (the log's own ``timestamp`` is
``log_timestamp``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from skyoap.model.records import RECORD_MODELS
from skyoap.model.stream import ColumnType, StreamData
from skyoap.model.topics import Topic, TopicRecord

SPARK_TYPES: dict[ColumnType, DataType] = {
    ColumnType.STRING: StringType(),
    ColumnType.TEXT: StringType(),
    ColumnType.WORDS: StringType(),
    ColumnType.INT: LongType(),
    ColumnType.BOOL: BooleanType(),
    ColumnType.FLOAT: DoubleType(),
    ColumnType.INTS: ArrayType(LongType()),
    ColumnType.MAP: MapType(StringType(), StringType()),
    ColumnType.STRINGS: ArrayType(StringType()),
}
ENVELOPE = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("key", StringType()),
        StructField("value", StringType()),
    ]
)


def table_schema(model: type[StreamData]) -> StructType:
    """The columns of a stored table, as Spark reads it."""
    return StructType([StructField(c.name, SPARK_TYPES[c.type]) for c in model.columns()])


@dataclass(frozen=True)
class _Field:
    column: str
    """Its name in Spark."""
    name: str
    """Its name in the entry's value."""
    type: ColumnType


class TopicEntries:
    """The schema of a topic's entries, and their record batches."""

    def __init__(self, topic: Topic) -> None:
        self.topic = topic
        kinds = [] if topic.value in RECORD_MODELS else ["model"]
        if topic is Topic.METRICS:
            kinds.append("level")
        fields = {k: _Field(k, k, ColumnType.STRING) for k in kinds}
        for table in topic.tables:
            for c in table.model.columns():
                column = f"{topic.value}_{c.name}" if c.name in ENVELOPE.fieldNames() else c.name
                fields.setdefault(c.name, _Field(column, c.name, c.type))
        self.fields = list(fields.values())
        self.schema = StructType(
            [*ENVELOPE.fields, *(StructField(f.column, SPARK_TYPES[f.type]) for f in self.fields)]
        )
        self._arrow = to_arrow_schema(self.schema, timezone="UTC")

    def batch(self, records: Sequence[TopicRecord]) -> pa.RecordBatch:
        values = [r.value for r in records]
        columns: dict[str, list[Any]] = {
            "topic": [self.topic.value] * len(records),
            "partition": [r.partition for r in records],
            "offset": [r.offset for r in records],
            "timestamp": [r.timestamp_ms * 1000 for r in records],  # microseconds
            "key": [r.key for r in records],
            "value": [orjson.dumps(v) for v in values],
        }
        for f in self.fields:
            columns[f.column] = [v.get(f.name) for v in values]
        return pa.RecordBatch.from_pydict(columns, schema=self._arrow)
