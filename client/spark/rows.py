"""The read schema (Spark's Kafka source's) and fetched records turned into its rows.

Rows cross to the JVM as Arrow record batches: one batch per fetched chunk, built column by column (no per-row
Python objects beyond the decoded record tuples). ``to_tuples`` is the plain-row path, kept for comparison
(docs/benchmarks.md has both rates).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

from moldau.fetcher import ConsumerRecord

BASE_DDL = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
            "timestampType int")
HEADERS_DDL = BASE_DDL + ", headers array<struct<key: string, value: binary>>"


def schema_ddl(include_headers: bool) -> str:
    return HEADERS_DDL if include_headers else BASE_DDL


def arrow_schema(include_headers: bool) -> Any:
    import pyarrow as pa  # only executors reading rows need pyarrow

    fields = [pa.field("key", pa.binary()), pa.field("value", pa.binary()), pa.field("topic", pa.string()),
              pa.field("partition", pa.int32()), pa.field("offset", pa.int64()),
              pa.field("timestamp", pa.timestamp("us", tz="UTC")), pa.field("timestampType", pa.int32())]
    if include_headers:
        fields.append(pa.field("headers", pa.list_(pa.struct([pa.field("key", pa.string()),
                                                             pa.field("value", pa.binary())]))))
    return pa.schema(fields)


def to_arrow(records: list[ConsumerRecord], include_headers: bool, schema: Any) -> Any:
    """One Arrow record batch of ``records`` (all of one partition)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(records)
    topic, partition = records[0].topic, records[0].partition
    _, _, offsets, timestamps, ts_types, keys, values, headers = zip(*records)
    ts = pa.array(timestamps, pa.int64())
    columns = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(offsets, pa.int64()),
        pc.multiply(ts, 1000).cast(pa.timestamp("us", tz="UTC")),
        pa.array(ts_types, pa.int32()),
    ]
    if include_headers:
        columns.append(pa.array([[{"key": k, "value": v} for k, v in h] for h in headers],
                                schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def to_tuples(records: list[ConsumerRecord], include_headers: bool) -> Iterator[tuple[Any, ...]]:
    """Plain rows (the non-Arrow path)."""
    for r in records:
        row = (r.key, r.value, r.topic, r.partition, r.offset, _EPOCH + dt.timedelta(milliseconds=r.timestamp),
               r.timestamp_type)
        yield row + ([(k, v) for k, v in r.headers],) if include_headers else row
