"""The authorizer the request handlers ask: Kafka's AclAuthorizer rules (broker/security/acl.py) over this broker's
cached ACLs (broker/security/acl_store.py), enabled by ``authorizer.class.name``.

Handlers ask once per (principal, resource, operation) of a request: ``allowed_names`` answers for all topics of
a Produce or Fetch at once, never per record or per partition. The decision index is rebuilt when the cache
changes (a CreateAcls/DeleteAcls here, or a change notification from ZooKeeper), not per request. With no
authorizer configured every request is allowed, as before.
"""

from __future__ import annotations

from collections.abc import Iterable

from moldau.broker.request_channel import Request
from moldau.broker.security.acl import (
    CLUSTER_NAME,
    WILDCARD,
    AclDecision,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    parse_super_users,
)
from moldau.broker.security.acl_store import AclCache

# authorizer.class.name values that turn authorization on (Kafka's ZooKeeper-mode class names and Moldau's).
AUTHORIZER_NAMES = ("kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer",
                    "moldau.acl")

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
# The operations Kafka reports in the authorized-operations bit fields (KIP-430), per resource type.
SUPPORTED_OPERATIONS = {
    T: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE, Operation.ALTER, Operation.DESCRIBE,
        Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    G: (Operation.READ, Operation.DESCRIBE, Operation.DELETE),
    C: (Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS,
        Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE),
}


class Authorizer:
    def __init__(self, cache: AclCache | None = None, super_users: str | None = None,
                 allow_if_no_acl: bool = False) -> None:
        self.cache = cache  # None: no authorizer configured, everything is allowed
        self.super_users = parse_super_users(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._decision: AclDecision | None = None
        self._version = -1

    @property
    def enabled(self) -> bool:
        return self.cache is not None

    def decision(self) -> AclDecision:
        assert self.cache is not None
        if self._decision is None or self._version != self.cache.version:
            self._version = self.cache.version
            self._decision = AclDecision(self.cache.all(), self.super_users, self.allow_if_no_acl)
        return self._decision

    def allowed(self, request: Request, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        if self.cache is None:
            return True
        return self.decision().authorize(request.principal, request.client_host, operation, resource_type, name)

    def cluster(self, request: Request, operation: Operation) -> bool:
        return self.allowed(request, operation, C, CLUSTER_NAME)

    def authorized_operations(self, request: Request, resource_type: ResourceType, name: str) -> int:
        """KIP-430's bit field: bit ``op`` set for each supported operation the principal may do."""
        return sum(1 << op for op in SUPPORTED_OPERATIONS[resource_type]
                   if self.allowed(request, op, resource_type, name))

    def may_write_some_topic(self, request: Request) -> bool:
        """KIP-679: an ALLOW Write (or All) ACL on some topic for this principal and host, and no DENY of it on
        every topic (the literal ``*``) — what Kafka's authorizeByResourceType asks for idempotent producers."""
        if self.cache is None:
            return True
        d = self.decision()
        if request.principal in d.super_users:
            return True
        mine = [b for b in d.bindings if b.resource_type == T and b.applies_to(request.principal, request.client_host)
                and b.operation in (Operation.WRITE, Operation.ALL)]
        if any(b.permission == Permission.DENY and b.name == WILDCARD and b.pattern == PatternType.LITERAL
               for b in mine):
            return False
        return any(b.permission == Permission.ALLOW for b in mine)

    def allowed_names(self, request: Request, operation: Operation, resource_type: ResourceType,
                      names: Iterable[str]) -> set[str]:
        """The names (topics, groups) of one request the principal may use: one decision per distinct name."""
        distinct = set(names)
        if self.cache is None:
            return distinct
        decision = self.decision()
        return {n for n in distinct
                if decision.authorize(request.principal, request.client_host, operation, resource_type, n)}


NO_AUTHORIZER = Authorizer()
