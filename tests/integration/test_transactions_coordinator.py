"""Transactions end to end with confluent-kafka's transactional producer (librdkafka's transaction manager): the
coordinator (FindCoordinator key type 1, InitProducerId, AddPartitionsToTxn, EndTxn, the marker round) and the
partition side together, on a single broker and on a three-broker ZooKeeper cluster. Committed transactions over
two topics and several partitions are seen by read_committed consumers, aborted ones only by read_uncommitted
ones; a second producer with the same transactional id fences the first; consume-transform-produce commits a
group's input offsets with the output (send_offsets_to_transaction, TxnOffsetCommit)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from .harness import BrokerProcess
from .test_cluster import Cluster, cluster, create_topic_confluent, zookeeper  # noqa: F401

pytestmark = pytest.mark.integration

TXN_TIMEOUT_S = 30


def producer(bootstrap: str, transactional_id: str) -> Any:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                     "transaction.timeout.ms": 60000, "linger.ms": 5})


def transaction(p: Any, records: list[tuple[str, int, bytes]], commit: bool) -> None:
    p.begin_transaction()
    for topic, partition, value in records:
        p.produce(topic, value, partition=partition)
    if commit:
        p.commit_transaction(TXN_TIMEOUT_S)
    else:
        p.flush(TXN_TIMEOUT_S)  # the records reach the logs before the abort
        p.abort_transaction(TXN_TIMEOUT_S)


def read_all(bootstrap: str, partitions: list[tuple[str, int]], isolation: str, count: int,
             timeout: float = 30.0) -> list[tuple[str, int, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": isolation})
    try:
        consumer.assign([TopicPartition(t, p, 0) for t, p in partitions])
        got: list[tuple[str, int, bytes]] = []
        deadline = time.monotonic() + timeout
        while len(got) < count:
            assert time.monotonic() < deadline, f"{isolation}: {len(got)} of {count} records: {got}"
            for m in consumer.consume(num_messages=100, timeout=0.5):
                assert m.error() is None, m.error()
                got.append((m.topic(), m.partition(), m.value()))
        return sorted(got)
    finally:
        consumer.close()


def exercise(bootstrap: str, rf: int) -> None:
    """Commit, abort, commit over two topics (3 + 2 partitions); then a zombie is fenced."""
    t1, t2 = f"txn-a-{uuid.uuid4().hex[:6]}", f"txn-b-{uuid.uuid4().hex[:6]}"
    create_topic_confluent(bootstrap, t1, partitions=3, rf=rf)
    create_topic_confluent(bootstrap, t2, partitions=2, rf=rf)
    partitions = [(t1, 0), (t1, 1), (t1, 2), (t2, 0), (t2, 1)]

    def batch(tag: str) -> list[tuple[str, int, bytes]]:
        return [(t, p, f"{tag}-{t[:5]}-{p}-{i}".encode()) for t, p in partitions for i in range(2)]

    tid = f"tx-{uuid.uuid4().hex[:8]}"
    first = producer(bootstrap, tid)
    first.init_transactions(TXN_TIMEOUT_S)
    committed, aborted, committed_too = batch("c1"), batch("ab"), batch("c2")
    transaction(first, committed, commit=True)
    transaction(first, aborted, commit=False)
    transaction(first, committed_too, commit=True)

    assert read_all(bootstrap, partitions, "read_committed", 20) == sorted(committed + committed_too)
    assert read_all(bootstrap, partitions, "read_uncommitted", 30) == sorted(committed + aborted + committed_too)

    # Zombie fencing: the second producer's InitProducerId bumps the epoch; the first one's next transaction fails
    # with a fatal (fenced) error, and nothing it wrote becomes visible.
    second = producer(bootstrap, tid)
    second.init_transactions(TXN_TIMEOUT_S)
    with pytest.raises(KafkaException) as fenced:
        transaction(first, [(t1, 0, b"zombie")], commit=True)
    error: KafkaError = fenced.value.args[0]
    assert error.fatal() or error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                             KafkaError.INVALID_PRODUCER_EPOCH), error
    transaction(second, [(t1, 0, b"after-fence")], commit=True)
    after = read_all(bootstrap, [(t1, 0)], "read_committed", 5)
    assert (t1, 0, b"after-fence") in after and all(v != b"zombie" for _, _, v in after)


def consume_transform_produce(bootstrap: str) -> None:
    """send_offsets_to_transaction: the input offsets of a consumer group are committed with the output records,
    atomically; an aborted transaction moves neither."""
    source, sink, group = (f"ctp-in-{uuid.uuid4().hex[:6]}", f"ctp-out-{uuid.uuid4().hex[:6]}",
                           f"ctp-{uuid.uuid4().hex[:6]}")
    create_topic_confluent(bootstrap, source, partitions=1, rf=1)
    create_topic_confluent(bootstrap, sink, partitions=1, rf=1)
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(6):
        plain.produce(source, f"in-{i}".encode(), partition=0)
    assert plain.flush(TXN_TIMEOUT_S) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    worker = producer(bootstrap, f"ctp-{uuid.uuid4().hex[:6]}")
    worker.init_transactions(TXN_TIMEOUT_S)
    try:
        consumer.subscribe([source])

        def step(n: int, commit: bool) -> None:
            got: list[Any] = []
            deadline = time.monotonic() + 30
            while len(got) < n:
                assert time.monotonic() < deadline, f"got {len(got)} of {n} input records"
                m = consumer.poll(0.5)
                if m is not None and m.error() is None:
                    got.append(m)
            worker.begin_transaction()
            for m in got:
                worker.produce(sink, m.value().replace(b"in", b"out" if commit else b"aborted"), partition=0)
            worker.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                               consumer.consumer_group_metadata(), TXN_TIMEOUT_S)
            if commit:
                worker.commit_transaction(TXN_TIMEOUT_S)
            else:
                worker.abort_transaction(TXN_TIMEOUT_S)
                consumer.seek(TopicPartition(source, 0, got[0].offset()))  # re-process, as a worker would

        step(3, commit=True)
        step(3, commit=False)
        step(3, commit=True)
        committed = consumer.committed([TopicPartition(source, 0)], timeout=10)
        assert committed[0].offset == 6
    finally:
        consumer.close()
    out = read_all(bootstrap, [(sink, 0)], "read_committed", 6)
    assert [v for _, _, v in out] == sorted(f"out-{i}".encode() for i in range(6))


def test_confluent_transactions_on_a_single_broker(broker: BrokerProcess) -> None:
    exercise(broker.bootstrap, rf=1)
    consume_transform_produce(broker.bootstrap)
    metrics = broker.fetch_metrics()
    committed = [line for line in metrics.splitlines()
                 if line.startswith('moldau_transactional_ids{state="CompleteCommit"}')]
    assert committed and float(committed[0].split()[-1]) >= 2, committed


def test_confluent_transactions_on_a_cluster(cluster: Cluster) -> None:  # noqa: F811
    cluster.start([1, 2, 3], extra=lambda _id: {"transaction.state.log.num.partitions": "5",
                                                "offsets.topic.num.partitions": "5"})
    exercise(cluster.bootstrap(), rf=3)
    assert len(cluster.assignment("__transaction_state")) == 5
    assert all(len(r) == 3 for r in cluster.assignment("__transaction_state").values())


TAGS = (("c1", True), ("ab", False), ("c2", True))


def values_of(client: str, tag: str, tp: tuple[str, int]) -> list[bytes]:
    return [f"{client}-{tag}-{tp[0][:6]}-{tp[1]}-{i}".encode() for i in range(2)]


async def aiokafka_transactions(bootstrap: str, partitions: list[tuple[str, int]]) -> str:
    """Commit, abort, commit over ``partitions``; then a second producer with the same id fences this one."""
    from aiokafka import AIOKafkaProducer

    tid = f"aio-{uuid.uuid4().hex[:6]}"
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid, enable_idempotence=True)
    await asyncio.wait_for(p.start(), 30)
    try:
        for tag, commit in TAGS:
            await p.begin_transaction()
            for tp in partitions:
                for value in values_of("aio", tag, tp):
                    await p.send_and_wait(tp[0], value, partition=tp[1])
            await asyncio.wait_for(p.commit_transaction() if commit else p.abort_transaction(), 30)
        successor = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid, enable_idempotence=True)
        await asyncio.wait_for(successor.start(), 30)
        await successor.stop()
        await p.begin_transaction()
        with pytest.raises(Exception) as fenced:  # the zombie's write is refused (ProducerFenced)
            await asyncio.wait_for(p.send_and_wait(partitions[0][0], b"aio-zombie", partition=partitions[0][1]), 30)
            await asyncio.wait_for(p.commit_transaction(), 30)
        return type(fenced.value).__name__
    finally:
        await p.stop()


def kafka_python_transactions(bootstrap: str, partitions: list[tuple[str, int]]) -> str:
    from kafka import KafkaProducer

    tid = f"kp-{uuid.uuid4().hex[:6]}"
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid)
    try:
        p.init_transactions()
        for tag, commit in TAGS:
            p.begin_transaction()
            for tp in partitions:
                for value in values_of("kp", tag, tp):
                    p.send(tp[0], value, partition=tp[1])
            p.flush(30)
            if commit:
                p.commit_transaction()
            else:
                p.abort_transaction()
        successor = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid)
        successor.init_transactions()
        successor.close(timeout=10)
        p.begin_transaction()
        with pytest.raises(Exception) as fenced:
            p.send(partitions[0][0], b"kp-zombie", partition=partitions[0][1]).get(timeout=30)
            p.commit_transaction()
        return type(fenced.value).__name__
    finally:
        p.close(timeout=10)


async def aio_read(bootstrap: str, partitions: list[tuple[str, int]], isolation: str, count: int
                   ) -> dict[tuple[str, int], list[bytes]]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as AioTopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest", isolation_level=isolation)
    await asyncio.wait_for(consumer.start(), 20)
    try:
        consumer.assign([AioTopicPartition(t, p) for t, p in partitions])
        out: dict[tuple[str, int], list[bytes]] = {tp: [] for tp in partitions}
        deadline = time.monotonic() + 30
        while sum(map(len, out.values())) < count:
            assert time.monotonic() < deadline, out
            for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                out[(tp.topic, tp.partition)] += [r.value for r in records]
        return out
    finally:
        await asyncio.wait_for(consumer.stop(), 20)


def confluent_read(bootstrap: str, partitions: list[tuple[str, int]], isolation: str, count: int
                   ) -> dict[tuple[str, int], list[bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "isolation.level": isolation})
    try:
        consumer.assign([TopicPartition(t, p, 0) for t, p in partitions])
        out: dict[tuple[str, int], list[bytes]] = {tp: [] for tp in partitions}
        deadline = time.monotonic() + 30
        while sum(map(len, out.values())) < count:
            assert time.monotonic() < deadline, out
            for m in consumer.consume(num_messages=100, timeout=0.5):
                assert m.error() is None, m.error()
                out[(m.topic(), m.partition())].append(m.value())
        return out
    finally:
        consumer.close()


def test_aiokafka_and_kafka_python_transactions_read_by_every_client(broker: BrokerProcess) -> None:
    """aiokafka's and kafka-python's transactional producers commit, abort, commit over two topics (3 + 2
    partitions); read_committed consumers of confluent-kafka, kafka-python, aiokafka and kcat each see exactly the
    committed records in order per partition, read_uncommitted ones all of them; a second producer with the same
    transactional id fences each (its later write or commit refused)."""
    from .clients import kp_consume
    from .test_transactions_log import kcat

    t1, t2 = f"mx-a-{uuid.uuid4().hex[:6]}", f"mx-b-{uuid.uuid4().hex[:6]}"
    create_topic_confluent(broker.bootstrap, t1, partitions=3, rf=1)
    create_topic_confluent(broker.bootstrap, t2, partitions=2, rf=1)
    partitions = [(t1, 0), (t1, 1), (t1, 2), (t2, 0), (t2, 1)]
    aio_fenced = asyncio.run(asyncio.wait_for(aiokafka_transactions(broker.bootstrap, partitions), 120))
    kp_fenced = kafka_python_transactions(broker.bootstrap, partitions)
    assert "Fenced" in aio_fenced or "Epoch" in aio_fenced, aio_fenced
    assert "Fenced" in kp_fenced or "Epoch" in kp_fenced, kp_fenced

    def expected(tags: tuple[str, ...]) -> dict[tuple[str, int], list[bytes]]:
        return {tp: [v for client in ("aio", "kp") for tag in tags for v in values_of(client, tag, tp)]
                for tp in partitions}

    committed, everything = expected(("c1", "c2")), expected(("c1", "ab", "c2"))
    n_committed, n_all = sum(map(len, committed.values())), sum(map(len, everything.values()))
    for isolation, want, n in (("read_committed", committed, n_committed), ("read_uncommitted", everything, n_all)):
        assert confluent_read(broker.bootstrap, partitions, isolation, n) == want, isolation
        assert asyncio.run(asyncio.wait_for(aio_read(broker.bootstrap, partitions, isolation, n), 60)) == want
        for tp in partitions:
            got = kp_consume(broker.bootstrap, tp[0], len(want[tp]), partition=tp[1], isolation_level=isolation)
            assert [r.value for r in got] == want[tp], (isolation, tp)
    for tp in partitions:
        out = kcat("-b", broker.bootstrap, "-C", "-t", tp[0], "-p", str(tp[1]), "-o", "beginning", "-e", "-q",
                   "-X", "isolation.level=read_committed", "-f", "%s\n")
        assert out.split() == committed[tp], tp


def test_a_hanging_transaction_is_aborted_on_its_timeout(broker_factory: Any, topic: str) -> None:
    """A producer that stops in the middle of a transaction (never commits) does not pin the last stable offset:
    the coordinator aborts it after transaction.timeout.ms, and read_committed consumers move past it."""
    b = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "300",
                        "transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3"})
    create_topic_confluent(b.bootstrap, topic, partitions=1, rf=1)
    hanging = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": f"hang-{uuid.uuid4().hex[:6]}",
                        "transaction.timeout.ms": 2000})
    hanging.init_transactions(TXN_TIMEOUT_S)
    hanging.begin_transaction()
    hanging.produce(topic, b"hanging", partition=0)
    assert hanging.flush(TXN_TIMEOUT_S) == 0
    plain = Producer({"bootstrap.servers": b.bootstrap})
    plain.produce(topic, b"after", partition=0)
    assert plain.flush(TXN_TIMEOUT_S) == 0
    # Bounded by the 2 s timeout, the 300 ms check interval and the markers: "after" becomes readable.
    got = read_all(b.bootstrap, [(topic, 0)], "read_committed", 1, timeout=30)
    assert [v for _, _, v in got] == [b"after"]


def test_back_to_back_commit_and_abort_with_librdkafka(broker: BrokerProcess) -> None:
    """librdkafka aborts right after a commit, the abort's records never flushed: its AddPartitionsToTxn reaches
    the coordinator while the commit's markers are on their way, and it sends EndTxn(abort) because it sent that
    request. The coordinator answers AddPartitionsToTxn once the markers are written, so the abort finds an Ongoing
    transaction (before, CONCURRENT_TRANSACTIONS then EndTxn(abort) in CompleteCommit: a fatal INVALID_TXN_STATE)."""
    topic = f"txn-b2b-{uuid.uuid4().hex[:6]}"
    create_topic_confluent(broker.bootstrap, topic, partitions=4, rf=1)
    p = producer(broker.bootstrap, f"b2b-{uuid.uuid4().hex[:6]}")
    p.init_transactions(TXN_TIMEOUT_S)
    committed = []
    for n in range(5):
        p.begin_transaction()
        values = [f"c{n}-{i}".encode() for i in range(1000)]
        for i, v in enumerate(values):
            p.produce(topic, v, partition=i % 4)
        p.commit_transaction(TXN_TIMEOUT_S)
        committed += values
        p.begin_transaction()
        for i in range(1000):
            p.produce(topic, f"a{n}-{i}".encode(), partition=i % 4)
        p.abort_transaction(TXN_TIMEOUT_S)
    got = read_all(broker.bootstrap, [(topic, i) for i in range(4)], "read_committed", len(committed))
    assert sorted(v for _, _, v in got) == sorted(committed)
