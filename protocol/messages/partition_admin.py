"""The partition and record admin APIs: CreatePartitions (37), DeleteRecords (21), ElectLeaders (43),
DescribeLogDirs (35), each over Kafka's full range (flexible from v2 in all four).

Clients pick the highest common version: confluent-kafka 2.16 sends CreatePartitions v3, DeleteRecords v2 and
ElectLeaders v2 (it has no DescribeLogDirs call); kafka-python 3.0 implements CreatePartitions 0-3, DeleteRecords
0-2, ElectLeaders 0-2 and DescribeLogDirs 0-5. ElectLeaders v0 has no election type (always preferred); v1 adds it
and a top-level error code. DescribeLogDirs v3 adds a top-level error code, v4 the volume's total and usable bytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.schema import Api, F

if TYPE_CHECKING:  # the message shapes are for mypy only
    from moldau.protocol.typed import (
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
        CreatePartitionsRequest,
        CreatePartitionsResponse,
        DeleteRecordsRequest,
        DeleteRecordsResponse,
        DescribeLogDirsRequest,
        DescribeLogDirsResponse,
        ElectLeadersRequest,
        ElectLeadersResponse,
        ListPartitionReassignmentsRequest,
        ListPartitionReassignmentsResponse,
    )

CREATE_PARTITIONS: Api[CreatePartitionsRequest, CreatePartitionsResponse] = Api(
    37, "CreatePartitions", versions=(0, 3), flexible=2,
    request=[
        F("topics", [
            F("name", "string"),
            F("count", "int32"),
            F("assignments", [F("broker_ids", "[]int32")], nullable="0+"),
        ]),
        F("timeout_ms", "int32"),
        F("validate_only", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", [
            F("name", "string"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
        ]),
    ],
)

DELETE_RECORDS: Api[DeleteRecordsRequest, DeleteRecordsResponse] = Api(
    21, "DeleteRecords", versions=(0, 2), flexible=2,
    request=[
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("offset", "int64"),
            ]),
        ]),
        F("timeout_ms", "int32"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("low_watermark", "int64"),
                F("error_code", "int16"),
            ]),
        ]),
    ],
)

ELECT_LEADERS: Api[ElectLeadersRequest, ElectLeadersResponse] = Api(
    43, "ElectLeaders", versions=(0, 2), flexible=2,
    request=[
        F("election_type", "int8", "1+"),
        F("topic_partitions", [
            F("topic", "string"),
            F("partitions", "[]int32"),
        ], nullable="0+"),
        F("timeout_ms", "int32", default=60000),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16", "1+"),
        F("replica_election_results", [
            F("topic", "string"),
            F("partition_result", [
                F("partition_id", "int32"),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+"),
            ]),
        ]),
    ],
)

DESCRIBE_LOG_DIRS: Api[DescribeLogDirsRequest, DescribeLogDirsResponse] = Api(
    35, "DescribeLogDirs", versions=(0, 4), flexible=2,
    request=[
        F("topics", [
            F("topic", "string"),
            F("partitions", "[]int32"),
        ], nullable="0+"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16", "3+"),
        F("results", [
            F("error_code", "int16"),
            F("log_dir", "string"),
            F("topics", [
                F("name", "string"),
                F("partitions", [
                    F("partition_index", "int32"),
                    F("partition_size", "int64"),
                    F("offset_lag", "int64"),
                    F("is_future_key", "bool"),
                ]),
            ]),
            F("total_bytes", "int64", "4+", default=-1),
            F("usable_bytes", "int64", "4+", default=-1),
        ]),
    ],
)

# Partition reassignment (KIP-455): v0 only, flexible from v0. confluent-kafka 2.16 has no call for these;
# kafka-python 3.0 implements v0 of both.
ALTER_PARTITION_REASSIGNMENTS: Api[AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse] = Api(
    45, "AlterPartitionReassignments", versions=(0, 0), flexible=0,
    request=[
        F("timeout_ms", "int32", default=60000),
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("replicas", "[]int32", nullable="0+"),
            ]),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("responses", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+"),
            ]),
        ]),
    ],
)

LIST_PARTITION_REASSIGNMENTS: Api[ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse] = Api(
    46, "ListPartitionReassignments", versions=(0, 0), flexible=0,
    request=[
        F("timeout_ms", "int32", default=60000),
        F("topics", [
            F("name", "string"),
            F("partition_indexes", "[]int32"),
        ], nullable="0+"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("replicas", "[]int32"),
                F("adding_replicas", "[]int32"),
                F("removing_replicas", "[]int32"),
            ]),
        ]),
    ],
)
