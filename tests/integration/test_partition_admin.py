"""CreatePartitions, DeleteRecords, ElectLeaders and DescribeLogDirs against three broker processes and a real
ZooKeeper, driven by confluent-kafka's and kafka-python's admin clients (and their consumers)."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from . import test_cluster as tc
from .harness import wait_until
from .test_cluster import SESSION_TIMEOUT_MS, Cluster, create_topic_confluent, metadata

# The module-scoped ZooKeeper and the per-test three-broker cluster of test_cluster.py.
zookeeper = tc.zookeeper
cluster = tc.cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _confluent_admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def _kp_admin(bootstrap: str) -> Any:
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)


def _partitions_in_metadata(c: Cluster, topic: str) -> set[int]:
    md = metadata(next(iter(c.brokers.values())))
    t = next((x for x in md["topics"] if x["name"] == topic), None)
    return set() if t is None else {p["partition_index"] for p in t["partitions"] if p["leader_id"] >= 0}


def test_create_partitions_from_both_clients_and_a_group_rebalances(cluster: Cluster) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer
    from confluent_kafka.admin import NewPartitions
    from kafka.errors import (
        InvalidPartitionsError,
        InvalidReplicationAssignmentError,
        UnknownTopicOrPartitionError,
    )

    cluster.start([1, 2, 3])
    bootstrap = cluster.bootstrap()
    create_topic_confluent(bootstrap, "grow", partitions=2, rf=2)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "grow-group", "auto.offset.reset": "earliest",
                         "topic.metadata.refresh.interval.ms": 1000, "session.timeout.ms": 10000})
    assigned: list[set[int]] = []
    consumer.subscribe(["grow"], on_assign=lambda c, parts: assigned.append({p.partition for p in parts}))
    try:
        wait_until(lambda: consumer.poll(0.2) is None and bool(assigned), 30, "the first assignment")
        assert assigned[-1] == {0, 1}

        admin = _confluent_admin(bootstrap)
        # validate_only changes nothing
        admin.create_partitions([NewPartitions("grow", 4)], validate_only=True)["grow"].result(20)
        assert len(cluster.assignment("grow")) == 2
        admin.create_partitions([NewPartitions("grow", 4)], operation_timeout=15)["grow"].result(20)
        plan = cluster.assignment("grow")
        assert sorted(plan) == [0, 1, 2, 3] and all(len(set(r)) == 2 for r in plan.values())
        states = cluster.states("grow")
        assert all(states[p]["leader"] == plan[p][0] for p in (2, 3))
        # an explicit assignment (confluent) and the algorithm (kafka-python), then the error cases
        admin.create_partitions([NewPartitions("grow", 5, [[3, 1]])])["grow"].result(20)
        assert cluster.assignment("grow")[4] == [3, 1]
        kp = _kp_admin(bootstrap)
        try:
            kp.create_partitions({"grow": 6}, timeout_ms=15000)
            assert len(cluster.assignment("grow")) == 6
            with pytest.raises(InvalidPartitionsError):
                kp.create_partitions({"grow": 3})
            with pytest.raises(InvalidPartitionsError):
                kp.create_partitions({"grow": 6})
            with pytest.raises(UnknownTopicOrPartitionError):
                kp.create_partitions({"no-such-topic": 3})
            with pytest.raises(InvalidReplicationAssignmentError):
                kp.create_partitions({"grow": {"count": 7, "assignments": [[1, 9]]}})
        finally:
            kp.close()
        with pytest.raises(KafkaException) as err:
            admin.create_partitions([NewPartitions("grow", 2)])["grow"].result(20)
        assert err.value.args[0].name() == "INVALID_PARTITIONS"
        wait_until(lambda: _partitions_in_metadata(cluster, "grow") == set(range(6)), 15, "leaders of 6 partitions")

        # the group's consumer notices the new partitions and rebalances onto them; a producer writes to them
        wait_until(lambda: consumer.poll(0.2) is None and assigned[-1] == set(range(6)), 40,
                   "a rebalance onto the new partitions")
        producer = Producer({"bootstrap.servers": bootstrap})
        for p in range(6):
            producer.produce("grow", f"to-{p}".encode(), partition=p)
        assert producer.flush(20) == 0
        seen: set[tuple[int, bytes]] = set()

        def consumed_all() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.add((msg.partition(), msg.value()))
            return len(seen) == 6

        wait_until(consumed_all, 30, "records from every partition")
        assert seen == {(p, f"to-{p}".encode()) for p in range(6)}
    finally:
        consumer.close()


def test_delete_records_moves_earliest_on_leader_and_followers(cluster: Cluster) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    from kafka import TopicPartition as KpTopicPartition
    from kafka.errors import OffsetOutOfRangeError

    cluster.start([1, 2, 3])
    bootstrap = cluster.bootstrap()
    create_topic_confluent(bootstrap, "trim", partitions=2, rf=3)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(100):
        producer.produce("trim", str(i).encode(), partition=i % 2)
    assert producer.flush(20) == 0

    admin = _confluent_admin(bootstrap)
    result = admin.delete_records([TopicPartition("trim", 0, 30)])
    deleted = next(iter(result.values())).result(20)
    assert deleted.low_watermark == 30
    # above the high watermark (50 records in partition 0)
    with pytest.raises(KafkaException) as err:
        next(iter(admin.delete_records([TopicPartition("trim", 0, 51)]).values())).result(20)
    assert err.value.args[0].name() == "OFFSET_OUT_OF_RANGE"

    kp = _kp_admin(bootstrap)
    try:
        answer = kp.delete_records({KpTopicPartition("trim", 1): 20})
        assert answer[KpTopicPartition("trim", 1)]["low_watermark"] == 20
        with pytest.raises(OffsetOutOfRangeError):
            kp.delete_records({KpTopicPartition("trim", 1): 99})
    finally:
        kp.close()

    # earliest moved: ListOffsets from confluent's consumer
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "trim-reader", "enable.auto.commit": False,
                         "auto.offset.reset": "error"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition("trim", 0), timeout=10)
        assert (low, high) == (30, 50)
        # a consumer at an old offset is out of range (auto.offset.reset=error surfaces it)
        consumer.assign([TopicPartition("trim", 0, 5)])
        errors: list[str] = []

        def out_of_range() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                errors.append(msg.error().name())
            return any("OFFSET_OUT_OF_RANGE" in e or "AUTO_OFFSET_RESET" in e for e in errors)

        wait_until(out_of_range, 20, "OFFSET_OUT_OF_RANGE for offset 5")
    finally:
        consumer.close()

    # the followers follow: a record written with acks=all after the deletion reached every follower in a Fetch
    # response that also carried the leader's log start offset; a clean stop writes log-start-offset-checkpoint
    producer.produce("trim", b"after", partition=0)
    assert producer.flush(20) == 0
    for broker in cluster.brokers.values():
        broker.stop(signal.SIGTERM, timeout=20)
    assert [_log_start(b.partition_dir("trim", 0)) for b in cluster.brokers.values()] == [30, 30, 30]


def _log_start(partition_dir: Any) -> int:
    for line in (partition_dir.parent / "log-start-offset-checkpoint").read_text().splitlines()[2:]:
        topic, partition, offset = line.split()
        if (topic, partition) == ("trim", "0"):
            return int(offset)
    return 0


def test_elect_leaders_preferred_and_unclean(cluster: Cluster) -> None:
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import NewTopic

    cluster.start([1, 2, 3], extra=lambda i: {"auto.leader.rebalance.enable": "false"})
    bootstrap = cluster.bootstrap()
    controller = cluster.controller()
    a, b = [i for i in (1, 2, 3) if i != controller]
    admin = _confluent_admin(bootstrap)
    for future in admin.create_topics([NewTopic("pref", num_partitions=1, replica_assignment=[[a, b, controller]]),
                                       NewTopic("dirty", num_partitions=1, replica_assignment=[[a, b]])]).values():
        future.result(20)
    wait_until(lambda: cluster.states("pref")[0]["leader"] == a and cluster.states("dirty")[0]["leader"] == a, 15,
               "first leaders")

    # preferred: move the leadership away (controlled shutdown of a), bring a back, elect on demand
    assert cluster.brokers[a].stop(signal.SIGTERM, timeout=20) == 0
    assert cluster.states("pref")[0]["leader"] == b
    cluster.brokers[a].start()
    wait_until(lambda: sorted(cluster.states("pref")[0]["isr"]) == sorted([a, b, controller]), 30, "a back in sync")
    assert cluster.states("pref")[0]["leader"] == b  # no automatic rebalance
    tp = TopicPartition("pref", 0)
    results = admin.elect_leaders(ElectionType.PREFERRED, [tp, TopicPartition("pref", 7)]).result(30)
    by_partition = {t.partition: e for t, e in results.items()}
    assert by_partition[0] is None and by_partition[7].name() == "UNKNOWN_TOPIC_OR_PART"
    assert cluster.states("pref")[0]["leader"] == a
    again = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(30)
    assert next(iter(again.values())).name() == "ELECTION_NOT_NEEDED"
    kp = _kp_admin(bootstrap)
    try:
        answer = kp.elect_leaders(0, None, raise_errors=False)
        codes = {(r[0], p[0]): p[1] for r in answer.replica_election_results for p in r[1]}
        # all partitions: pref is led by its preferred replica already (ELECTION_NOT_NEEDED); dirty lost a in the
        # controlled shutdown too, and goes back to it now
        assert codes[("pref", 0)] == 84 and codes[("dirty", 0)] == 0
        assert cluster.states("dirty")[0]["leader"] == a
        # unclean on a partition whose leader lives: not needed
        answer = kp.elect_leaders(1, {"dirty": [0]}, raise_errors=False)
        assert answer.replica_election_results[0][1][0][1] == 84
    finally:
        kp.close()

    # unclean: b leaves the ISR (stopped), then a, the last in-sync replica, dies; b returns out of sync
    assert cluster.brokers[b].stop(signal.SIGTERM, timeout=20) == 0
    wait_until(lambda: cluster.states("dirty")[0]["isr"] == [a], 15, "ISR [a]")
    cluster.brokers[a].kill()
    wait_until(lambda: cluster.states("dirty")[0]["leader"] == -1, SESSION_TIMEOUT_MS / 1000 + 15, "offline")
    cluster.brokers[b].start()
    wait_until(lambda: str(b) in cluster.kazoo.get_children("/brokers/ids"), 20, "b registered")
    assert cluster.states("dirty")[0]["leader"] == -1  # unclean election is disabled: it stays offline
    dirty = TopicPartition("dirty", 0)
    bootstrap = cluster.bootstrap()
    admin = _confluent_admin(bootstrap)
    preferred = admin.elect_leaders(ElectionType.PREFERRED, [dirty]).result(30)
    assert next(iter(preferred.values())).name() == "PREFERRED_LEADER_NOT_AVAILABLE"
    unclean = admin.elect_leaders(ElectionType.UNCLEAN, [dirty]).result(30)
    assert next(iter(unclean.values())) is None
    state = cluster.states("dirty")[0]
    assert state["leader"] == b and state["isr"] == [b]


def test_describe_log_dirs_with_kafka_python(cluster: Cluster) -> None:
    from confluent_kafka import Producer

    cluster.start([1, 2, 3])
    bootstrap = cluster.bootstrap()
    create_topic_confluent(bootstrap, "sized", partitions=3, rf=2)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(300):
        producer.produce("sized", b"x" * 100, partition=i % 3)
    assert producer.flush(20) == 0
    plan = cluster.assignment("sized")
    kp = _kp_admin(bootstrap)
    try:
        def sizes() -> dict[tuple[int, int], int]:
            out: dict[tuple[int, int], int] = {}
            for response in kp.describe_log_dirs():
                for log_dir in response["log_dirs"]:
                    assert log_dir["error_code"] == 0
                    for topic in log_dir["topics"]:
                        for part in topic["partitions"] if topic["name"] == "sized" else []:
                            assert part["is_future_key"] is False and part["offset_lag"] >= 0
                            out[(part["partition_index"], response["broker"])] = part["partition_size"]
            return out

        # followers fetch asynchronously: wait until every replica holds the 100 records of its partition
        found = wait_until(lambda: (lambda s: s if len(s) == 6 and min(s.values()) > 100 * 100 else None)(sizes()),
                           20, "six replicas with their records")
    finally:
        kp.close()
    assert set(found) == {(p, r) for p, rs in plan.items() for r in rs}
