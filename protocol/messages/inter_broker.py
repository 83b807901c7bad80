"""Controller-to-broker and replication APIs of the ZooKeeper-era protocol.

* LeaderAndIsr (key 4) v0-v7, flexible from v4: v0-v1 send a flat partition list, v2+ group partition states by
  topic; v5+ add the request type and topic ids (the v5+ response is keyed by topic id).
* StopReplica (key 5) v0-v4, flexible from v2: v0 a flat partition list, v1-v2 topics with partition indexes,
  v3+ per-partition leader epoch and delete flag.
* UpdateMetadata (key 6) v0-v8, flexible from v6: v0 one host/port per broker, v1+ a list of endpoints, v5+
  partition states grouped by topic.
* ControlledShutdown (key 7) v0-v3, flexible from v3 (v0 uses request header v0, see header.py).
* OffsetForLeaderEpoch (key 23) v0-v4, flexible from v4: used by followers (replica_id >= 0) and by consumers
  (replica_id -2, "not a replica") to find where a leader epoch ends.

``is_kraft_controller`` is always false here: Moldau's controller is the ZooKeeper one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.schema import Api, F

if TYPE_CHECKING:  # the message shapes are for mypy only
    from moldau.protocol.typed import (
        ControlledShutdownRequest,
        ControlledShutdownResponse,
        LeaderAndIsrRequest,
        LeaderAndIsrResponse,
        OffsetForLeaderEpochRequest,
        OffsetForLeaderEpochResponse,
        StopReplicaRequest,
        StopReplicaResponse,
        UpdateMetadataRequest,
        UpdateMetadataResponse,
    )

_LEADER_AND_ISR_PARTITION_STATE = [
    F("topic_name", "string", "0-1"),
    F("partition_index", "int32"),
    F("controller_epoch", "int32"),
    F("leader", "int32"),
    F("leader_epoch", "int32"),
    F("isr", "[]int32"),
    F("partition_epoch", "int32"),
    F("replicas", "[]int32"),
    F("adding_replicas", "[]int32", "3+"),
    F("removing_replicas", "[]int32", "3+"),
    F("is_new", "bool", "1+"),
    F("leader_recovery_state", "int8", "6+"),
]

_LEADER_AND_ISR_PARTITION_ERROR = [
    F("topic_name", "string", "0-4"),
    F("partition_index", "int32"),
    F("error_code", "int16"),
]

LEADER_AND_ISR: Api[LeaderAndIsrRequest, LeaderAndIsrResponse] = Api(
    4, "LeaderAndIsr", versions=(0, 7), flexible=4,
    request=[
        F("controller_id", "int32"),
        F("is_kraft_controller", "bool", "7+"),
        F("controller_epoch", "int32"),
        F("broker_epoch", "int64", "2+", default=-1),
        F("type", "int8", "5+"),
        F("ungrouped_partition_states", _LEADER_AND_ISR_PARTITION_STATE, "0-1"),
        F("topic_states", [
            F("topic_name", "string", "2+"),
            F("topic_id", "uuid", "5+"),
            F("partition_states", _LEADER_AND_ISR_PARTITION_STATE, "2+"),
        ], "2+"),
        F("live_leaders", [
            F("broker_id", "int32"),
            F("host_name", "string"),
            F("port", "int32"),
        ]),
    ],
    response=[
        F("error_code", "int16"),
        F("partition_errors", _LEADER_AND_ISR_PARTITION_ERROR, "0-4"),
        F("topics", [
            F("topic_id", "uuid", "5+"),
            F("partition_errors", _LEADER_AND_ISR_PARTITION_ERROR, "5+"),
        ], "5+"),
    ],
)

STOP_REPLICA: Api[StopReplicaRequest, StopReplicaResponse] = Api(
    5, "StopReplica", versions=(0, 4), flexible=2,
    request=[
        F("controller_id", "int32"),
        F("is_kraft_controller", "bool", "4+"),
        F("controller_epoch", "int32"),
        F("broker_epoch", "int64", "1+", default=-1),
        F("delete_partitions", "bool", "0-2"),
        F("ungrouped_partitions", [
            F("topic_name", "string", "0"),
            F("partition_index", "int32", "0"),
        ], "0"),
        F("topics", [
            F("name", "string", "1-2"),
            F("partition_indexes", "[]int32", "1-2"),
        ], "1-2"),
        F("topic_states", [
            F("topic_name", "string", "3+"),
            F("partition_states", [
                F("partition_index", "int32", "3+"),
                F("leader_epoch", "int32", "3+", default=-1),
                F("delete_partition", "bool", "3+"),
            ], "3+"),
        ], "3+"),
    ],
    response=[
        F("error_code", "int16"),
        F("partition_errors", [
            F("topic_name", "string"),
            F("partition_index", "int32"),
            F("error_code", "int16"),
        ]),
    ],
)

_UPDATE_METADATA_PARTITION_STATE = [
    F("topic_name", "string", "0-4"),
    F("partition_index", "int32"),
    F("controller_epoch", "int32"),
    F("leader", "int32"),
    F("leader_epoch", "int32"),
    F("isr", "[]int32"),
    F("zk_version", "int32"),
    F("replicas", "[]int32"),
    F("offline_replicas", "[]int32", "4+"),
]

UPDATE_METADATA: Api[UpdateMetadataRequest, UpdateMetadataResponse] = Api(
    6, "UpdateMetadata", versions=(0, 8), flexible=6,
    request=[
        F("controller_id", "int32"),
        F("is_kraft_controller", "bool", "8+"),
        F("type", "int8", "8+", tag=0, tagged="8+"),
        F("controller_epoch", "int32"),
        F("broker_epoch", "int64", "5+", default=-1),
        F("ungrouped_partition_states", _UPDATE_METADATA_PARTITION_STATE, "0-4"),
        F("topic_states", [
            F("topic_name", "string", "5+"),
            F("topic_id", "uuid", "7+"),
            F("partition_states", _UPDATE_METADATA_PARTITION_STATE, "5+"),
        ], "5+"),
        F("live_brokers", [
            F("id", "int32"),
            F("v0_host", "string", "0"),
            F("v0_port", "int32", "0"),
            F("endpoints", [
                F("port", "int32", "1+"),
                F("host", "string", "1+"),
                F("listener", "string", "3+"),
                F("security_protocol", "int16", "1+"),
            ], "1+"),
            F("rack", "string", "2+", nullable="0+"),
        ]),
    ],
    response=[
        F("error_code", "int16"),
    ],
)

CONTROLLED_SHUTDOWN: Api[ControlledShutdownRequest, ControlledShutdownResponse] = Api(
    7, "ControlledShutdown", versions=(0, 3), flexible=3,
    request=[
        F("broker_id", "int32"),
        F("broker_epoch", "int64", "2+", default=-1),
    ],
    response=[
        F("error_code", "int16"),
        F("remaining_partitions", [
            F("topic_name", "string"),
            F("partition_index", "int32"),
        ]),
    ],
)

OFFSET_FOR_LEADER_EPOCH: Api[OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse] = Api(
    23, "OffsetForLeaderEpoch", versions=(0, 4), flexible=4,
    request=[
        F("replica_id", "int32", "3+", default=-2),
        F("topics", [
            F("topic", "string"),
            F("partitions", [
                F("partition", "int32"),
                F("current_leader_epoch", "int32", "2+", default=-1),
                F("leader_epoch", "int32"),
            ]),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32", "2+"),
        F("topics", [
            F("topic", "string"),
            F("partitions", [
                F("error_code", "int16"),
                F("partition", "int32"),
                F("leader_epoch", "int32", "1+", default=-1),
                F("end_offset", "int64", default=-1),
            ]),
        ]),
    ],
)
