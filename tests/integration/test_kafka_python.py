"""kafka-python 3.0 against a real broker: produce/consume with every codec, ListOffsets, default producer."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from .clients import CODECS, kp_consume, kp_produce, make_records, norm_headers
from .harness import BrokerProcess

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_every_codec(broker: BrokerProcess, topic: str, codec: str) -> None:
    records = make_records(60, tag=f"kp-{codec}")
    offsets = kp_produce(
        broker.bootstrap,
        topic,
        records,
        compression_type=None if codec == "none" else codec,
        linger_ms=20,  # several records per batch, so the codec really compresses a multi-record batch
        enable_idempotence=False,
        acks=1,
    )
    assert offsets == list(range(len(records)))

    got = kp_consume(broker.bootstrap, topic, len(records))
    assert [m.offset for m in got] == list(range(len(records)))
    for m, r in zip(got, records, strict=True):
        assert m.topic == topic and m.partition == 0
        assert m.key == r.key, m.offset
        assert m.value == r.value, m.offset
        assert norm_headers(m.headers) == r.headers, m.offset


def test_default_producer_is_idempotent_acks_all_and_works(broker: BrokerProcess, topic: str) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)
    try:
        # kafka-python 3.0's defaults: idempotence on, acks=all. The broker must serve InitProducerId for this.
        assert producer.config["enable_idempotence"] is True
        assert producer.config["acks"] == -1
        futures = [producer.send(topic, key=b"k%d" % i, value=b"v%d" % i) for i in range(200)]
        producer.flush(timeout=30)
        metas = [f.get(timeout=30) for f in futures]
    finally:
        producer.close(timeout=10)
    assert sorted(m.offset for m in metas) == list(range(200))
    got = kp_consume(broker.bootstrap, topic, 200, partition=metas[0].partition)
    assert [(m.key, m.value) for m in got] == [(b"k%d" % i, b"v%d" % i) for i in range(200)]


def test_list_offsets_earliest_latest_and_by_timestamp(broker: BrokerProcess, topic: str) -> None:
    base_ts = int(time.time() * 1000) - 100_000
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, enable_idempotence=False, linger_ms=0)
    try:
        # 30 records, one second apart in record time, each flushed alone so every batch has its own timestamps.
        for i in range(30):
            producer.send(topic, key=b"k", value=b"v%d" % i, partition=0, timestamp_ms=base_ts + i * 1000)
            producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)

    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    try:
        assert consumer.beginning_offsets([tp], timeout_ms=20000) == {tp: 0}
        assert consumer.end_offsets([tp], timeout_ms=20000) == {tp: 30}

        found = consumer.offsets_for_times({tp: base_ts + 10_000}, timeout_ms=20000)[tp]
        assert found is not None and (found.offset, found.timestamp) == (10, base_ts + 10_000)
        # Between two records: the first record at or after the time.
        found = consumer.offsets_for_times({tp: base_ts + 10_500}, timeout_ms=20000)[tp]
        assert found is not None and (found.offset, found.timestamp) == (11, base_ts + 11_000)
        found = consumer.offsets_for_times({tp: 0}, timeout_ms=20000)[tp]
        assert found is not None and found.offset == 0
        # After the last record: no offset.
        assert consumer.offsets_for_times({tp: base_ts + 10_000_000}, timeout_ms=20000)[tp] is None
    finally:
        consumer.close()


def test_consume_from_the_middle_and_offset_out_of_range_resets(broker: BrokerProcess, topic: str) -> None:
    records = make_records(40, tag="mid", with_nulls=False)
    kp_produce(broker.bootstrap, topic, records, acks=1, enable_idempotence=False)
    got = kp_consume(broker.bootstrap, topic, 15, start_offset=25)
    assert [m.offset for m in got] == list(range(25, 40))
    assert [m.value for m in got] == [r.value for r in records[25:]]
    # An offset past the end: the broker answers OFFSET_OUT_OF_RANGE and the client resets to earliest.
    got = kp_consume(broker.bootstrap, topic, 40, start_offset=1000)
    assert [m.offset for m in got][:40] == list(range(40))


def test_topic_is_auto_created_on_produce(broker: BrokerProcess, topic: str) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, enable_idempotence=False)
    try:
        meta = producer.send(topic, value=b"hello").get(timeout=30)
        assert meta.topic == topic and meta.offset == 0
        assert producer.partitions_for(topic) == {0}  # num.partitions=1 in the test config
    finally:
        producer.close(timeout=10)
