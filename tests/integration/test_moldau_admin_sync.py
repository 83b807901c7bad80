"""Moldau's AdminClient and the blocking (sync) Producer against a real broker."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import pytest

from moldau import AdminClient, KafkaError, NewTopic, Producer, RecordMetadata
from moldau.errors import BlockingCallOnLoopError, KafkaTimeoutError
from moldau.protocol.errors import ErrorCode
from moldau.sync import background_loop

from .clients import ck_consume
from .harness import BrokerProcess

pytestmark = pytest.mark.integration


def test_admin_create_describe_delete(broker: BrokerProcess, topic: str) -> None:
    with AdminClient(bootstrap_servers=broker.bootstrap) as admin:
        assert admin.create_topics([NewTopic(topic, 3, 1)], validate_only=True) == {topic: None}
        assert topic not in admin.list_topics()
        assert admin.create_topics([NewTopic(topic, 3, 1, config={"retention.ms": "60000"})]) == {topic: None}
        with pytest.raises(KafkaError) as info:
            admin.create_topics([NewTopic(topic, 3, 1)])
        assert info.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
        assert topic in admin.list_topics()
        (desc,) = admin.describe_topics([topic])
        assert [p.partition for p in desc.partitions] == [0, 1, 2]
        assert all(p.leader == 0 and p.replicas == [0] and p.isr == [0] for p in desc.partitions)
        cluster = admin.describe_cluster()
        assert [b.node_id for b in cluster.brokers] == [0] and cluster.controller_id == 0
        offsets = admin.list_offsets({(topic, 0): "earliest", (topic, 1): "latest"})
        assert offsets[(topic, 0)].offset == 0 and offsets[(topic, 1)].offset == 0
        assert admin.delete_topics([topic]) == {topic: None}
        missing = admin.delete_topics(["no-such-topic-x"], raise_errors=False)
        assert missing["no-such-topic-x"] is not None
        assert missing["no-such-topic-x"].code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_sync_producer_futures_callbacks_and_flush(broker: BrokerProcess, topic: str) -> None:
    delivered: list[RecordMetadata] = []
    lock = threading.Lock()

    def on_delivery(err: BaseException | None, meta: RecordMetadata | None) -> None:
        assert err is None and meta is not None
        with lock:
            delivered.append(meta)

    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2}) as producer:
        fut = producer.send(topic, b"first", b"k", partition=0, headers={"h": "v"})
        assert fut.result(30).offset == 0
        for i in range(500):
            producer.produce(topic, f"v{i}".encode(), partition=0, on_delivery=on_delivery)
        producer.flush(30)
        assert len(delivered) == 500
        many = producer.send_many(topic, [b"m"] * 1000, partition=0)
        assert many.result(30) == 1000
        for i in range(100):  # fire and forget: no future, no callback
            producer.produce(topic, b"ff%d" % i, partition=0)
        producer.flush(30)
    assert sorted(m.offset for m in delivered) == list(range(1, 501))
    got = ck_consume(broker.bootstrap, topic, 1601)
    assert [m.value() for m in got[1501:]] == [b"ff%d" % i for i in range(100)]
    assert got[0].key() == b"k" and got[0].headers() == [("h", b"v")]
    assert [m.value() for m in got[1:501]] == [f"v{i}".encode() for i in range(500)]


def test_sync_consumer_reads_sync_producer(broker: BrokerProcess, topic: str) -> None:
    from moldau import Consumer, TopicPartition

    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=1) as producer:
        for i in range(300):
            producer.produce(topic, b"v%d" % i, b"k%d" % i, partition=0)
        producer.flush(30)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                  enable_auto_commit=False) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        got: list[tuple[bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 30
        while len(got) < 300:
            assert time.monotonic() < deadline, f"only {len(got)} records"
            got += [(r.key, r.value) for r in consumer.poll(timeout_ms=500)]
        assert got == [(b"k%d" % i, b"v%d" % i) for i in range(300)]
        assert consumer.position(TopicPartition(topic, 0)) == 300


@contextlib.contextmanager
def _client_loop_held() -> Iterator[None]:
    """Keeps the shared client loop thread busy inside the block, so calls made there queue up behind it."""
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        entered.set()
        release.wait(30)

    background_loop().call_soon_threadsafe(hold)
    assert entered.wait(30), "client loop did not run the holding callback"
    try:
        yield
    finally:
        release.set()


def test_sync_flush_waits_for_records_awaiting_metadata(broker: BrokerProcess, topic: str) -> None:
    # Regression: records to a topic without cached metadata wait in send() inside the scheduled hand-over;
    # flush() used to find the pending list empty and return before they were even appended (then close()
    # dropped them silently). Holding the loop while producing makes that one hand-over take every record.
    delivered: list[tuple[BaseException | None, int | None]] = []
    forgotten = f"{topic}-ff"
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=1) as producer:
        with _client_loop_held():
            for i in range(10):
                producer.produce(topic, b"v%d" % i, partition=0,
                                 on_delivery=lambda e, m: delivered.append((e, m.offset if m else None)))
        producer.flush(30)
        assert delivered == [(None, i) for i in range(10)]
        with _client_loop_held():
            for i in range(10):  # fire and forget: only the broker can tell whether they were sent
                producer.produce(forgotten, b"f%d" % i, partition=0)
        producer.flush(30)
        with AdminClient(bootstrap_servers=broker.bootstrap) as admin:
            assert admin.list_offsets({(forgotten, 0): "latest"})[(forgotten, 0)].offset == 10


def test_blocking_calls_in_a_delivery_callback_raise_instead_of_deadlocking(broker: BrokerProcess, topic: str) -> None:
    # The callback runs on the client loop's thread; flush() there used to wait for that very thread forever.
    caught: list[BaseException] = []
    with Producer(bootstrap_servers=broker.bootstrap) as producer, \
            AdminClient(bootstrap_servers=broker.bootstrap) as admin:
        def on_delivery(err: BaseException | None, meta: RecordMetadata | None) -> None:
            for blocking in (lambda: producer.flush(5), admin.list_topics):
                try:
                    blocking()
                except BlockingCallOnLoopError as exc:
                    caught.append(exc)

        producer.produce(topic, b"v", partition=0, on_delivery=on_delivery)
        producer.flush(30)
        assert admin.list_topics()  # the client still works from the application's thread
    assert len(caught) == 2, caught
    assert "flush()" in str(caught[0]) and "delivery callback" in str(caught[0])
    assert "list_topics()" in str(caught[1])


def test_send_on_a_full_buffer_honours_max_block_ms(broker: BrokerProcess, topic: str) -> None:
    with Producer(bootstrap_servers=broker.bootstrap, max_block_ms=500) as producer:
        producer.max_handover = 20  # records the loop has not taken over yet; the loop is held below
        with _client_loop_held():
            for i in range(20):
                producer.produce(topic, b"%d" % i, partition=0)
            started = time.monotonic()
            with pytest.raises(KafkaTimeoutError, match="max.block.ms"):
                producer.send(topic, b"late", partition=0)
            waited = time.monotonic() - started
        assert 0.45 <= waited < 10, waited
        producer.flush(30)
        with AdminClient(bootstrap_servers=broker.bootstrap) as admin:  # the late record was not queued
            assert admin.list_offsets({(topic, 0): "latest"})[(topic, 0)].offset == 20


def test_admin_consumer_group_methods(broker: BrokerProcess, topic: str) -> None:
    from moldau import Consumer, OffsetAndMetadata, TopicPartition
    from moldau.aio import ConsumerRebalanceListener

    group, tp = f"adm-{topic}", TopicPartition(topic, 0)
    in_listener: list[BaseException] = []

    class Listener(ConsumerRebalanceListener):  # runs on the client loop's thread, inside poll()
        def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
            try:
                consumer.committed(tp)
            except BlockingCallOnLoopError as exc:
                in_listener.append(exc)

    with Producer(bootstrap_servers=broker.bootstrap) as producer:
        for i in range(5):
            producer.produce(topic, b"%d" % i, partition=0)
        producer.flush(30)
    with AdminClient(bootstrap_servers=broker.bootstrap) as admin:
        with Consumer(bootstrap_servers=broker.bootstrap, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False) as consumer:
            consumer.subscribe([topic], listener=Listener())
            deadline = time.monotonic() + 30
            while not consumer.assignment() or consumer.position(tp) < 5:
                assert time.monotonic() < deadline, "never assigned"
                consumer.poll(timeout_ms=200)
            consumer.commit()
            assert len(in_listener) == 1 and "committed()" in str(in_listener[0])
            described = admin.describe_consumer_groups([group])[group]
            assert not isinstance(described, KafkaError)
            assert (described.state, described.partition_assignor, described.coordinator) == ("Stable", "range", 0)
            [member] = described.members
            assert member.assignment == [tp] and member.client_id and member.host
            assert [g.group_id for g in admin.list_consumer_groups(states=["Stable"])].count(group) == 1
            busy = admin.delete_consumer_groups([group], raise_errors=False)[group]
            assert busy is not None and busy.code == ErrorCode.NON_EMPTY_GROUP
        listing = [g for g in admin.list_consumer_groups() if g.group_id == group]
        assert [(g.state, g.is_simple_consumer_group, g.protocol_type) for g in listing] == [("Empty", False,
                                                                                               "consumer")]
        assert group not in [g.group_id for g in admin.list_consumer_groups(states=["Stable"])]
        assert admin.list_consumer_group_offsets(group) == {tp: OffsetAndMetadata(5, "")}
        assert admin.alter_consumer_group_offsets(group, {tp: OffsetAndMetadata(2, "m")}) == {tp: None}
        assert admin.list_consumer_group_offsets(group, [tp]) == {tp: OffsetAndMetadata(2, "m")}
        assert admin.delete_consumer_group_offsets(group, [tp]) == {tp: None}
        assert admin.list_consumer_group_offsets(group) == {}
        assert admin.delete_consumer_groups([group]) == {group: None}
        assert group not in [g.group_id for g in admin.list_consumer_groups()]
        missing = admin.describe_consumer_groups([group])[group]  # Kafka: a deleted group reads as Dead
        assert not isinstance(missing, KafkaError) and missing.state == "Dead" and missing.members == []
        with pytest.raises(ValueError, match="unknown group state"):
            admin.list_consumer_groups(states=["Running"])
