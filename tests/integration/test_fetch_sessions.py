"""Consumers' incremental fetch sessions (KIP-227) against a real broker: kafka-python asks for one and gets it,
and records produced while it polls still arrive through its incremental fetches, in order, none lost; the broker
counts the session and its partitions (moldau_incremental_fetch_sessions, ..._partitions_cached)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from .harness import BrokerProcess, wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 12


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of this test's own: the session gauges count only its fetchers."""
    broker = BrokerProcess(tmp_path / "broker", overrides={"num.partitions": str(PARTITIONS)}).start()
    try:
        yield broker
    finally:
        broker.kill()


def _produce(bootstrap: str, topic: str, tag: str) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, enable_idempotence=False, linger_ms=5)
    try:
        for p in range(PARTITIONS):
            for i in range(5):
                producer.send(topic, value=f"{tag}-{p}-{i}".encode(), partition=p)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)


def _consume(consumer: KafkaConsumer, want: int, deadline_s: float = 60.0) -> dict[int, list[str]]:
    got: dict[int, list[str]] = {}
    deadline = time.monotonic() + deadline_s
    while sum(map(len, got.values())) < want and time.monotonic() < deadline:
        for tp, msgs in consumer.poll(timeout_ms=200).items():
            got.setdefault(tp.partition, []).extend(m.value.decode() for m in msgs)
    return got


def test_kafka_python_consumes_through_an_incremental_session(own_broker: BrokerProcess) -> None:
    topic = "sessions"
    _produce(own_broker.bootstrap, topic, "a")
    consumer = KafkaConsumer(bootstrap_servers=own_broker.bootstrap, enable_auto_commit=False,
                             fetch_max_wait_ms=100, request_timeout_ms=20000)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        first = _consume(consumer, 5 * PARTITIONS)
        assert first == {p: [f"a-{p}-{i}" for i in range(5)] for p in range(PARTITIONS)}
        # One session (this broker has no followers), holding every assigned partition.
        wait_until(lambda: own_broker.gauge("moldau_incremental_fetch_sessions") == 1, 15, "one fetch session")
        assert own_broker.gauge("moldau_incremental_fetch_partitions_cached") == PARTITIONS
        # New records while the consumer polls: its incremental fetches name no partition, the session's changed
        # set brings them.
        _produce(own_broker.bootstrap, topic, "b")
        second = _consume(consumer, 5 * PARTITIONS)
        assert second == {p: [f"b-{p}-{i}" for i in range(5)] for p in range(PARTITIONS)}
        assert own_broker.gauge("moldau_incremental_fetch_sessions") == 1  # the same session throughout
    finally:
        consumer.close()


def test_moldau_consumer_uses_a_session_and_forgets_unassigned_partitions(own_broker: BrokerProcess) -> None:
    """Moldau's consumer opens a session too; after a seek it names the moved partition again (the records
    re-read), and an unassigned partition leaves the session (forgotten), so it stops being cached."""
    import asyncio

    from moldau.consumer import Consumer
    from moldau.consumer import TopicPartition as MTP

    topic = "moldau-sessions"
    _produce(own_broker.bootstrap, topic, "a")

    async def run() -> None:
        async with Consumer({"bootstrap.servers": own_broker.bootstrap, "fetch.max.wait.ms": 100,
                             "enable.auto.commit": False}) as consumer:
            consumer.assign([MTP(topic, p) for p in range(PARTITIONS)])
            consumer.seek_to_beginning()

            async def take(want: int) -> dict[int, list[str]]:
                got: dict[int, list[str]] = {}
                deadline = time.monotonic() + 60
                while sum(map(len, got.values())) < want:
                    assert time.monotonic() < deadline, got
                    for tp, records in (await consumer.getmany(timeout_ms=200)).items():
                        got.setdefault(tp.partition, []).extend(r.value.decode() for r in records)
                return got

            assert await take(5 * PARTITIONS) == {p: [f"a-{p}-{i}" for i in range(5)] for p in range(PARTITIONS)}
            wait_until(lambda: own_broker.gauge("moldau_incremental_fetch_sessions") == 1, 15, "one session")
            assert own_broker.gauge("moldau_incremental_fetch_partitions_cached") == PARTITIONS
            consumer.seek(MTP(topic, 3), 2)
            assert await take(3) == {3: ["a-3-2", "a-3-3", "a-3-4"]}
            _produce(own_broker.bootstrap, topic, "b")
            assert await take(5 * PARTITIONS) == {p: [f"b-{p}-{i}" for i in range(5)] for p in range(PARTITIONS)}
            consumer.assign([MTP(topic, p) for p in range(PARTITIONS // 2)])
            _produce(own_broker.bootstrap, topic, "c")
            half = PARTITIONS // 2
            assert await take(5 * half) == {p: [f"c-{p}-{i}" for i in range(5)] for p in range(half)}
            # The consumer keeps fetching meanwhile (a blocking wait here would stop its fetches).
            deadline = time.monotonic() + 15
            while own_broker.gauge("moldau_incremental_fetch_partitions_cached") != half:
                assert time.monotonic() < deadline, "the unassigned partitions were not forgotten"
                assert not await consumer.getmany(timeout_ms=100)  # nothing more was produced
            assert own_broker.gauge("moldau_incremental_fetch_sessions") == 1

    asyncio.run(run())
