"""A log dir that fills up (a small tmpfs): Kafka's JBOD behaviour (KIP-112).

The broker answers KAFKA_STORAGE_ERROR, takes that log dir offline (moldau_offline_log_dirs 1), tells the
controller through /log_dir_event_notification, and the controller moves leadership of the partitions there to
other replicas and takes them out of the ISR. The broker keeps serving the partitions in its other log dir, and
no acknowledged write is lost. A broker whose every log dir failed shuts down with exit code 1.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.protocol.errors import ErrorCode

from .harness import BrokerProcess, wait_until
from .test_cluster import Cluster, cluster, zookeeper  # noqa: F401
from .test_replication import create_topic, produce

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SMALL_DISK = "3m"
VALUE = b"x" * 60_000


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MiB tmpfs: writes beyond that fail with ENOSPC, as on a full disk."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    d = tmp_path / "small-disk"
    d.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SMALL_DISK}", "tmpfs", str(d)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], capture_output=True)


def offline_log_dirs(broker: BrokerProcess) -> float:
    found = re.search(r"^moldau_offline_log_dirs ([0-9.e+-]+)$", broker.fetch_metrics(), re.M)
    assert found is not None
    return float(found.group(1))


def test_a_full_log_dir_goes_offline_and_its_partitions_move_while_the_other_dir_serves_on(
        small_disk: Path, cluster: Cluster, tmp_path: Path) -> None:  # noqa: F811
    from confluent_kafka import Consumer, Producer, TopicPartition

    big = tmp_path / "big-disk"
    settings = {"replica.lag.time.max.ms": "30000", "auto.leader.rebalance.enable": "false",
                "default.replication.factor": "3", "log.segment.bytes": str(1 << 20)}
    cluster.start([1, 2, 3], extra=lambda i: {**settings, **({"log.dirs": f"{big},{small_disk}"} if i == 1 else {})})
    topic = "jbod"
    create_topic(cluster, topic, partitions=4, min_isr=2)
    on_small = sorted(int(p.name.rsplit("-", 1)[1]) for p in small_disk.glob(f"{topic}-*"))
    on_big = sorted(int(p.name.rsplit("-", 1)[1]) for p in big.glob(f"{topic}-*"))
    assert on_small and on_big and sorted(on_small + on_big) == [0, 1, 2, 3], (on_small, on_big)
    broker1 = cluster.brokers[1]

    acked: set[bytes] = set()
    errors: list[str] = []
    lock = threading.Lock()
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "enable.idempotence": True, "acks": "all",
                        "linger.ms": 5, "message.timeout.ms": 90000, "retry.backoff.ms": 100,
                        "topic.metadata.refresh.interval.ms": 1000})

    def done(err: object, msg: object, value: bytes) -> None:
        with lock:
            if err is None:
                acked.add(value)
            else:
                errors.append(str(err))

    # Far more than 3 MiB per partition on the small disk: it fills up within the first part of this.
    n = 0
    deadline = time.monotonic() + 60
    while offline_log_dirs(broker1) < 1 and time.monotonic() < deadline:
        for p in range(4):
            value = VALUE + f"|{p}|{n}".encode()
            producer.produce(topic, value, partition=p, on_delivery=lambda e, m, v=value: done(e, m, v))
            n += 1
        producer.poll(0)
        time.sleep(0.01)
    assert offline_log_dirs(broker1) == 1, "the small log dir never went offline"
    # The controller moves leadership off the failed replicas and takes them out of the ISR; the replicas in
    # the healthy log dir stay in sync.
    wait_until(lambda: all(1 not in s["isr"] and s["leader"] != 1
                           for p, s in cluster.states(topic).items() if p in on_small), 30,
               "broker 1's failed replicas out of the ISR and leadership")
    for i in range(200):  # writes go on to every partition
        value = VALUE[:100] + f"|after|{i}".encode()
        producer.produce(topic, value, partition=i % 4, on_delivery=lambda e, m, v=value: done(e, m, v))
    assert producer.flush(90) == 0
    assert not errors, errors[:5]
    states = cluster.states(topic)
    assert all(1 in states[p]["isr"] for p in on_big), states
    assert broker1.is_running()
    # DescribeLogDirs (kafka-python): the failed dir is reported with KAFKA_STORAGE_ERROR, the other with its
    # partitions.
    from kafka.admin import KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(), request_timeout_ms=15000)
    try:
        [described] = kp.describe_log_dirs(brokers=[1])
    finally:
        kp.close()
    by_dir = {d["log_dir"]: d for d in described["log_dirs"]}
    assert by_dir[str(small_disk.resolve())]["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
    assert by_dir[str(small_disk.resolve())]["topics"] == []
    healthy = by_dir[str(big.resolve())]
    assert healthy["error_code"] == 0
    assert sorted(p["partition_index"] for t in healthy["topics"] if t["name"] == topic
                  for p in t["partitions"]) == on_big
    for p in on_small:
        # Broker 1 no longer serves these partitions: a client that still asks it is told so.
        body_error = produce_to(broker1, topic, p)
        assert body_error in (ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_LEADER_OR_FOLLOWER), body_error

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "jbod-check",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(4)])
        seen: set[bytes] = set()
        end = time.monotonic() + 60
        while not acked <= seen and time.monotonic() < end:
            for msg in consumer.consume(500, 1.0):
                if msg.error() is None:
                    seen.add(msg.value())
    finally:
        consumer.close()
    assert acked <= seen, f"{len(acked - seen)} acknowledged records lost"


def produce_to(broker: BrokerProcess, topic: str, partition: int) -> ErrorCode:
    """acks=1 produce of one small record straight to ``broker``; its error code."""
    import asyncio

    from moldau.connection import BrokerConnection, api_for
    from moldau.protocol.api import ApiKey
    from moldau.protocol.records import build_batch

    async def go() -> ErrorCode:
        body = {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
                "topic_data": [{"name": topic, "partition_data": [
                    {"index": partition, "records": build_batch([(None, b"probe", [], None)])}]}]}
        async with BrokerConnection("127.0.0.1", broker.port, client_id="disk-test") as conn:
            response = await conn.send(api_for(ApiKey.PRODUCE), body)
        return ErrorCode.for_code(int(response["responses"][0]["partition_responses"][0]["error_code"]))

    return asyncio.run(asyncio.wait_for(go(), 20))


def test_a_broker_whose_every_log_dir_failed_shuts_down(small_disk: Path, tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "broker", overrides={"log.dirs": str(small_disk),
                                                           "log.segment.bytes": str(1 << 20)})
    broker.start()
    try:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics([NewTopic("fill", 1, 1)], request_timeout=15).values():
            future.result(timeout=20)
        wait_until(lambda: produce(broker, "fill", [b"first"], acks=1) == ErrorCode.NONE, 30, "topic writable")
        error = ErrorCode.NONE
        deadline = time.monotonic() + 60
        while error == ErrorCode.NONE and time.monotonic() < deadline:
            error = produce(broker, "fill", [VALUE] * 10, acks=1)
        assert error == ErrorCode.KAFKA_STORAGE_ERROR
        assert broker.proc is not None
        assert broker.proc.wait(timeout=60) == 1
        assert "every log dir has failed" in broker.stderr_tail()
    finally:
        broker.kill()
