"""Test data and small bounded helpers around the real Kafka clients (no mocks: these talk to a broker)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]

Headers = list[tuple[str, bytes | None]]


@dataclass(frozen=True, slots=True)
class Rec:
    key: bytes | None
    value: bytes | None
    headers: Headers


def make_records(n: int, tag: str, with_nulls: bool = True) -> list[Rec]:
    """Keyed records with headers and compressible values; a few edge cases (null key, empty and null value)."""
    records = []
    for i in range(n):
        key: bytes | None = f"key-{i}".encode()
        value: bytes | None = f"{tag} value {i} ".encode() + b"lorem ipsum dolor sit amet " * (i % 7 + 1)
        headers: Headers = [("index", str(i).encode()), ("tag", tag.encode())]
        if with_nulls:
            if i == 3:
                key = None
            elif i == 5:
                value = b""
            elif i == 7:
                value = None  # a tombstone: null value, key present
            elif i == 9:
                headers = []
        records.append(Rec(key, value, headers))
    return records


def norm_headers(headers: Any) -> Headers:
    """Headers as a list of (str, bytes | None), whatever shape the client returned."""
    if not headers:
        return []
    out: Headers = []
    for k, v in headers:
        out.append((k.decode() if isinstance(k, bytes) else str(k), None if v is None else bytes(v)))
    return out


# --------------------------------------------------------------------------------------------------------
# kafka-python


def kp_consume(
    bootstrap: str,
    topic: str,
    count: int,
    partition: int = 0,
    start_offset: int | None = 0,
    timeout: float = 30.0,
    **config: Any,
) -> list[Any]:
    """Reads `count` records from one partition with kafka-python (explicit assignment, no group, no commit)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=20000,
        **config,
    )
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        if start_offset is None:
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, start_offset)
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(out) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"kafka-python consumer got {len(out)} of {count} records in {timeout}s")
            batch = consumer.poll(timeout_ms=500)
            for records in batch.values():
                out.extend(records)
        return out
    finally:
        consumer.close()


def kp_produce(bootstrap: str, topic: str, records: list[Rec], partition: int | None = 0, **config: Any) -> list[int]:
    """Produces with kafka-python and returns the acknowledged offsets, in send order."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=20000, **config)
    try:
        futures = [
            producer.send(topic, key=r.key, value=r.value, headers=r.headers, partition=partition)
            for r in records
        ]
        producer.flush(timeout=30)
        return [f.get(timeout=30).offset for f in futures]
    finally:
        producer.close(timeout=10)


# --------------------------------------------------------------------------------------------------------
# confluent-kafka


def ck_consumer(bootstrap: str, **config: Any) -> Any:
    """A confluent-kafka consumer for explicit assignment. librdkafka wants a group.id; nothing is committed."""
    from confluent_kafka import Consumer

    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": "moldau-tests-no-commit",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
    }
    conf.update(config)
    return Consumer(conf)


def ck_consume(
    bootstrap: str,
    topic: str,
    count: int,
    partition: int = 0,
    start_offset: int | None = None,
    timeout: float = 30.0,
    **config: Any,
) -> list[Any]:
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    consumer = ck_consumer(bootstrap, **config)
    try:
        offset = OFFSET_BEGINNING if start_offset is None else start_offset
        consumer.assign([TopicPartition(topic, partition, offset)])
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(out) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"confluent consumer got {len(out)} of {count} records in {timeout}s")
            msgs = consumer.consume(num_messages=min(10000, count - len(out)), timeout=0.5)
            for m in msgs:
                if m.error() is not None:
                    raise AssertionError(f"consumer error: {m.error()}")
                out.append(m)
        return out
    finally:
        consumer.close()
