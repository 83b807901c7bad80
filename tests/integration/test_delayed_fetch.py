"""Delayed fetch (purgatory): a fetch waits up to max_wait_ms for min_bytes, and a produce wakes it early."""

from __future__ import annotations

import struct
import threading
import time
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from .clients import ck_consumer, kp_produce, make_records
from .harness import BrokerProcess, RawConnection

pytestmark = pytest.mark.integration

FETCH = 1
FETCH_V = 4


def fetch_v4_body(topic: str, offset: int, max_wait_ms: int, min_bytes: int, max_bytes: int = 1 << 20) -> bytes:
    name = topic.encode()
    return (
        struct.pack(">iiiib", -1, max_wait_ms, min_bytes, max_bytes, 0)  # replica, wait, min, max, isolation
        + struct.pack(">ih", 1, len(name))
        + name
        + struct.pack(">iiqi", 1, 0, offset, max_bytes)  # one partition: index 0
    )


def parse_fetch_v4(frame: bytes, correlation_id: int) -> tuple[int, int, int]:
    """Returns (error_code, high_watermark, records_size) of the single partition in a Fetch v4 response."""
    corr, _throttle, n_topics = struct.unpack_from(">iii", frame, 0)
    assert corr == correlation_id and n_topics == 1
    pos = 12
    (name_len,) = struct.unpack_from(">h", frame, pos)
    pos += 2 + name_len
    (n_parts,) = struct.unpack_from(">i", frame, pos)
    assert n_parts == 1
    pos += 4
    _index, error, hw, _lso, n_aborted = struct.unpack_from(">ihqqi", frame, pos)
    pos += 4 + 2 + 8 + 8 + 4 + max(n_aborted, 0) * 16
    (records_size,) = struct.unpack_from(">i", frame, pos)
    return error, hw, max(records_size, 0)


def timed_fetch(broker: BrokerProcess, topic: str, offset: int, max_wait_ms: int, min_bytes: int) -> tuple[float, int, int]:
    """Sends one raw Fetch v4 and returns (seconds until the response, error_code, records bytes)."""
    with RawConnection(broker.port, timeout=max_wait_ms / 1000 + 10) as conn:
        start = time.monotonic()
        conn.request(FETCH, FETCH_V, 7, fetch_v4_body(topic, offset, max_wait_ms, min_bytes))
        frame = conn.recv_frame()
        elapsed = time.monotonic() - start
    error, _hw, size = parse_fetch_v4(frame, 7)
    return elapsed, error, size


def one_record_topic(broker: BrokerProcess, topic: str) -> None:
    assert kp_produce(broker.bootstrap, topic, make_records(1, tag="seed", with_nulls=False), acks=-1) == [0]


def test_fetch_with_data_returns_at_once(broker: BrokerProcess, topic: str) -> None:
    one_record_topic(broker, topic)
    elapsed, error, size = timed_fetch(broker, topic, offset=0, max_wait_ms=5000, min_bytes=1)
    assert error == 0 and size > 0
    assert elapsed < 1.0, f"fetch with data available took {elapsed:.2f}s"


def test_fetch_at_log_end_waits_max_wait(broker: BrokerProcess, topic: str) -> None:
    one_record_topic(broker, topic)
    elapsed, error, size = timed_fetch(broker, topic, offset=1, max_wait_ms=1000, min_bytes=1)
    assert error == 0 and size == 0
    assert 0.85 <= elapsed <= 3.0, f"fetch at the log end returned after {elapsed:.2f}s, expected ~1.0s"


def test_fetch_below_min_bytes_waits_then_returns_what_there_is(broker: BrokerProcess, topic: str) -> None:
    one_record_topic(broker, topic)
    elapsed, error, size = timed_fetch(broker, topic, offset=0, max_wait_ms=1000, min_bytes=1_000_000)
    assert error == 0 and size > 0, "after max wait the fetch must return the data it has"
    assert 0.85 <= elapsed <= 3.0, f"fetch with min_bytes unmet returned after {elapsed:.2f}s, expected ~1.0s"


def test_produce_wakes_a_waiting_raw_fetch(broker: BrokerProcess, topic: str) -> None:
    one_record_topic(broker, topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, enable_idempotence=False)
    try:
        producer.partitions_for(topic)  # metadata and connection ready before the clock starts

        def produce_later() -> None:
            time.sleep(0.5)
            producer.send(topic, value=b"wake up", partition=0).get(timeout=10)

        thread = threading.Thread(target=produce_later, daemon=True)
        thread.start()
        elapsed, error, size = timed_fetch(broker, topic, offset=1, max_wait_ms=5000, min_bytes=1)
        thread.join(timeout=15)
    finally:
        producer.close(timeout=10)
    assert error == 0 and size > 0
    assert 0.4 <= elapsed < 2.0, f"produce after 0.5s should complete the 5s fetch early; took {elapsed:.2f}s"


def test_kafka_python_consumer_is_woken_by_produce(broker: BrokerProcess, topic: str) -> None:
    one_record_topic(broker, topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, enable_idempotence=False)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=5000,
        fetch_min_bytes=1,
        request_timeout_ms=30000,
    )
    try:
        producer.partitions_for(topic)
        tp = KpTopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 1)
        assert consumer.poll(timeout_ms=300) == {}  # the first fetch is now parked at the broker
        acked_at: list[float] = []

        def produce_later() -> None:
            time.sleep(0.5)
            producer.send(topic, value=b"wake up", partition=0).get(timeout=10)
            acked_at.append(time.monotonic())

        thread = threading.Thread(target=produce_later, daemon=True)
        thread.start()
        start = time.monotonic()
        received: list[Any] = []
        while not received and time.monotonic() - start < 15:
            for batch in consumer.poll(timeout_ms=100).values():
                received.extend(batch)
        received_at = time.monotonic()
        thread.join(timeout=15)
    finally:
        consumer.close()
        producer.close(timeout=10)
    assert [m.value for m in received] == [b"wake up"]
    assert acked_at, "the produce did not complete"
    latency = received_at - acked_at[0]
    assert latency < 1.5, f"record reached the consumer {latency:.2f}s after it was acknowledged (max wait 5s)"


def test_confluent_consumer_is_woken_by_produce(broker: BrokerProcess, topic: str) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    producer.produce(topic, value=b"seed", partition=0)
    assert producer.flush(20) == 0
    consumer = ck_consumer(broker.bootstrap, **{"fetch.wait.max.ms": 5000, "fetch.min.bytes": 1})
    try:
        consumer.assign([TopicPartition(topic, 0, 1)])
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:  # let the consumer reach the log end and park a fetch
            msg = consumer.poll(0.1)
            assert msg is None or msg.error() is None, msg.error()
            assert msg is None, f"unexpected record at offset {msg.offset()}"
        acked_at: list[float] = []

        def produce_later() -> None:
            time.sleep(0.5)
            producer.produce(topic, value=b"wake up", partition=0)
            producer.flush(10)
            acked_at.append(time.monotonic())

        thread = threading.Thread(target=produce_later, daemon=True)
        thread.start()
        start = time.monotonic()
        msg = None
        while msg is None and time.monotonic() - start < 15:
            msg = consumer.poll(0.05)
        received_at = time.monotonic()
        thread.join(timeout=15)
    finally:
        consumer.close()
    assert msg is not None and msg.error() is None, msg and msg.error()
    assert msg.value() == b"wake up"
    assert acked_at, "the produce did not complete"
    latency = received_at - acked_at[0]
    assert latency < 1.5, f"record reached the consumer {latency:.2f}s after it was acknowledged (max wait 5s)"
