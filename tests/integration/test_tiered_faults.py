"""Tiered storage under faults, on three ZooKeeper-mode brokers tiering to a real S3-API server (moto, one process
for the module): the object store stops answering (SIGSTOP, a few seconds standing in for the issue's 30 s),
the leader is killed (kill -9) in the middle of a copy, and a broker comes back with an empty disk. Nothing
acknowledged is lost, no segment is orphaned or counted twice, and the rebuilt broker copies only the local tail.

One cluster serves the module; each test has its own topic. The store's client gives up after 3 attempts of
500 ms (``rsm.config.s3.api.call.attempt.timeout``), so an outage of a few seconds shows what 30 s would."""

from __future__ import annotations

import asyncio
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from moldau.connection import BrokerConnection, api_for
from moldau.protocol.api import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.storage.remote.metadata import METADATA_TOPIC, RemoteLogMetadataCache, decode_event

from . import test_cluster as tc
from .clients import ck_consume, make_records
from .harness import BrokerProcess, wait_until
from .s3server import S3Server, start_s3_server
from .test_cluster import Cluster
from .test_confluent import produce

zookeeper = tc.zookeeper
# ~20 s to start the cluster and the store, ~25 s and ~20 s the tests (a ZooKeeper session to expire, S3 calls
# to time out): the slow tier, as test_tiered_cluster.py.
pytestmark = [pytest.mark.integration, pytest.mark.slow]

BUCKET = "faults"
METADATA_PARTITIONS = 2


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    server = start_s3_server(tmp_path_factory.mktemp("moto") / "moto.log")
    try:
        yield server
    finally:
        if server.proc is not None and server.proc.poll() is None:
            server.proc.send_signal(signal.SIGCONT)
        server.stop()


@pytest.fixture(scope="module")
def cluster(zookeeper: Any, s3: S3Server, tmp_path_factory: pytest.TempPathFactory,
            request: pytest.FixtureRequest) -> Iterator[Cluster]:
    c = Cluster(zookeeper, tmp_path_factory.mktemp("tiered-faults"), request)
    try:
        c.start([1, 2, 3], lambda _: {
            "remote.log.storage.system.enable": "true", "remote.log.storage.manager.class.name": "s3",
            **s3.rsm_config(BUCKET), "rsm.config.s3.api.call.attempt.timeout": "500",
            "remote.log.manager.task.interval.ms": "200",
            "rlmm.config.remote.log.metadata.topic.num.partitions": str(METADATA_PARTITIONS),
            "rlmm.config.remote.log.metadata.topic.replication.factor": "3"})
        yield c
    finally:
        c.close()


def create(cluster: Cluster, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    # The previous test restarts a broker as it ends: its port opens before the controller and the other brokers
    # know it is back, and CreateTopics with it in the assignment then answers INVALID_REPLICA_ASSIGNMENT.
    def everyone_known() -> bool:
        for b in cluster.brokers.values():
            try:
                ids = set(AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=5).brokers)
            except Exception:  # noqa: BLE001 - a broker still starting: ask again
                return False
            if ids != {1, 2, 3}:
                return False
        return True

    wait_until(everyone_known, 60, "every broker registered and known to the others")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2, 3]], config={
        "remote.storage.enable": "true", "segment.bytes": "16384", "local.retention.bytes": "1",
        "min.insync.replicas": "2"})])[topic].result(30)
    wait_until(lambda: sorted(cluster.states(topic)[0]["isr"]) == [1, 2, 3], 30, f"{topic}'s ISR")


def write(cluster: Cluster, topic: str, n: int, tag: str) -> list[bytes]:
    records = make_records(n, tag=tag, with_nulls=False)
    offsets = produce(cluster.bootstrap(), topic, records, acks="all", **{
        "enable.idempotence": True, "batch.num.messages": 10})
    assert offsets == sorted(offsets) and len(set(offsets)) == n
    return [r.value for r in records if r.value is not None]


def bases(broker: BrokerProcess, topic: str) -> list[int]:
    return sorted(int(p.name[:20]) for p in broker.partition_dir(topic).glob("*.log"))


def leader(cluster: Cluster, topic: str) -> int:
    return int(cluster.states(topic)[0]["leader"])


def copy_errors(broker: BrokerProcess) -> float:
    lines = [x for x in broker.fetch_metrics().splitlines() if x.startswith("moldau_remote_copy_errors_total ")]
    return float(lines[0].split()[1]) if lines else 0.0


def remote_metadata(bootstrap: str, topic: str) -> RemoteLogMetadataCache:
    """Replays __remote_log_metadata to its end, as a broker does, keeping ``topic``'s events."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "inspect", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 10})
    cache = RemoteLogMetadataCache()
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(METADATA_TOPIC, p), timeout=10)[1]
                for p in range(METADATA_PARTITIONS)}
        consumer.assign([TopicPartition(METADATA_TOPIC, p, OFFSET_BEGINNING) for p, end in ends.items() if end > 0])
        positions = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + 20
        while any(positions[p] < ends[p] for p in ends):
            assert time.monotonic() < deadline, f"metadata read {positions} of {ends}"
            for m in consumer.consume(500, 0.1):
                assert m.error() is None, m.error()
                positions[m.partition()] = m.offset() + 1
                event = decode_event(m.value())
                if event.segment_id.topic == topic:
                    cache.apply(event)
    finally:
        consumer.close()
    return cache


def s3_segment_ids(s3: S3Server, topic: str) -> set[str]:
    import boto3

    client = boto3.session.Session().client("s3", endpoint_url=s3.endpoint, region_name="us-east-1",
                                            aws_access_key_id="test", aws_secret_access_key="test")
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix=f"{topic}-0/")
    # <start offset, 20 digits>-<segment id>.<kind>
    return {obj["Key"].split("/")[-1][21:].split(".")[0] for obj in listed.get("Contents", [])}


def consistent(s3: S3Server, cache: RemoteLogMetadataCache, topic: str) -> bool:
    """Every copy finished or deleted, none counted twice, the remote log contiguous from 0, and the bucket
    holding exactly the objects of the finished segments."""
    chain = cache.copied_segments(topic, 0)
    contiguous = bool(chain) and chain[0].start_offset == 0 and all(
        b.start_offset == a.end_offset + 1 for a, b in zip(chain, chain[1:], strict=False))
    return (contiguous and not cache.unfinished_segments(topic, 0) and not cache.redundant_segments(topic, 0)
            and s3_segment_ids(s3, topic) == {str(m.segment_id.id) for m in chain})


async def fetch_at(broker: BrokerProcess, topic: str, offset: int) -> tuple[int, float]:
    """One consumer Fetch of partition 0 at ``offset``: (error code, seconds the answer took)."""
    body = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset,
                                                        "current_leader_epoch": -1, "log_start_offset": -1,
                                                        "partition_max_bytes": 1 << 20}]}]}
    async with BrokerConnection("127.0.0.1", broker.port, client_id="faults") as conn:
        started = time.monotonic()
        response = await conn.send(api_for(ApiKey.FETCH), body, version=11)
        part = response["responses"][0]["partitions"][0]
        return int(part["error_code"]), time.monotonic() - started


def test_store_outage_and_leader_killed_mid_copy(cluster: Cluster, s3: S3Server) -> None:
    topic = "outage"
    create(cluster, topic)
    values = write(cluster, topic, 400, "before")
    old = leader(cluster, topic)
    wait_until(lambda: len(bases(cluster.brokers[old], topic)) <= 2, 60, "the first segments copied to S3")
    before = bases(cluster.brokers[old], topic)
    local_start = before[0]
    assert local_start > 0
    errors = copy_errors(cluster.brokers[old])

    assert s3.proc is not None
    s3.proc.send_signal(signal.SIGSTOP)  # the store stops answering: connections open, requests hang
    try:
        values += write(cluster, topic, 400, "during")  # produce does not depend on the store
        wait_until(lambda: copy_errors(cluster.brokers[old]) > errors, 30, "a copy to time out")
        held = bases(cluster.brokers[old], topic)
        assert held[0] == local_start and len(held) >= len(before) + 2  # nothing deleted while uncopied

        # A remote read fails with a retriable error, each answer bounded (remote.fetch.max.wait.ms), no hang.
        async def until_storage_error() -> None:
            while True:
                code, seconds = await fetch_at(cluster.brokers[old], topic, 0)
                assert seconds < 5 and code in (ErrorCode.NONE, ErrorCode.KAFKA_STORAGE_ERROR), (code, seconds)
                if code == ErrorCode.KAFKA_STORAGE_ERROR:
                    return

        asyncio.run(asyncio.wait_for(until_storage_error(), 30))
        assert ErrorCode.KAFKA_STORAGE_ERROR.retriable
        # Local reads go on.
        got = ck_consume(cluster.bootstrap(), topic, 800 - local_start, start_offset=local_start, timeout=30)
        assert [m.value() for m in got] == values[local_start:]

        # Mid-copy: the leader has announced a copy that cannot finish; kill -9 it there.
        wait_until(lambda: remote_metadata(cluster.bootstrap(), topic).unfinished_segments(topic, 0), 30,
                   "a copy started and not finished")
        cluster.brokers[old].stop(signal.SIGKILL)
    finally:
        s3.proc.send_signal(signal.SIGCONT)

    wait_until(lambda: leader(cluster, topic) not in (old, -1), 30, "a new leader")
    new = cluster.brokers[leader(cluster, topic)]
    wait_until(lambda: len(bases(new, topic)) <= 2, 60, "the new leader to copy the rest")
    wait_until(lambda: consistent(s3, remote_metadata(cluster.bootstrap(), topic), topic), 30,
               "no orphaned or doubly counted segment")
    got = ck_consume(cluster.bootstrap(), topic, len(values), timeout=60)
    assert [(m.offset(), m.value()) for m in got] == list(enumerate(values))

    cluster.brokers[old].start()  # for the next test


def test_broker_replaced_with_an_empty_disk_copies_only_the_tail(cluster: Cluster, s3: S3Server) -> None:
    topic = "replaced"
    create(cluster, topic)
    values = write(cluster, topic, 600, "replaced")
    lead = leader(cluster, topic)
    wait_until(lambda: len(bases(cluster.brokers[lead], topic)) <= 2, 60, "segments copied to S3")
    local_start = bases(cluster.brokers[lead], topic)[0]
    assert local_start > 0

    victim_id = next(i for i in (1, 2, 3) if i != lead)
    victim = cluster.brokers[victim_id]
    victim.stop()  # controlled shutdown: out of the ISR (kill -9 is the other test's)
    shutil.rmtree(victim.log_dir)  # a new disk
    victim.log_dir.mkdir()
    victim.start()
    leader_dir = cluster.brokers[lead].partition_dir(topic)

    def caught_up() -> bool:
        try:
            mine = {p.name: p.stat().st_size for p in victim.partition_dir(topic).glob("*.log")}
        except FileNotFoundError:
            return False
        return mine == {p.name: p.stat().st_size for p in leader_dir.glob("*.log")}

    wait_until(caught_up, 60, "the new disk to hold the leader's local log")
    wait_until(lambda: sorted(cluster.states(topic)[0]["isr"]) == [1, 2, 3], 60, "the new disk in the ISR")
    rebuilt = bases(victim, topic)
    assert rebuilt and rebuilt[0] >= local_start  # the leader's local tail only, nothing of the remote part
    assert sum(f.stat().st_size for f in Path(victim.partition_dir(topic)).glob("*.log")) < 3 * 16384

    # The rebuilt broker alone serves the partition, the remote part from the metadata it replayed (the leader
    # last: its controlled shutdown hands the partition to the rebuilt broker, the one other in-sync replica).
    for other in sorted((i for i in (1, 2, 3) if i != victim_id), key=lambda i: i == lead):
        cluster.brokers[other].stop()
    wait_until(lambda: leader(cluster, topic) == victim_id, 30, "the rebuilt broker leading")
    got = ck_consume(victim.bootstrap, topic, len(values), timeout=60)
    assert [(m.offset(), m.value()) for m in got] == list(enumerate(values))
