"""Metadata (key 3): v0-v12, flexible from v9.

A null topic list (v1+) asks for every topic; an empty list in v0 means the same. Topic IDs appear from v10 and may
replace names in requests from v10 and in responses from v12.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.schema import Api, F

if TYPE_CHECKING:  # the message shapes are for mypy only
    from moldau.protocol.typed import MetadataRequest, MetadataResponse

_MIN_INT32 = -(1 << 31)  # "authorized operations not requested"

METADATA: Api[MetadataRequest, MetadataResponse] = Api(
    3, "Metadata", versions=(0, 12), flexible=9,
    request=[
        F("topics", [
            F("topic_id", "uuid", "10+"),
            F("name", "string", nullable="10+"),
        ], nullable="1+"),
        F("allow_auto_topic_creation", "bool", "4+", default=True),
        F("include_cluster_authorized_operations", "bool", "8-10"),
        F("include_topic_authorized_operations", "bool", "8+"),
    ],
    response=[
        F("throttle_time_ms", "int32", "3+"),
        F("brokers", [
            F("node_id", "int32"),
            F("host", "string"),
            F("port", "int32"),
            F("rack", "string", "1+", nullable="1+", default=None),
        ]),
        F("cluster_id", "string", "2+", nullable="2+", default=None),
        F("controller_id", "int32", "1+", default=-1),
        F("topics", [
            F("error_code", "int16"),
            F("name", "string", nullable="12+"),
            F("topic_id", "uuid", "10+"),
            F("is_internal", "bool", "1+"),
            F("partitions", [
                F("error_code", "int16"),
                F("partition_index", "int32"),
                F("leader_id", "int32"),
                F("leader_epoch", "int32", "7+", default=-1),
                F("replica_nodes", "[]int32"),
                F("isr_nodes", "[]int32"),
                F("offline_replicas", "[]int32", "5+"),
            ]),
            F("topic_authorized_operations", "int32", "8+", default=_MIN_INT32),
        ]),
        F("cluster_authorized_operations", "int32", "8-10", default=_MIN_INT32),
    ],
)
