"""The consumer group protocol of KIP-848: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69).

Both are flexible from v0. ConsumerGroupHeartbeat v1 adds the subscribed topic regex (Kafka 4.0); the member
epoch carries the protocol: 0 joins, -1 leaves, -2 leaves a static member's place open. Assignments name topics
by their topic id. A nullable struct (the heartbeat's Assignment) is an int8 marker on the wire: -1 null, 1 set.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.schema import Api, F, Struct

if TYPE_CHECKING:  # the message shapes are for mypy only
    from moldau.protocol.typed import (
        ConsumerGroupDescribeRequest,
        ConsumerGroupDescribeResponse,
        ConsumerGroupHeartbeatRequest,
        ConsumerGroupHeartbeatResponse,
    )

_TOPIC_PARTITIONS = [
    F("topic_id", "uuid"),
    F("partitions", "[]int32"),
]

CONSUMER_GROUP_HEARTBEAT: Api[ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse] = Api(
    68, "ConsumerGroupHeartbeat", versions=(0, 1), flexible=0,
    request=[
        F("group_id", "string"),
        F("member_id", "string"),
        F("member_epoch", "int32"),
        F("instance_id", "string", nullable="0+", default=None),
        F("rack_id", "string", nullable="0+", default=None),
        F("rebalance_timeout_ms", "int32", default=-1),
        F("subscribed_topic_names", "[]string", nullable="0+", default=None),
        F("subscribed_topic_regex", "string", "1+", nullable="1+", default=None),
        F("server_assignor", "string", nullable="0+", default=None),
        F("topic_partitions", list(_TOPIC_PARTITIONS), nullable="0+", default=None),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("member_id", "string", nullable="0+", default=None),
        F("member_epoch", "int32"),
        F("heartbeat_interval_ms", "int32"),
        F("assignment", Struct([
            F("topic_partitions", list(_TOPIC_PARTITIONS)),
        ]), nullable="0+", default=None),
    ],
)

_DESCRIBED_PARTITIONS = Struct([
    F("topic_partitions", [
        F("topic_id", "uuid"),
        F("topic_name", "string"),
        F("partitions", "[]int32"),
    ]),
])

CONSUMER_GROUP_DESCRIBE: Api[ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse] = Api(
    69, "ConsumerGroupDescribe", versions=(0, 0), flexible=0,
    request=[
        F("group_ids", "[]string"),
        F("include_authorized_operations", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("groups", [
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+", default=None),
            F("group_id", "string"),
            F("group_state", "string"),
            F("group_epoch", "int32"),
            F("assignment_epoch", "int32"),
            F("assignor_name", "string"),
            F("members", [
                F("member_id", "string"),
                F("instance_id", "string", nullable="0+", default=None),
                F("rack_id", "string", nullable="0+", default=None),
                F("member_epoch", "int32"),
                F("client_id", "string"),
                F("client_host", "string"),
                F("subscribed_topic_names", "[]string"),
                F("subscribed_topic_regex", "string", nullable="0+", default=None),
                F("assignment", _DESCRIBED_PARTITIONS),
                F("target_assignment", _DESCRIBED_PARTITIONS),
            ]),
            F("authorized_operations", "int32", default=-(1 << 31)),
        ]),
    ],
)
