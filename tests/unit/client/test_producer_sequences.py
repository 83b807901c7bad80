"""The idempotent producer after a batch fails for good (KIP-360): its sequence would be a gap the broker refuses
every later batch of the partition for ("sequence N does not follow M"), so the producer bumps its epoch and the
partition's sequences restart at 0. Drives Moldau's Producer against a real broker (tests/unit/client/conftest.py).

Found by `moldau-verify --launch 3 --tiered --faults kill,pause`: one batch failed for good with
OUT_OF_ORDER_SEQUENCE_NUMBER and the partition refused every later batch for the rest of the run
(docs/reliability.md). Here the batch fails for good with MESSAGE_TOO_LARGE (the topic's max.message.bytes).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from moldau.admin import AdminClient, NewTopic
from moldau.errors import KafkaError
from moldau.producer import Producer
from moldau.producer_records import Batch as _Batch
from moldau.protocol.errors import ErrorCode
from tests.integration.harness import BrokerProcess


@pytest.mark.integration  # a real broker process (tests/unit/client/conftest.py): `-m 'not integration'` skips it
async def test_later_batches_go_through_after_a_batch_fails_for_good(broker: BrokerProcess) -> None:
    topic = "idem-gap"
    async with AdminClient(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, 1, 1, config={"max.message.bytes": "2048"})])
    async with asyncio.timeout(30):
        async with Producer(bootstrap_servers=broker.bootstrap, enable_idempotence=True, linger_ms=0,
                            batch_size=1000) as producer:
            first = await (await producer.send(topic, b"first", partition=0))
            assert first.offset == 0
            ids = producer._producer_id, producer._producer_epoch  # noqa: SLF001
            big = await producer.send(topic, b"x" * 8000, partition=0)  # a batch of its own (batch.size)
            # Later records sent before the big one's answer: batches in flight behind the gap.
            later = [await producer.send(topic, b"later-%d" % i, partition=0) for i in range(30)]
            with pytest.raises(KafkaError) as failed:
                await big
            assert failed.value.code == ErrorCode.MESSAGE_TOO_LARGE
            offsets = [(await f).offset for f in later]
            assert offsets == list(range(1, 31)), offsets  # all written, in the order sent, none twice
            after = await (await producer.send(topic, b"after", partition=0))
            assert after.offset == 31
            # A new epoch of the same producer id (InitProducerId v3+ with the current id and epoch).
            assert (producer._producer_id, producer._producer_epoch) == (ids[0], ids[1] + 1)  # noqa: SLF001


def _sealed_batch(base_sequence: int, records: int = 1) -> _Batch:
    batch = _Batch("t", 0, time.monotonic(), [(None, b"v", None, 0)] * records, [],
                   asyncio.get_running_loop().create_future())
    batch.data, batch.base_sequence, batch.attempts = b"sealed", base_sequence, 1
    return batch


async def test_out_of_order_sequence_is_retried_only_behind_an_unresolved_batch() -> None:
    """The verify run's first failure: "sequence 2 does not follow 0" while the batch at sequence 1 was still
    unresolved (its request failed after the next one had been sent). Kafka retries such a batch; only a batch that
    directly follows the last acknowledged one fails for good on OUT_OF_ORDER_SEQUENCE_NUMBER."""
    producer = Producer(bootstrap_servers="127.0.0.1:9", enable_idempotence=True)  # never started: no I/O
    tp = ("t", 0)
    first = _sealed_batch(0)
    producer._acked(first)  # noqa: SLF001
    refused = KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, "sequence 2 does not follow 0")
    behind = _sealed_batch(2)
    producer._retry_or_fail(behind, refused)  # noqa: SLF001 - the batch at 1 is unresolved
    assert not behind.done.done() and list(producer._queues[tp]) == [behind]  # noqa: SLF001
    producer._queues[tp].clear()  # noqa: SLF001
    producer._retrying.clear()  # noqa: SLF001
    gap = _sealed_batch(1)  # directly follows the acknowledged 0: the broker really lacks a sequence
    producer._retry_or_fail(gap, KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, "lost"))  # noqa: SLF001
    assert gap.done.done() and isinstance(gap.error, KafkaError)
    assert tp in producer._reset_pending  # noqa: SLF001 - the next batches restart at 0 under a new epoch
