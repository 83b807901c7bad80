"""Consumer groups on the ZooKeeper cluster: the offsets topic can be created from any broker, not only the
controller, so a client whose bootstrap list names only a non-controller broker gets a coordinator at once."""

from __future__ import annotations

import signal
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from moldau.protocol.api import ApiKey
from moldau.protocol.errors import ErrorCode

from .harness import wait_until
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


def _consume(bootstrap: str, group: str, topic: str, want: int, timeout_s: float = 40) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 6000})
    got: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout_s
        while len(got) < want and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        if got:
            consumer.commit(asynchronous=False)
        # Nothing beyond `want` may arrive: poll a little longer.
        for _ in range(4):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    return got


@pytest.mark.slow
def test_committed_offsets_survive_the_loss_of_the_coordinator(cluster: Cluster) -> None:  # noqa: F811
    """Kill the group coordinator's broker: the group finds the new coordinator (the new leader of its
    __consumer_offsets partition, which loads the group from its replica) and resumes at the committed offsets."""
    cluster.start([1, 2, 3], extra=lambda _id: {"offsets.topic.num.partitions": "6",
                                                "group.initial.rebalance.delay.ms": "0",
                                                "replica.lag.time.max.ms": "5000"})
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    bootstrap = cluster.bootstrap()
    create_topic_confluent(bootstrap, topic, partitions=3, rf=3)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(30):
        producer.produce(topic, f"a{i}".encode())
    assert producer.flush(30) == 0
    first = _consume(bootstrap, group, topic, 30)
    assert sorted(first) == sorted(f"a{i}".encode() for i in range(30))

    answer = run(send(cluster.brokers[1], ApiKey.FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": [group]}))
    coordinator = answer["coordinators"][0]["node_id"]
    assert coordinator in cluster.brokers
    # The commit was written with acks=all to the ISR of its offsets partition; a full ISR everywhere makes
    # every replica eligible to lead once the coordinator is gone.
    wait_until(lambda: all(len(s["isr"]) == len(cluster.assignment("__consumer_offsets")[p])
                           for p, s in cluster.states("__consumer_offsets").items()), 30,
               "every offsets partition fully in sync")
    cluster.brokers[coordinator].stop(signal.SIGKILL)

    survivors = cluster.bootstrap(exclude=coordinator)
    producer = Producer({"bootstrap.servers": survivors, "acks": "all", "message.timeout.ms": 60000})
    for i in range(10):
        producer.produce(topic, f"b{i}".encode())
    assert producer.flush(60) == 0
    second = _consume(survivors, group, topic, 10, timeout_s=60)
    assert sorted(second) == sorted(f"b{i}".encode() for i in range(10)), \
        f"expected only the 10 records produced after the commit, got {len(second)}: {second[:12]}"
