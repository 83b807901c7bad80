"""Moldau's transactional producer on a three-broker ZooKeeper cluster (RF 3): the transaction coordinator is
SIGKILLed with a transaction open; the producer finds the new coordinator (FindCoordinator key type 1 again after
the lost connection / NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE) and its commit completes there. Moldau's
read_committed consumer on the survivors then sees the whole transaction."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from moldau.aio import Consumer, Producer, TopicPartition
from moldau.protocol.api import ApiKey
from moldau.protocol.errors import ErrorCode

from .test_cluster import Cluster, cluster, create_topic_confluent, run, send, zookeeper  # noqa: F401

pytestmark = pytest.mark.integration


def test_moldau_producer_commits_after_its_coordinator_is_killed(cluster: Cluster) -> None:  # noqa: F811
    cluster.start([1, 2, 3], extra=lambda _id: {"transaction.state.log.num.partitions": "3",
                                                "offsets.topic.num.partitions": "3"})
    bootstrap = cluster.bootstrap()
    topic, tid = f"mtxk-{uuid.uuid4().hex[:6]}", f"mtxk-{uuid.uuid4().hex[:6]}"
    create_topic_confluent(bootstrap, topic, partitions=3, rf=3)
    values = [f"v{i}".encode() for i in range(6)]
    partitions = [TopicPartition(topic, p) for p in range(3)]

    async def go() -> list[bytes]:
        async with Producer(bootstrap_servers=bootstrap, transactional_id=tid, max_block_ms=90000) as producer:
            await producer.init_transactions()
            producer.begin_transaction()
            for i, v in enumerate(values):
                await producer.send(topic, v, partition=i % 3)
            await producer.flush()
            [entry] = (await asyncio.to_thread(lambda: run(send(
                cluster.brokers[1], ApiKey.FIND_COORDINATOR, {"key_type": 1, "coordinator_keys": [tid]}))))[
                "coordinators"]
            assert entry["error_code"] == ErrorCode.NONE, entry
            victim = entry["node_id"]
            await asyncio.to_thread(cluster.brokers[victim].kill)
            await producer.commit_transaction()
        survivors = ",".join(b.bootstrap for i, b in cluster.brokers.items() if i != victim)
        async with Consumer(bootstrap_servers=survivors, isolation_level="read_committed",
                            auto_offset_reset="earliest") as consumer:
            consumer.assign(partitions)
            got: list[bytes] = []
            deadline = time.monotonic() + 60
            while len(got) < len(values):
                assert time.monotonic() < deadline, got
                for recs in (await consumer.getmany(timeout_ms=500)).values():
                    got.extend(r.value for r in recs)
            return sorted(got)

    assert asyncio.run(asyncio.wait_for(go(), 240)) == values
