"""Kafka's ACL decision rules and its ZooKeeper encoding."""

from __future__ import annotations

import json

from moldau.broker.security.acl import (
    AclBinding,
    AclDecision,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    decode_zk,
    encode_zk,
    parse_super_users,
    zk_path,
)

T, G = ResourceType.TOPIC, ResourceType.GROUP
ALICE, BOB = "User:alice", "User:bob"


def acl(name: str, op: Operation, perm: Permission = Permission.ALLOW, principal: str = ALICE,
        pattern: PatternType = PatternType.LITERAL, rtype: ResourceType = T, host: str = "*") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def test_write_without_read() -> None:
    d = AclDecision([acl("orders", Operation.WRITE)])
    assert d.authorize(ALICE, "10.0.0.1", Operation.WRITE, T, "orders")
    assert not d.authorize(ALICE, "10.0.0.1", Operation.READ, T, "orders")
    assert d.authorize(ALICE, "10.0.0.1", Operation.DESCRIBE, T, "orders")  # implied by Write
    assert not d.authorize(BOB, "10.0.0.1", Operation.WRITE, T, "orders")


def test_prefixed_and_wildcard() -> None:
    d = AclDecision([acl("logs-", Operation.READ, pattern=PatternType.PREFIXED), acl("*", Operation.DESCRIBE,
                                                                                     principal="User:*")])
    assert d.authorize(ALICE, "h", Operation.READ, T, "logs-app")
    assert not d.authorize(ALICE, "h", Operation.READ, T, "metrics")
    assert d.authorize(BOB, "h", Operation.DESCRIBE, T, "metrics")


def test_deny_wins_and_all() -> None:
    d = AclDecision([acl("orders", Operation.ALL), acl("orders", Operation.WRITE, Permission.DENY,
                                                       host="10.0.0.9")])
    assert d.authorize(ALICE, "10.0.0.1", Operation.WRITE, T, "orders")
    assert not d.authorize(ALICE, "10.0.0.9", Operation.WRITE, T, "orders")
    assert d.authorize(ALICE, "10.0.0.9", Operation.READ, T, "orders")


def test_no_acl_found_and_super_users() -> None:
    assert not AclDecision([]).authorize(ALICE, "h", Operation.READ, G, "g")
    assert AclDecision([], allow_if_no_acl=True).authorize(ALICE, "h", Operation.READ, G, "g")
    # Once any ACL covers the resource, allow.everyone.if.no.acl.found no longer applies to it.
    assert not AclDecision([acl("g", Operation.READ, rtype=G)], allow_if_no_acl=True).authorize(
        BOB, "h", Operation.READ, G, "g")
    assert AclDecision([], super_users=parse_super_users("User:admin; User:ops")).authorize(
        "User:ops", "h", Operation.ALTER, ResourceType.CLUSTER, "kafka-cluster")


def test_zookeeper_layout_round_trip() -> None:
    bindings = [acl("orders", Operation.READ), acl("orders", Operation.WRITE, Permission.DENY, principal=BOB)]
    assert zk_path(T, "orders", PatternType.LITERAL) == "/kafka-acl/Topic/orders"
    assert zk_path(G, "app-", PatternType.PREFIXED) == "/kafka-acl-extended/prefixed/Group/app-"
    data = encode_zk(bindings)
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:bob", "permissionType": "Deny", "operation": "Write", "host": "*"}]}
    assert decode_zk(T, "orders", PatternType.LITERAL, data) == bindings
