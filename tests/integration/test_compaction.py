"""A compacted topic written by confluent-kafka, cleaned by the broker's log cleaner, read back by kcat."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .harness import BrokerProcess, wait_until
from .test_kcat import kcat

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEYS = 40
DELETED = {f"key-{i}" for i in range(0, KEYS, 8)}


def _read_all(broker: BrokerProcess, topic: str) -> list[tuple[int, str, str | None]]:
    out = kcat("-b", broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-Z", "-q",
               "-f", "%o\t%k\t%s\n").stdout.decode()
    rows = []
    for line in out.splitlines():
        offset, key, value = line.split("\t")
        rows.append((int(offset), key, None if value == "NULL" else value))
    return rows


def test_compacted_topic_is_cleaned(broker_factory: Callable[..., BrokerProcess], topic: str) -> None:
    broker = broker_factory({"log.cleaner.backoff.ms": "100"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    configs = {"cleanup.policy": "compact", "segment.bytes": "8192", "min.cleanable.dirty.ratio": "0.01",
               "delete.retention.ms": "1"}
    for f in admin.create_topics([NewTopic(topic, 1, 1, config=configs)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "compression.type": "lz4"})
    latest: dict[str, str | None] = {}
    for version in range(10):
        for i in range(KEYS):
            key = f"key-{i}"
            value = None if version == 9 and key in DELETED else f"v{version}-{i}-" + "x" * 40
            producer.produce(topic, key=key, value=value)
            latest[key] = value
    assert producer.flush(30) == 0
    # a record without a key is refused on a compacted topic
    errors: list[KafkaException] = []
    producer.produce(topic, value=b"no key", on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert producer.flush(30) == 0
    assert errors and errors[0].name() == "INVALID_RECORD", errors
    written = 10 * KEYS
    filler = 0

    def compacted() -> list[tuple[int, str, str | None]] | None:
        # keep rolling segments (filler keys) so tombstones, once cleaned, are cleaned again past their horizon
        nonlocal filler
        for _ in range(30):
            producer.produce(topic, key=f"filler-{filler % 5}", value="f" * 200)
            filler += 1
        producer.flush(30)
        rows = _read_all(broker, topic)
        main = [r for r in rows if r[1].startswith("key-")]
        keys = [k for _, k, _ in main]
        if len(keys) != len(set(keys)) or any(v is None for _, _, v in main):
            return None
        return rows

    rows = wait_until(compacted, 90, "the log cleaner to compact the topic", interval=0.5)
    offsets = [o for o, _, _ in rows]
    assert offsets == sorted(set(offsets))
    got = {k: v for _, k, v in rows if k.startswith("key-")}
    assert got == {k: v for k, v in latest.items() if v is not None}
    assert len(rows) < written
    metrics = broker.fetch_metrics()
    assert "moldau_log_cleaner_runs_total" in metrics
    runs = [float(line.split()[-1]) for line in metrics.splitlines()
            if line.startswith("moldau_log_cleaner_runs_total")]
    assert runs and runs[0] >= 2


def test_consumer_offsets_shrink_after_many_commits(
    broker_factory: Callable[..., BrokerProcess], topic: str
) -> None:
    from confluent_kafka import Consumer, TopicPartition

    broker = broker_factory({"log.cleaner.backoff.ms": "100", "offsets.topic.num.partitions": "1",
                             "offsets.topic.segment.bytes": "4096", "offsets.topic.replication.factor": "1"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        f.result(30)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic}",
                         "enable.auto.commit": False})
    try:
        commits = 0

        def commit(n: int) -> None:
            nonlocal commits
            for _ in range(n):
                commits += 1
                consumer.commit(offsets=[TopicPartition(topic, 0, commits), TopicPartition(topic, 1, commits)],
                                asynchronous=False)

        commit(300)
        written = sum(p.stat().st_size for p in broker.partition_dir("__consumer_offsets").glob("*.log*"))

        def shrunk() -> int | None:
            commit(10)  # keeps rolling segments so the cleaner has sealed, dirty ones to work on
            size = sum(p.stat().st_size for p in broker.partition_dir("__consumer_offsets").glob("*.log"))
            return size if size < written / 3 else None

        wait_until(shrunk, 90, "__consumer_offsets to be compacted", interval=0.3)
        got = consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=30)
        assert [tp.offset for tp in got] == [commits, commits]
    finally:
        consumer.close()
