"""Moldau's consumer asks for offsets across a leader move: its blocking offset calls (end_offsets,
beginning_offsets, offsets_for_times) retry a retriable error with fresh metadata until default.api.timeout.ms,
as Kafka's consumer does. moldau-verify's run failed once on NOT_LEADER_OR_FOLLOWER from end_offsets after its
faults, when preferred leaders moved back."""

from __future__ import annotations

import asyncio

import pytest

from moldau.admin import AdminClient
from moldau.connection import BrokerConnection, api_for
from moldau.consumer import Consumer, TopicPartition
from moldau.protocol.api import ApiKey
from moldau.protocol.errors import ErrorCode

from .harness import wait_until
from .test_cluster import Cluster, cluster, create_topic_confluent, zookeeper  # noqa: F401

pytestmark = pytest.mark.integration


def test_end_offsets_follow_a_leader_that_moved(cluster: Cluster) -> None:  # noqa: F811
    cluster.start([1, 2])
    topic = "moved"
    create_topic_confluent(cluster.bootstrap(), topic, partitions=1, rf=2)
    tp = TopicPartition(topic, 0)
    replicas = cluster.assignment(topic)[0]
    first, second = replicas
    wait_until(lambda: cluster.states(topic)[0]["leader"] == first, 20, "the preferred leader")

    async def go() -> None:
        async with Consumer(bootstrap_servers=cluster.bootstrap(), default_api_timeout_ms=30000) as consumer:
            assert await consumer.end_offsets([tp]) == {tp: 0}
            async with AdminClient(bootstrap_servers=cluster.bootstrap()) as admin:
                await admin.alter_partition_reassignments({tp: [second, first]})
                await asyncio.to_thread(wait_until, lambda: cluster.assignment(topic)[0] == [second, first], 20,
                                        "the reordered replicas")
                await admin.elect_leaders("preferred", [tp])
            # The old leader has applied its demotion (ZooKeeper's state moves before the broker hears of it).
            old = cluster.brokers[first]
            deadline = asyncio.get_running_loop().time() + 20
            while await _list_offsets_error(old.port, topic) != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                assert asyncio.get_running_loop().time() < deadline, "the old leader still answers as leader"
                await asyncio.sleep(0.05)
            # Both brokers still run and metadata.max.age.ms is 5 minutes: the consumer still names the old
            # leader, which answers NOT_LEADER_OR_FOLLOWER.
            assert consumer._cluster.leader_for(topic, 0) == first
            assert await consumer.end_offsets([tp]) == {tp: 0}
            assert await consumer.beginning_offsets([tp]) == {tp: 0}
            assert consumer._cluster.leader_for(topic, 0) == second

    asyncio.run(asyncio.wait_for(go(), 120))


async def _list_offsets_error(port: int, topic: str) -> int:
    async with BrokerConnection("127.0.0.1", port, client_id="offsets-failover-test") as conn:
        answer = await conn.send(api_for(ApiKey.LIST_OFFSETS), {"replica_id": -1, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    return int(answer["topics"][0]["partitions"][0]["error_code"])
