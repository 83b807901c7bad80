"""Partition reassignment (AlterPartitionReassignments / ListPartitionReassignments) on four brokers with
kafka-python's admin client, under a running acks=all producer: no acknowledged record lost, the ISR ends as
the target, the removed replica's data is gone."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from . import test_cluster as tc
from .harness import wait_until
from .test_cluster import Cluster, consume_all

zookeeper = tc.zookeeper
cluster = tc.cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]
BIN = Path(sys.executable).parent


def tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "moldau-reassign-partitions"), *args], capture_output=True, text=True,
                          timeout=90)


class AckingProducer(threading.Thread):
    """confluent-kafka, acks=all, numbered values until stopped; remembers what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                                  "message.timeout.ms": 30000})
        self.topic = topic
        self.acked: list[bytes] = []
        self.errors: list[str] = []
        self.stop = threading.Event()

    def _done(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked.append(msg.value())
        else:
            self.errors.append(str(err))

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            self.producer.produce(self.topic, f"v{i}".encode(), partition=0, on_delivery=self._done)
            self.producer.poll(0.01)
            i += 1
        self.producer.flush(40)


def test_reassignment_moves_a_partition_under_load(cluster: Cluster, tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    cluster.start([1, 2, 3, 4])
    bootstrap = cluster.bootstrap()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("moving", num_partitions=1, replica_assignment=[[1, 2, 3]])])["moving"].result(20)
    wait_until(lambda: sorted(cluster.states("moving")[0]["isr"]) == [1, 2, 3], 15, "ISR [1, 2, 3]")
    producer = AckingProducer(bootstrap, "moving")
    producer.start()
    kp = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        wait_until(lambda: len(producer.acked) > 200, 30, "records acknowledged before the move")
        tp = TopicPartition("moving", 0)
        assert kp.alter_partition_reassignments({tp: [2, 3, 4]}) == {tp: None}
        unknown = kp.alter_partition_reassignments({TopicPartition("moving", 5): [1]})
        assert unknown[TopicPartition("moving", 5)] is not None
        wait_until(lambda: cluster.assignment("moving")[0] == [2, 3, 4], 60, "the new replica set")
        state = wait_until(lambda: (lambda s: s if sorted(s["isr"]) == [2, 3, 4] else None)(
            cluster.states("moving")[0]), 30, "ISR [2, 3, 4]")
        assert state["leader"] in (2, 3, 4)
        assert kp.list_partition_reassignments() == {}
        no_op = kp.alter_partition_reassignments({tp: None})  # nothing to cancel
        assert no_op[tp] is not None and no_op[tp].errno == 85  # NO_REASSIGNMENT_IN_PROGRESS
        wait_until(lambda: not (cluster.brokers[1].log_dir / "moving-0").is_dir(), 30,
                   "the data gone from broker 1")
        acked_during = len(producer.acked)
        wait_until(lambda: len(producer.acked) > acked_during + 100, 30, "records acknowledged after the move")
    finally:
        producer.stop.set()
        producer.join(60)
        kp.close()
    assert not producer.errors, producer.errors[:5]
    consumed = consume_all(cluster.bootstrap(), "moving", 1, timeout=60)
    assert set(producer.acked) <= consumed

    # moldau-reassign-partitions as a process: propose, execute (back onto broker 1, preferred first), verify
    bs = ["--bootstrap-server", cluster.bootstrap()]
    topics = tmp_path / "topics.json"
    topics.write_text('{"topics": [{"topic": "moving"}], "version": 1}')
    generated = tool(*bs, "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "1,2,4")
    assert generated.returncode == 0, generated.stderr
    lines = generated.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment" and lines[3] == "Proposed partition reassignment " \
        "configuration"
    assert json.loads(lines[1])["partitions"] == [{"topic": "moving", "partition": 0, "replicas": [2, 3, 4],
                                                  "log_dirs": ["any"] * 3}]
    assert sorted(json.loads(lines[4])["partitions"][0]["replicas"]) == [1, 2, 4]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "moving", "partition": 0,
                                                              "replicas": [1, 2, 4]}]}))
    executed = tool(*bs, "--execute", "--reassignment-json-file", str(plan), "--throttle", "50000000")
    assert executed.returncode == 0, executed.stderr
    assert executed.stdout.splitlines()[-2:] == ["The inter-broker throttle limit was set to 50000000 B/s",
                                                 "Successfully started partition reassignment for moving-0"]
    # --throttle: Kafka's replication throttles (the copy's sources and its new replica) until --verify.
    assert {k: v for k, v in json.loads(cluster.kazoo.get("/config/topics/moving")[0])["config"].items()
            if "throttled" in k} == {"leader.replication.throttled.replicas": "0:2,0:3,0:4",
                                     "follower.replication.throttled.replicas": "0:1"}
    assert json.loads(cluster.kazoo.get("/config/brokers/1")[0])["config"]["leader.replication.throttled.rate"] \
        == "50000000"
    wait_until(lambda: "Reassignment of partition moving-0 is completed." in tool(
        *bs, "--verify", "--reassignment-json-file", str(plan)).stdout.splitlines(), 60, "the tool's move completed")
    assert not [k for k in json.loads(cluster.kazoo.get("/config/topics/moving")[0])["config"] if "throttled" in k]
    assert "leader.replication.throttled.rate" not in json.loads(cluster.kazoo.get("/config/brokers/1")[0])["config"]
    assert cluster.assignment("moving")[0] == [1, 2, 4]
    assert sorted(cluster.states("moving")[0]["isr"]) == [1, 2, 4]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 1, "partitions": [{"topic": "moving", "partition": 0,
                                                             "replicas": [1, 9]}]}))
    refused = tool(*bs, "--execute", "--reassignment-json-file", str(bad))
    assert refused.returncode == 1 and "INVALID_REPLICA_ASSIGNMENT" in refused.stderr

    # the ZooKeeper-era way: a tool writes /admin/reassign_partitions; the controller moves the partition, and
    # removes the znode once done (an unknown partition in it is refused and dropped at once)
    cluster.kazoo.create("/admin/reassign_partitions", json.dumps({"version": 1, "partitions": [
        {"topic": "moving", "partition": 0, "replicas": [3, 4, 2]},
        {"topic": "moving", "partition": 7, "replicas": [1]}]}).encode())
    wait_until(lambda: cluster.kazoo.exists("/admin/reassign_partitions") is None, 60, "the znode removed")
    assert cluster.assignment("moving")[0] == [3, 4, 2]
    wait_until(lambda: sorted(cluster.states("moving")[0]["isr"]) == [2, 3, 4], 15, "ISR [2, 3, 4] again")
    topic_znode = json.loads(cluster.kazoo.get("/brokers/topics/moving")[0])
    assert topic_znode["adding_replicas"] == {} and topic_znode["removing_replicas"] == {}


def test_a_new_controller_resumes_a_reassignment(cluster: Cluster) -> None:
    """The target replica is frozen (SIGSTOP) so the move cannot finish; the controller dies; its successor reads
    the move from the topic znode, lists it, and finishes it once the replica is back."""
    import signal

    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    from .test_cluster import SESSION_TIMEOUT_MS

    cluster.start([1, 2, 3, 4])
    controller = cluster.controller()
    a, b, d = [i for i in (1, 2, 3, 4) if i != controller]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic("resumed", num_partitions=1, replica_assignment=[[a, b]])])["resumed"].result(20)
    wait_until(lambda: sorted(cluster.states("resumed")[0]["isr"]) == sorted([a, b]), 15, "ISR [a, b]")
    frozen = cluster.brokers[d].proc
    assert frozen is not None
    kp = KafkaAdminClient(bootstrap_servers=cluster.brokers[a].bootstrap, request_timeout_ms=15000)
    assert kp.list_partition_reassignments() == {}  # connected to the controller before d freezes
    frozen.send_signal(signal.SIGSTOP)
    try:
        try:
            tp = TopicPartition("resumed", 0)
            assert kp.alter_partition_reassignments({tp: [d, a]}) == {tp: None}
        finally:
            kp.close()
        znode = json.loads(cluster.kazoo.get("/brokers/topics/resumed")[0])
        assert znode["partitions"]["0"] == [d, a, b] and znode["adding_replicas"] == {"0": [d]}
        assert znode["removing_replicas"] == {"0": [b]}
        cluster.brokers[controller].kill()
        wait_until(lambda: cluster.kazoo.exists("/controller") is not None and cluster.controller() in (a, b),
                   SESSION_TIMEOUT_MS / 1000 + 20, "a new controller")
        live = ",".join(cluster.brokers[i].bootstrap for i in (a, b))  # not the frozen one
        kp = KafkaAdminClient(bootstrap_servers=live, request_timeout_ms=15000)
        try:
            ongoing = wait_until(lambda: kp.list_partition_reassignments() or None, 20, "the resumed move listed")
            assert ongoing == {tp: {"replicas": [d, a, b], "adding_replicas": [d], "removing_replicas": [b]}}
        finally:
            kp.close()
    finally:
        frozen.send_signal(signal.SIGCONT)
    wait_until(lambda: cluster.assignment("resumed")[0] == [d, a], SESSION_TIMEOUT_MS / 1000 + 40,
               "the move finished")
    wait_until(lambda: sorted(cluster.states("resumed")[0]["isr"]) == sorted([d, a]), 20, "ISR [d, a]")
    znode = json.loads(cluster.kazoo.get("/brokers/topics/resumed")[0])
    assert znode["adding_replicas"] == {} and znode["removing_replicas"] == {}


def test_cancelling_a_reassignment_restores_the_original_replicas(cluster: Cluster) -> None:
    import signal

    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    cluster.start([1, 2, 3])
    controller = cluster.controller()
    a, d = [i for i in (1, 2, 3) if i != controller]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic("cancelled", num_partitions=1,
                                  replica_assignment=[[a, controller]])])["cancelled"].result(20)
    wait_until(lambda: sorted(cluster.states("cancelled")[0]["isr"]) == sorted([a, controller]), 15, "in sync")
    frozen = cluster.brokers[d].proc
    assert frozen is not None
    kp = KafkaAdminClient(bootstrap_servers=cluster.brokers[a].bootstrap, request_timeout_ms=15000)
    assert kp.list_partition_reassignments() == {}  # connected to the controller before d freezes
    frozen.send_signal(signal.SIGSTOP)  # the new replica cannot catch up: the move stays in progress
    try:
        tp = TopicPartition("cancelled", 0)
        assert kp.alter_partition_reassignments({tp: [d, a]}) == {tp: None}
        assert kp.list_partition_reassignments() == {
            tp: {"replicas": [d, a, controller], "adding_replicas": [d], "removing_replicas": [controller]}}
        assert cluster.assignment("cancelled")[0] == [d, a, controller]
        # adding a partition meanwhile keeps the move's adding/removing replicas in the topic znode
        kp.create_partitions({"cancelled": {"count": 2, "assignments": [[a, controller]]}})
        znode = json.loads(cluster.kazoo.get("/brokers/topics/cancelled")[0])
        assert znode["partitions"] == {"0": [d, a, controller], "1": [a, controller]}
        assert znode["adding_replicas"] == {"0": [d]} and znode["removing_replicas"] == {"0": [controller]}
        assert kp.alter_partition_reassignments({tp: None}) == {tp: None}  # cancel
        wait_until(lambda: cluster.assignment("cancelled")[0] == [a, controller], 20, "the original replicas")
        assert kp.list_partition_reassignments() == {}
    finally:
        kp.close()
        frozen.send_signal(signal.SIGCONT)
    znode = json.loads(cluster.kazoo.get("/brokers/topics/cancelled")[0])
    assert znode["adding_replicas"] == {} and znode["removing_replicas"] == {}
    assert sorted(cluster.states("cancelled")[0]["isr"]) == sorted([a, controller])
