"""Consumer groups on the ZooKeeper cluster: the offsets topic can be created from any broker, not only the
controller, so a client whose bootstrap list names only a non-controller broker gets a coordinator at once."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from protocol.api import ApiKey
from protocol.errors import ErrorCode

from .test_cluster import Cluster, cluster, create_topic_confluent, run, send, zookeeper  # noqa: F401

pytestmark = pytest.mark.integration


def test_find_coordinator_on_a_non_controller_creates_the_offsets_topic(cluster: Cluster) -> None:  # noqa: F811
    cluster.start([1, 2, 3], extra=lambda _id: {"offsets.topic.num.partitions": "6",
                                                "group.initial.rebalance.delay.ms": "0"})
    controller = cluster.controller()
    other = next(b for i, b in cluster.brokers.items() if i != controller)
    group = f"g-{uuid.uuid4().hex[:8]}"
    # FindCoordinator v4 (batched keys): the first answer must already name a coordinator.
    answer = run(send(other, ApiKey.FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": [group]}))
    [entry] = answer["coordinators"]
    assert entry["error_code"] == ErrorCode.NONE, answer
    assert entry["node_id"] in cluster.brokers
    assert len(cluster.assignment("__consumer_offsets")) == 6

    # A group whose clients know only that broker commits and reads back its offsets.
    topic = f"t-{uuid.uuid4().hex[:8]}"
    create_topic_confluent(other.bootstrap, topic, partitions=1, rf=1)
    producer = Producer({"bootstrap.servers": other.bootstrap})
    for i in range(5):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(20) == 0
    consumer = Consumer({"bootstrap.servers": other.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        got = []
        for _ in range(60):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
            if len(got) == 5:
                break
        assert got == [f"v{i}".encode() for i in range(5)]
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        assert committed[0].offset == 5
    finally:
        consumer.close()
