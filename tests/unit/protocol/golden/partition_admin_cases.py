"""Golden cases of the partition and record admin APIs (CreatePartitions, DeleteRecords, ElectLeaders,
DescribeLogDirs, AlterPartitionReassignments, ListPartitionReassignments), merged into generate.py.

The library encoder is kafka-python 3.0's message classes (built from its copy of Kafka's JSON definitions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hand_built import Value
from kafka.protocol import admin

API_SPECS: dict[str, tuple[int, range, tuple[Any, Any], tuple[str, str, str] | None,
                           tuple[str, str, str] | None]] = {
    "delete_records": (21, range(0, 3), (admin.DeleteRecordsRequest, admin.DeleteRecordsResponse), None, None),
    "describe_log_dirs": (35, range(0, 5), (admin.DescribeLogDirsRequest, admin.DescribeLogDirsResponse),
                          None, None),
    "create_partitions": (37, range(0, 4), (admin.CreatePartitionsRequest, admin.CreatePartitionsResponse),
                          None, None),
    "elect_leaders": (43, range(0, 3), (admin.ElectLeadersRequest, admin.ElectLeadersResponse), None, None),
    "alter_partition_reassignments": (45, range(0, 1), (admin.AlterPartitionReassignmentsRequest,
                                                        admin.AlterPartitionReassignmentsResponse), None, None),
    "list_partition_reassignments": (46, range(0, 1), (admin.ListPartitionReassignmentsRequest,
                                                       admin.ListPartitionReassignmentsResponse), None, None),
}

RENAMED: dict[str, str] = {}

SAMPLES: dict[tuple[str, str], Value] = {
    ("create_partitions", "request"): {
        "topics": [{"name": "orders", "count": 6, "assignments": [{"broker_ids": [1, 2]}, {"broker_ids": [2, 3]}]},
                   {"name": "billing", "count": 3, "assignments": None}],
        "timeout_ms": 30000, "validate_only": False,
    },
    ("create_partitions", "response"): {
        "throttle_time_ms": 0,
        "results": [{"name": "orders", "error_code": 0, "error_message": None},
                    {"name": "billing", "error_code": 37, "error_message": "Topic already has 3 partitions."}],
    },
    ("delete_records", "request"): {
        "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "offset": 42},
                                                     {"partition_index": 1, "offset": -1}]}],
        "timeout_ms": 30000,
    },
    ("delete_records", "response"): {
        "throttle_time_ms": 0,
        "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "low_watermark": 42, "error_code": 0},
                                                     {"partition_index": 1, "low_watermark": -1,
                                                      "error_code": 1}]}],
    },
    ("elect_leaders", "request"): {
        "election_type": 1, "topic_partitions": [{"topic": "orders", "partitions": [0, 2]}], "timeout_ms": 60000,
    },
    ("elect_leaders", "response"): {
        "throttle_time_ms": 0, "error_code": 0,
        "replica_election_results": [{"topic": "orders", "partition_result": [
            {"partition_id": 0, "error_code": 0, "error_message": None},
            {"partition_id": 2, "error_code": 84, "error_message": "Leader election not needed for topic partition."}]}],
    },
    ("describe_log_dirs", "request"): {"topics": [{"topic": "orders", "partitions": [0, 1]}]},
    ("describe_log_dirs", "response"): {
        "throttle_time_ms": 0, "error_code": 0,
        "results": [{"error_code": 0, "log_dir": "/var/lib/moldau/data1",
                     "topics": [{"name": "orders", "partitions": [
                         {"partition_index": 0, "partition_size": 123456, "offset_lag": 0, "is_future_key": False},
                         {"partition_index": 1, "partition_size": 0, "offset_lag": 7, "is_future_key": False}]}],
                     "total_bytes": 1 << 40, "usable_bytes": 1 << 39},
                    {"error_code": 56, "log_dir": "/var/lib/moldau/data2", "topics": [], "total_bytes": -1,
                     "usable_bytes": -1}],
    },
    ("alter_partition_reassignments", "request"): {
        "timeout_ms": 60000,
        "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "replicas": [2, 3, 4]},
                                                     {"partition_index": 1, "replicas": None}]}],
    },
    ("alter_partition_reassignments", "response"): {
        "throttle_time_ms": 0, "error_code": 0, "error_message": None,
        "responses": [{"name": "orders", "partitions": [
            {"partition_index": 0, "error_code": 0, "error_message": None},
            {"partition_index": 1, "error_code": 85, "error_message": "No reassignment in progress."}]}],
    },
    ("list_partition_reassignments", "request"): {
        "timeout_ms": 60000, "topics": [{"name": "orders", "partition_indexes": [0, 1]}],
    },
    ("list_partition_reassignments", "response"): {
        "throttle_time_ms": 0, "error_code": 0, "error_message": None,
        "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "replicas": [2, 3, 4, 1],
                                                      "adding_replicas": [4], "removing_replicas": [1]}]}],
    },
}

VARIANTS: list[tuple[str, str, int, Value]] = [
    # Every partition: null topic lists.
    ("elect_leaders", "request", 2, {"election_type": 0, "topic_partitions": None, "timeout_ms": 60000}),
    ("describe_log_dirs", "request", 4, {"topics": None}),
    ("list_partition_reassignments", "request", 0, {"timeout_ms": 60000, "topics": None}),
]

HAND_BUILT: list[tuple[str, str, int, Callable[[], tuple[Value, bytes]]]] = []
