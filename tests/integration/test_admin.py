"""CreateTopics / DeleteTopics through kafka-python's KafkaAdminClient and confluent-kafka's AdminClient."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka import errors as kerr

from .clients import kp_consume, kp_produce, make_records
from .harness import BrokerProcess, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def kp_admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)
    try:
        yield admin
    finally:
        admin.close()


@pytest.fixture
def ck_admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


# -- kafka-python ------------------------------------------------------------------------------------------


def test_kafka_python_create_describe_delete(kp_admin: KafkaAdminClient, broker: BrokerProcess, topic: str) -> None:
    result = kp_admin.create_topics({topic: {"num_partitions": 3, "replication_factor": 1}}, timeout_ms=10000)
    assert [(t["name"], t["error_code"]) for t in result["topics"]] == [(topic, 0)]
    wait_until(lambda: topic in kp_admin.list_topics(), 10, f"{topic} in list_topics()")

    (described,) = kp_admin.describe_topics([topic])
    assert described["error_code"] == 0
    parts = sorted(described["partitions"], key=lambda p: p["partition_index"])
    assert [p["partition_index"] for p in parts] == [0, 1, 2]
    assert all(p["leader_id"] == broker.broker_id for p in parts)
    assert all(p["replica_nodes"] == [broker.broker_id] for p in parts)

    # Every partition takes writes.
    for partition in range(3):
        recs = make_records(5, tag=f"p{partition}", with_nulls=False)
        assert kp_produce(broker.bootstrap, topic, recs, partition=partition, acks=1) == list(range(5))
        got = kp_consume(broker.bootstrap, topic, 5, partition=partition)
        assert [m.value for m in got] == [r.value for r in recs]

    result = kp_admin.delete_topics([topic], timeout_ms=10000)
    assert [(t["name"], t["error_code"]) for t in result["topics"]] == [(topic, 0)]
    wait_until(lambda: topic not in kp_admin.list_topics(), 10, f"{topic} gone from list_topics()")


def test_kafka_python_create_errors(kp_admin: KafkaAdminClient, topic: str) -> None:
    kp_admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}})
    with pytest.raises(kerr.TopicAlreadyExistsError):
        kp_admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}})
    with pytest.raises(kerr.InvalidTopicError):
        kp_admin.create_topics({"bad/name": {"num_partitions": 1, "replication_factor": 1}})
    with pytest.raises(kerr.InvalidTopicError):
        kp_admin.create_topics({"x" * 250: {"num_partitions": 1, "replication_factor": 1}})
    with pytest.raises(kerr.InvalidReplicationFactorError):
        kp_admin.create_topics({topic + "-rf3": {"num_partitions": 1, "replication_factor": 3}})
    with pytest.raises(kerr.InvalidPartitionsError):
        kp_admin.create_topics({topic + "-p0": {"num_partitions": 0, "replication_factor": 1}})
    names = kp_admin.list_topics()
    assert topic + "-rf3" not in names and topic + "-p0" not in names and "bad/name" not in names


def test_kafka_python_validate_only_creates_nothing(kp_admin: KafkaAdminClient, topic: str) -> None:
    result = kp_admin.create_topics({topic: {"num_partitions": 2, "replication_factor": 1}}, validate_only=True)
    assert [(t["name"], t["error_code"]) for t in result["topics"]] == [(topic, 0)]
    assert topic not in kp_admin.list_topics()


def test_kafka_python_delete_unknown_topic(kp_admin: KafkaAdminClient, topic: str) -> None:
    with pytest.raises(kerr.UnknownTopicOrPartitionError):
        kp_admin.delete_topics([topic + "-never-created"])


def test_deleted_topic_can_be_recreated_empty(kp_admin: KafkaAdminClient, broker: BrokerProcess, topic: str) -> None:
    kp_admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}})
    kp_produce(broker.bootstrap, topic, make_records(10, tag="old", with_nulls=False), acks=1)
    kp_admin.delete_topics([topic])
    wait_until(lambda: topic not in kp_admin.list_topics(), 10, f"{topic} deleted")
    kp_admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}})
    new = make_records(3, tag="new", with_nulls=False)
    assert kp_produce(broker.bootstrap, topic, new, acks=1) == [0, 1, 2]
    got = kp_consume(broker.bootstrap, topic, 3)
    assert [m.value for m in got] == [r.value for r in new]


# -- confluent-kafka ---------------------------------------------------------------------------------------


def ck_error_code(exc_info: pytest.ExceptionInfo[KafkaException]) -> int:
    err = exc_info.value.args[0]
    assert isinstance(err, KafkaError), err
    return int(err.code())


def test_confluent_create_list_delete(ck_admin: AdminClient, broker: BrokerProcess, topic: str) -> None:
    futures = ck_admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)], operation_timeout=10)
    assert futures[topic].result(timeout=20) is None
    md = wait_until(
        lambda: (m := ck_admin.list_topics(timeout=10)).topics.get(topic) and m, 10, f"{topic} in metadata"
    )
    t = md.topics[topic]
    assert t.error is None and sorted(t.partitions) == [0, 1]
    assert all(p.leader == broker.broker_id and list(p.isrs) == [broker.broker_id] for p in t.partitions.values())
    assert list(md.brokers) == [broker.broker_id]
    assert md.controller_id == broker.broker_id

    futures = ck_admin.delete_topics([topic], operation_timeout=10)
    assert futures[topic].result(timeout=20) is None
    wait_until(lambda: topic not in ck_admin.list_topics(timeout=10).topics, 10, f"{topic} gone")


def test_confluent_create_errors(ck_admin: AdminClient, topic: str) -> None:
    ck_admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(timeout=20)

    cases = {
        topic: KafkaError.TOPIC_ALREADY_EXISTS,
        "bad/name": KafkaError.TOPIC_EXCEPTION,
        topic + "-rf3": KafkaError.INVALID_REPLICATION_FACTOR,
    }
    new_topics = [
        NewTopic(topic, num_partitions=1, replication_factor=1),
        NewTopic("bad/name", num_partitions=1, replication_factor=1),
        NewTopic(topic + "-rf3", num_partitions=1, replication_factor=3),
    ]
    futures = ck_admin.create_topics(new_topics, operation_timeout=10)
    for name, code in cases.items():
        with pytest.raises(KafkaException) as exc_info:
            futures[name].result(timeout=20)
        assert ck_error_code(exc_info) == code, (name, exc_info.value)

    with pytest.raises(KafkaException) as exc_info:
        ck_admin.delete_topics([topic + "-never-created"])[topic + "-never-created"].result(timeout=20)
    assert ck_error_code(exc_info) == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert topic + "-rf3" not in ck_admin.list_topics(timeout=10).topics
