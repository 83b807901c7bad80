"""Replication with a real ZooKeeper and three broker processes: ISR shrink and expansion with a paused follower
(URP on /metrics, acks=all with min.insync.replicas=2), a divergent log truncated through leader epochs, and the
verification test: an idempotent acks=all producer writing while leaders are stopped and killed, after which
every acknowledged value is read exactly once with no gap in the offsets (judged by moldau-verify's checker).

Every wait is bounded; every process is stopped by the fixtures.
"""

from __future__ import annotations

import json
import re
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from moldau.broker.verify.checker import check
from moldau.broker.verify.history import FINAL_READ, History, make_value
from moldau.connection import BrokerConnection, api_for
from moldau.protocol.api import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.records import build_batch

from .harness import BrokerProcess, wait_until
from .test_cluster import SESSION_TIMEOUT_MS, Cluster, cluster, metadata, run, send, zookeeper  # noqa: F401

pytestmark = pytest.mark.integration

LAG_MS = 3000
BROKER_SETTINGS = {"replica.lag.time.max.ms": str(LAG_MS), "replica.fetch.backoff.ms": "200",
                   "replica.fetch.wait.max.ms": "500", "auto.leader.rebalance.enable": "false",
                   "offsets.topic.replication.factor": "3", "default.replication.factor": "3"}
FAILOVER_S = SESSION_TIMEOUT_MS / 1000 + 15


def start(c: Cluster, settings: dict[str, str] | None = None) -> None:
    c.start([1, 2, 3], extra=lambda _: {**BROKER_SETTINGS, **(settings or {})})


def create_topic(c: Cluster, name: str, partitions: int = 1, min_isr: int = 2) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    topic = NewTopic(name, partitions, 3, config={"min.insync.replicas": str(min_isr)})
    for future in admin.create_topics([topic], request_timeout=15).values():
        future.result(timeout=20)
    wait_until(lambda: all(s["leader"] >= 0 for s in c.states(name).values()), 15, "leaders for the new topic")
    # ZooKeeper names the leaders before the leaders have heard (LeaderAndIsr): wait until each leader's own
    # metadata, which the controller updates only after its LeaderAndIsr to that broker, says it leads.
    for p, s in c.states(name).items():
        wait_until(lambda p=p, leader=s["leader"]: leads(c.brokers[leader], name, p), 15,
                   f"broker {s['leader']} leading {name}-{p}")


def leads(broker: BrokerProcess, topic: str, partition: int) -> bool:
    topics = {t["name"]: t for t in metadata(broker)["topics"]}
    parts = {p["partition_index"]: p for p in (topics.get(topic) or {"partitions": []})["partitions"]}
    return partition in parts and parts[partition]["leader_id"] == broker.broker_id


def state(c: Cluster, topic: str, p: int = 0) -> dict[str, Any]:
    return json.loads(c.kazoo.get(f"/brokers/topics/{topic}/partitions/{p}/state")[0])  # type: ignore[no-any-return]


def gauge(broker: BrokerProcess, name: str) -> float:
    return broker.gauge(name)


def urp(broker: BrokerProcess) -> float:
    return gauge(broker, "moldau_under_replicated_partitions")


async def _produce(port: int, topic: str, batch: bytes, acks: int, timeout_ms: int = 10000) -> tuple[ErrorCode, int]:
    body = {"transactional_id": None, "acks": acks, "timeout_ms": timeout_ms,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
    async with BrokerConnection("127.0.0.1", port, client_id="replication-test",
                                request_timeout_ms=timeout_ms + 5000) as conn:
        response = await conn.send(api_for(ApiKey.PRODUCE), body)
    answer = response["responses"][0]["partition_responses"][0]
    return ErrorCode.for_code(int(answer["error_code"])), int(answer["base_offset"])


def produce(broker: BrokerProcess, topic: str, values: list[bytes], acks: int = -1) -> ErrorCode:
    batch = build_batch([(None, v, [], None) for v in values])
    return run(_produce(broker.port, topic, batch, acks))[0]  # type: ignore[no-any-return]


def read_all(bootstrap: str, topic: str, timeout: float = 30) -> list[tuple[int, bytes]]:
    """(offset, value) of every record of partition 0 up to its high watermark (confluent-kafka consumer)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{time.monotonic_ns()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        tp = TopicPartition(topic, 0, 0)
        _, high = consumer.get_watermark_offsets(tp, timeout=10)
        consumer.assign([tp])
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + timeout
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
            for msg in consumer.consume(500, 1.0):
                if msg.error() is None:
                    out.append((msg.offset(), msg.value()))
        assert out and out[-1][0] == high - 1, f"read up to {out[-1][0] if out else None}, high watermark {high}"
        return out
    finally:
        consumer.close()


def in_sync(c: Cluster, topic: str, n: int = 3) -> Callable[[], bool]:
    return lambda: len(state(c, topic)["isr"]) == n


# ------------------------------------------------------------------------------------------------ ISR and URP
@pytest.mark.slow
def test_paused_followers_shrink_the_isr_and_min_insync_replicas_guards_acks_all(cluster: Cluster) -> None:  # noqa: F811
    start(cluster)
    topic = "isr"
    create_topic(cluster, topic)
    s = state(cluster, topic)
    leader = cluster.brokers[s["leader"]]
    f1, f2 = (cluster.brokers[b] for b in (1, 2, 3) if b != s["leader"])
    assert produce(leader, topic, [b"a0", b"a1"]) == ErrorCode.NONE
    wait_until(lambda: urp(leader) == 0, 10, "no under-replicated partition at first")
    stopped: list[BrokerProcess] = []
    try:
        f1.proc.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
        stopped.append(f1)
        wait_until(lambda: urp(leader) == 1, LAG_MS / 1000 + 10, "URP 1 on the leader")
        assert f1.broker_id not in state(cluster, topic)["isr"]
        # One follower gone: min.insync.replicas=2 still holds.
        assert produce(leader, topic, [b"b0", b"b1"]) == ErrorCode.NONE
        f2.proc.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
        stopped.append(f2)
        wait_until(in_sync(cluster, topic, 1), LAG_MS / 1000 + 10, "the ISR down to the leader")
        # ZooKeeper holds the shrunk ISR before the leader's own copy follows (its write's answer, or the
        # controller's LeaderAndIsr, is still on its way): wait for the leader itself to refuse acks=all.
        wait_until(lambda: gauge(leader, "moldau_under_min_isr_partitions") == 1, 15,
                   "the leader's ISR below min.insync.replicas")
        assert produce(leader, topic, [b"refused"]) == ErrorCode.NOT_ENOUGH_REPLICAS
        assert produce(leader, topic, [b"c0"], acks=1) == ErrorCode.NONE
    finally:
        for b in stopped:
            b.proc.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
    wait_until(in_sync(cluster, topic), FAILOVER_S + 10, "both followers back in the ISR")
    wait_until(lambda: urp(leader) == 0, 10, "URP 0 after the catch-up")
    assert produce(leader, topic, [b"d0"]) == ErrorCode.NONE
    metrics = leader.fetch_metrics()
    assert re.search(r"^moldau_isr_shrinks_total [1-9]", metrics, re.M)
    assert re.search(r"^moldau_isr_expands_total [1-9]", metrics, re.M)
    values = [v for _, v in read_all(cluster.bootstrap(), topic)]
    assert values == [b"a0", b"a1", b"b0", b"b1", b"c0", b"d0"]


# ------------------------------------------------------------------------------------------------ divergent log
def segment_bytes(broker: BrokerProcess, topic: str) -> bytes:
    d = broker.partition_dir(topic)
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))


@pytest.mark.slow
def fetch_purgatory_size(broker: BrokerProcess) -> float:
    found = re.search(r'^moldau_purgatory_size\{purgatory="Fetch"\} (\S+)$', broker.fetch_metrics(), re.M)
    assert found, "moldau_purgatory_size{purgatory=\"Fetch\"} not exported"
    return float(found.group(1))


def test_an_old_leader_truncates_its_unreplicated_tail_and_matches_the_new_leader(cluster: Cluster) -> None:  # noqa: F811
    # A long lag limit: the stopped followers must stay in the ISR from SIGSTOP to the leader's death, however
    # slow a loaded machine makes the steps between.
    start(cluster, {"replica.lag.time.max.ms": "20000"})
    topic = "diverge"
    create_topic(cluster, topic)
    old_id = state(cluster, topic)["leader"]
    old = cluster.brokers[old_id]
    followers = [cluster.brokers[b] for b in (1, 2, 3) if b != old_id]
    assert produce(old, topic, [f"committed-{i}".encode() for i in range(5)]) == ErrorCode.NONE
    for f in followers:
        f.proc.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
    try:
        # Accepted by the leader alone (acks=1), then the leader dies before anyone copied it. First the
        # followers' fetches parked at the leader (replica.fetch.wait.max.ms) must have been answered (empty):
        # one still parked would carry the batch into a stopped follower's socket. All this stays well below
        # replica.lag.time.max.ms, so they stay in the ISR.
        wait_until(lambda: fetch_purgatory_size(old) == 0, 10, "no follower fetch parked at the leader")
        assert produce(old, topic, [b"lost-1", b"lost-2"], acks=1) == ErrorCode.NONE
        old.kill()
    finally:
        for f in followers:
            f.proc.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
    new_id = wait_until(lambda: state(cluster, topic)["leader"] not in (old_id, -1) and state(cluster, topic)["leader"],
                        FAILOVER_S + 10, "a new leader")
    new = cluster.brokers[new_id]
    wait_until(lambda: leads(new, topic, 0), 15, "the new leader to know it leads")  # ZooKeeper names it first
    wait_until(lambda: all(gauge(f, "moldau_live_brokers") == 2 for f in followers), 15,
               "the survivors' metadata without the dead broker")
    assert produce(new, topic, [b"after-1", b"after-2", b"after-3"]) == ErrorCode.NONE
    old.start()
    wait_until(in_sync(cluster, topic), 30, "the old leader back in the ISR")
    wait_until(lambda: all(gauge(b, "moldau_live_brokers") == 3 for b in cluster.brokers.values()), 15,
               "every broker's metadata with all three")
    assert produce(new, topic, [b"last"]) == ErrorCode.NONE
    expected = segment_bytes(new, topic)
    wait_until(lambda: segment_bytes(old, topic) == expected and all(segment_bytes(f, topic) == expected
                                                                     for f in followers), 15,
               "every replica holding the new leader's bytes")
    values = [v for _, v in read_all(cluster.bootstrap(), topic)]
    assert values == [f"committed-{i}".encode() for i in range(5)] + [b"after-1", b"after-2", b"after-3", b"last"]
    assert "truncated from 7 to 5" in old.stderr_text()


# ------------------------------------------------------------------------------------------------ idempotence
def test_a_new_leader_deduplicates_a_retry_of_a_batch_its_predecessor_accepted(cluster: Cluster) -> None:  # noqa: F811
    start(cluster)
    topic = "idem"
    create_topic(cluster, topic)
    old = cluster.brokers[leader_of(cluster, topic)]
    ids = run(send(old, ApiKey.INIT_PRODUCER_ID, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                                  "producer_id": -1, "producer_epoch": -1}))
    pid, epoch = ids["producer_id"], ids["producer_epoch"]

    def batch(seq: int, values: list[bytes]) -> bytes:
        return build_batch([(None, v, [], None) for v in values], producer_id=pid, producer_epoch=epoch,
                           base_sequence=seq)

    first = batch(0, [b"a", b"b", b"c"])
    assert run(_produce(old.port, topic, first, -1)) == (ErrorCode.NONE, 0)
    old.stop(signal.SIGTERM, timeout=30)  # controlled shutdown: an in-sync follower leads now
    new = cluster.brokers[wait_until(lambda: leader_of(cluster, topic) not in (old.broker_id, -1)
                                     and leader_of(cluster, topic), 15, "a new leader")]
    wait_until(lambda: leads(new, topic, 0), 15, "the new leader to know it leads")
    # The producer never saw the answer and retries: the new leader knows the batch from the replicated log.
    assert run(_produce(new.port, topic, first, -1)) == (ErrorCode.NONE, 0)
    assert run(_produce(new.port, topic, batch(3, [b"d"]), -1)) == (ErrorCode.NONE, 3)
    assert [v for _, v in read_all(cluster.bootstrap(), topic)] == [b"a", b"b", b"c", b"d"]


# ------------------------------------------------------------------------------------------------ verification
class Writer:
    """An idempotent acks=all producer writing moldau-verify's values "w:0", "w:1", ... on a background thread;
    records every attempt and every acknowledgement (with its offset) in a moldau-verify History."""

    def __init__(self, kind: str, bootstrap: str, topic: str, rate: float = 200.0) -> None:
        self.kind, self.bootstrap, self.topic, self.rate = kind, bootstrap, topic, rate
        self.history = History()
        self.acked: list[int] = []
        self.errors: list[str] = []
        self.sent = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"writer-{kind}", daemon=True)

    def _send(self, n: int) -> bytes:
        value = make_value("w", n)
        with self.lock:
            self.history.attempt(value, 0)
        return value

    def _ok(self, n: int, offset: int) -> None:
        with self.lock:
            self.acked.append(n)
            self.history.ack(make_value("w", n), 0, offset)

    def _failed(self, n: int, err: object) -> None:
        with self.lock:
            self.errors.append(str(err))
            self.history.fail(make_value("w", n), str(err))

    def _run(self) -> None:
        if self.kind == "confluent":
            self._run_confluent()
        else:
            self._run_kafka_python()

    def _pace(self, t0: float) -> None:
        delay = t0 + self.sent / self.rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    def _run_confluent(self) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
                      "linger.ms": 5, "message.timeout.ms": 120000, "retry.backoff.ms": 200,
                      "topic.metadata.refresh.interval.ms": 2000})
        t0 = time.monotonic()
        while not self.stop.is_set():
            n = self.sent
            p.produce(self.topic, self._send(n), partition=0,
                      on_delivery=lambda err, msg, n=n: self._ok(n, msg.offset()) if err is None
                      else self._failed(n, err))
            self.sent += 1
            p.poll(0)
            self._pace(t0)
        p.flush(60)

    def _run_kafka_python(self) -> None:
        from kafka import KafkaProducer

        p = KafkaProducer(bootstrap_servers=self.bootstrap, enable_idempotence=True, acks="all", linger_ms=5,
                          retries=2_000_000, retry_backoff_ms=200, request_timeout_ms=10000,
                          delivery_timeout_ms=120000, metadata_max_age_ms=2000, max_block_ms=60000)
        t0 = time.monotonic()
        while not self.stop.is_set():
            n = self.sent
            fut = p.send(self.topic, self._send(n), partition=0)
            fut.add_callback(lambda meta, n=n: self._ok(n, meta.offset))
            fut.add_errback(lambda err, n=n: self._failed(n, err))
            self.sent += 1
            self._pace(t0)
        p.flush(timeout=60)
        p.close(timeout=10)


def leader_of(c: Cluster, topic: str) -> int:
    return int(state(c, topic)["leader"])


def bounce_leader(c: Cluster, topic: str, sig: int) -> None:
    """Stops the current leader with ``sig``, waits for another leader, restarts it, waits for it in the ISR."""
    victim = leader_of(c, topic)
    broker = c.brokers[victim]
    if sig == signal.SIGKILL:
        broker.kill()
    else:
        broker.stop(sig, timeout=30)
    wait_until(lambda: leader_of(c, topic) not in (victim, -1), FAILOVER_S, f"a leader other than {victim}")
    broker.start()
    wait_until(in_sync(c, topic), 40, f"broker {victim} back in the ISR")


@pytest.mark.slow
@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_no_acknowledged_write_is_lost_while_leaders_fail(cluster: Cluster, client: str) -> None:  # noqa: F811
    t_start = time.monotonic()
    start(cluster)
    topic = "verify"
    create_topic(cluster, topic)
    writer = Writer(client, cluster.bootstrap(), topic)
    writer.thread.start()
    try:
        wait_until(lambda: len(writer.acked) >= 100, 30, "the first acknowledged writes")
        bounce_leader(cluster, topic, signal.SIGTERM)               # (a)
        bounce_leader(cluster, topic, signal.SIGKILL)               # (b)
        for _ in range(5):                                          # (c)
            assert time.monotonic() - t_start < 150, "the fault schedule ran out of time"
            bounce_leader(cluster, topic, signal.SIGKILL)
        acked_before = len(writer.acked)
        wait_until(lambda: len(writer.acked) >= acked_before + 100, 30, "writes acknowledged after the last fault")
    finally:
        writer.stop.set()
        writer.thread.join(90)
    assert not writer.thread.is_alive()
    records = read_all(cluster.bootstrap(), topic)
    offsets = [o for o, _ in records]
    writer.history.read(FINAL_READ, [(0, o, v) for o, v in records])
    report = check(writer.history)  # moldau-verify's checker: lost, unexpected, duplicated, reordered, changed
    print(f"\n[{client}] errors {len(writer.errors)} {writer.errors[:3]}, {time.monotonic() - t_start:.0f}s\n"
          f"{report.table()}")
    assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), "a gap in the offsets"
    assert offsets[0] == 0
    assert report.ok, report.to_json()
    assert report.acked > 1000
