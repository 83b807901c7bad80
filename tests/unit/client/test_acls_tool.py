"""moldau-acls: Kafka's kafka-acls flags turned into ACL bindings and filters, and its output format."""

from __future__ import annotations

import io

import pytest

from moldau.admin_acls import AclBinding
from moldau.protocol.acl import Operation, PatternType, Permission, ResourceType
from moldau.tools.acls import bindings, parse_args, print_grouped
from moldau.tools.common import ToolError

BOOT = ["--bootstrap-server", "127.0.0.1:9092"]


def test_add_with_operations_hosts_and_prefixed_pattern() -> None:
    args = parse_args([*BOOT, "--add", "--allow-principal", "User:alice", "--operation", "read",
                       "--operation", "Describe", "--topic", "logs-", "--resource-pattern-type", "PREFIXED"])
    assert bindings(args) == [
        AclBinding(ResourceType.TOPIC, "logs-", PatternType.PREFIXED, "User:alice", "*", op, Permission.ALLOW)
        for op in (Operation.READ, Operation.DESCRIBE)]
    args = parse_args([*BOOT, "--add", "--deny-principal", "User:bob", "--deny-host", "10.0.0.1", "--cluster"])
    assert bindings(args) == [AclBinding(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, "User:bob",
                                         "10.0.0.1", Operation.ALL, Permission.DENY)]


def test_producer_and_consumer_conveniences() -> None:
    args = parse_args([*BOOT, "--add", "--allow-principal", "User:p", "--producer", "--topic", "t", "--idempotent"])
    got = {(b.resource_type, b.operation) for b in bindings(args)}
    assert got == {(ResourceType.TOPIC, Operation.WRITE), (ResourceType.TOPIC, Operation.DESCRIBE),
                   (ResourceType.TOPIC, Operation.CREATE), (ResourceType.CLUSTER, Operation.IDEMPOTENT_WRITE)}
    args = parse_args([*BOOT, "--add", "--allow-principal", "User:c", "--consumer", "--topic", "t", "--group", "g"])
    got = {(b.resource_type, b.name, b.operation) for b in bindings(args)}
    assert got == {(ResourceType.TOPIC, "t", Operation.READ), (ResourceType.TOPIC, "t", Operation.DESCRIBE),
                   (ResourceType.GROUP, "g", Operation.READ)}


@pytest.mark.parametrize("argv, message", [
    ([], "exactly one action"),
    (["--add", "--list"], "exactly one action"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"], "not valid"),
    (["--add", "--allow-principal", "alice", "--topic", "t"], "Type:name"),
    (["--add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"], "unknown operation"),
    (["--add", "--allow-principal", "User:a"], "--topic, --cluster"),
    (["--add", "--topic", "t"], "--allow-principal, --deny-principal"),
    (["--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"], "--group"),
])
def test_bad_flags_name_the_problem(argv: list[str], message: str) -> None:
    with pytest.raises(ToolError, match=message):
        parse_args([*BOOT, *argv])


def test_output_in_kafkas_format() -> None:
    out = io.StringIO()
    print_grouped("Current ACLs for resource", [AclBinding(ResourceType.TOPIC, "t", PatternType.LITERAL,
                                                           "User:a", "*", Operation.READ, Permission.ALLOW)], out)
    assert out.getvalue().splitlines()[:2] == [
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`: ",
        " \t(principal=User:a, host=*, operation=READ, permissionType=ALLOW) "]
