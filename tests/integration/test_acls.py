"""ACLs on a real broker (ZooKeeper mode, one SASL_PLAINTEXT listener with PLAIN users, AclAuthorizer) with real
clients: Write without Read, a prefixed ACL, group Read for consumer groups, Metadata hiding topics, the super
user; ACLs managed through confluent-kafka's AdminClient, through moldau-acls (as a process) and written straight
into ZooKeeper the way Kafka's tools do (the broker follows the change notification)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from .harness import REPO_ROOT, BrokerProcess, wait_until
from .test_cluster import zookeeper  # noqa: F401
from .zookeeper import ZooKeeperProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

USERS = {"broker": "broker-secret", "admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
        'password="broker-secret" ' + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")


class Secured:
    def __init__(self, broker: BrokerProcess, connect: str, root: Path) -> None:
        self.broker = broker
        self.connect = connect
        self.root = root

    def conf(self, user: str) -> dict[str, str]:
        """librdkafka's property names (the same as Moldau's client and tools take)."""
        return {"bootstrap.servers": self.broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user]}


def start_brokers(zk: ZooKeeperProcess, root: Path, ids: list[int]) -> tuple[str, list[BrokerProcess]]:
    """Brokers of one new cluster (its own chroot), SASL_PLAINTEXT only, ACLs on; returns once a client sees
    every broker and the controller."""
    from confluent_kafka.admin import AdminClient

    connect = zk.connect + "/" + uuid.uuid4().hex[:10]
    brokers = []
    try:
        for broker_id in ids:
            broker = BrokerProcess(root / f"broker{broker_id}", broker_id=broker_id)
            broker.overrides.update({
                "broker.id": str(broker_id), "zookeeper.connect": connect, "zookeeper.session.timeout.ms": "6000",
                "listeners": f"SASL_PLAINTEXT://127.0.0.1:{broker.port}",
                "security.inter.broker.protocol": "SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol": "PLAIN",
                "sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": JAAS,
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                "super.users": "User:broker;User:admin", "offsets.topic.num.partitions": "1",
                "auto.create.topics.enable": "false"})
            brokers.append(broker.start())
        admin = AdminClient(Secured(brokers[0], connect, root).conf("admin"))

        def ready() -> bool:
            md = admin.list_topics(timeout=10)
            return sorted(md.brokers) == sorted(ids) and md.controller_id in ids

        wait_until(ready, 30, "every broker registered and a controller elected")
    except BaseException:
        for b in brokers:
            b.kill()
        raise
    return connect, brokers


@pytest.fixture(scope="module")
def secured(zookeeper: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory  # noqa: F811
            ) -> Iterator[Secured]:
    root = tmp_path_factory.mktemp("acls")
    connect, (broker,) = start_brokers(zookeeper, root, [1])
    try:
        yield Secured(broker, connect, root)
    finally:
        broker.kill()


def create_topics(s: Secured, *names: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(s.conf("admin"))
    for f in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        f.result(30)
    wait_until(lambda: set(names) <= set(admin.list_topics(timeout=10).topics), 30, "topics in metadata")


def produce(conf: dict[str, str], topic: str, n: int = 3) -> list[Any]:
    """Delivery reports of n records (each one's error() tells whether the broker took it)."""
    from confluent_kafka import Producer

    producer = Producer({**conf, "message.timeout.ms": 15000})
    reports: list[Any] = []
    for i in range(n):
        producer.produce(topic, f"v{i}".encode(), on_delivery=lambda err, msg: reports.append((err, msg)))
    producer.flush(30)
    assert len(reports) == n
    return reports


def consume(s: Secured, user: str, topic: str, group: str, want: int, timeout: float = 30) -> tuple[list[Any], Any]:
    """Subscribes and polls until ``want`` records or the first error: (records, error or None)."""
    from confluent_kafka import Consumer

    consumer = Consumer({**s.conf(user), "group.id": group, "auto.offset.reset": "earliest",
                         "enable.partition.eof": False})
    consumer.subscribe([topic])
    got: list[Any] = []
    try:
        deadline = time.monotonic() + timeout
        while len(got) < want and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                return got, m.error()
            got.append(m)
        return got, None
    finally:
        consumer.close()


def visible_topics(s: Secured, user: str) -> set[str]:
    from confluent_kafka.admin import AdminClient

    return set(AdminClient(s.conf(user)).list_topics(timeout=10).topics)


def test_acl_matrix_with_confluent_kafka(secured: Secured) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    s, tag = secured, uuid.uuid4().hex[:6]
    orders, logs, secret, app = f"orders-{tag}", f"logs-{tag}-app", f"secret-{tag}", f"app-{tag}"
    create_topics(s, orders, logs, secret)
    admin = AdminClient(s.conf("admin"))
    allow = AclPermissionType.ALLOW
    wanted = [
        AclBinding(ResourceType.TOPIC, orders, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.WRITE,
                   allow),
        AclBinding(ResourceType.TOPIC, f"logs-{tag}", ResourcePatternType.PREFIXED, "User:alice", "*",
                   AclOperation.READ, allow),
        AclBinding(ResourceType.GROUP, app, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                   allow),
    ]
    for f in admin.create_acls(wanted).values():
        assert f.result(30) is None
    described = admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice",
                                                     None, AclOperation.ANY, AclPermissionType.ANY)).result(30)
    assert {(b.name, b.resource_pattern_type, b.operation) for b in described} >= {
        (orders, ResourcePatternType.LITERAL, AclOperation.WRITE),
        (f"logs-{tag}", ResourcePatternType.PREFIXED, AclOperation.READ),
        (app, ResourcePatternType.LITERAL, AclOperation.READ)}

    # Stored where Kafka keeps them, each change announced for every broker's watch.
    zk = KazooClient(s.connect)
    zk.start(timeout=10)
    try:
        literal = json.loads(zk.get(f"/kafka-acl/Topic/{orders}")[0])
        assert literal == {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow",
                                                   "operation": "Write", "host": "*"}]}
        assert json.loads(zk.get(f"/kafka-acl-extended/prefixed/Topic/logs-{tag}")[0])["acls"][0]["operation"] \
            == "Read"
        notes = {zk.get(f"/kafka-acl-changes/{c}")[0] for c in zk.get_children("/kafka-acl-changes")}
        assert {f"Topic:{orders}".encode(), f"Group:{app}".encode()} <= notes
        extended = [json.loads(zk.get(f"/kafka-acl-extended-changes/{c}")[0])
                    for c in zk.get_children("/kafka-acl-extended-changes")]
        assert {"version": 1, "resourceType": "Topic", "name": f"logs-{tag}", "patternType": "PREFIXED"} in extended
    finally:
        zk.stop()
        zk.close()

    # Write but not Read: alice produces to orders and cannot consume it; bob can do neither.
    assert all(err is None for err, _ in produce(s.conf("alice"), orders))
    bob_reports = produce(s.conf("bob"), orders, n=1)
    assert bob_reports[0][0] is not None and bob_reports[0][0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    got, error = consume(s, "alice", orders, app, want=1)
    assert not got and error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # A prefixed ACL covers matching topics; the group needs Read too.
    assert all(err is None for err, _ in produce(s.conf("admin"), logs, n=2))
    got, error = consume(s, "alice", logs, app, want=2)
    assert error is None and [m.value() for m in got] == [b"v0", b"v1"]
    got, error = consume(s, "alice", logs, f"other-{tag}", want=1)
    assert not got and error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED

    # Metadata hides what a principal may not describe; the super user sees (and reads) everything.
    seen = visible_topics(s, "alice")
    assert {orders, logs} <= seen and secret not in seen
    assert not {orders, logs, secret} & visible_topics(s, "bob")
    got, error = consume(s, "admin", orders, f"admin-{tag}", want=3)
    assert error is None and len(got) == 3

    # Only super users (or Alter/Describe on the cluster) manage ACLs. (librdkafka hands a refused DescribeAcls
    # back as an empty list, so the refusal itself is checked with Moldau's AdminClient, which raises it.)
    alice_admin = AdminClient(s.conf("alice"))  # kept referenced: a collected client fails its futures
    refused = alice_admin.create_acls([AclBinding(ResourceType.TOPIC, secret, ResourcePatternType.LITERAL,
                                                  "User:alice", "*", AclOperation.READ, allow)])
    for f in refused.values():
        with pytest.raises(KafkaException) as caught:
            f.result(30)
        assert caught.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert alice_admin.describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
        AclPermissionType.ANY)).result(30) == []
    from moldau import AdminClient as MoldauAdmin
    from moldau import KafkaError as MoldauError

    with MoldauAdmin(s.conf("alice")) as moldau_admin:
        with pytest.raises(MoldauError) as denied:
            moldau_admin.describe_acls()
        assert denied.value.code == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    with MoldauAdmin(s.conf("admin")) as moldau_admin:
        assert {(b.name, b.principal) for b in moldau_admin.describe_acls()} >= {(orders, "User:alice")}

    # delete_acls removes the prefixed ACL: alice can no longer read the logs topic.
    deleted = admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, f"logs-{tag}", ResourcePatternType.PREFIXED,
                                                  None, None, AclOperation.ANY, AclPermissionType.ANY)])
    assert [b.operation for f in deleted.values() for b in f.result(30)] == [AclOperation.READ]
    got, error = consume(s, "alice", logs, app, want=1)
    assert not got and error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_acls_written_into_zookeeper_reach_the_broker(secured: Secured) -> None:
    """Kafka's layout: /kafka-acl/Topic/<name> and a /kafka-acl-changes notification, as kafka-acls
    --authorizer-properties zookeeper.connect=... writes them; the broker's cache follows the watch."""
    s, tag = secured, uuid.uuid4().hex[:6]
    topic = f"zk-{tag}"
    create_topics(s, topic)
    assert topic not in visible_topics(s, "bob")
    zk = KazooClient(s.connect)
    zk.start(timeout=10)
    try:
        acl = {"version": 1, "acls": [{"principal": "User:bob", "permissionType": "Allow", "operation": "Describe",
                                       "host": "*"}]}
        zk.create(f"/kafka-acl/Topic/{topic}", json.dumps(acl).encode(), makepath=True)
        zk.create("/kafka-acl-changes/acl_changes_", f"Topic:{topic}".encode(), sequence=True, makepath=True)
        wait_until(lambda: topic in visible_topics(s, "bob"), 30, "bob sees the topic after the notification")
    finally:
        zk.stop()
        zk.close()


def test_describe_consumer_groups_reports_authorized_operations(secured: Secured) -> None:
    """KIP-430 through confluent-kafka: a principal with only Read on a group sees Read and Describe (implied),
    the super user every group operation; not asked for, librdkafka reports none (the broker's "unknown")."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    s, tag = secured, uuid.uuid4().hex[:6]
    topic, group = f"ops-{tag}", f"ops-{tag}"
    create_topics(s, topic)
    admin = AdminClient(s.conf("admin"))
    for f in admin.create_acls([AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, "User:alice",
                                           "*", AclOperation.READ, AclPermissionType.ALLOW)]).values():
        assert f.result(30) is None
    # A simple offset commit makes the group exist (Empty), as a consumer's first commit would.
    committed = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 0)])])
    assert committed[group].result(30).group_id == group

    def operations(user: str, include: bool) -> set[AclOperation] | None:
        client = AdminClient(s.conf(user))
        described = client.describe_consumer_groups([group], include_authorized_operations=include,
                                                    request_timeout=30)[group].result(30)
        assert described.group_id == group
        return None if described.authorized_operations is None else set(described.authorized_operations)

    assert operations("alice", True) == {AclOperation.READ, AclOperation.DESCRIBE}
    assert operations("admin", True) == {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}
    assert operations("alice", False) is None
    with pytest.raises(KafkaException, match="GROUP_AUTHORIZATION_FAILED|[Aa]uthoriz"):
        operations("bob", True)


def acls_tool(s: Secured, *args: str) -> subprocess.CompletedProcess[str]:
    props = s.root / "admin.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in s.conf("admin").items() if k != "bootstrap.servers"))
    return subprocess.run([sys.executable, "-m", "moldau.tools.acls", "--bootstrap-server", s.broker.bootstrap,
                           "--command-config", str(props), *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def test_moldau_acls_tool_and_kafka_python(secured: Secured) -> None:
    from kafka import KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError

    s, tag = secured, uuid.uuid4().hex[:6]
    topic = f"tool-{tag}"
    create_topics(s, topic)
    kp = {"bootstrap_servers": s.broker.bootstrap, "security_protocol": "SASL_PLAINTEXT",
          "sasl_mechanism": "PLAIN", "sasl_plain_username": "bob", "sasl_plain_password": USERS["bob"]}

    def bob_sends() -> Any:
        producer = KafkaProducer(**kp, max_block_ms=20000, retries=0)
        try:
            return producer.send(topic, b"from-bob").get(timeout=30)
        finally:
            producer.close(timeout=10)

    with pytest.raises(TopicAuthorizationFailedError):
        bob_sends()
    added = acls_tool(s, "--add", "--allow-principal", "User:bob", "--producer", "--topic", topic)
    assert added.returncode == 0, added.stderr
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC" in added.stdout
    assert bob_sends().offset == 0
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePatternFilter,
        ResourceType,
    )

    kp_admin = KafkaAdminClient(**{**kp, "sasl_plain_username": "admin", "sasl_plain_password": USERS["admin"]})
    try:
        acls, error = kp_admin.describe_acls(ACLFilter(
            "User:bob", None, ACLOperation.ANY, ACLPermissionType.ANY,
            ResourcePatternFilter(ResourceType.TOPIC, topic, ACLResourcePatternType.LITERAL)))
    finally:
        kp_admin.close()
    assert error.errno == 0 and {a.operation for a in acls} == {ACLOperation.WRITE, ACLOperation.DESCRIBE,
                                                                ACLOperation.CREATE}
    listed = acls_tool(s, "--list", "--topic", topic)
    assert listed.returncode == 0, listed.stderr
    assert "(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW)" in listed.stdout
    removed = acls_tool(s, "--remove", "--force", "--allow-principal", "User:bob", "--operation", "Write",
                        "--topic", topic)
    assert removed.returncode == 0, removed.stderr
    listed = acls_tool(s, "--list", "--topic", topic)
    assert "operation=WRITE" not in listed.stdout and "operation=DESCRIBE" in listed.stdout
    with pytest.raises(TopicAuthorizationFailedError):
        bob_sends()
    refused = acls_tool(s, "--list", "--topic", topic, "--command-config", "/nonexistent.properties")
    assert refused.returncode == 1 and "--command-config" in refused.stderr


def client_cert(certs_dir: Path, cn: str) -> Path:
    """A client certificate ``/O=Moldau/CN=<cn>`` signed by the test CA (certificate + key in one PEM)."""
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=certs_dir, check=True, capture_output=True, timeout=60)

    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", f"{cn}.key",
            "-out", f"{cn}.csr", "-subj", f"/O=Moldau/CN={cn}")
    (certs_dir / "client.cnf").write_text("basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
    openssl("x509", "-req", "-in", f"{cn}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{cn}.crt", "-days", "2", "-extfile", "client.cnf")
    pem = certs_dir / f"{cn}.pem"
    pem.write_text((certs_dir / f"{cn}.crt").read_text() + (certs_dir / f"{cn}.key").read_text())
    return pem


def test_mtls_principal_is_the_certificate_subject(tmp_path: Path) -> None:
    """A standalone broker on an SSL listener with ssl.client.auth=required: the principal is the client
    certificate's RFC 2253 subject (User:CN=alice,O=Moldau), as Kafka's default principal builder makes it;
    its ACLs live in the broker's acls.json."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    from moldau.broker.security.certs import make_certs

    certs = make_certs(tmp_path / "certs")
    alice_pem = client_cert(tmp_path / "certs", "alice")
    broker = mtls_acl_broker(tmp_path, certs, {"super.users": "User:CN=localhost"})
    broker.start()
    try:
        def conf(pem: Path) -> dict[str, str]:
            return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SSL",
                    "ssl.ca.location": str(certs.ca), "ssl.certificate.location": str(pem),
                    "ssl.key.location": str(pem)}

        admin = AdminClient(conf(certs.broker_pem))  # CN=localhost: the super user
        for f in admin.create_topics([NewTopic("mtls-open", 1, 1), NewTopic("mtls-closed", 1, 1)]).values():
            f.result(30)
        for f in admin.create_acls([AclBinding(ResourceType.TOPIC, "mtls-open", ResourcePatternType.LITERAL,
                                               "User:CN=alice,O=Moldau", "*", AclOperation.WRITE,
                                               AclPermissionType.ALLOW)]).values():
            assert f.result(30) is None
        assert all(err is None for err, _ in produce(conf(alice_pem), "mtls-open", n=2))
        denied = produce(conf(alice_pem), "mtls-closed", n=1)
        assert denied[0][0] is not None and denied[0][0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert (broker.log_dir / "acls.json").exists()
    finally:
        broker.kill()


def test_an_acl_created_on_one_broker_applies_on_another(zookeeper: ZooKeeperProcess,  # noqa: F811
                                                         tmp_path: Path) -> None:
    """CreateAcls answered by broker 1 only; the partition is led by broker 2, which must learn the ACL from the
    ZooKeeper change notification before alice's produce (which goes to broker 2) is allowed."""
    import asyncio

    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, NewTopic

    from moldau.aio import AdminClient as AsyncAdmin
    from moldau.protocol.acl import Operation, PatternType, Permission, ResourceType
    from moldau.protocol.messages.acls import CREATE_ACLS

    connect, brokers = start_brokers(zookeeper, tmp_path, [1, 2])
    try:
        s = Secured(brokers[0], connect, tmp_path)
        admin = AdminClient(s.conf("admin"))
        for f in admin.create_topics([NewTopic("on-two", 1, replica_assignment=[[2]])]).values():
            f.result(30)
        wait_until(lambda: "on-two" in admin.list_topics(timeout=10).topics, 30, "topic in metadata")
        denied = produce(s.conf("alice"), "on-two", n=1)
        assert denied[0][0] is not None and denied[0][0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

        async def create_on_broker_1() -> dict[str, Any]:
            async with AsyncAdmin(s.conf("admin")) as a:
                conn = await a.cluster.connection(1)
                return await conn.send(CREATE_ACLS, {"creations": [{
                    "resource_type": ResourceType.TOPIC, "resource_name": "on-two",
                    "resource_pattern_type": PatternType.LITERAL, "principal": "User:alice", "host": "*",
                    "operation": Operation.WRITE, "permission_type": Permission.ALLOW}]})

        created = asyncio.run(create_on_broker_1())
        assert created["results"][0]["error_code"] == 0
        wait_until(lambda: produce(s.conf("alice"), "on-two", n=1)[0][0] is None, 30,
                   "broker 2 allows alice's produce after the notification")
    finally:
        for b in brokers:
            b.kill()


def mtls_acl_broker(tmp_path: Path, certs: Any, extra: dict[str, str]) -> BrokerProcess:
    """A standalone broker (not started) with one SSL listener that requires client certificates, and ACLs on."""
    broker = BrokerProcess(tmp_path / "broker")
    broker.overrides.update({
        "listeners": f"SSL://127.0.0.1:{broker.port}", "security.inter.broker.protocol": "SSL",
        "ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM", "ssl.keystore.location": str(certs.broker_pem),
        "ssl.truststore.location": str(certs.ca), "ssl.client.auth": "required",
        "authorizer.class.name": "moldau.acl",
        "offsets.topic.num.partitions": "1", "auto.create.topics.enable": "false", **extra})
    return broker
