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
    return [(str(h[0]), _bytes(h[1], "headers.value")) for h in value]


def write_rows(options: SinkOptions, rows: Iterator[Any]) -> WriteResult:
    """Produces ``rows`` (pyspark Rows) and waits until every one is acknowledged; raises the first failure."""
    config = {"enable.idempotence": "true", **options.client_config}
    producer_config(config)  # bad kafka.* settings fail here, naming the key, before any row is consumed
    return asyncio.run(_write(config, options.topic, rows))


async def _write(config: dict[str, Any], topic_option: str | None, rows: Iterator[Any]) -> WriteResult:
    producer = Producer(config)
    await producer.start()
    futures: list[asyncio.Future[RecordMetadata]] = []
    count = 0
    try:
        fields: dict[str, int] | None = None
        for row in rows:
            if fields is None:
                fields = {name.lower(): i for i, name in enumerate(row.__fields__)}
            topic = topic_option or (row[fields["topic"]] if "topic" in fields else None)
            if not topic:
                raise SourceOptionError(f"row {count} has a null topic and no 'topic' option is set")
            value = _bytes(row[fields["value"]], "value")
            key = _bytes(row[fields["key"]], "key") if "key" in fields else None
            partition = row[fields["partition"]] if "partition" in fields else None
            headers = _headers(row[fields["headers"]]) if "headers" in fields else None
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
