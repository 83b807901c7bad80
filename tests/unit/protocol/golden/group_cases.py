"""Golden cases of the group and offset APIs (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups, OffsetDelete), merged into generate.py.

The library encoders are kafka-python 3.0's message classes, cross-checked (non-flexible versions) against
kafka-python's hand-written ``kafka.protocol.old`` classes and aiokafka's Struct classes where they exist.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hand_built import MIN_INT32, Value
from kafka.protocol.admin import groups as admin_groups
from kafka.protocol.consumer import group as consumer_group
from kafka.protocol.metadata import find_coordinator

# A ConsumerProtocolSubscription v1 for ["orders"] and a ConsumerProtocolAssignment v1 for orders [0, 1].
SUBSCRIPTION = bytes.fromhex("00010000000100066f7264657273ffffffff00000000")
ASSIGNMENT = bytes.fromhex("00010000000100066f72646572730000000200000000" "00000001ffffffff")

API_SPECS: dict[str, tuple[int, range, tuple[Any, Any], tuple[str, str, str] | None,
                           tuple[str, str, str] | None]] = {
    "offset_commit": (8, range(2, 10), (consumer_group.OffsetCommitRequest, consumer_group.OffsetCommitResponse),
                      ("commit", "OffsetCommitRequest", "OffsetCommitResponse"),
                      ("commit", "OffsetCommitRequest", "OffsetCommitResponse")),
    "offset_fetch": (9, range(1, 10), (consumer_group.OffsetFetchRequest, consumer_group.OffsetFetchResponse),
                     ("commit", "OffsetFetchRequest", "OffsetFetchResponse"),
                     ("commit", "OffsetFetchRequest", "OffsetFetchResponse")),
    "find_coordinator": (10, range(0, 5),
                         (find_coordinator.FindCoordinatorRequest, find_coordinator.FindCoordinatorResponse),
                         ("find_coordinator", "FindCoordinatorRequest", "FindCoordinatorResponse"),
                         ("coordination", "FindCoordinatorRequest", "FindCoordinatorResponse")),
    "join_group": (11, range(0, 10), (consumer_group.JoinGroupRequest, consumer_group.JoinGroupResponse),
                   ("group", "JoinGroupRequest", "JoinGroupResponse"),
                   ("group", "JoinGroupRequest", "JoinGroupResponse")),
    "heartbeat": (12, range(0, 5), (consumer_group.HeartbeatRequest, consumer_group.HeartbeatResponse),
                  ("group", "HeartbeatRequest", "HeartbeatResponse"),
                  ("group", "HeartbeatRequest", "HeartbeatResponse")),
    "leave_group": (13, range(0, 6), (consumer_group.LeaveGroupRequest, consumer_group.LeaveGroupResponse),
                    ("group", "LeaveGroupRequest", "LeaveGroupResponse"),
                    ("group", "LeaveGroupRequest", "LeaveGroupResponse")),
    "sync_group": (14, range(0, 6), (consumer_group.SyncGroupRequest, consumer_group.SyncGroupResponse),
                   ("group", "SyncGroupRequest", "SyncGroupResponse"),
                   ("group", "SyncGroupRequest", "SyncGroupResponse")),
    "describe_groups": (15, range(0, 6), (admin_groups.DescribeGroupsRequest, admin_groups.DescribeGroupsResponse),
                        ("admin", "DescribeGroupsRequest", "DescribeGroupsResponse"),
                        ("admin", "DescribeGroupsRequest", "DescribeGroupsResponse")),
    "list_groups": (16, range(0, 6), (admin_groups.ListGroupsRequest, admin_groups.ListGroupsResponse),
                    ("admin", "ListGroupsRequest", "ListGroupsResponse"),
                    ("admin", "ListGroupsRequest", "ListGroupsResponse")),
    "delete_groups": (42, range(0, 3), (admin_groups.DeleteGroupsRequest, admin_groups.DeleteGroupsResponse),
                      ("admin", "DeleteGroupsRequest", "DeleteGroupsResponse"),
                      ("admin", "DeleteGroupsRequest", "DeleteGroupsResponse")),
    "offset_delete": (47, range(0, 1), (consumer_group.OffsetDeleteRequest, consumer_group.OffsetDeleteResponse),
                      None, None),
}

RENAMED: dict[str, str] = {}

_PARTITIONS = [{"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": 3,
                "metadata": "checkpoint", "error_code": 0},
               {"partition_index": 1, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": None,
                "error_code": 0}]

SAMPLES: dict[tuple[str, str], Value] = {
    ("find_coordinator", "request"): {"key": "orders-app", "key_type": 0,
                                      "coordinator_keys": ["orders-app", "billing"]},
    ("find_coordinator", "response"): {
        "throttle_time_ms": 0, "error_code": 0, "error_message": None, "node_id": 1, "host": "broker1.example",
        "port": 9092,
        "coordinators": [{"key": "orders-app", "node_id": 1, "host": "broker1.example", "port": 9092,
                          "error_code": 0, "error_message": None},
                         {"key": "billing", "node_id": -1, "host": "", "port": -1, "error_code": 15,
                          "error_message": "The coordinator is not available."}],
    },
    ("join_group", "request"): {
        "group_id": "orders-app", "session_timeout_ms": 45000, "rebalance_timeout_ms": 300000, "member_id": "",
        "group_instance_id": "instance-1", "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": SUBSCRIPTION}, {"name": "roundrobin", "metadata": SUBSCRIPTION}],
        "reason": "rebalance failed",
    },
    ("join_group", "response"): {
        "throttle_time_ms": 0, "error_code": 0, "generation_id": 7, "protocol_type": "consumer",
        "protocol_name": "range", "leader": "c-1", "skip_assignment": False, "member_id": "c-1",
        "members": [{"member_id": "c-1", "group_instance_id": "instance-1", "metadata": SUBSCRIPTION},
                    {"member_id": "c-2", "group_instance_id": None, "metadata": SUBSCRIPTION}],
    },
    ("sync_group", "request"): {
        "group_id": "orders-app", "generation_id": 7, "member_id": "c-1", "group_instance_id": None,
        "protocol_type": "consumer", "protocol_name": "range",
        "assignments": [{"member_id": "c-1", "assignment": ASSIGNMENT}, {"member_id": "c-2", "assignment": b""}],
    },
    ("sync_group", "response"): {"throttle_time_ms": 0, "error_code": 0, "protocol_type": "consumer",
                                 "protocol_name": "range", "assignment": ASSIGNMENT},
    ("heartbeat", "request"): {"group_id": "orders-app", "generation_id": 7, "member_id": "c-1",
                               "group_instance_id": "instance-1"},
    ("heartbeat", "response"): {"throttle_time_ms": 0, "error_code": 27},
    ("leave_group", "request"): {
        "group_id": "orders-app", "member_id": "c-1",
        "members": [{"member_id": "c-1", "group_instance_id": None, "reason": "closing"},
                    {"member_id": "", "group_instance_id": "instance-2", "reason": None}],
    },
    ("leave_group", "response"): {
        "throttle_time_ms": 0, "error_code": 0,
        "members": [{"member_id": "c-1", "group_instance_id": None, "error_code": 0},
                    {"member_id": "", "group_instance_id": "instance-2", "error_code": 25}],
    },
    ("offset_commit", "request"): {
        "group_id": "orders-app", "generation_id_or_member_epoch": 7, "member_id": "c-1",
        "group_instance_id": None, "retention_time_ms": -1,
        "topics": [{"name": "orders", "partitions": [
            {"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": 3,
             "committed_metadata": "checkpoint"},
            {"partition_index": 1, "committed_offset": 7, "committed_leader_epoch": -1, "committed_metadata": None},
        ]}],
    },
    ("offset_commit", "response"): {
        "throttle_time_ms": 0,
        "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "error_code": 0},
                                                     {"partition_index": 1, "error_code": 12}]}],
    },
    ("offset_fetch", "request"): {
        "group_id": "orders-app", "topics": [{"name": "orders", "partition_indexes": [0, 1]}],
        "groups": [{"group_id": "orders-app", "member_id": "m-1", "member_epoch": 4,
                    "topics": [{"name": "orders", "partition_indexes": [0, 1]}]},
                   {"group_id": "billing", "member_id": None, "member_epoch": -1, "topics": None}],
        "require_stable": True,
    },
    ("offset_fetch", "response"): {
        "throttle_time_ms": 0, "topics": [{"name": "orders", "partitions": _PARTITIONS}], "error_code": 0,
        "groups": [{"group_id": "orders-app", "topics": [{"name": "orders", "partitions": _PARTITIONS}],
                    "error_code": 0},
                   {"group_id": "billing", "topics": [], "error_code": 16}],
    },
    ("list_groups", "request"): {"states_filter": ["Stable", "Empty"], "types_filter": ["classic"]},
    ("list_groups", "response"): {
        "throttle_time_ms": 0, "error_code": 0,
        "groups": [{"group_id": "orders-app", "protocol_type": "consumer", "group_state": "Stable",
                    "group_type": "classic"},
                   {"group_id": "offsets-only", "protocol_type": "", "group_state": "Empty",
                    "group_type": "classic"}],
    },
    ("describe_groups", "request"): {"groups": ["orders-app", "billing"], "include_authorized_operations": False},
    ("describe_groups", "response"): {
        "throttle_time_ms": 0,
        "groups": [{"error_code": 0, "group_id": "orders-app", "group_state": "Stable",
                    "protocol_type": "consumer", "protocol_data": "range",
                    "members": [{"member_id": "c-1", "group_instance_id": "instance-1", "client_id": "app",
                                 "client_host": "/127.0.0.1", "member_metadata": SUBSCRIPTION,
                                 "member_assignment": ASSIGNMENT}],
                    "authorized_operations": MIN_INT32},
                   {"error_code": 0, "group_id": "billing", "group_state": "Dead", "protocol_type": "",
                    "protocol_data": "", "members": [], "authorized_operations": MIN_INT32}],
    },
    ("delete_groups", "request"): {"groups_names": ["orders-app", "billing"]},
    ("delete_groups", "response"): {
        "throttle_time_ms": 0,
        "results": [{"group_id": "orders-app", "error_code": 68}, {"group_id": "billing", "error_code": 0}],
    },
    ("offset_delete", "request"): {
        "group_id": "orders-app",
        "topics": [{"name": "orders", "partitions": [{"partition_index": 0}, {"partition_index": 1}]}],
    },
    ("offset_delete", "response"): {
        "error_code": 0, "throttle_time_ms": 0,
        "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "error_code": 86},
                                                     {"partition_index": 1, "error_code": 0}]}],
    },
}

VARIANTS: list[tuple[str, str, int, Value]] = [
    # MEMBER_ID_REQUIRED: no generation, no protocol (null from v7).
    ("join_group", "response", 5, {"throttle_time_ms": 0, "error_code": 79, "generation_id": -1,
                                   "protocol_name": "", "leader": "", "member_id": "rdkafka-1", "members": []}),
    ("join_group", "response", 7, {"throttle_time_ms": 0, "error_code": 79, "generation_id": -1,
                                   "protocol_type": None, "protocol_name": None, "leader": "",
                                   "member_id": "rdkafka-1", "members": []}),
    # OffsetFetch: every committed offset of the group (null topics).
    ("offset_fetch", "request", 7, {"group_id": "orders-app", "topics": None, "require_stable": False}),
]

HAND_BUILT: list[tuple[str, str, int, Callable[[], tuple[Value, bytes]]]] = []
