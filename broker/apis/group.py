"""FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ListGroups, DescribeGroups, DeleteGroups.

Thin: decode the request's shape, call the group coordinator (``GroupDeps``), shape the answer for
the version. JoinGroup and SyncGroup may be parked by the coordinator; they then return a future.

ACLs (Kafka's rules): the membership APIs need Read on the group, FindCoordinator Describe on the group (or on
the transactional id), DescribeGroups Describe, DeleteGroups Delete; ListGroups lists the groups the principal
may Describe (all of them with Describe on the cluster). Refusals answer GROUP_AUTHORIZATION_FAILED. Asked for
(v3+), DescribeGroups fills each described group's authorized-operations bit field (KIP-430) from the ACLs;
without an authorizer, or for a group it could not describe, the field stays "unknown" as in Metadata.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, cast

from moldau.broker.apis.context import GroupDeps
from moldau.broker.apis.metadata import UNKNOWN_AUTHORIZED_OPERATIONS
from moldau.broker.coordinator.coordinator import GroupCoordinator
from moldau.broker.coordinator.offsets import OFFSETS_TOPIC
from moldau.broker.coordinator.txn_coordinator import TransactionCoordinator
from moldau.broker.coordinator.txn_log import TRANSACTION_STATE_TOPIC
from moldau.broker.request_channel import Request
from moldau.broker.security.acl import Operation, ResourceType
from moldau.broker.topics import TopicCreationError, create_topic, plan_topic
from moldau.protocol.errors import ErrorCode

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        DeleteGroupsRequest,
        DeleteGroupsResponse,
        DescribeGroupsRequest,
        DescribeGroupsResponse,
        DescribeGroupsResponseGroups,
        FindCoordinatorRequest,
        FindCoordinatorResponse,
        FindCoordinatorResponseCoordinators,
        HeartbeatRequest,
        HeartbeatResponse,
        JoinGroupRequest,
        JoinGroupResponse,
        LeaveGroupRequest,
        LeaveGroupResponse,
        ListGroupsRequest,
        ListGroupsResponse,
        SyncGroupRequest,
        SyncGroupResponse,
    )

log = logging.getLogger("moldau.apis.group")

GROUP_KEY, TRANSACTION_KEY = 0, 1
DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED


def group_allowed(ctx: GroupDeps, request: Request, operation: Operation, group_id: str) -> bool:
    return ctx.topics.auth.allowed(request, operation, ResourceType.GROUP, group_id)


# ---------------------------------------------------------------------------------------------- FindCoordinator
# How long FindCoordinator waits for the new offsets topic's leaders before answering "not available yet".
OFFSETS_TOPIC_CREATE_WAIT_MS = 5000


async def ensure_internal_topic(ctx: GroupDeps, lock: asyncio.Lock, name: str, partitions: int, replication: int,
                                configs: dict[str, str]) -> ErrorCode:
    """Create an internal topic (__consumer_offsets, __transaction_state) on first use; replication capped at the
    live brokers."""
    async with lock:
        if ctx.topics.metadata.topic(name) is not None:
            return ErrorCode.NONE
        # Any broker may create it: standalone brokers are their own controller, and in ZooKeeper mode the
        # topic znodes may be written from any broker (the controller then elects the leaders).
        live = len(ctx.topics.metadata.live_brokers())
        replication = min(replication, live)
        if "min.insync.replicas" in configs:  # never above the replication it got
            configs = dict(configs, **{"min.insync.replicas": str(min(int(configs["min.insync.replicas"]),
                                                                      replication))})
        try:
            plan = plan_topic(ctx.topics, name, partitions, replication, [], configs)
            await create_topic(ctx.topics, name, plan, configs, timeout_ms=OFFSETS_TOPIC_CREATE_WAIT_MS)
        except TopicCreationError as exc:
            if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                return ErrorCode.NONE
            if exc.code == ErrorCode.REQUEST_TIMED_OUT:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE  # created; leaders not elected yet: the client retries
            log.error("cannot create %s: %s", name, exc.message)  # the log format tags the broker
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        log.info("created %s with %d partitions, replication factor %d", name, len(plan), replication)
        return ErrorCode.NONE


async def ensure_offsets_topic(ctx: GroupDeps, coordinator: GroupCoordinator) -> ErrorCode:
    """Create __consumer_offsets on first use (compacted)."""
    cfg = ctx.topics.config
    configs = {"cleanup.policy": "compact", "compression.type": "producer",
               "segment.bytes": str(cfg.get("offsets.topic.segment.bytes"))}
    return await ensure_internal_topic(ctx, coordinator.topic_lock, OFFSETS_TOPIC,
                                       int(cfg.get("offsets.topic.num.partitions")),
                                       int(cfg.get("offsets.topic.replication.factor")), configs)


async def ensure_transaction_topic(ctx: GroupDeps, coordinator: TransactionCoordinator) -> ErrorCode:
    """Create __transaction_state on first use, with Kafka's settings for it (compacted, uncompressed,
    transaction.state.log.min.isr as min.insync.replicas, no unclean leader election)."""
    cfg = ctx.topics.config
    configs = {"cleanup.policy": "compact", "compression.type": "uncompressed",
               "unclean.leader.election.enable": "false",
               "min.insync.replicas": str(cfg.get("transaction.state.log.min.isr")),
               "segment.bytes": str(cfg.get("transaction.state.log.segment.bytes"))}
    return await ensure_internal_topic(ctx, coordinator.topic_lock, TRANSACTION_STATE_TOPIC,
                                       int(cfg.get("transaction.state.log.num.partitions")),
                                       int(cfg.get("transaction.state.log.replication.factor")), configs)


async def _find_one(ctx: GroupDeps, key: str, key_type: int, listener: str | None
                    ) -> FindCoordinatorResponseCoordinators:
    entry: FindCoordinatorResponseCoordinators = {"key": key, "node_id": -1, "host": "", "port": -1,
                                                  "error_code": ErrorCode.NONE, "error_message": None}
    if key_type not in (GROUP_KEY, TRANSACTION_KEY):
        entry["error_code"] = ErrorCode.INVALID_REQUEST
        entry["error_message"] = f"Unknown coordinator type {key_type}"
        return entry
    coordinator = ctx.active_coordinator()
    txn = ctx.transactions if ctx.transactions is not None and ctx.transactions.active else None
    if key_type == TRANSACTION_KEY and txn is not None:
        error, name = await ensure_transaction_topic(ctx, txn), TRANSACTION_STATE_TOPIC
        partition = txn.store.partition_for(key)
    elif key_type == GROUP_KEY and coordinator is not None:
        error, name = await ensure_offsets_topic(ctx, coordinator), OFFSETS_TOPIC
        partition = coordinator.store.partition_for(key)
    else:
        entry["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
        return entry
    topic = ctx.topics.metadata.topic(name)
    if error != ErrorCode.NONE or topic is None:
        entry["error_code"] = error if error != ErrorCode.NONE else ErrorCode.COORDINATOR_NOT_AVAILABLE
        return entry
    state = topic.partitions.get(partition)
    # The coordinator's endpoint on the client's listener; a coordinator without that listener is not available.
    broker = None if state is None else next((b for b in ctx.topics.metadata.live_brokers(listener)
                                              if b.broker_id == state.leader), None)
    if broker is None:
        entry["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
        return entry
    entry.update({"node_id": broker.broker_id, "host": broker.host, "port": broker.port})
    return entry


async def handle_find_coordinator(ctx: GroupDeps, request: Request, body: FindCoordinatorRequest
                                  ) -> FindCoordinatorResponse:
    version = request.version
    keys = body["coordinator_keys"] if version >= 4 else [body["key"]]
    results: list[FindCoordinatorResponseCoordinators] = []
    for key in keys:
        if body["key_type"] == TRANSACTION_KEY:
            denied = not ctx.topics.auth.allowed(request, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key)
            code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        else:
            denied, code = not group_allowed(ctx, request, Operation.DESCRIBE, key), DENIED
        if denied:
            results.append({"key": key, "node_id": -1, "host": "", "port": -1, "error_code": code,
                            "error_message": None})
            continue
        results.append(await _find_one(ctx, key, body["key_type"], request.listener or None))
    if version >= 4:
        return {"throttle_time_ms": 0, "coordinators": results}
    r = results[0]
    return {"throttle_time_ms": 0, "error_code": r["error_code"], "error_message": r["error_message"],
            "node_id": r["node_id"], "host": r["host"], "port": r["port"]}


# ---------------------------------------------------------------------------------------------- membership
def _not_available(error: ErrorCode = ErrorCode.COORDINATOR_NOT_AVAILABLE) -> LeaveGroupResponse:
    # Typed as the wider of its two users: a LeaveGroupResponse is also a HeartbeatResponse.
    return {"throttle_time_ms": 0, "error_code": error}


def handle_join_group(ctx: GroupDeps, request: Request, body: JoinGroupRequest
                      ) -> JoinGroupResponse | asyncio.Future[JoinGroupResponse]:
    version = request.version
    future: asyncio.Future[JoinGroupResponse] = asyncio.get_running_loop().create_future()

    def done(result: dict[str, Any]) -> None:
        if future.done():
            return
        response = dict(result, throttle_time_ms=0, skip_assignment=False)
        if version < 7 and response["protocol_name"] is None:
            response["protocol_name"] = ""
        future.set_result(cast("JoinGroupResponse", response))  # the coordinator's dicts are untyped

    coordinator = ctx.active_coordinator()
    if coordinator is None or not group_allowed(ctx, request, Operation.READ, body["group_id"]):
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE if coordinator is None else DENIED
        done({"error_code": error, "generation_id": -1, "protocol_name": None,
              "leader": "", "member_id": body["member_id"], "members": []})
    else:
        coordinator.join_group(body["group_id"], body["member_id"], body["group_instance_id"], version >= 4,
                               request.header.client_id or "", "/" + request.client_host,
                               body["rebalance_timeout_ms"], body["session_timeout_ms"], body["protocol_type"],
                               [(p["name"], p["metadata"]) for p in body["protocols"]], done)
    return future.result() if future.done() else future


def handle_sync_group(ctx: GroupDeps, request: Request, body: SyncGroupRequest
                      ) -> SyncGroupResponse | asyncio.Future[SyncGroupResponse]:
    future: asyncio.Future[SyncGroupResponse] = asyncio.get_running_loop().create_future()

    def done(result: dict[str, Any]) -> None:
        if not future.done():
            future.set_result(cast("SyncGroupResponse", dict(result, throttle_time_ms=0)))

    coordinator = ctx.active_coordinator()
    if coordinator is None or not group_allowed(ctx, request, Operation.READ, body["group_id"]):
        done({"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE if coordinator is None else DENIED,
              "assignment": b""})
    else:
        assignments = {a["member_id"]: a["assignment"] for a in body["assignments"]}
        coordinator.sync_group(body["group_id"], body["generation_id"], body["member_id"],
                               body["group_instance_id"], body["protocol_type"], body["protocol_name"],
                               assignments, done)
    return future.result() if future.done() else future


def handle_heartbeat(ctx: GroupDeps, request: Request, body: HeartbeatRequest) -> HeartbeatResponse:
    coordinator = ctx.active_coordinator()
    if coordinator is None:
        return _not_available()
    if not group_allowed(ctx, request, Operation.READ, body["group_id"]):
        return _not_available(DENIED)
    error = coordinator.heartbeat(body["group_id"], body["member_id"], body["group_instance_id"],
                                  body["generation_id"])
    return {"throttle_time_ms": 0, "error_code": error}


def handle_leave_group(ctx: GroupDeps, request: Request, body: LeaveGroupRequest) -> LeaveGroupResponse:
    coordinator = ctx.active_coordinator()
    if coordinator is None:
        return _not_available()
    if not group_allowed(ctx, request, Operation.READ, body["group_id"]):
        return {"throttle_time_ms": 0, "error_code": DENIED, "members": []}
    if request.version >= 3:
        leaving = [(m["member_id"], m["group_instance_id"]) for m in body["members"]]
    else:
        leaving = [(body["member_id"], None)]
    error, results = coordinator.leave_group(body["group_id"], leaving)
    if request.version < 3 and error == ErrorCode.NONE and results:
        error = results[0][2]  # one member: its error is the answer
    return {"throttle_time_ms": 0, "error_code": error,
            "members": [{"member_id": m, "group_instance_id": i, "error_code": e} for m, i, e in results]}


# ---------------------------------------------------------------------------------------------- admin
def handle_list_groups(ctx: GroupDeps, request: Request, body: ListGroupsRequest) -> ListGroupsResponse:
    coordinator = ctx.active_coordinator()
    if coordinator is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "groups": []}
    types = {t.lower() for t in body["types_filter"]}
    states = {s.lower() for s in body["states_filter"]} or None
    error, groups = coordinator.list_groups(states)
    if types:
        groups = [g for g in groups if g.group_type() in types]
    if not ctx.topics.auth.cluster(request, Operation.DESCRIBE):
        visible = ctx.topics.auth.allowed_names(request, Operation.DESCRIBE, ResourceType.GROUP,
                                                (g.group_id for g in groups))
        groups = [g for g in groups if g.group_id in visible]
    return {"throttle_time_ms": 0, "error_code": error,
            "groups": [{"group_id": g.group_id, "protocol_type": g.protocol_type or "",
                        "group_state": g.state_name(), "group_type": g.group_type()} for g in groups]}


def handle_describe_groups(ctx: GroupDeps, request: Request, body: DescribeGroupsRequest
                           ) -> DescribeGroupsResponse:
    coordinator = ctx.active_coordinator()
    # Decoded requests carry every field (v0-2: include_authorized_operations defaults to false).
    with_operations = ctx.topics.auth.enabled and request.version >= 3 and body["include_authorized_operations"]
    described: list[DescribeGroupsResponseGroups] = []
    for group_id in body["groups"]:
        if coordinator is None or not group_allowed(ctx, request, Operation.DESCRIBE, group_id):
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE if coordinator is None else DENIED
            described.append({"error_code": error, "group_id": group_id, "group_state": "", "protocol_type": "",
                              "protocol_data": "", "members": [],
                              "authorized_operations": UNKNOWN_AUTHORIZED_OPERATIONS})
            continue
        error, summary = coordinator.describe_group(group_id)
        operations = UNKNOWN_AUTHORIZED_OPERATIONS
        if with_operations and error == ErrorCode.NONE:  # as Kafka: only a group described without error
            operations = ctx.topics.auth.authorized_operations(request, ResourceType.GROUP, group_id)
        described.append(cast("DescribeGroupsResponseGroups",
                              dict(summary, error_code=error, authorized_operations=operations)))
    return {"throttle_time_ms": 0, "groups": described}


def handle_delete_groups(ctx: GroupDeps, request: Request, body: DeleteGroupsRequest) -> DeleteGroupsResponse:
    coordinator = ctx.active_coordinator()
    if coordinator is None:
        results = {g: ErrorCode.COORDINATOR_NOT_AVAILABLE for g in body["groups_names"]}
    else:
        names = list(body["groups_names"])
        allowed = ctx.topics.auth.allowed_names(request, Operation.DELETE, ResourceType.GROUP, names)
        results = coordinator.delete_groups([g for g in names if g in allowed])
        results.update({g: DENIED for g in names if g not in allowed})
    return {"throttle_time_ms": 0,
            "results": [{"group_id": g, "error_code": results[g]} for g in body["groups_names"]]}
