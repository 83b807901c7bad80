"""Restarts, kill -9 and tampered files: every acknowledged record survives; torn tails and lost indexes heal."""

from __future__ import annotations

import signal
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from .clients import kp_consume, kp_produce, make_records, norm_headers
from .harness import BrokerProcess

pytestmark = pytest.mark.integration


def end_offset(bootstrap: str, topic: str, partition: int = 0) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, partition)
        return int(consumer.end_offsets([tp], timeout_ms=20000)[tp])
    finally:
        consumer.close()


def segment_files(broker: BrokerProcess, topic: str, suffix: str) -> list[Path]:
    return sorted(broker.partition_dir(topic).glob(f"*{suffix}"))


def test_sigterm_restart_keeps_every_record(fresh_broker: BrokerProcess, topic: str) -> None:
    expected = make_records(300, tag="restart")
    for i, codec in enumerate(("none", "zstd", "gzip")):
        chunk = expected[i * 100 : (i + 1) * 100]
        offsets = kp_produce(fresh_broker.bootstrap, topic, chunk, compression_type=None if codec == "none" else codec)
        assert offsets == list(range(i * 100, (i + 1) * 100))

    assert fresh_broker.stop(signal.SIGTERM) == 0, "SIGTERM must be a clean shutdown (exit code 0)"
    fresh_broker.start()
    assert end_offset(fresh_broker.bootstrap, topic) == 300
    got = kp_consume(fresh_broker.bootstrap, topic, 300)
    assert [m.offset for m in got] == list(range(300))
    assert [(m.key, m.value, norm_headers(m.headers)) for m in got] == [(r.key, r.value, r.headers) for r in expected]

    # And it keeps appending after the last offset.
    assert kp_produce(fresh_broker.bootstrap, topic, make_records(5, tag="after", with_nulls=False)) == list(
        range(300, 305)
    )


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_kill_9_during_writes_keeps_every_acknowledged_record(fresh_broker: BrokerProcess, topic: str) -> None:
    acked: dict[int, bytes] = {}  # offset -> value
    failed = 0
    lock = threading.Lock()
    stop = threading.Event()
    producer = Producer(
        {
            "bootstrap.servers": fresh_broker.bootstrap,
            "acks": "all",
            "linger.ms": 2,
            "message.timeout.ms": 4000,
            "retries": 0,  # a retry after the kill could duplicate; we only care about what was acknowledged
            "compression.type": "lz4",
        }
    )

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        nonlocal failed
        with lock:
            if err is None:
                acked[msg.offset()] = msg.value()
            else:
                failed += 1

    def write_loop() -> None:
        i = 0
        while not stop.is_set():
            try:
                producer.produce(topic, value=b"rec-%08d" % i, key=b"k", partition=0, on_delivery=on_delivery)
                i += 1
            except BufferError:
                producer.poll(0.01)
            producer.poll(0.001 if i % 100 == 0 else 0)

    # Make sure the topic exists before the writer starts.
    kp_produce(fresh_broker.bootstrap, topic, make_records(1, tag="first", with_nulls=False), acks=-1)
    writer = threading.Thread(target=write_loop, daemon=True)
    writer.start()
    try:
        deadline = time.monotonic() + 30
        while len(acked) < 5000 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(acked) >= 5000, f"only {len(acked)} records acknowledged in 30 s before the kill"
        fresh_broker.kill()  # SIGKILL, mid-stream
        time.sleep(0.5)
    finally:
        stop.set()
        writer.join(timeout=10)
    producer.flush(10)  # undelivered messages time out (message.timeout.ms) and report errors

    with lock:
        snapshot = dict(acked)
    assert snapshot, "nothing was acknowledged"
    fresh_broker.start()
    leo = end_offset(fresh_broker.bootstrap, topic)
    assert leo >= max(snapshot) + 1, f"log end offset {leo} is before acknowledged offset {max(snapshot)}"
    got = kp_consume(fresh_broker.bootstrap, topic, leo, timeout=60)
    stored = {m.offset: m.value for m in got}
    assert sorted(stored) == list(range(leo)), "offsets after recovery are not contiguous"
    missing = [o for o, v in snapshot.items() if stored.get(o) != v]
    assert not missing, f"{len(missing)} acknowledged records lost or changed, e.g. offsets {missing[:10]}"


@pytest.mark.parametrize("how", ["sigterm", "kill"])
def test_torn_tail_is_truncated_on_restart(fresh_broker: BrokerProcess, topic: str, how: str) -> None:
    records = make_records(50, tag="torn")
    kp_produce(fresh_broker.bootstrap, topic, records, compression_type="snappy")

    def append_garbage() -> None:
        active = segment_files(fresh_broker, topic, ".log")[-1]
        with open(active, "ab") as f:
            # A plausible batch start (offset 50, length 1000) followed by too few, random bytes.
            f.write((50).to_bytes(8, "big") + (1000).to_bytes(4, "big") + bytes(range(200)))

    if how == "kill":
        fresh_broker.kill()
    else:
        assert fresh_broker.stop(signal.SIGTERM) == 0
    append_garbage()
    fresh_broker.start()
    assert end_offset(fresh_broker.bootstrap, topic) == 50
    got = kp_consume(fresh_broker.bootstrap, topic, 50)
    assert [(m.offset, m.key, m.value) for m in got] == [(i, r.key, r.value) for i, r in enumerate(records)]
    # New appends go right after the last good record, and are readable.
    more = make_records(5, tag="after", with_nulls=False)
    assert kp_produce(fresh_broker.bootstrap, topic, more) == list(range(50, 55))
    got = kp_consume(fresh_broker.bootstrap, topic, 5, start_offset=50)
    assert [m.value for m in got] == [r.value for r in more]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_deleted_index_is_rebuilt(broker_factory: Callable[..., BrokerProcess], topic: str) -> None:
    broker = broker_factory({"log.segment.bytes": str(1024 * 1024)})
    value = b"x" * 1000
    # ~3 MiB: at least three segments of 1 MiB.
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, linger_ms=5, enable_idempotence=False)
    try:
        futures = [producer.send(topic, key=b"%d" % i, value=value, partition=0) for i in range(3000)]
        producer.flush(timeout=60)
        assert [f.get(timeout=30).offset for f in futures] == list(range(3000))
    finally:
        producer.close(timeout=10)

    logs = segment_files(broker, topic, ".log")
    assert len(logs) >= 3, f"expected several segments with log.segment.bytes=1MiB, got {[p.name for p in logs]}"
    assert broker.stop(signal.SIGTERM) == 0
    indexes = segment_files(broker, topic, ".index")
    assert indexes, "no .index files were written"
    for index in indexes:
        index.unlink()
    broker.start()

    # Reads at many offsets (each needs an offset lookup) return the right records.
    for start in (0, 1, 999, 1000, 1500, 2047, 2999):
        first = kp_consume(broker.bootstrap, topic, 1, start_offset=start)[0]
        assert (first.offset, first.key) == (start, b"%d" % start)
    got = kp_consume(broker.bootstrap, topic, 3000, timeout=60)
    assert [int(m.key) for m in got] == list(range(3000))
    # Index entries may sit in a write buffer while the broker runs; after a clean stop they are on disk.
    assert broker.stop(signal.SIGTERM) == 0
    for log in logs[:-1]:
        index = log.with_suffix(".index")
        assert index.exists(), f"{index.name} was not rebuilt"
        data = index.read_bytes()
        assert data and len(data) % 8 == 0, f"{index.name}: {len(data)} bytes"
        entries = list(struct.iter_unpack(">ii", data))
        rel_offsets = [e[0] for e in entries]
        positions = [e[1] for e in entries]
        assert rel_offsets == sorted(set(rel_offsets)) and positions == sorted(set(positions)), index.name
        assert 0 <= positions[0] and positions[-1] < log.stat().st_size, index.name
