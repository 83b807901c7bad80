"""The sink: rows with Spark's Kafka-sink columns produced through Moldau's idempotent producer.

Columns: ``value`` (required), ``key``, ``topic`` (the ``topic`` option overrides it, as in Spark),
``partition``, ``headers`` (array<struct<key string, value binary>>); key/value may be binary or string.
Delivery is at least once, like Spark's sink: a failed or retried Spark task writes its rows again. Inside a task
the producer is idempotent (``enable.idempotence=true``), so its own retries never duplicate a record.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from moldau.config import producer_config
from moldau.producer import Producer, RecordMetadata
from moldau.spark.options import SinkOptions, SourceOptionError

log = logging.getLogger("moldau.spark")

SINK_COLUMNS = ("key", "value", "topic", "partition", "headers")
_YIELD_EVERY = 512  # rows between hand-overs to the producer's sender task


@dataclass
class WriteResult:
    """What one task reports to the driver (Spark's WriterCommitMessage)."""
    rows: int


def check_columns(columns: Sequence[str], options: SinkOptions) -> None:
    """Spark's checks of the sink's input: a value column, a topic from the option or a column."""
    names = {c.lower() for c in columns}
    if "value" not in names:
        raise SourceOptionError("Required attribute 'value' not found in the DataFrame written to moldau")
    if options.topic is None and "topic" not in names:
        raise SourceOptionError("topic option required when no 'topic' attribute is present. Use the 'topic' "
                                "option for setting a topic.")


def _bytes(value: Any, column: str) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise SourceOptionError(f"{column} attribute type must be a string or binary, got {type(value).__name__}")


def _headers(value: Any) -> list[tuple[str, bytes | None]] | None:
    if not value:
        return None
    # A pyspark Row (key, value) or, from an Arrow batch, a dict {"key": ..., "value": ...}.
    return [(str(h["key"]), _bytes(h["value"], "headers.value")) if isinstance(h, dict)
            else (str(h[0]), _bytes(h[1], "headers.value")) for h in value]


# One record as the producer takes it: (topic, value, key, partition, headers).
Record = tuple[str | None, bytes | None, bytes | None, int | None, list[tuple[str, bytes | None]] | None]


def _from_rows(rows: Iterator[Any]) -> Iterator[Record]:
    fields: dict[str, int] | None = None
    for row in rows:
        if fields is None:
            fields = {name.lower(): i for i, name in enumerate(row.__fields__)}
        yield (row[fields["topic"]] if "topic" in fields else None,
               _bytes(row[fields["value"]], "value"),
               _bytes(row[fields["key"]], "key") if "key" in fields else None,
               row[fields["partition"]] if "partition" in fields else None,
               _headers(row[fields["headers"]]) if "headers" in fields else None)


def _from_arrow(batches: Iterator[Any]) -> Iterator[Record]:
    """Records of Arrow record batches: each column becomes a Python list once per batch, not per row."""
    for batch in batches:
        n = batch.num_rows
        cols = {name.lower(): batch.column(i).to_pylist() for i, name in enumerate(batch.schema.names)}
        none = [None] * n
        headers = [_headers(h) for h in cols["headers"]] if "headers" in cols else none
        # String key/value columns arrive as str; _write encodes them.
        yield from zip(cols.get("topic", none), cols["value"], cols.get("key", none), cols.get("partition", none),
                       headers)


def write_rows(options: SinkOptions, rows: Iterator[Any]) -> WriteResult:
    """Produces ``rows`` (pyspark Rows) and waits until every one is acknowledged; raises the first failure."""
    return _run(options, _from_rows(rows))


def write_arrow(options: SinkOptions, batches: Iterator[Any]) -> WriteResult:
    """Like :func:`write_rows` for Arrow record batches (the faster way rows cross from the JVM)."""
    return _run(options, _from_arrow(batches))


def _run(options: SinkOptions, records: Iterator[Record]) -> WriteResult:
    config = {"enable.idempotence": "true", **options.client_config}
    producer_config(config)  # bad kafka.* settings fail here, naming the key, before any row is consumed
    return asyncio.run(_write(config, options.topic, records))


async def _write(config: dict[str, Any], topic_option: str | None, records: Iterator[Record]) -> WriteResult:
    producer = Producer(config)
    await producer.start()
    futures: list[asyncio.Future[RecordMetadata]] = []
    count = 0
    try:
        for row_topic, value, key, partition, headers in records:
            topic = topic_option or row_topic
            if not topic:
                raise SourceOptionError(f"row {count} has a null topic and no 'topic' option is set")
            if not isinstance(value, bytes | None):  # str (a string column), bytearray, ...
                value = _bytes(value, "value")
            if not isinstance(key, bytes | None):
                key = _bytes(key, "key")
            fut = producer.send_nowait(topic, value, key, partition=partition, headers=headers)
            if fut is None:
                fut = await producer.send(topic, value, key, partition=partition, headers=headers)
            futures.append(fut)
            count += 1
            if count % _YIELD_EVERY == 0:
                await asyncio.sleep(0)
        await producer.flush()
        for fut in futures:
            fut.result()  # raises the delivery error of a failed record
    finally:
        await producer.close()
    return WriteResult(count)
