"""Client quotas with real clients: a confluent-kafka producer held to its producer_byte_rate next to an
unthrottled one on the same broker, a kafka-python consumer held to its consumer_byte_rate, a quota change
seen (and enforced) by every broker of a cluster, and user quotas of SCRAM principals next to client-id quotas
(the most specific entity wins). Long rate measurements with four client libraries: bench/quotas.py."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from moldau.connection import BrokerConnection, api_for
from moldau.protocol.api import ApiKey
from moldau.protocol.records import build_batch
from moldau.security import ClientSecurity
from moldau.sync import AdminClient

from .harness import BrokerProcess, free_port, wait_until
from .secure import USERS
from .test_cluster import Cluster, cluster, zookeeper  # noqa: F401
from .test_security_cluster import scram_tool

pytestmark = [pytest.mark.integration]

QUOTA = 256 * 1024  # bytes/s
RUN_S = 13.0
MEASURE_FROM_S = 3.0
# Kafka's rate is sampled over quota.window.num samples and never divided by less than num - 1 of them, so a new
# client first gets that many seconds' allowance at once, and a burst that lands in one sample comes back when
# that sample expires (every num x size seconds). With Kafka's 11 x 1 s that cycle is 11 s long; with 2 x 1 s a
# 10 s measurement spans five cycles, so its average is a fair measure of the quota. (A request larger than the
# quota over the window can overshoot it, as with Kafka: the window forgets it before the client is through.)
WINDOW = {"quota.window.num": "2", "quota.window.size.seconds": "1"}


def _metric(broker: BrokerProcess, name: str, client_id: str) -> float:
    match = re.search(rf'^{name}{{client_id="{client_id}",quota="produce",user=""}} (\S+)$', broker.fetch_metrics(),
                      re.M)
    return float(match.group(1)) if match else 0.0


def _produce_for(bootstrap: str, client_id: str, topic: str, start: float, bytes_after: dict[str, int],
                 stats: dict[str, Any]) -> None:
    """Produce 1 KiB records as fast as the producer takes them until RUN_S; count the bytes acknowledged
    after MEASURE_FROM_S and the largest throttle time the producer's statistics reported."""
    def delivered(err: Any, msg: Any) -> None:
        if err is None and MEASURE_FROM_S <= time.monotonic() - start < RUN_S:
            bytes_after[client_id] = bytes_after.get(client_id, 0) + len(msg.value())

    def on_stats(text: str) -> None:  # the largest throttle time librdkafka reported in any interval
        seen = max((b.get("throttle", {}).get("max", 0) for b in json.loads(text)["brokers"].values()), default=0)
        stats[client_id] = max(stats.get(client_id, 0), seen)

    # Requests of at most 64 KiB: well within what the quota allows over the window (see WINDOW).
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                         "message.max.bytes": 65536, "batch.size": 65536,
                         "queue.buffering.max.messages": 2000, "statistics.interval.ms": 1000,
                         "stats_cb": on_stats})
    value = b"q" * 1024
    while time.monotonic() - start < RUN_S:
        try:
            producer.produce(topic, value, on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
            continue
        producer.poll(0)
    producer.purge(in_queue=True)
    producer.flush(10)


def test_a_producer_is_held_to_its_quota_while_another_is_not(broker_factory: Callable[..., BrokerProcess],
                                                              topic: str) -> None:
    broker = broker_factory(WINDOW)
    tag = uuid.uuid4().hex[:8]
    slow, fast = f"slow-{tag}", f"fast-{tag}"
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.alter_client_quotas([({"client-id": slow}, {"producer_byte_rate": QUOTA})])
        assert admin.describe_client_quotas([("client-id", 0, slow)]) == [
            ({"client-id": slow}, {"producer_byte_rate": float(QUOTA)})]
        start = time.monotonic()
        bytes_after: dict[str, int] = {}
        stats: dict[str, Any] = {}
        threads = [threading.Thread(target=_produce_for, args=(broker.bootstrap, cid, topic, start, bytes_after,
                                                                 stats)) for cid in (slow, fast)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        seconds = RUN_S - MEASURE_FROM_S
        slow_rate, fast_rate = bytes_after.get(slow, 0) / seconds, bytes_after.get(fast, 0) / seconds
        # The broker's own measure of the throttled client (over its last 1-2 s: shown, too short to bound) and
        # the throttle time it imposed.
        broker_rate = _metric(broker, "moldau_client_quota_rate", slow)
        throttled_s = _metric(broker, "moldau_client_quota_throttle_time_seconds_total", slow)
        print(f"quota {QUOTA} B/s: throttled {slow_rate:.0f} B/s (broker: {broker_rate:.0f} B/s, "
              f"{throttled_s:.1f} s of throttle), unthrottled {fast_rate:.0f} B/s")
        assert 0.6 * QUOTA <= slow_rate <= 1.4 * QUOTA
        assert throttled_s > 1.0
        assert fast_rate >= 3 * QUOTA  # the other client on the same broker is not held back
        assert _metric(broker, "moldau_client_quota_rate", fast) == 0.0  # and not even measured
        # librdkafka read the throttle times from the responses (KIP-219).
        assert stats[slow] > 0
        # Removed, the entity is gone from DescribeClientQuotas.
        admin.alter_client_quotas([({"client-id": slow}, {"producer_byte_rate": None})])
        assert admin.describe_client_quotas([]) == []


async def _throttle_of_one_produce(broker: BrokerProcess, client_id: str, port: int | None = None,
                                   user: str | None = None) -> int:
    """One 64 KiB Produce from a new connection (SASL_PLAINTEXT with SCRAM-SHA-256 as ``user`` on ``port``, if
    given); the throttle time the broker answers with."""
    batch = build_batch([(None, b"x" * 65536, [], 1000)])
    security = None if user is None else ClientSecurity("SASL_PLAINTEXT", mechanism="SCRAM-SHA-256",
                                                        username=user, password=USERS[user])
    async with BrokerConnection("127.0.0.1", port or broker.port, client_id=client_id, security=security) as conn:
        response = await conn.send(api_for(ApiKey.PRODUCE), {
            "transactional_id": None, "acks": 1, "timeout_ms": 5000,
            "topic_data": [{"name": "no-such-topic-quota", "partition_data": [{"index": 0, "records": batch}]}]})
    return int(response["throttle_time_ms"])


def test_a_consumer_is_held_to_its_quota(broker_factory: Callable[..., BrokerProcess], topic: str) -> None:
    """kafka-python reading a full topic under consumer_byte_rate: fetch responses sized to the quota and the
    channel muted after each throttled one keep it at the quota."""
    from kafka import KafkaConsumer

    broker = broker_factory(WINDOW)
    reader = f"reader-{uuid.uuid4().hex[:8]}"
    # Batches of at most 64 KiB: a fetch never has to hand out one batch larger than the window's allowance.
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 65536})
    for _ in range(6000):  # 6 MiB: more than the consumer may read in the run
        producer.produce(topic, b"c" * 1024)
        producer.poll(0)
    assert producer.flush(30) == 0
    del producer  # librdkafka's threads end with it (no reconnect attempts after the broker stops)
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.alter_client_quotas([({"client-id": reader}, {"consumer_byte_rate": QUOTA})])
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, client_id=reader, group_id=None,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        start, received = time.monotonic(), 0
        while (elapsed := time.monotonic() - start) < RUN_S:
            for records in consumer.poll(timeout_ms=200).values():
                if elapsed >= MEASURE_FROM_S:
                    received += sum(len(r.value) for r in records)
    finally:
        consumer.close()
    rate = received / (RUN_S - MEASURE_FROM_S)
    print(f"consumer quota {QUOTA} B/s: read {rate:.0f} B/s")
    assert 0.6 * QUOTA <= rate <= 1.4 * QUOTA
    assert re.search(rf'^moldau_client_quota_throttle_time_seconds_total{{client_id="{reader}",quota="fetch",'
                     rf'user=""}} [1-9]', broker.fetch_metrics(), re.M)


async def _metadata_loop(broker: BrokerProcess, client_id: str, seconds: float) -> tuple[int, int]:
    """Metadata requests back to back on one connection of Moldau's client; (requests, throttle ms it waited)."""
    async with BrokerConnection("127.0.0.1", broker.port, client_id=client_id) as conn:
        deadline, sent = asyncio.get_running_loop().time() + seconds, 0
        while asyncio.get_running_loop().time() < deadline:
            await conn.send(api_for(ApiKey.METADATA), {"topics": None, "allow_auto_topic_creation": False})
            sent += 1
        return sent, conn.throttle_time_ms_total


def test_request_percentage_throttles_a_tight_metadata_loop(broker: BrokerProcess) -> None:
    """Moldau's client under request_percentage=0.05 (0.5 ms of handler time per second; a Metadata request
    takes tens of microseconds): the broker throttles the loop and the client waits the throttle times out
    before its next request."""
    client_id = f"meta-{uuid.uuid4().hex[:8]}"
    free, _ = asyncio.run(_metadata_loop(broker, f"free-{client_id}", 1.0))
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.alter_client_quotas([({"client-id": client_id}, {"request_percentage": 0.05})])
        try:
            sent, waited_ms = asyncio.run(_metadata_loop(broker, client_id, 6.0))
            rate = float(re.search(rf'^moldau_client_quota_rate{{client_id="{client_id}",quota="request",'
                                   rf'user=""}} (\S+)$', broker.fetch_metrics(), re.M).group(1))  # type: ignore
        finally:
            admin.alter_client_quotas([({"client-id": client_id}, {"request_percentage": None})])
    print(f"request_percentage=0.05: {sent} Metadata requests in 6 s (unthrottled: {free} in 1 s), waited "
          f"{waited_ms} ms, broker measures {rate:.2f}%")
    assert waited_ms > 1000  # much of the run was spent waiting out throttle times
    assert sent < 3 * free  # six times as long, far fewer than six times the requests
    assert rate <= 0.15  # the handler time it gets, as the broker measures it, is near the quota


def test_a_throttled_reassignment_copies_at_its_rate(cluster: Cluster, tmp_path: Path) -> None:  # noqa: F811
    """moldau-reassign-partitions --throttle 1000000: 8 MiB copied to a new replica take several seconds (the
    replication quota's window is 2 x 1 s here, so its first-window allowance is about 1 MB); --verify removes the
    throttles once the move is done."""
    from confluent_kafka.admin import AdminClient as ConfluentAdmin
    from confluent_kafka.admin import NewTopic

    cluster.start([1, 2], extra=lambda _: {"replication.quota.window.num": "2"})
    bootstrap = cluster.bootstrap()
    admin = ConfluentAdmin({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("heavy", num_partitions=1, replica_assignment=[[1]])])["heavy"].result(20)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 65536})
    for _ in range(8192):
        producer.produce("heavy", b"h" * 1024)
        producer.poll(0)
    assert producer.flush(30) == 0
    del producer
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "heavy", "partition": 0,
                                                              "replicas": [1, 2]}]}))

    def tool(*argv: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "moldau.tools.reassign_partitions", "--bootstrap-server",
                               bootstrap, "--reassignment-json-file", str(plan), *argv], capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    start = time.monotonic()
    assert "The inter-broker throttle limit was set to 1000000 B/s" in tool("--execute", "--throttle", "1000000")
    wait_until(lambda: "Reassignment of partition heavy-0 is completed." in tool("--verify"), 90, "the move")
    elapsed = time.monotonic() - start
    print(f"8 MiB reassigned under --throttle 1000000 in {elapsed:.1f} s")
    # Unthrottled (--throttle 1000000000) the same run took 3.5 s, tool start-ups and --verify polling included;
    # at 1 MB/s the bytes past the first window's allowance alone need over 6 s.
    assert elapsed >= 6.0
    assert not [k for k in json.loads(cluster.kazoo.get("/config/topics/heavy")[0])["config"] if "throttled" in k]
    for broker_id in (1, 2):
        assert json.loads(cluster.kazoo.get(f"/config/brokers/{broker_id}")[0])["config"] == {}


def test_quotas_on_a_cluster_scram_users_client_ids_most_specific_wins(cluster: Cluster) -> None:  # noqa: F811
    """Three brokers with a SASL_PLAINTEXT (SCRAM-SHA-256, users in ZooKeeper) listener for clients. Quotas set
    with the admin API and moldau-configs land in Kafka's znodes and every broker describes them; a user quota applies to the SCRAM
    principal, a client-id quota to whoever uses that client id, a user + client-id quota beats both (Kafka's
    precedence order), on every broker; removing a quota applies on every broker at once, without a restart."""
    for user, password in USERS.items():
        scram_tool("--zookeeper", cluster.connect, "--alter", "--entity-type", "users", "--entity-name", user,
                   "--add-config", f"SCRAM-SHA-256=[password={password}]")
    sasl_ports: dict[int, int] = {}
    for i in (1, 2, 3):  # PLAINTEXT (listed first: inter-broker and the harness's) plus CLIENTS
        b = cluster.brokers[i] = BrokerProcess(cluster.root / f"broker{i}", broker_id=i)
        sasl_ports[i] = free_port()
        b.overrides.update(cluster.settings(i, {
            "listeners": f"PLAINTEXT://127.0.0.1:{b.port},CLIENTS://127.0.0.1:{sasl_ports[i]}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENTS:SASL_PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT", "sasl.enabled.mechanisms": "SCRAM-SHA-256"}))
        b.start()
    cluster.kazoo.start(timeout=10)
    wait_until(lambda: sorted(cluster.kazoo.get_children("/brokers/ids")) == ["1", "2", "3"], 30, "registration")
    app, other = f"app-{uuid.uuid4().hex[:6]}", f"other-{uuid.uuid4().hex[:6]}"
    with AdminClient({"bootstrap.servers": cluster.bootstrap()}) as admin:
        admin.alter_client_quotas([
            ({"user": "alice"}, {"producer_byte_rate": 1000}),  # alice: 1000 B/s whatever her client id
            ({"client-id": app}, {"producer_byte_rate": 1000}),  # the client id app: 1000 B/s for anyone
            ({"user": "bob", "client-id": None}, {"request_percentage": 50}),  # each of bob's client ids
        ])
    # kafka-configs' way (pairs of --entity-type and --entity-name): alice's app is unbounded.
    proc = subprocess.run([sys.executable, "-m", "moldau.tools.configs", "--bootstrap-server",
                           cluster.brokers[1].bootstrap, "--alter", "--entity-type", "users", "--entity-name",
                           "alice", "--entity-type", "clients", "--entity-name", app, "--add-config",
                           "producer_byte_rate=1000000000"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    # Kafka's znodes; alice's keeps her SCRAM credentials next to the quota.
    assert json.loads(cluster.kazoo.get(f"/config/clients/{app}")[0])["config"] == {"producer_byte_rate": "1000"}
    alice = json.loads(cluster.kazoo.get("/config/users/alice")[0])["config"]
    assert alice["producer_byte_rate"] == "1000" and "SCRAM-SHA-256" in alice
    assert json.loads(cluster.kazoo.get("/config/users/bob/clients/<default>")[0])["config"] == {
        "request_percentage": "50.0"}
    with AdminClient({"bootstrap.servers": cluster.bootstrap()}) as admin:
        for broker_id in (1, 2, 3):
            found = admin.describe_client_quotas([], broker_id=broker_id)
            assert ({"client-id": app}, {"producer_byte_rate": 1000.0}) in found
            assert ({"user": "bob", "client-id": None}, {"request_percentage": 50.0}) in found

    def throttles(broker_id: int) -> dict[tuple[str, str], bool]:
        b = cluster.brokers[broker_id]
        return {(user, cid): asyncio.run(_throttle_of_one_produce(b, cid, sasl_ports[broker_id], user)) > 0
                for user in ("alice", "bob") for cid in (app, other)}

    expected = {("alice", app): False,  # users/alice/clients/app beats users/alice and clients/app
                ("alice", other): True,  # users/alice
                ("bob", app): True,  # clients/app (bob's request_percentage is another key)
                ("bob", other): False}  # no producer_byte_rate
    for broker_id in (1, 2, 3):  # each broker applies the changes from its /config/changes watch
        wait_until(lambda i=broker_id: throttles(i) == expected, 20, f"broker {broker_id}'s quotas")
    # Without the user + client-id quota, alice's app falls back to users/alice, on every broker.
    with AdminClient({"bootstrap.servers": cluster.bootstrap()}) as admin:
        admin.alter_client_quotas([({"user": "alice", "client-id": app}, {"producer_byte_rate": None})])
    for broker_id in (1, 2, 3):
        b = cluster.brokers[broker_id]
        wait_until(lambda b=b, i=broker_id: asyncio.run(_throttle_of_one_produce(b, app, sasl_ports[i], "alice")) > 0,
                   20, f"broker {broker_id} throttling alice's {app}")


async def _mutate(broker: BrokerProcess, client_id: str, api: ApiKey, version: int, body: dict[str, Any]
                  ) -> dict[str, Any]:
    """One CreateTopics/DeleteTopics/CreatePartitions request at ``version`` on a new connection (so neither
    the broker's mute nor the client's wait after an earlier throttled answer holds it back)."""
    async with BrokerConnection("127.0.0.1", broker.port, client_id=client_id) as conn:
        return await conn.send(api_for(api), body, version)


def _create(broker: BrokerProcess, client_id: str, version: int, topics: dict[str, int]) -> dict[str, Any]:
    return asyncio.run(_mutate(broker, client_id, ApiKey.CREATE_TOPICS, version, {
        "topics": [{"name": n, "num_partitions": p, "replication_factor": 1, "assignments": [], "configs": []}
                   for n, p in topics.items()], "timeout_ms": 10000, "validate_only": False}))


def test_controller_mutation_rate_refuses_new_clients_and_throttles_old_ones(broker: BrokerProcess) -> None:
    """KIP-599: controller_mutation_rate=0.1 (a bucket of 0.1 x 11 s = 1.1 partitions, refilled at 0.1/s: once
    below zero it stays there for the whole test). CreateTopics v6+, DeleteTopics v5+ and CreatePartitions v3+
    are refused with THROTTLING_QUOTA_EXCEEDED while the client is below zero; older versions go through and
    are throttled (throttle_time_ms), as Kafka does."""
    tag = uuid.uuid4().hex[:8]
    client_id, a, b, c, d = f"mut-{tag}", f"a-{tag}", f"b-{tag}", f"c-{tag}", f"d-{tag}"
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.alter_client_quotas([({"client-id": client_id}, {"controller_mutation_rate": 0.1})])
        try:
            # a takes the bucket to 0.1, b (accepted: the bucket was not below zero) to -2.9, c is refused.
            r = _create(broker, client_id, 6, {a: 1, b: 3, c: 1})
            assert [(t["name"], t["error_code"]) for t in r["topics"]] == [(a, 0), (b, 0), (c, 89)]
            assert 20_000 < r["throttle_time_ms"] <= 29_000  # 2.9 partitions at 0.1/s
            assert _create(broker, client_id, 5, {d: 1})["topics"][0]["error_code"] == 0  # v5: throttled only
            assert _create(broker, f"other-{tag}", 7, {c: 1})["topics"][0]["error_code"] == 0  # no quota
            more = asyncio.run(_mutate(broker, client_id, ApiKey.CREATE_PARTITIONS, 3, {
                "topics": [{"name": b, "count": 4, "assignments": None}], "timeout_ms": 10000,
                "validate_only": False}))
            assert more["results"][0]["error_code"] == 89 and more["throttle_time_ms"] > 20_000
            old = asyncio.run(_mutate(broker, client_id, ApiKey.CREATE_PARTITIONS, 2, {
                "topics": [{"name": b, "count": 4, "assignments": None}], "timeout_ms": 10000,
                "validate_only": False}))
            assert old["results"][0]["error_code"] == 0 and old["throttle_time_ms"] > 20_000
            strict = asyncio.run(_mutate(broker, client_id, ApiKey.DELETE_TOPICS, 5,
                                         {"topic_names": [a], "timeout_ms": 10000}))
            assert strict["responses"][0]["error_code"] == 89
            lenient = asyncio.run(_mutate(broker, client_id, ApiKey.DELETE_TOPICS, 4,
                                          {"topic_names": [a, b, c, d], "timeout_ms": 10000}))
            assert [t["error_code"] for t in lenient["responses"]] == [0, 0, 0, 0]
            assert lenient["throttle_time_ms"] > 20_000
        finally:
            admin.alter_client_quotas([({"client-id": client_id}, {"controller_mutation_rate": None})])
