"""ACLs with the clients test_acls.py does not drive: aiokafka 0.14 and kcat 1.7 (librdkafka 2.0.2), logged in
with SASL PLAIN on test_acls.py's broker (AclAuthorizer, allow.everyone.if.no.acl.found=false): Write without
Read, Read on the topic and the group for a consumer group, a missing group Read, Metadata hiding topics."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import pytest

from .test_acls import Secured, consume, create_topics, secured  # noqa: F401
from .test_cluster import zookeeper  # noqa: F401
from .test_security import kcat

pytestmark = pytest.mark.integration  # the module runs in ~12 s (ZooKeeper, one broker, two tests) on the loaded 2 cores


def grant(s: Secured, principal: str, *acls: tuple[str, str, str]) -> None:
    """ALLOW ACLs from any host, each (resource type, literal name, operation) as confluent-kafka names them."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    bindings = [AclBinding(ResourceType[kind], name, ResourcePatternType.LITERAL, principal, "*",
                           AclOperation[op], AclPermissionType.ALLOW) for kind, name, op in acls]
    admin_conf: dict[str, Any] = {**s.conf("admin")}
    admin = AdminClient(admin_conf)  # kept referenced until the futures resolve: a collected client fails them
    for f in admin.create_acls(bindings).values():
        assert f.result(30) is None


def aio_conf(s: Secured, user: str) -> dict[str, Any]:
    """test_acls.py's login (SASL_PLAINTEXT, PLAIN) in aiokafka's argument names."""
    conf = s.conf(user)
    return {"bootstrap_servers": conf["bootstrap.servers"], "security_protocol": conf["security.protocol"],
            "sasl_mechanism": conf["sasl.mechanism"], "sasl_plain_username": conf["sasl.username"],
            "sasl_plain_password": conf["sasl.password"]}


async def drain(consumer: Any, want: int, timeout: float = 30) -> list[Any]:
    """Records until ``want`` arrived or ``timeout`` passed; an error the consumer raises propagates."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        batch = await consumer.getmany(timeout_ms=500)
        got += [r for records in batch.values() for r in records]
    return got


async def aio_produce(s: Secured, user: str, topic: str, values: list[bytes]) -> list[int]:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(**aio_conf(s, user), request_timeout_ms=15000)
    await producer.start()
    try:
        return [(await producer.send_and_wait(topic, v, partition=0)).offset for v in values]
    finally:
        await producer.stop()


async def aio_group_consume(s: Secured, user: str, topic: str, group: str, want: int,
                            commit: bool = True) -> tuple[list[bytes], Any]:
    """Joins ``group``, reads ``want`` records and, if ``commit``, commits them: (values, the committed offset of
    partition 0, or None without ``commit``)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(topic, **aio_conf(s, user), group_id=group, auto_offset_reset="earliest",
                                enable_auto_commit=False)
    await consumer.start()
    try:
        got = await drain(consumer, want)
        if not commit:
            return [r.value for r in got], None
        await consumer.commit()
        return [r.value for r in got], await consumer.committed(TopicPartition(topic, 0))
    finally:
        await consumer.stop()


def test_aiokafka_acls(secured: Secured) -> None:  # noqa: F811
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError

    s, tag = secured, uuid.uuid4().hex[:6]
    orders, logs = f"aio-orders-{tag}", f"aio-logs-{tag}"
    readers, lurkers, strangers = f"aio-readers-{tag}", f"aio-lurkers-{tag}", f"aio-strangers-{tag}"
    create_topics(s, orders, logs)
    grant(s, "User:alice", ("TOPIC", orders, "WRITE"))
    grant(s, "User:bob", ("TOPIC", logs, "READ"), ("GROUP", readers, "READ"), ("GROUP", lurkers, "DESCRIBE"))

    # Write without Read: alice's producer is served, bob (no ACL on the topic) is refused.
    assert asyncio.run(aio_produce(s, "alice", orders, [b"a0", b"a1", b"a2"])) == [0, 1, 2]
    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(aio_produce(s, "bob", orders, [b"b0"]))

    async def alice_reads() -> list[Any]:
        consumer = AIOKafkaConsumer(**aio_conf(s, "alice"), auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([TopicPartition(orders, 0)])
            return await drain(consumer, 1)
        finally:
            await consumer.stop()

    with pytest.raises(TopicAuthorizationFailedError) as denied:
        asyncio.run(alice_reads())
    assert orders in str(denied.value)

    # Read on the topic and on the group: bob consumes in the group and commits.
    assert asyncio.run(aio_produce(s, "admin", logs, [b"l0", b"l1", b"l2"])) == [0, 1, 2]
    values, committed = asyncio.run(aio_group_consume(s, "bob", logs, readers, 3))
    assert values == [b"l0", b"l1", b"l2"] and committed == 3

    # Describe without Read on a group fails JoinGroup; no ACL at all on a group fails FindCoordinator. No commit:
    # the refusal must come while joining (OffsetCommit needs group Read too, and would hide a join let through).
    for group in (lurkers, strangers):
        with pytest.raises(GroupAuthorizationFailedError) as refused:
            asyncio.run(aio_group_consume(s, "bob", logs, group, 1, commit=False))
        assert group in str(refused.value)


def kcat_props(s: Secured, user: str) -> list[str]:
    """``-b <bootstrap> -F <file>``: the user's login as a librdkafka properties file."""
    conf = s.conf(user)
    props = s.root / f"kcat-{user}.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in conf.items() if k != "bootstrap.servers"))
    return ["-b", conf["bootstrap.servers"], "-F", str(props)]


def listed_topics(s: Secured, user: str) -> set[str]:
    out = kcat(*kcat_props(s, user), "-L", "-J", "-m", "15").stdout
    return {t["topic"] for t in json.loads(out)["topics"]}


def test_kcat_acls(secured: Secured) -> None:  # noqa: F811
    s, tag = secured, uuid.uuid4().hex[:6]
    orders, secret = f"kc-orders-{tag}", f"kc-secret-{tag}"
    create_topics(s, orders, secret)
    grant(s, "User:alice", ("TOPIC", orders, "WRITE"))

    # Write without Read: kcat produces as alice (the super user reads the records back) ...
    kcat(*kcat_props(s, "alice"), "-P", "-t", orders, "-p", "0", "-X", "message.timeout.ms=15000",
         stdin=b"k0\nk1\nk2\n")
    got, error = consume(s, "admin", orders, f"kc-admin-{tag}", want=3)
    assert error is None and [m.value() for m in got] == [b"k0", b"k1", b"k2"]
    # ... and bob, without any ACL on the topic, cannot.
    refused = kcat(*kcat_props(s, "bob"), "-P", "-t", orders, "-p", "0", "-X", "message.timeout.ms=15000",
                   stdin=b"b0\n", check=False)
    assert refused.returncode != 0 and b"Delivery failed" in refused.stderr, refused.stderr[-2000:]
    assert b"Topic authorization failed" in refused.stderr, refused.stderr[-2000:]

    # Alice cannot consume: kcat stops with the fetch's authorization error ("% ERROR: Topic <name> [0]
    # error: Fetch from broker 1 failed: Broker: Topic authorization failed").
    denied = kcat(*kcat_props(s, "alice"), "-C", "-t", orders, "-p", "0", "-o", "beginning", "-e", check=False)
    assert denied.returncode != 0, denied.stderr[-2000:]
    assert b"Fetch from broker" in denied.stderr and b"Topic authorization failed" in denied.stderr, \
        denied.stderr[-2000:]
    assert not denied.stdout.strip(), denied.stdout[-500:]

    # Metadata: all-topics listing hides the topic alice may not describe; the super user sees both.
    assert {orders, secret} <= listed_topics(s, "admin")
    seen = listed_topics(s, "alice")
    assert orders in seen and secret not in seen
