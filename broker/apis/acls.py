"""DescribeAcls, CreateAcls, DeleteAcls (Kafka's AclAuthorizer through the Admin API).

DescribeAcls needs Describe on the cluster, CreateAcls and DeleteAcls need Alter on it (else
CLUSTER_AUTHORIZATION_FAILED). Without an authorizer every one answers SECURITY_DISABLED, as Kafka does.
DescribeAcls reads this broker's cache; changes go through the ACL store (ZooKeeper or acls.json), which
notifies every broker. Handlers never talk to ZooKeeper themselves.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from moldau.broker.apis.context import AclDeps
from moldau.broker.request_channel import Request
from moldau.broker.security.acl import (
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    binding_error,
)
from moldau.broker.security.acl_store import AclStore, resource_of
from moldau.protocol.errors import ErrorCode

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        CreateAclsRequest,
        CreateAclsResponse,
        CreateAclsResponseResults,
        DeleteAclsRequest,
        DeleteAclsResponse,
        DeleteAclsResponseFilterResults,
        DescribeAclsRequest,
        DescribeAclsResponse,
        DescribeAclsResponseResources,
    )

log = logging.getLogger("moldau.apis.acls")

NO_AUTHORIZER_MESSAGE = "No Authorizer is configured on the broker"


def _filter(f: Mapping[str, Any]) -> AclFilter:
    """A request's filter; ValueError on an unknown enum code."""
    return AclFilter(ResourceType(f["resource_type_filter"]), f["resource_name_filter"],
                     PatternType(f.get("pattern_type_filter", PatternType.LITERAL)), f["principal_filter"],
                     f["host_filter"], Operation(f["operation"]), Permission(f["permission_type"]))


def _denied_or_disabled(ctx: AclDeps, request: Request, operation: Operation) -> tuple[ErrorCode, str | None]:
    if ctx.store is None or not ctx.auth.enabled:
        return ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER_MESSAGE
    if not ctx.auth.cluster(request, operation):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None
    return ErrorCode.NONE, None


def handle_describe_acls(ctx: AclDeps, request: Request, body: DescribeAclsRequest) -> DescribeAclsResponse:
    error, message = _denied_or_disabled(ctx, request, Operation.DESCRIBE)
    resources: list[DescribeAclsResponseResources] = []
    if error == ErrorCode.NONE:
        try:
            flt = _filter(body)
        except ValueError as exc:
            error, message = ErrorCode.INVALID_REQUEST, str(exc)
        else:
            assert ctx.auth.cache is not None
            grouped: dict[tuple[ResourceType, str, PatternType], list[AclBinding]] = {}
            for b in ctx.auth.cache.all():
                if flt.matches(b):
                    grouped.setdefault(resource_of(b), []).append(b)
            for (rtype, name, pattern), found in sorted(grouped.items()):
                resources.append({"resource_type": rtype, "resource_name": name, "pattern_type": pattern, "acls": [
                    {"principal": b.principal, "host": b.host, "operation": b.operation,
                     "permission_type": b.permission} for b in sorted(found, key=str)]})
    if request.version == 0:  # v0 knows literal patterns only
        resources = [r for r in resources if r["pattern_type"] == PatternType.LITERAL]
    return {"throttle_time_ms": 0, "error_code": error, "error_message": message, "resources": resources}


def _binding(c: Mapping[str, Any]) -> AclBinding:
    return AclBinding(ResourceType(c["resource_type"]), c["resource_name"],
                      PatternType(c.get("resource_pattern_type", PatternType.LITERAL)), c["principal"], c["host"],
                      Operation(c["operation"]), Permission(c["permission_type"]))


async def handle_create_acls(ctx: AclDeps, request: Request, body: CreateAclsRequest) -> CreateAclsResponse:
    error, message = _denied_or_disabled(ctx, request, Operation.ALTER)
    results: list[CreateAclsResponseResults] = []
    valid: list[AclBinding] = []
    for c in body["creations"]:
        if error != ErrorCode.NONE:
            results.append({"error_code": error, "error_message": message})
            continue
        try:
            b = _binding(c)
            problem = binding_error(b)
        except ValueError as exc:
            problem = str(exc)
        if problem is not None:
            results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": problem})
            continue
        valid.append(b)
        results.append({"error_code": ErrorCode.NONE, "error_message": None})
    if valid:
        store: AclStore | None = ctx.store
        assert store is not None
        try:
            await store.add(valid)
        except Exception as exc:  # ZooKeeper unreachable: the ACLs that were to be created say so
            log.warning("creating ACLs failed: %r", exc)
            for r in results:
                if r["error_code"] == ErrorCode.NONE:
                    r["error_code"], r["error_message"] = ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)
    return {"throttle_time_ms": 0, "results": results}


async def handle_delete_acls(ctx: AclDeps, request: Request, body: DeleteAclsRequest) -> DeleteAclsResponse:
    error, message = _denied_or_disabled(ctx, request, Operation.ALTER)
    results: list[DeleteAclsResponseFilterResults] = []
    doomed: set[AclBinding] = set()
    for f in body["filters"]:
        if error != ErrorCode.NONE:
            results.append({"error_code": error, "error_message": message, "matching_acls": []})
            continue
        try:
            flt = _filter(f)
        except ValueError as exc:
            results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(exc), "matching_acls": []})
            continue
        assert ctx.auth.cache is not None
        matched = sorted((b for b in ctx.auth.cache.all() if flt.matches(b)), key=str)
        doomed.update(matched)
        results.append({"error_code": ErrorCode.NONE, "error_message": None, "matching_acls": [
            {"error_code": ErrorCode.NONE, "error_message": None, "resource_type": b.resource_type,
             "resource_name": b.name, "pattern_type": b.pattern, "principal": b.principal, "host": b.host,
             "operation": b.operation, "permission_type": b.permission} for b in matched]})
    if doomed:
        assert ctx.store is not None
        try:
            await ctx.store.remove(sorted(doomed, key=str))
        except Exception as exc:  # ZooKeeper unreachable: nothing is reported as deleted
            log.warning("deleting ACLs failed: %r", exc)
            for r in results:
                if r["error_code"] == ErrorCode.NONE:
                    r["error_code"], r["error_message"] = ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)
                    r["matching_acls"] = []
    return {"throttle_time_ms": 0, "filter_results": results}
