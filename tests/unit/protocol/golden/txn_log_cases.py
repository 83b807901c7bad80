"""Golden cases of the partition side of transactions (WriteTxnMarkers, DescribeProducers), merged into
generate.py. The library encoder is kafka-python 3.0's message classes (built from its copy of Kafka's JSON
definitions)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hand_built import Value
from kafka.protocol.admin import transactions
from kafka.protocol.producer import transaction

API_SPECS: dict[str, tuple[int, range, tuple[Any, Any], tuple[str, str, str] | None,
                           tuple[str, str, str] | None]] = {
    "write_txn_markers": (27, range(0, 2), (transaction.WriteTxnMarkersRequest, transaction.WriteTxnMarkersResponse),
                          None, None),
    "describe_producers": (61, range(0, 1), (transactions.DescribeProducersRequest,
                                             transactions.DescribeProducersResponse), None, None),
}

RENAMED: dict[str, str] = {}

SAMPLES: dict[tuple[str, str], Value] = {
    ("write_txn_markers", "request"): {
        "markers": [
            {"producer_id": 4001, "producer_epoch": 3, "transaction_result": True,
             "topics": [{"name": "orders", "partition_indexes": [0, 2]}, {"name": "billing", "partition_indexes": [1]}],
             "coordinator_epoch": 7},
            {"producer_id": 4002, "producer_epoch": 0, "transaction_result": False,
             "topics": [{"name": "orders", "partition_indexes": [1]}], "coordinator_epoch": 7},
        ],
    },
    ("write_txn_markers", "response"): {
        "markers": [
            {"producer_id": 4001, "topics": [
                {"name": "orders", "partitions": [{"partition_index": 0, "error_code": 0},
                                                  {"partition_index": 2, "error_code": 6}]},
                {"name": "billing", "partitions": [{"partition_index": 1, "error_code": 47}]}]},
            {"producer_id": 4002, "topics": [
                {"name": "orders", "partitions": [{"partition_index": 1, "error_code": 52}]}]},
        ],
    },
    ("describe_producers", "request"): {
        "topics": [{"name": "orders", "partition_indexes": [0, 1]}],
    },
    ("describe_producers", "response"): {
        "throttle_time_ms": 0,
        "topics": [{"name": "orders", "partitions": [
            {"partition_index": 0, "error_code": 0, "error_message": None, "active_producers": [
                {"producer_id": 4001, "producer_epoch": 3, "last_sequence": 41, "last_timestamp": 1700000000000,
                 "coordinator_epoch": 7, "current_txn_start_offset": 1200},
                {"producer_id": 4002, "producer_epoch": 0, "last_sequence": -1, "last_timestamp": -1,
                 "coordinator_epoch": -1, "current_txn_start_offset": -1}]},
            {"partition_index": 1, "error_code": 6, "error_message": "This server is not the leader.",
             "active_producers": []}]}],
    },
}

VARIANTS: list[tuple[str, str, int, Value]] = []

HAND_BUILT: list[tuple[str, str, int, Callable[[], tuple[Value, bytes]]]] = []
