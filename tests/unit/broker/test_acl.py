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


def test_filters_as_kafka_matches_them() -> None:
    from moldau.broker.security.acl import AclFilter

    literal = acl("logs-app", Operation.READ)
    prefixed = acl("logs-", Operation.READ, pattern=PatternType.PREFIXED)
    wildcard = acl("*", Operation.READ)
    everything = [literal, prefixed, wildcard, acl("app", Operation.READ, rtype=G)]
    match = AclFilter(T, "logs-app", PatternType.MATCH)
    assert [b for b in everything if match.matches(b)] == [literal, prefixed, wildcard]
    exact = AclFilter(T, "logs-", PatternType.ANY)
    assert [b for b in everything if exact.matches(b)] == [prefixed]
    assert [b for b in everything if AclFilter(pattern=PatternType.LITERAL).matches(b)] == [
        literal, wildcard, everything[3]]
    assert not AclFilter(principal=BOB).matches(literal)
    assert not AclFilter(operation=Operation.WRITE).matches(literal)


def test_binding_validation() -> None:
    from moldau.broker.security.acl import CLUSTER_NAME, binding_error

    assert binding_error(acl("t", Operation.READ)) is None
    assert binding_error(acl(CLUSTER_NAME, Operation.ALTER, rtype=ResourceType.CLUSTER)) is None
    assert "cluster" in (binding_error(acl("c", Operation.ALTER, rtype=ResourceType.CLUSTER)) or "")
    assert binding_error(acl("t", Operation.ANY)) is not None
    assert binding_error(acl("t", Operation.READ, pattern=PatternType.MATCH)) is not None
    assert binding_error(acl("t", Operation.READ, principal="alice")) is not None


def test_change_notifications_in_kafkas_formats() -> None:
    from moldau.broker.security.acl_store import (
        EXTENDED_CHANGES,
        LITERAL_CHANGES,
        change_note,
        parse_change_note,
    )

    root, data = change_note((T, "orders", PatternType.LITERAL))
    assert (root, data) == (LITERAL_CHANGES, b"Topic:orders")
    assert parse_change_note(root, data) == (T, "orders", PatternType.LITERAL)
    root, data = change_note((G, "app-", PatternType.PREFIXED))
    assert root == EXTENDED_CHANGES
    assert json.loads(data) == {"version": 1, "resourceType": "Group", "name": "app-", "patternType": "PREFIXED"}
    assert parse_change_note(root, data) == (G, "app-", PatternType.PREFIXED)


def test_decision_index_agrees_with_a_scan() -> None:
    bindings = [acl("a", Operation.READ), acl("a", Operation.WRITE, Permission.DENY, principal="User:*"),
                acl("a-", Operation.DESCRIBE, pattern=PatternType.PREFIXED), acl("*", Operation.CREATE)]
    d = AclDecision(bindings)
    for name in ("a", "a-1", "b"):
        assert sorted(map(str, d.matching(T, name))) == sorted(str(b) for b in bindings if b.covers(T, name))
    assert d.authorize(ALICE, "h", Operation.READ, T, "a") and not d.authorize(ALICE, "h", Operation.WRITE, T, "a")


def test_ssl_principal_is_the_rfc2253_subject() -> None:
    from moldau.broker.security.tls import certificate_principal

    cert = {"subject": ((("countryName", "US"),), (("organizationName", "Ex, Inc"),),
                        (("organizationalUnitName", "eng"), ("userId", "7")), (("commonName", "alice"),))}
    assert certificate_principal(cert) == "User:CN=alice,OU=eng+UID=7,O=Ex\\, Inc,C=US"
    assert certificate_principal({"subject": ((("commonName", " lead"),),)}) == "User:CN=\\ lead"
    assert certificate_principal(None) is None and certificate_principal({}) is None
