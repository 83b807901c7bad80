"""ACL administration for ``AdminClient``: CreateAcls, DescribeAcls and DeleteAcls (the highest version both sides
support; prefixed patterns need v1+).

``AclBinding`` is one ACL; ``AclBindingFilter`` selects ACLs (None / ANY match everything; the MATCH pattern type
selects every pattern that covers a named resource). The enums are Kafka's wire codes (moldau.protocol.acl).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from moldau.cluster import Cluster
from moldau.errors import KafkaError
from moldau.protocol.acl import CLUSTER_NAME, Operation, PatternType, Permission, ResourceType
from moldau.protocol.messages.acls import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        CreateAclsRequestCreations,
        DeleteAclsRequestFilters,
        DeleteAclsResponseFilterResultsMatchingAcls,
        DescribeAclsResponseResourcesAcls,
    )

__all__ = ["AclBinding", "AclBindingFilter", "AclsAdmin", "CLUSTER_NAME", "Operation", "PatternType", "Permission",
           "ResourceType"]


@dataclass(frozen=True)
class AclBinding:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission_type: Permission


@dataclass(frozen=True)
class AclBindingFilter:
    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission_type: Permission = Permission.ANY


def _filter_body(f: AclBindingFilter) -> DeleteAclsRequestFilters:
    """The filter's wire form (DescribeAcls' request has the same fields at its top level)."""
    return {"resource_type_filter": f.resource_type, "resource_name_filter": f.name,
            "pattern_type_filter": f.pattern_type, "principal_filter": f.principal, "host_filter": f.host,
            "operation": f.operation, "permission_type": f.permission_type}


def _binding(rtype: int, name: str, pattern: int,
             acl: DescribeAclsResponseResourcesAcls | DeleteAclsResponseFilterResultsMatchingAcls) -> AclBinding:
    return AclBinding(ResourceType(rtype), name, PatternType(pattern), acl["principal"], acl["host"],
                      Operation(acl["operation"]), Permission(acl["permission_type"]))


class AclsAdmin:
    """Mixed into ``AdminClient`` (client/admin.py), which provides ``_cluster``."""

    _cluster: Cluster

    async def create_acls(self, acls: Sequence[AclBinding]) -> dict[AclBinding, KafkaError | None]:
        """Per ACL its error (None: created; creating an existing ACL is not an error)."""
        creations: list[CreateAclsRequestCreations] = [{"resource_type": a.resource_type, "resource_name": a.name,
                      "resource_pattern_type": a.pattern_type, "principal": a.principal, "host": a.host,
                      "operation": a.operation, "permission_type": a.permission_type} for a in acls]
        conn = await self._cluster.any_connection()
        response = await conn.send(CREATE_ACLS, {"creations": creations})
        return {a: KafkaError(r["error_code"], r["error_message"]) if r["error_code"] else None
                for a, r in zip(acls, response["results"], strict=True)}

    async def describe_acls(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """The ACLs the filter selects; raises KafkaError (SECURITY_DISABLED without an authorizer,
        CLUSTER_AUTHORIZATION_FAILED without Describe on the cluster)."""
        conn = await self._cluster.any_connection()
        response = await conn.send(DESCRIBE_ACLS, _filter_body(acl_filter or AclBindingFilter()))
        if response["error_code"]:
            raise KafkaError(response["error_code"], response["error_message"])
        return [_binding(r["resource_type"], r["resource_name"], r["pattern_type"], acl)
                for r in response["resources"] for acl in r["acls"]]

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding] | KafkaError]:
        """Per filter the ACLs it deleted, or its error."""
        conn = await self._cluster.any_connection()
        response = await conn.send(DELETE_ACLS, {"filters": [_filter_body(f) for f in filters]})
        out: list[list[AclBinding] | KafkaError] = []
        for r in response["filter_results"]:
            if r["error_code"]:
                out.append(KafkaError(r["error_code"], r["error_message"]))
                continue
            out.append([_binding(m["resource_type"], m["resource_name"], m["pattern_type"], m)
                        for m in r["matching_acls"]])
        return out
