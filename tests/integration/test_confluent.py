"""confluent-kafka 2.16 (librdkafka) against a real broker: every codec, idempotence, watermarks, timestamps."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer, TopicPartition

from .clients import CODECS, Rec, ck_consume, ck_consumer, make_records, norm_headers
from .harness import BrokerProcess

pytestmark = pytest.mark.integration


def produce(bootstrap: str, topic: str, records: list[Rec], timestamps: list[int] | None = None, **config: Any) -> list[int]:
    """Produces to partition 0 and returns the delivered offsets in send order; fails on any delivery error."""
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 20, "message.timeout.ms": 30000}
    conf.update(config)
    producer = Producer(conf)
    results: dict[int, Any] = {}

    def delivered(i: int) -> Any:
        def cb(err: KafkaError | None, msg: Any) -> None:
            results[i] = err if err is not None else msg.offset()

        return cb

    for i, r in enumerate(records):
        kwargs: dict[str, Any] = {}
        if timestamps is not None:
            kwargs["timestamp"] = timestamps[i]
        producer.produce(
            topic, key=r.key, value=r.value, headers=r.headers, partition=0, on_delivery=delivered(i), **kwargs
        )
        producer.poll(0)
    remaining = producer.flush(40)
    assert remaining == 0, f"{remaining} messages not delivered"
    errors = {i: e for i, e in results.items() if isinstance(e, KafkaError)}
    assert not errors, f"delivery errors: {errors}"
    return [results[i] for i in range(len(records))]


@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_every_codec(broker: BrokerProcess, topic: str, codec: str) -> None:
    records = make_records(60, tag=f"ck-{codec}")
    offsets = produce(broker.bootstrap, topic, records, **{"compression.type": codec, "acks": "all"})
    assert offsets == list(range(len(records)))

    got = ck_consume(broker.bootstrap, topic, len(records))
    assert [m.offset() for m in got] == list(range(len(records)))
    for m, r in zip(got, records, strict=True):
        assert m.topic() == topic and m.partition() == 0
        assert (m.key(), m.value()) == (r.key, r.value), m.offset()
        assert norm_headers(m.headers()) == r.headers, m.offset()


def test_idempotent_producer(broker: BrokerProcess, topic: str) -> None:
    records = make_records(500, tag="idem", with_nulls=False)
    offsets = produce(
        broker.bootstrap, topic, records, **{"enable.idempotence": True, "compression.type": "lz4", "linger.ms": 5}
    )
    assert offsets == list(range(500))
    got = ck_consume(broker.bootstrap, topic, 500)
    assert [m.value() for m in got] == [r.value for r in records]


def test_watermarks_and_offsets_for_times(broker: BrokerProcess, topic: str) -> None:
    base_ts = int(time.time() * 1000) - 100_000
    records = make_records(20, tag="ts", with_nulls=False)
    timestamps = [base_ts + i * 1000 for i in range(20)]
    # Records 0-9 one per batch; records 10-19 in one batch, so a lookup must also look inside a batch.
    produce(broker.bootstrap, topic, records[:10], timestamps=timestamps[:10], **{"batch.num.messages": 1})
    produce(broker.bootstrap, topic, records[10:], timestamps=timestamps[10:], **{"linger.ms": 200})

    consumer = ck_consumer(broker.bootstrap)
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=20) == (0, 20)
        cases = {
            base_ts - 5_000: 0,  # before everything: the first record
            base_ts + 7_000: 7,  # exact hit on a single-record batch
            base_ts + 7_001: 8,  # between records: the next one
            base_ts + 14_500: 15,  # inside the multi-record batch
            base_ts + 19_000: 19,
            base_ts + 1_000_000: -1,  # after the last record: OFFSET_END
        }
        for ts, expected in cases.items():
            (res,) = consumer.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=20)
            assert res.error is None, (ts - base_ts, res.error)
            assert res.offset == expected, (ts - base_ts, res.offset)
    finally:
        consumer.close()

    got = ck_consume(broker.bootstrap, topic, 20)
    assert [m.timestamp()[1] for m in got] == timestamps


def test_keyless_records_on_a_compacted_topic_are_named_per_record(broker: BrokerProcess, topic: str) -> None:
    """KIP-467: the broker refuses the batch and names each keyless record (batch index and message) in
    ProduceResponse record_errors, with Kafka's partition error_message. librdkafka fails the whole batch but
    tells them apart: the named records with INVALID_RECORD, the others with its local _INVALID_DIFFERENT_RECORD
    (without record_errors all 100 would be INVALID_RECORD)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1000, "batch.num.messages": 1000})
    results: dict[int, Any] = {}
    for i in range(100):
        key = None if i % 10 == 3 else f"k{i}".encode()
        producer.produce(topic, key=key, value=f"v{i}".encode(), partition=0,
                         on_delivery=lambda err, _msg, i=i: results.__setitem__(i, err))
    assert producer.flush(60) == 0
    assert len(results) == 100 and all(err is not None for err in results.values())
    invalid = sorted(i for i, err in results.items() if err.code() == KafkaError.INVALID_RECORD)
    assert invalid == list(range(3, 100, 10)), {err.str() for err in results.values()}
    others = {results[i].code() for i in range(100) if i % 10 != 3}
    assert others == {KafkaError._INVALID_DIFFERENT_RECORD}
