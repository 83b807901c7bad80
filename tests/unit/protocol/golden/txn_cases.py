"""Golden cases of the transaction coordinator's APIs (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
TxnOffsetCommit, DescribeTransactions, ListTransactions), merged into generate.py; WriteTxnMarkers and
DescribeProducers are in txn_log_cases.py.

The library encoder is kafka-python 3.0's message classes (built from its copy of Kafka's JSON definitions); the
non-flexible versions are also encoded with kafka-python's hand-written ``kafka.protocol.old`` classes and
aiokafka's ``aiokafka.protocol.transaction`` (v0), which must agree byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hand_built import Value
from kafka.protocol.admin import transactions as admin_txn
from kafka.protocol.producer import transaction as txn

API_SPECS: dict[str, tuple[int, range, tuple[Any, Any], tuple[str, str, str] | None,
                           tuple[str, str, str] | None]] = {
    "add_partitions_to_txn": (24, range(0, 6), (txn.AddPartitionsToTxnRequest, txn.AddPartitionsToTxnResponse),
                              ("add_partitions_to_txn", "AddPartitionsToTxnRequest", "AddPartitionsToTxnResponse"),
                              ("transaction", "AddPartitionsToTxnRequest", "AddPartitionsToTxnResponse")),
    "add_offsets_to_txn": (25, range(0, 5), (txn.AddOffsetsToTxnRequest, txn.AddOffsetsToTxnResponse),
                           ("add_offsets_to_txn", "AddOffsetsToTxnRequest", "AddOffsetsToTxnResponse"),
                           ("transaction", "AddOffsetsToTxnRequest", "AddOffsetsToTxnResponse")),
    "end_txn": (26, range(0, 5), (txn.EndTxnRequest, txn.EndTxnResponse),
                ("end_txn", "EndTxnRequest", "EndTxnResponse"), ("transaction", "EndTxnRequest", "EndTxnResponse")),
    "txn_offset_commit": (28, range(0, 5), (txn.TxnOffsetCommitRequest, txn.TxnOffsetCommitResponse),
                          ("txn_offset_commit", "TxnOffsetCommitRequest", "TxnOffsetCommitResponse"),
                          ("transaction", "TxnOffsetCommitRequest", "TxnOffsetCommitResponse")),
    "describe_transactions": (65, range(0, 1), (admin_txn.DescribeTransactionsRequest,
                                                admin_txn.DescribeTransactionsResponse), None, None),
    "list_transactions": (66, range(0, 2), (admin_txn.ListTransactionsRequest,
                                            admin_txn.ListTransactionsResponse), None, None),
}

RENAMED: dict[str, str] = {}

_PARTITION_RESULTS = [{"partition_index": 0, "partition_error_code": 0},
                      {"partition_index": 3, "partition_error_code": 90}]

SAMPLES: dict[tuple[str, str], Value] = {
    ("add_partitions_to_txn", "request"): {
        "transactions": [{"transactional_id": "txn-1", "producer_id": 4000, "producer_epoch": 3,
                          "verify_only": True, "topics": [{"name": "orders", "partitions": [0, 3]}]}],
        "v3_and_below_transactional_id": "txn-1", "v3_and_below_producer_id": 4000,
        "v3_and_below_producer_epoch": 3,
        "v3_and_below_topics": [{"name": "orders", "partitions": [0, 3]}, {"name": "billing", "partitions": [1]}],
    },
    ("add_partitions_to_txn", "response"): {
        "throttle_time_ms": 0, "error_code": 0,
        "results_by_transaction": [{"transactional_id": "txn-1", "topic_results": [
            {"name": "orders", "results_by_partition": _PARTITION_RESULTS}]}],
        "results_by_topic_v3_and_below": [{"name": "orders", "results_by_partition": _PARTITION_RESULTS}],
    },
    ("add_offsets_to_txn", "request"): {
        "transactional_id": "txn-1", "producer_id": 4000, "producer_epoch": 3, "group_id": "app",
    },
    ("add_offsets_to_txn", "response"): {"throttle_time_ms": 0, "error_code": 51},
    ("end_txn", "request"): {
        "transactional_id": "txn-1", "producer_id": 4000, "producer_epoch": 3, "committed": True,
    },
    ("end_txn", "response"): {"throttle_time_ms": 0, "error_code": 0},
    ("txn_offset_commit", "request"): {
        "transactional_id": "txn-1", "group_id": "app", "producer_id": 4000, "producer_epoch": 3,
        "generation_id": 5, "member_id": "consumer-1-abc", "group_instance_id": None,
        "topics": [{"name": "orders", "partitions": [
            {"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": 2,
             "committed_metadata": ""}]}],
    },
    ("txn_offset_commit", "response"): {
        "throttle_time_ms": 0,
        "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "error_code": 0}]}],
    },
    ("describe_transactions", "request"): {"transactional_ids": ["txn-1", "txn-2"]},
    ("describe_transactions", "response"): {
        "throttle_time_ms": 0,
        "transaction_states": [
            {"error_code": 0, "transactional_id": "txn-1", "transaction_state": "Ongoing",
             "transaction_timeout_ms": 60000, "transaction_start_time_ms": 1_700_000_000_000,
             "producer_id": 4000, "producer_epoch": 3,
             "topics": [{"topic": "orders", "partitions": [0, 3]}]},
            {"error_code": 105, "transactional_id": "txn-2", "transaction_state": "",
             "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
             "producer_epoch": -1, "topics": []}],
    },
    ("list_transactions", "request"): {
        "state_filters": ["Ongoing"], "producer_id_filters": [4000], "duration_filter": 60000,
    },
    ("list_transactions", "response"): {
        "throttle_time_ms": 0, "error_code": 0, "unknown_state_filters": [],
        "transaction_states": [{"transactional_id": "txn-1", "producer_id": 4000, "transaction_state": "Ongoing"}],
    },
}

VARIANTS: list[tuple[str, str, int, Value]] = []

HAND_BUILT: list[tuple[str, str, int, Callable[[], tuple[Value, bytes]]]] = []
