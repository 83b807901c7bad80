"""aiokafka 0.14 against a real broker: produce/consume with every codec, offsets lookups."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from .clients import CODECS, make_records, norm_headers
from .harness import BrokerProcess

pytestmark = pytest.mark.integration


async def consume(bootstrap: str, topic: str, count: int, timeout: float = 30.0) -> list[Any]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await asyncio.wait_for(consumer.start(), 20)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(out) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"aiokafka consumer got {len(out)} of {count} records in {timeout}s")
            batches = await consumer.getmany(tp, timeout_ms=500)
            for msgs in batches.values():
                out.extend(msgs)
        return out
    finally:
        await asyncio.wait_for(consumer.stop(), 20)


@pytest.mark.parametrize("codec", CODECS)
async def test_produce_consume_every_codec(broker: BrokerProcess, topic: str, codec: str) -> None:
    records = make_records(60, tag=f"aio-{codec}")
    producer = AIOKafkaProducer(
        bootstrap_servers=broker.bootstrap,
        compression_type=None if codec == "none" else codec,
        linger_ms=20,
        acks=1,
        request_timeout_ms=20000,
    )
    await asyncio.wait_for(producer.start(), 20)
    try:
        futures = [
            await producer.send(topic, key=r.key, value=r.value, headers=r.headers, partition=0) for r in records
        ]
        metas = await asyncio.wait_for(asyncio.gather(*futures), 30)
    finally:
        await asyncio.wait_for(producer.stop(), 20)
    assert [m.offset for m in metas] == list(range(len(records)))

    got = await consume(broker.bootstrap, topic, len(records))
    assert [m.offset for m in got] == list(range(len(records)))
    for m, r in zip(got, records, strict=True):
        assert (m.key, m.value) == (r.key, r.value), m.offset
        assert norm_headers(m.headers) == r.headers, m.offset


async def test_idempotent_producer_and_offset_lookups(broker: BrokerProcess, topic: str) -> None:
    base_ts = int(time.time() * 1000) - 50_000
    producer = AIOKafkaProducer(
        bootstrap_servers=broker.bootstrap, enable_idempotence=True, acks="all", request_timeout_ms=20000
    )
    await asyncio.wait_for(producer.start(), 20)
    try:
        for i in range(10):
            meta = await asyncio.wait_for(
                producer.send_and_wait(topic, value=b"v%d" % i, partition=0, timestamp_ms=base_ts + i * 1000), 30
            )
            assert meta.offset == i
    finally:
        await asyncio.wait_for(producer.stop(), 20)

    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    await asyncio.wait_for(consumer.start(), 20)
    try:
        tp = TopicPartition(topic, 0)
        assert await asyncio.wait_for(consumer.beginning_offsets([tp]), 20) == {tp: 0}
        assert await asyncio.wait_for(consumer.end_offsets([tp]), 20) == {tp: 10}
        found = (await asyncio.wait_for(consumer.offsets_for_times({tp: base_ts + 4_500}), 20))[tp]
        assert found is not None and (found.offset, found.timestamp) == (5, base_ts + 5_000)
        assert (await asyncio.wait_for(consumer.offsets_for_times({tp: base_ts + 60_000}), 20))[tp] is None
    finally:
        await asyncio.wait_for(consumer.stop(), 20)
