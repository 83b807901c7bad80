"""Moldau's own AdminClient (partitions and records) and consumer against a standalone broker: a group's
consumer rebalances onto partitions CreatePartitions added; DeleteRecords, ElectLeaders, DescribeLogDirs."""

from __future__ import annotations

import asyncio
import time

import pytest

from moldau.admin import AdminClient, NewPartitions
from moldau.consumer import Consumer, TopicPartition
from moldau.errors import KafkaError
from moldau.protocol.errors import ErrorCode

from .harness import BrokerProcess
from .test_moldau_consumer import create_topic, produce_spread

pytestmark = pytest.mark.integration


def test_group_rebalances_onto_added_partitions(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, 2)
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
            "metadata.max.age.ms": 1000, "heartbeat.interval.ms": 300}

    async def run() -> tuple[set[TopicPartition], set[int]]:
        async with Consumer(conf) as consumer, AdminClient(bootstrap_servers=broker.bootstrap) as admin:
            consumer.subscribe([topic])
            deadline = time.monotonic() + 30
            while consumer.assignment() != {TopicPartition(topic, p) for p in (0, 1)}:
                assert time.monotonic() < deadline, consumer.assignment()
                await consumer.getmany(timeout_ms=200)
            assert await admin.create_partitions({topic: NewPartitions(4)}) == {topic: None}
            with pytest.raises(KafkaError) as err:
                await admin.create_partitions({topic: 3})
            assert err.value.code == ErrorCode.INVALID_PARTITIONS
            await asyncio.to_thread(produce_spread, broker.bootstrap, topic, 0, 40, 4)
            seen: set[int] = set()
            deadline = time.monotonic() + 40
            while seen != {0, 1, 2, 3}:
                assert time.monotonic() < deadline, (consumer.assignment(), seen)
                for tp, records in (await consumer.getmany(timeout_ms=300)).items():
                    if records:
                        seen.add(tp.partition)
            return consumer.assignment(), seen

    assignment, seen = asyncio.run(run())
    assert assignment == {TopicPartition(topic, p) for p in range(4)} and seen == {0, 1, 2, 3}


def test_delete_records_elect_leaders_log_dirs(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, 2)
    produce_spread(broker.bootstrap, topic, 0, 20, 2)

    async def run() -> None:
        async with AdminClient(bootstrap_servers=broker.bootstrap) as admin:
            assert await admin.delete_records({(topic, 0): 4, (topic, 1): -1}) == {(topic, 0): 4, (topic, 1): 10}
            results = await admin.delete_records({(topic, 0): 50, (topic, 9): 1}, raise_errors=False)
            assert isinstance(results[(topic, 0)], KafkaError)
            assert results[(topic, 0)].code == ErrorCode.OFFSET_OUT_OF_RANGE  # type: ignore[union-attr]
            assert results[(topic, 9)].code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # type: ignore[union-attr]
            offsets = await admin.list_offsets({(topic, 0): "earliest"})
            assert offsets[(topic, 0)].offset == 4
            elected = await admin.elect_leaders("preferred", [(topic, 0)])
            assert elected[(topic, 0)] is not None and elected[(topic, 0)].code == ErrorCode.ELECTION_NOT_NEEDED
            dirs = await admin.describe_log_dirs()
            [(node, [log_dir])] = list(dirs.items())
            assert log_dir.error is None and log_dir.path == str(broker.log_dir.resolve())
            assert log_dir.replicas[(topic, 0)].size > 0 and log_dir.replicas[(topic, 0)].offset_lag == 0

    asyncio.run(run())
