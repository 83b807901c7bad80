"""Two listeners per broker: Metadata and FindCoordinator answer with the endpoints of the listener the request
arrived on, the way Kafka does (a client that came in on EXTERNAL must not be told the INTERNAL addresses).

A real ZooKeeper and three broker processes; each broker binds INTERNAL (inter.broker.listener.name, advertised
as localhost:<port>) and EXTERNAL (advertised as 127.0.0.1:<other port>). The hosts differ so that every answer
shows which listener it describes. confluent-kafka and kcat produce and consume through EXTERNAL; consumer
groups (FindCoordinator, then the coordinator's endpoint) work through both listeners. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from moldau.connection import BrokerConnection, api_for
from moldau.protocol.api import ApiKey
from moldau.protocol.errors import ErrorCode

from .clients import ck_consume
from .conftest import _remember
from .harness import BrokerProcess, free_port, wait_until
from .test_cluster import create_topic_confluent
from .test_kcat import kcat
from .zookeeper import ZooKeeperProcess

pytestmark = pytest.mark.integration

IDS = [1, 2, 3]
INTERNAL_HOST = "localhost"
EXTERNAL_HOST = "127.0.0.1"


class TwoListenerCluster:
    def __init__(self, zk: ZooKeeperProcess, root: Path, request: pytest.FixtureRequest) -> None:
        self.connect = f"{zk.connect}/{uuid.uuid4().hex[:10]}"
        self.internal = {i: free_port() for i in IDS}
        self.brokers: dict[int, BrokerProcess] = {}
        for i in IDS:
            external = free_port()
            overrides = {
                "broker.id": str(i), "zookeeper.connect": self.connect, "zookeeper.session.timeout.ms": "6000",
                "listeners": f"INTERNAL://127.0.0.1:{self.internal[i]},EXTERNAL://127.0.0.1:{external}",
                "advertised.listeners": f"INTERNAL://{INTERNAL_HOST}:{self.internal[i]},"
                                        f"EXTERNAL://{EXTERNAL_HOST}:{external}",
                "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
                "inter.broker.listener.name": "INTERNAL",
                "offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "3",
            }
            # BrokerProcess.port is the port it waits on and `bootstrap` names: the EXTERNAL one.
            broker = BrokerProcess(root / f"broker{i}", broker_id=i, port=external, overrides=overrides)
            _remember(request, broker)
            self.brokers[i] = broker

    def start(self) -> None:
        for broker in self.brokers.values():
            broker.start()
        kazoo = KazooClient(self.connect)
        kazoo.start(timeout=10)
        try:
            wait_until(lambda: sorted(kazoo.get_children("/brokers/ids")) == [str(i) for i in IDS], 20,
                       "all brokers registered")
        finally:
            kazoo.stop()
            kazoo.close()
        for i in IDS:  # every broker has had an UpdateMetadata that lists all three
            wait_until(partial(_lists_all, self.internal[i]), 30, f"broker {i} lists all brokers")

    def external(self) -> dict[int, tuple[str, int]]:
        return {i: (EXTERNAL_HOST, b.port) for i, b in self.brokers.items()}

    def internal_endpoints(self) -> dict[int, tuple[str, int]]:
        return {i: (INTERNAL_HOST, p) for i, p in self.internal.items()}

    def bootstrap(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.external().values())

    def close(self) -> None:
        for broker in self.brokers.values():
            broker.kill()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[TwoListenerCluster]:
    zk = ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper"))
    zk.start()
    c = TwoListenerCluster(zk, tmp_path_factory.mktemp("brokers"), request)
    try:
        c.start()
        yield c
    finally:
        try:
            c.close()
        finally:
            zk.stop()


def _lists_all(internal_port: int) -> bool:
    return len(metadata(INTERNAL_HOST, internal_port)["brokers"]) == len(IDS)


def _send(host: str, port: int, key: ApiKey, body: dict[str, Any], version: int | None = None) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with BrokerConnection(host, port, client_id="listener-test") as conn:
            return await conn.send(api_for(key), body, version)

    return asyncio.run(asyncio.wait_for(go(), 30))


def metadata(host: str, port: int, topics: list[str] | None = None) -> dict[str, Any]:
    body = {"topics": None if topics is None else [{"name": t} for t in topics], "allow_auto_topic_creation": False}
    return _send(host, port, ApiKey.METADATA, body)


def brokers_of(md: dict[str, Any]) -> dict[int, tuple[str, int]]:
    return {b["node_id"]: (b["host"], b["port"]) for b in md["brokers"]}


def test_metadata_lists_the_endpoints_of_the_listener_asked(cluster: TwoListenerCluster) -> None:
    external, internal = cluster.external(), cluster.internal_endpoints()
    for i in IDS:
        assert brokers_of(metadata(*external[i])) == external, f"EXTERNAL of broker {i}"
        assert brokers_of(metadata(*internal[i])) == internal, f"INTERNAL of broker {i}"


def test_find_coordinator_answers_on_the_listener_asked(cluster: TwoListenerCluster) -> None:
    external, internal = cluster.external(), cluster.internal_endpoints()
    group = f"g-{uuid.uuid4().hex[:8]}"

    def coordinator(host: str, port: int) -> tuple[int, str, int]:
        r = _send(host, port, ApiKey.FIND_COORDINATOR, {"key": group, "key_type": 0}, version=3)
        assert r["error_code"] == ErrorCode.NONE, r
        return r["node_id"], r["host"], r["port"]

    # The offsets topic is created by the first FindCoordinator: retry until its leaders are elected.
    node, host, port = wait_until(lambda: _try(lambda: coordinator(*external[1])), 30, "a group coordinator")
    assert (host, port) == external[node]
    for i in IDS:  # every broker hears of the new offsets topic from the controller, in its own time
        wait_until(lambda i=i: _try(lambda: coordinator(*external[i])) == (node, *external[node]), 15,
                   f"broker {i}'s coordinator answer on EXTERNAL")
        assert coordinator(*internal[i]) == (node, *internal[node])


def _try(fn: Any) -> Any:
    try:
        return fn()
    except AssertionError:
        return None


def test_confluent_and_kcat_through_external(cluster: TwoListenerCluster) -> None:
    from confluent_kafka import Producer

    topic = f"ext-{uuid.uuid4().hex[:8]}"
    create_topic_confluent(cluster.bootstrap(), topic, partitions=3, rf=3)
    # Bootstrap through one broker only: every other address the client uses came from Metadata.
    host, port = cluster.external()[1]
    first = f"{host}:{port}"
    producer = Producer({"bootstrap.servers": first, "acks": "all"})
    listed = producer.list_topics(timeout=15)
    assert {b.id: (b.host, b.port) for b in listed.brokers.values()} == cluster.external()
    acked: list[Any] = []
    for n in range(300):
        producer.produce(topic, value=b"ck-%d" % n, partition=n % 3,
                         on_delivery=lambda err, msg: acked.append(msg) if err is None else None)
    assert producer.flush(30) == 0 and len(acked) == 300
    got = [m.value() for p in range(3) for m in ck_consume(first, topic, 100, partition=p)]
    assert sorted(got) == sorted(b"ck-%d" % n for n in range(300))

    meta = json.loads(kcat("-b", first, "-L", "-J", "-t", topic).stdout)
    assert {b["id"]: b["name"] for b in meta["brokers"]} == {i: f"{h}:{p}" for i, (h, p) in cluster.external().items()}
    kcat("-b", first, "-P", "-t", topic, "-p", "2", stdin=b"kcat-1\nkcat-2\n")
    out = kcat("-b", first, "-C", "-t", topic, "-p", "2", "-o", "100", "-c", "2", "-e").stdout
    assert out.split() == [b"kcat-1", b"kcat-2"]
    # kcat's balanced consumer: FindCoordinator and the group protocol through EXTERNAL.
    out = kcat("-b", first, "-G", f"kg-{topic}", "-X", "auto.offset.reset=earliest", "-c", "302", "-f", "%s\n",
               topic).stdout
    assert sorted(out.split()) == sorted([b"ck-%d" % n for n in range(300)] + [b"kcat-1", b"kcat-2"])


def _group_roundtrip(bootstrap: str, topic: str, group: str, count: int) -> list[bytes]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []

        def poll() -> bool:
            got.extend(m.value() or b"" for m in consumer.consume(50, 0.5) if m.error() is None)
            return len(got) >= count

        wait_until(poll, 60, f"group {group} reads {count} records")
        consumer.commit(asynchronous=False)
        return got
    finally:
        consumer.close()


def test_consumer_groups_on_both_listeners(cluster: TwoListenerCluster) -> None:
    from confluent_kafka import Producer

    topic = f"grp-{uuid.uuid4().hex[:8]}"
    create_topic_confluent(cluster.bootstrap(), topic, partitions=2, rf=3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all"})
    for n in range(40):
        producer.produce(topic, value=b"g-%d" % n, partition=n % 2)
    assert producer.flush(30) == 0
    expected = sorted(b"g-%d" % n for n in range(40))
    internal = ",".join(f"{h}:{p}" for h, p in cluster.internal_endpoints().values())
    for name, bootstrap in (("external", cluster.bootstrap()), ("internal", internal)):
        group = f"{name}-{uuid.uuid4().hex[:6]}"
        assert sorted(_group_roundtrip(bootstrap, topic, group, 40)) == expected, name
        # The commit landed: OffsetFetch through the same listener's coordinator sees both partitions at 20.
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        try:
            committed = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=15)
        finally:
            c.close()
        assert [tp.offset for tp in committed] == [20, 20], name


def test_a_standalone_broker_answers_with_its_own_listener(broker_factory: Any) -> None:
    """No controller: the broker's own advertised listeners, the one the request came in on."""
    broker: BrokerProcess = broker_factory(start=False)
    other = free_port()
    broker.overrides.update({
        "listeners": f"CLIENTS://127.0.0.1:{broker.port},REPLICATION://127.0.0.1:{other}",
        "advertised.listeners": f"CLIENTS://127.0.0.1:{broker.port},REPLICATION://localhost:{other}",
        "listener.security.protocol.map": "CLIENTS:PLAINTEXT,REPLICATION:PLAINTEXT",
        "inter.broker.listener.name": "REPLICATION"})
    broker.start()
    assert brokers_of(metadata("127.0.0.1", broker.port)) == {0: ("127.0.0.1", broker.port)}
    assert brokers_of(metadata("127.0.0.1", other)) == {0: ("localhost", other)}
