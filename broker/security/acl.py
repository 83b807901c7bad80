"""Kafka's ACL model and its decision rules, and the ZooKeeper layout Kafka stores ACLs in (the authorizer in the
request path: broker/security/authorizer.py; where ACLs are kept: broker/security/acl_store.py).

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

from moldau.protocol.acl import (  # noqa: F401  (re-exported: the broker's ACL code imports them from here)
    CLUSTER_NAME,
    OPERATION_NAMES,
    RESOURCE_NAMES,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

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
    """The authorizer's rules over a set of bindings (the caller keeps the set current and rebuilds this when it
    changes). Bindings are indexed by resource type and literal name, so a decision looks at the few bindings
    that can cover the resource instead of all of them."""

    def __init__(self, bindings: Iterable[AclBinding], super_users: Iterable[str] = (),
                 allow_if_no_acl: bool = False) -> None:
        self.bindings = list(bindings)
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefixed: dict[ResourceType, list[AclBinding]] = {}
        for b in self.bindings:
            if b.pattern == PatternType.PREFIXED:
                self._prefixed.setdefault(b.resource_type, []).append(b)
            else:
                self._literal.setdefault((b.resource_type, b.name), []).append(b)

    def matching(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """Every binding whose pattern covers the resource."""
        found = [*self._literal.get((resource_type, name), ()), *self._literal.get((resource_type, WILDCARD), ())]
        found += [b for b in self._prefixed.get(resource_type, ()) if name.startswith(b.name)]
        return found

    def authorize(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        matching = self.matching(resource_type, name)
        if not matching:
            return self.allow_if_no_acl
        mine = [b for b in matching if b.applies_to(principal, host)]
        if any(b.permission == Permission.DENY and b.operation in (operation, Operation.ALL) for b in mine):
            return False
        allowed = {operation, *IMPLIED_BY.get(operation, ())}
        return any(b.permission == Permission.ALLOW and (b.operation in allowed or b.operation == Operation.ALL)
                   for b in mine)


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Kafka's AclBindingFilter (DescribeAcls, DeleteAcls): None / ANY match everything; the MATCH pattern type
    selects every pattern that covers the named resource (literal name, the ``*`` literal, matching prefixes)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches(self, b: AclBinding) -> bool:
        return self._matches_pattern(b) and (
            (self.principal is None or self.principal == b.principal)
            and (self.host is None or self.host == b.host)
            and self.operation in (Operation.ANY, b.operation)
            and self.permission in (Permission.ANY, b.permission))

    def _matches_pattern(self, b: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, b.resource_type):
            return False
        if self.pattern not in (PatternType.ANY, PatternType.MATCH, b.pattern):
            return False
        if self.name is None:
            return True
        if self.pattern in (PatternType.ANY, b.pattern):
            return self.name == b.name
        if b.pattern == PatternType.PREFIXED:
            return self.name.startswith(b.name)
        return self.name == b.name or b.name == WILDCARD


def binding_error(b: AclBinding) -> str | None:
    """Why an ACL cannot be created (Kafka answers INVALID_REQUEST), or None."""
    if b.resource_type not in RESOURCE_NAMES:
        return f"unknown or ANY resource type {int(b.resource_type)}"
    if b.pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        return "the pattern type must be LITERAL or PREFIXED"
    if b.operation not in OPERATION_NAMES:
        return f"unknown or ANY operation {int(b.operation)}"
    if b.permission not in (Permission.ALLOW, Permission.DENY):
        return "the permission type must be ALLOW or DENY"
    if not b.name:
        return "the resource name must not be empty"
    if b.resource_type == ResourceType.CLUSTER and b.name != CLUSTER_NAME:
        return f"the cluster resource is named {CLUSTER_NAME}"
    kind, sep, who = b.principal.partition(":")
    if not sep or not kind or not who:
        return f"principal {b.principal!r} is not of the form Type:name"
    if not b.host:
        return "the host must not be empty (use * for all hosts)"
    return None


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
