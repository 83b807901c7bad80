"""The moldau Spark data source, batch: exact offset ranges of topics written by confluent-kafka and kcat,
timestamps, headers, minPartitions, failOnDataLoss after retention deleted records, and batch writes."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient as CKAdmin
from confluent_kafka.admin import NewTopic as CKNewTopic

from .harness import BrokerProcess, wait_until
from .spark_session import spark_session  # noqa: F401  (the session-wide Spark fixture, `spark`)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BASE_TS = 1_700_000_000_000
PER_PARTITION = 50
ROW = "partition, offset, key, value, unix_millis(timestamp) AS ts, timestampType, topic"


def create_topic(bootstrap: str, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
    admin = CKAdmin({"bootstrap.servers": bootstrap})
    admin.create_topics([CKNewTopic(name, partitions, 1, config=config or {})])[name].result(30)


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int, ts: Callable[[int], int]) -> None:
    """Record i of partition p: key k{p}-{i}, value v{p}-{i}, timestamp ts(i), header n=i on even i."""
    p = CKProducer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for part in range(partitions):
        for i in range(per_partition):
            p.produce(topic, value=f"v{part}-{i}".encode(), key=f"k{part}-{i}".encode(), partition=part,
                      timestamp=ts(i), headers=[("n", str(i).encode())] if i % 2 == 0 else None)
    assert p.flush(30) == 0


def read(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format("moldau").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def rows(df: Any) -> set[tuple[Any, ...]]:
    return {(r.partition, r.offset, bytes(r.key), bytes(r.value), r.ts, r.timestampType, r.topic)
            for r in df.selectExpr(*ROW.split(", ")).collect()}


def expected(topic: str, ranges: dict[int, range]) -> set[tuple[Any, ...]]:
    return {(p, i, f"k{p}-{i}".encode(), f"v{p}-{i}".encode(), BASE_TS + 10 * i, 0, topic)
            for p, offsets in ranges.items() for i in offsets}


@pytest.fixture(scope="module")
def two_partitions(_session_broker: BrokerProcess) -> tuple[str, str]:
    topic = f"spark-batch-{time.time_ns()}"
    create_topic(_session_broker.bootstrap, topic, 2)
    produce(_session_broker.bootstrap, topic, 2, PER_PARTITION, lambda i: BASE_TS + 10 * i)
    return _session_broker.bootstrap, topic


def test_batch_reads_exact_offset_ranges(spark: Any, two_partitions: tuple[str, str]) -> None:
    bootstrap, topic = two_partitions
    everything = range(PER_PARTITION)
    df = read(spark, bootstrap, subscribe=topic)
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert rows(df) == expected(topic, {0: everything, 1: everything})
    assert df.rdd.getNumPartitions() == 2  # one input partition per topic-partition
    df = read(spark, bootstrap, subscribe=topic, startingOffsets=f'{{"{topic}":{{"0":10,"1":-2}}}}',
              endingOffsets=f'{{"{topic}":{{"0":20,"1":-1}}}}')
    assert rows(df) == expected(topic, {0: range(10, 20), 1: everything})
    df = read(spark, bootstrap, assign=f'{{"{topic}":[1]}}', startingOffsets="earliest", endingOffsets="latest")
    assert rows(df) == expected(topic, {1: everything})


def test_batch_reads_by_timestamp(spark: Any, two_partitions: tuple[str, str]) -> None:
    bootstrap, topic = two_partitions
    df = read(spark, bootstrap, subscribePattern=topic.replace("-", "."), startingTimestamp=str(BASE_TS + 100),
              endingTimestamp=str(BASE_TS + 300))
    assert rows(df) == expected(topic, {0: range(10, 30), 1: range(10, 30)})
    df = read(spark, bootstrap, subscribe=topic,
              startingOffsetsByTimestamp=f'{{"{topic}":{{"0":{BASE_TS + 205},"1":{BASE_TS}}}}}',
              endingOffsetsByTimestamp=f'{{"{topic}":{{"0":{BASE_TS + 10**9},"1":{BASE_TS + 20}}}}}')
    assert rows(df) == expected(topic, {0: range(21, PER_PARTITION), 1: range(0, 2)})
    with pytest.raises(Exception, match="No offset matched the timestamp"):
        read(spark, bootstrap, subscribe=topic, startingTimestamp=str(BASE_TS + 10**9)).collect()
    # startingOffsetsByTimestampStrategy=latest: no match starts at the latest offset (partition 1 has a match).
    df = read(spark, bootstrap, subscribe=topic, startingOffsetsByTimestampStrategy="latest",
              startingOffsetsByTimestamp=f'{{"{topic}":{{"0":{BASE_TS + 10**9},"1":{BASE_TS + 450}}}}}')
    assert rows(df) == expected(topic, {1: range(45, PER_PARTITION)})


def test_min_partitions_and_headers(spark: Any, two_partitions: tuple[str, str]) -> None:
    bootstrap, topic = two_partitions
    df = read(spark, bootstrap, subscribe=topic, minPartitions="6", includeHeaders="true")
    assert df.rdd.getNumPartitions() >= 6
    got = df.select("partition", "offset", "headers").collect()
    assert sorted((r.partition, r.offset) for r in got) == [(p, i) for p in range(2) for i in range(PER_PARTITION)]
    for r in got:
        want = [("n", str(r.offset).encode())] if r.offset % 2 == 0 else []
        assert [(h.key, bytes(h.value)) for h in r.headers] == want


def test_reads_a_topic_written_by_kcat(spark: Any, broker: BrokerProcess, topic: str) -> None:
    kcat = shutil.which("kcat")
    assert kcat, "kcat is not installed (apt-get install kcat)"
    lines = b"".join(b"key-%d:value %d\n" % (i, i) for i in range(30))
    subprocess.run([kcat, "-b", broker.bootstrap, "-P", "-t", topic, "-p", "0", "-K:", "-z", "lz4",
                    "-H", "via=kcat"], input=lines, check=True, timeout=60, capture_output=True)
    df = read(spark, broker.bootstrap, subscribe=topic, includeHeaders="true")
    got = sorted(df.select("offset", "key", "value", "headers").collect(), key=lambda r: r.offset)
    assert [(r.offset, bytes(r.key), bytes(r.value)) for r in got] == \
        [(i, b"key-%d" % i, b"value %d" % i) for i in range(30)]
    assert all([(h.key, bytes(h.value)) for h in r.headers] == [("via", b"kcat")] for r in got)


def test_fail_on_data_loss_after_retention(spark: Any, broker_factory: Callable[..., BrokerProcess],
                                           topic: str) -> None:
    b = broker_factory({"log.retention.check.interval.ms": "200"})
    create_topic(b.bootstrap, topic, 1, {"segment.bytes": "1024", "retention.ms": "60000"})
    # An hour old: every closed segment is past retention.ms at once. Twenty batches: segments hold whole batches.
    p = CKProducer({"bootstrap.servers": b.bootstrap})
    for i in range(200):
        p.produce(topic, value=b"x" * 100, partition=0, timestamp=int(time.time() * 1000) - 3_600_000)
        if i % 10 == 9:
            assert p.flush(30) == 0
    consumer = CKConsumer({"bootstrap.servers": b.bootstrap, "group.id": "probe"})
    try:
        # Retention removes one closed segment after another: wait until only the active one is left, so the
        # log start no longer moves while Spark reads.
        def settled() -> int | None:
            if len(list(b.partition_dir(topic).glob("*.log"))) != 1:
                return None
            return consumer.get_watermark_offsets(CKTopicPartition(topic, 0), 5)[0] or None

        start = wait_until(settled, 60, "retention to delete every closed segment")
    finally:
        consumer.close()
    assert start is not None
    offsets = f'{{"{topic}":{{"0":0}}}}'
    with pytest.raises(Exception, match="failOnDataLoss"):
        read(spark, b.bootstrap, subscribe=topic, startingOffsets=offsets).collect()
    df = read(spark, b.bootstrap, subscribe=topic, startingOffsets=offsets, failOnDataLoss="false")
    assert sorted(r.offset for r in df.select("offset").collect()) == list(range(start, 200))


def test_batch_write_read_back_by_confluent_kafka(spark: Any, broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, 2)
    data = [(f"k{i}", f"v{i}".encode(), i % 2, [("h", f"{i}".encode())]) for i in range(100)]
    df = spark.createDataFrame(data, "key string, value binary, partition int, "
                                     "headers array<struct<key: string, value: binary>>")
    df.write.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic) \
        .mode("append").save()
    got = consume_all(broker.bootstrap, topic, 100)
    assert sorted(got) == sorted((i % 2, f"k{i}".encode(), f"v{i}".encode(), [("h", f"{i}".encode())])
                                 for i in range(100))
    with pytest.raises(Exception, match="value"):
        spark.createDataFrame([("k",)], "key string").write.format("moldau") \
            .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic).mode("append").save()


def consume_all(bootstrap: str, topic: str, n: int) -> list[tuple[Any, ...]]:
    """(partition, key, value, headers) of the first ``n`` records, read by confluent-kafka."""
    c = CKConsumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.time_ns()}",
                    "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    out: list[tuple[Any, ...]] = []
    deadline = time.monotonic() + 60
    try:
        while len(out) < n and time.monotonic() < deadline:
            for m in c.consume(500, 1.0):
                assert m.error() is None, m.error()
                out.append((m.partition(), m.key(), m.value(), list(m.headers() or [])))
    finally:
        c.close()
    assert len(out) == n, f"read {len(out)} of {n} records from {topic}"
    return out
