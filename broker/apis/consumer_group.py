"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848): the coordinator works with topic names, the wire
with topic ids; this module maps between the two and shapes the answers.

ACLs (Kafka's rules): the heartbeat needs Read on the group, the describe Describe on it; refusals answer
GROUP_AUTHORIZATION_FAILED. With ``group.coordinator.rebalance.protocols`` lacking ``consumer`` the heartbeat
answers UNSUPPORTED_VERSION, as a Kafka broker that does not serve the protocol.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.broker.apis.context import GroupDeps
from moldau.broker.apis.metadata import UNKNOWN_AUTHORIZED_OPERATIONS
from moldau.broker.coordinator.consumer_group import TopicPartitions
from moldau.broker.coordinator.consumer_membership import HeartbeatRequest
from moldau.broker.request_channel import Request
from moldau.broker.security.acl import Operation, ResourceType
from moldau.protocol.errors import ErrorCode

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        ConsumerGroupDescribeRequest,
        ConsumerGroupDescribeResponse,
        ConsumerGroupDescribeResponseGroups,
        ConsumerGroupDescribeResponseGroupsMembers,
        ConsumerGroupDescribeResponseGroupsMembersAssignment,
        ConsumerGroupHeartbeatRequest,
        ConsumerGroupHeartbeatResponse,
        ConsumerGroupHeartbeatResponseAssignmentTopicPartitions,
    )


def handle_consumer_group_heartbeat(ctx: GroupDeps, request: Request, body: ConsumerGroupHeartbeatRequest
                                    ) -> ConsumerGroupHeartbeatResponse:
    coordinator = ctx.active_coordinator()

    def error(code: ErrorCode, message: str | None = None) -> ConsumerGroupHeartbeatResponse:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "member_id": None,
                "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}

    if coordinator is None:
        return error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if "consumer" not in coordinator.config.rebalance_protocols:
        return error(ErrorCode.UNSUPPORTED_VERSION, "The consumer group protocol is not enabled "
                                                    "(group.coordinator.rebalance.protocols).")
    if not ctx.topics.auth.allowed(request, Operation.READ, ResourceType.GROUP, body["group_id"]):
        return error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    owned: TopicPartitions | None = None
    if body["topic_partitions"] is not None:
        by_id = {t.topic_id: name for name, t in ctx.topics.metadata.topics().items()}
        owned = {}
        for tp in body["topic_partitions"]:
            name = by_id.get(tp["topic_id"])
            if name is not None and tp["partitions"]:  # a deleted topic's partitions are simply gone
                owned.setdefault(name, set()).update(tp["partitions"])
    result = coordinator.consumer_group_heartbeat(HeartbeatRequest(
        body["group_id"], body["member_id"], body["member_epoch"], body["instance_id"], body["rack_id"],
        body["rebalance_timeout_ms"], body["subscribed_topic_names"], body["subscribed_topic_regex"],
        body["server_assignor"], owned, request.header.client_id or "", "/" + request.client_host))
    response: ConsumerGroupHeartbeatResponse = {
        "throttle_time_ms": 0, "error_code": result.error_code, "error_message": result.error_message,
        "member_id": result.member_id, "member_epoch": result.member_epoch,
        "heartbeat_interval_ms": result.heartbeat_interval_ms, "assignment": None}
    if result.assignment is not None:
        topics = ctx.topics.metadata.topics()
        parts: list[ConsumerGroupHeartbeatResponseAssignmentTopicPartitions] = [
            {"topic_id": topics[name].topic_id, "partitions": sorted(ps)}
            for name, ps in sorted(result.assignment.items()) if name in topics and ps]
        response["assignment"] = {"topic_partitions": parts}
    return response


def _described(ctx: GroupDeps, tps: TopicPartitions) -> ConsumerGroupDescribeResponseGroupsMembersAssignment:
    topics = ctx.topics.metadata.topics()
    return {"topic_partitions": [{"topic_id": topics[name].topic_id, "topic_name": name, "partitions": sorted(ps)}
                                 for name, ps in sorted(tps.items()) if name in topics and ps]}


def handle_consumer_group_describe(ctx: GroupDeps, request: Request, body: ConsumerGroupDescribeRequest
                                   ) -> ConsumerGroupDescribeResponse:
    coordinator = ctx.active_coordinator()
    auth = ctx.topics.auth
    with_operations = auth.enabled and body["include_authorized_operations"]
    groups: list[ConsumerGroupDescribeResponseGroups] = []
    for group_id in body["group_ids"]:
        entry: ConsumerGroupDescribeResponseGroups = {
            "error_code": ErrorCode.NONE, "error_message": None, "group_id": group_id, "group_state": "",
            "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
            "authorized_operations": UNKNOWN_AUTHORIZED_OPERATIONS}
        groups.append(entry)
        if coordinator is None:
            entry["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
            continue
        if not auth.allowed(request, Operation.DESCRIBE, ResourceType.GROUP, group_id):
            entry["error_code"] = ErrorCode.GROUP_AUTHORIZATION_FAILED
            continue
        code, message, cg = coordinator.describe_consumer_group(group_id)
        if cg is None:
            entry["error_code"], entry["error_message"] = code, message
            continue
        members: list[ConsumerGroupDescribeResponseGroupsMembers] = [
            {"member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
             "member_epoch": m.member_epoch, "client_id": m.client_id, "client_host": m.client_host,
             "subscribed_topic_names": list(m.topic_names), "subscribed_topic_regex": m.topic_regex,
             "assignment": _described(ctx, m.assigned),
             "target_assignment": _described(ctx, cg.target.get(m.member_id, {}))}
            for m in cg.members.values()]
        entry.update({"group_state": cg.state(), "group_epoch": cg.group_epoch,
                      "assignment_epoch": cg.assignment_epoch,
                      "assignor_name": cg.assignor_name or cg.chosen_assignor(), "members": members})
        if with_operations:
            entry["authorized_operations"] = auth.authorized_operations(request, ResourceType.GROUP, group_id)
    return {"throttle_time_ms": 0, "groups": groups}
