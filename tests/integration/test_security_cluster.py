"""Inter-broker traffic over an authenticated listener: two brokers whose inter-broker listener is SASL_SSL with
SCRAM-SHA-512 (users in ZooKeeper, written by moldau-scram --zookeeper) replicate a topic and run the controller
channel; clients produce with acks=all over the same listener and read back from the follower's copy."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .clients import ck_consume
from .harness import REPO_ROOT, BrokerProcess, free_port, wait_until
from .secure import USERS, Certs, client_settings, make_certs
from .test_cluster import Cluster, cluster, zookeeper  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def scram_tool(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "moldau.broker.security.scram_tool", *args], cwd=REPO_ROOT,
                          capture_output=True, timeout=60, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def start_secured(c: Cluster, certs: Certs, ids: list[int]) -> dict[int, int]:
    """Brokers with INTERNAL (SASL_SSL, inter-broker, listed first so it is the advertised endpoint) and a
    PLAINTEXT listener the harness uses to see the process is up. Returns broker id -> INTERNAL port."""
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
            'password="broker-secret";')
    internal: dict[int, int] = {}
    for broker_id in ids:
        port = internal[broker_id] = free_port()
        b = BrokerProcess(c.root / f"broker{broker_id}", broker_id=broker_id)
        b.overrides.update(c.settings(broker_id, {
            "listeners": f"INTERNAL://127.0.0.1:{port},PLAINTEXT://127.0.0.1:{b.port}",
            "listener.security.protocol.map": "INTERNAL:SASL_SSL,PLAINTEXT:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.internal.scram-sha-512.sasl.jaas.config": jaas,
            "listener.name.internal.ssl.keystore.location": str(certs.broker_pem),
            "listener.name.internal.ssl.truststore.location": str(certs.ca),
            "ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM",
            "offsets.topic.replication.factor": "2", "replica.fetch.wait.max.ms": "200"}))
        c.brokers[broker_id] = b
        b.start()
    c.kazoo.start(timeout=10)
    wait_until(lambda: sorted(c.kazoo.get_children("/brokers/ids")) == sorted(map(str, ids)), 30, "registration")
    return internal


@pytest.fixture
def secured(cluster: Cluster, certs: Certs) -> Iterator[tuple[Cluster, dict[int, int]]]:  # noqa: F811
    for user, password in {"broker": "broker-secret", **USERS}.items():
        scram_tool("--zookeeper", cluster.connect, "--alter", "--entity-type", "users", "--entity-name", user,
                   "--add-config", f"SCRAM-SHA-512=[password={password}]")
    yield cluster, start_secured(cluster, certs, [1, 2])


def test_replication_over_sasl_ssl(secured: tuple[Cluster, dict[int, int]], certs: Certs, topic: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    c, ports = secured
    stored = json.loads(c.kazoo.get("/config/users/alice")[0])
    assert stored["config"]["SCRAM-SHA-512"].startswith("salt=")  # Kafka's layout and format
    assert "alice" in scram_tool("--zookeeper", c.connect, "--describe", "--entity-name", "alice")
    bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports.values())
    conf = {"bootstrap.servers": bootstrap, **client_settings("SASL_SSL", certs, "SCRAM-SHA-512")}
    admin = AdminClient(conf)
    for f in admin.create_topics([NewTopic(topic, 1, 2, config={"min.insync.replicas": "2"})]).values():
        f.result(timeout=30)
    # acks=all with min.insync.replicas=2 only succeeds once the follower (told by the controller, over the
    # authenticated listener) has fetched over it too; the ISR must hold both replicas.
    wait_until(lambda: len(json.loads(c.kazoo.get(f"/brokers/topics/{topic}/partitions/0/state")[0])["isr"]) == 2,
               30, "both replicas in the ISR")
    producer = Producer({**conf, "acks": "all"})
    for i in range(20):
        producer.produce(topic, value=b"r%d" % i, partition=0)
    assert producer.flush(30) == 0
    got = ck_consume(bootstrap, topic, 20, start_offset=0, **conf)
    assert [m.value() for m in got] == [b"r%d" % i for i in range(20)]
    follower = [i for i in ports if i != json.loads(
        c.kazoo.get(f"/brokers/topics/{topic}/partitions/0/state")[0])["leader"]][0]
    seg = c.brokers[follower].partition_dir(topic, 0)
    wait_until(lambda: sum(p.stat().st_size for p in Path(seg).glob("*.log")) > 0, 20, "follower copy written")


def test_missing_inter_broker_login_stops_start_up(tmp_path: Path) -> None:
    """A SASL inter-broker listener without a login in its JAAS entry stops start-up naming the key."""
    b = BrokerProcess(tmp_path / "b")
    b.overrides.update({
        "listeners": f"INTERNAL://127.0.0.1:{b.port}", "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL", "zookeeper.connect": "127.0.0.1:1",
        "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="x";'})
    with pytest.raises(RuntimeError) as info:
        b.start(timeout=30)
    assert "sasl.jaas.config" in str(info.value) and "username" in str(info.value)
