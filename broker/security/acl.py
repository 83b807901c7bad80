"""Kafka's ACL model and its decision rules, and the ZooKeeper layout Kafka stores ACLs in (not wired into the
request path yet: docs/security.md "Not yet").

An ACL allows or denies one principal (``User:alice``, ``User:*``) from one host (or ``*``) one operation on
resources of one type whose name matches a pattern: LITERAL (the name, or ``*`` for all) or PREFIXED. The
decision follows Kafka's AclAuthorizer: super users may do everything; a resource no ACL matches is open only
with ``allow.everyone.if.no.acl.found``; a matching DENY wins over any ALLOW; Read, Write, Delete or Alter imply
Describe and AlterConfigs implies DescribeConfigs; ``All`` matches every operation.

ZooKeeper: ``/kafka-acl/<Type>/<name>`` (literal) and ``/kafka-acl-extended/prefixed/<Type>/<name>``, each
``{"version":1,"acls":[{"principal":...,"permissionType":"Allow","operation":"Read","host":"*"}]}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum


class ResourceType(IntEnum):  # Kafka's wire codes
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5


class PatternType(IntEnum):
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class Permission(IntEnum):
    ANY = 1
    DENY = 2
    ALLOW = 3


RESOURCE_NAMES = {ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group", ResourceType.CLUSTER: "Cluster",
                  ResourceType.TRANSACTIONAL_ID: "TransactionalId"}
OPERATION_NAMES = {Operation.ALL: "All", Operation.READ: "Read", Operation.WRITE: "Write",
                   Operation.CREATE: "Create", Operation.DELETE: "Delete", Operation.ALTER: "Alter",
                   Operation.DESCRIBE: "Describe", Operation.CLUSTER_ACTION: "ClusterAction",
                   Operation.DESCRIBE_CONFIGS: "DescribeConfigs", Operation.ALTER_CONFIGS: "AlterConfigs",
                   Operation.IDEMPOTENT_WRITE: "IdempotentWrite"}
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
# An allowed operation that implies another (Kafka: AclAuthorizer's implied operations).
IMPLIED_BY = {Operation.DESCRIBE: (Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER),
              Operation.DESCRIBE_CONFIGS: (Operation.ALTER_CONFIGS,)}


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    name: str
    pattern: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def covers(self, resource_type: ResourceType, name: str) -> bool:
        if self.resource_type != resource_type:
            return False
        if self.pattern == PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name == name or self.name == WILDCARD

    def applies_to(self, principal: str, host: str) -> bool:
        return self.principal in (principal, "User:*") and self.host in (host, WILDCARD)


class AclDecision:
    """The authorizer's rules over a set of bindings (the caller keeps the set current)."""

    def __init__(self, bindings: Iterable[AclBinding], super_users: Iterable[str] = (),
                 allow_if_no_acl: bool = False) -> None:
        self.bindings = list(bindings)
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl

    def authorize(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        matching = [b for b in self.bindings if b.covers(resource_type, name)]
        if not matching:
            return self.allow_if_no_acl
        mine = [b for b in matching if b.applies_to(principal, host)]
        if any(b.permission == Permission.DENY and b.operation in (operation, Operation.ALL) for b in mine):
            return False
        allowed = {operation, *IMPLIED_BY.get(operation, ())}
        return any(b.permission == Permission.ALLOW and (b.operation in allowed or b.operation == Operation.ALL)
                   for b in mine)


def parse_super_users(text: str | None) -> list[str]:
    """``super.users``: principals separated by ';' (Kafka's format)."""
    return [p.strip() for p in (text or "").split(";") if p.strip()]


def zk_path(resource_type: ResourceType, name: str, pattern: PatternType) -> str:
    base = "/kafka-acl" if pattern == PatternType.LITERAL else "/kafka-acl-extended/prefixed"
    return f"{base}/{RESOURCE_NAMES[resource_type]}/{name}"


def encode_zk(bindings: Iterable[AclBinding]) -> bytes:
    acls = [{"principal": b.principal, "permissionType": "Allow" if b.permission == Permission.ALLOW else "Deny",
             "operation": OPERATION_NAMES[b.operation], "host": b.host} for b in bindings]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_zk(resource_type: ResourceType, name: str, pattern: PatternType, data: bytes) -> list[AclBinding]:
    by_name = {v: k for k, v in OPERATION_NAMES.items()}
    out = []
    for acl in json.loads(data).get("acls", []):
        out.append(AclBinding(resource_type, name, pattern, acl["principal"], acl["host"],
                              by_name[acl["operation"]],
                              Permission.ALLOW if acl["permissionType"] == "Allow" else Permission.DENY))
    return out
