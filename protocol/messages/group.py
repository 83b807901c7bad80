"""The classic group membership APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ListGroups,
DescribeGroups and DeleteGroups.

Supported ranges cover what kafka-python 3.0 (JoinGroup <= 7, SyncGroup <= 5, FindCoordinator any: v4+ batches
keys), aiokafka 0.14 (JoinGroup 0-2/5, SyncGroup 0-1/3, FindCoordinator 0-1) and librdkafka 2.0-2.16 (JoinGroup
<= 5, FindCoordinator <= 2) negotiate. FindCoordinator stops at v4: v5 and v6 change only error semantics for
transactions and share groups, which Moldau does not coordinate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.schema import Api, F

if TYPE_CHECKING:  # the message shapes are for mypy only
    from moldau.protocol.typed import (
        DeleteGroupsRequest,
        DeleteGroupsResponse,
        DescribeGroupsRequest,
        DescribeGroupsResponse,
        FindCoordinatorRequest,
        FindCoordinatorResponse,
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

FIND_COORDINATOR: Api[FindCoordinatorRequest, FindCoordinatorResponse] = Api(
    10, "FindCoordinator", versions=(0, 4), flexible=3,
    request=[
        F("key", "string", "0-3"),
        F("key_type", "int8", "1+", default=0),
        F("coordinator_keys", "[]string", "4+"),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16", "0-3"),
        F("error_message", "string", "1-3", nullable="1-3"),
        F("node_id", "int32", "0-3"),
        F("host", "string", "0-3"),
        F("port", "int32", "0-3"),
        F("coordinators", [
            F("key", "string", "4+"),
            F("node_id", "int32", "4+"),
            F("host", "string", "4+"),
            F("port", "int32", "4+"),
            F("error_code", "int16", "4+"),
            F("error_message", "string", "4+", nullable="4+"),
        ], "4+"),
    ],
)

JOIN_GROUP: Api[JoinGroupRequest, JoinGroupResponse] = Api(
    11, "JoinGroup", versions=(0, 9), flexible=6,
    request=[
        F("group_id", "string"),
        F("session_timeout_ms", "int32"),
        F("rebalance_timeout_ms", "int32", "1+", default=-1),
        F("member_id", "string"),
        F("group_instance_id", "string", "5+", nullable="5+", default=None),
        F("protocol_type", "string"),
        F("protocols", [
            F("name", "string"),
            F("metadata", "bytes"),
        ]),
        F("reason", "string", "8+", nullable="8+", default=None),
    ],
    response=[
        F("throttle_time_ms", "int32", "2+"),
        F("error_code", "int16"),
        F("generation_id", "int32", default=-1),
        F("protocol_type", "string", "7+", nullable="7+", default=None),
        F("protocol_name", "string", nullable="7+"),
        F("leader", "string"),
        F("skip_assignment", "bool", "9+", default=False),
        F("member_id", "string"),
        F("members", [
            F("member_id", "string"),
            F("group_instance_id", "string", "5+", nullable="5+", default=None),
            F("metadata", "bytes"),
        ]),
    ],
)

SYNC_GROUP: Api[SyncGroupRequest, SyncGroupResponse] = Api(
    14, "SyncGroup", versions=(0, 5), flexible=4,
    request=[
        F("group_id", "string"),
        F("generation_id", "int32"),
        F("member_id", "string"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
        F("protocol_type", "string", "5+", nullable="5+", default=None),
        F("protocol_name", "string", "5+", nullable="5+", default=None),
        F("assignments", [
            F("member_id", "string"),
            F("assignment", "bytes"),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16"),
        F("protocol_type", "string", "5+", nullable="5+", default=None),
        F("protocol_name", "string", "5+", nullable="5+", default=None),
        F("assignment", "bytes"),
    ],
)

HEARTBEAT: Api[HeartbeatRequest, HeartbeatResponse] = Api(
    12, "Heartbeat", versions=(0, 4), flexible=4,
    request=[
        F("group_id", "string"),
        F("generation_id", "int32"),
        F("member_id", "string"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16"),
    ],
)

LEAVE_GROUP: Api[LeaveGroupRequest, LeaveGroupResponse] = Api(
    13, "LeaveGroup", versions=(0, 5), flexible=4,
    request=[
        F("group_id", "string"),
        F("member_id", "string", "0-2"),
        F("members", [
            F("member_id", "string", "3+"),
            F("group_instance_id", "string", "3+", nullable="3+", default=None),
            F("reason", "string", "5+", nullable="5+", default=None),
        ], "3+"),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16"),
        F("members", [
            F("member_id", "string", "3+"),
            F("group_instance_id", "string", "3+", nullable="3+"),
            F("error_code", "int16", "3+"),
        ], "3+"),
    ],
)

LIST_GROUPS: Api[ListGroupsRequest, ListGroupsResponse] = Api(
    16, "ListGroups", versions=(0, 5), flexible=3,
    request=[
        F("states_filter", "[]string", "4+"),
        F("types_filter", "[]string", "5+"),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16"),
        F("groups", [
            F("group_id", "string"),
            F("protocol_type", "string"),
            F("group_state", "string", "4+"),
            F("group_type", "string", "5+"),
        ]),
    ],
)

_MIN_INT32 = -(1 << 31)  # "authorized operations not requested"

DESCRIBE_GROUPS: Api[DescribeGroupsRequest, DescribeGroupsResponse] = Api(
    15, "DescribeGroups", versions=(0, 5), flexible=5,
    request=[
        F("groups", "[]string"),
        F("include_authorized_operations", "bool", "3+"),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F("groups", [
            F("error_code", "int16"),
            F("group_id", "string"),
            F("group_state", "string"),
            F("protocol_type", "string"),
            F("protocol_data", "string"),
            F("members", [
                F("member_id", "string"),
                F("group_instance_id", "string", "4+", nullable="4+", default=None),
                F("client_id", "string"),
                F("client_host", "string"),
                F("member_metadata", "bytes"),
                F("member_assignment", "bytes"),
            ]),
            F("authorized_operations", "int32", "3+", default=_MIN_INT32),
        ]),
    ],
)

DELETE_GROUPS: Api[DeleteGroupsRequest, DeleteGroupsResponse] = Api(
    42, "DeleteGroups", versions=(0, 2), flexible=2,
    request=[
        F("groups_names", "[]string"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", [
            F("group_id", "string"),
            F("error_code", "int16"),
        ]),
    ],
)
