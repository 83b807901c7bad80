"""The transaction APIs (KIP-98, KIP-447, KIP-664): AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26),
WriteTxnMarkers (27), TxnOffsetCommit (28), DescribeProducers (61), DescribeTransactions (65) and
ListTransactions (66).

Ranges: what Kafka 3.x/4.x and the Python/C clients send. aiokafka 0.14 implements AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn and TxnOffsetCommit at v0 only, so every minimum stays 0. kafka-python 3.0 goes up to
AddPartitionsToTxn v3 / EndTxn v3 / TxnOffsetCommit v3, librdkafka 2.16 to AddPartitionsToTxn v3, EndTxn v3,
TxnOffsetCommit v3. AddPartitionsToTxn v4-v5 batch several transactions (broker-to-broker verification of
KIP-890 part 1; v5 adds TRANSACTION_ABORTABLE). EndTxn stops at v4: v5 (KIP-890 part 2, a new epoch per
transaction) is unstable in the reference definitions and only sent with the transaction.version feature.
TxnOffsetCommit v3 adds KIP-447's generation / member id fencing. WriteTxnMarkers is the coordinator-to-leader
API (v1 is the flexible form). ListTransactions v1 adds the duration filter (KIP-994).

Declared here for both halves of transactions; an API is advertised only once broker/apis routes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.schema import Api, F

if TYPE_CHECKING:  # the message shapes are for mypy only
    from moldau.protocol.typed import (
        AddOffsetsToTxnRequest,
        AddOffsetsToTxnResponse,
        AddPartitionsToTxnRequest,
        AddPartitionsToTxnResponse,
        DescribeProducersRequest,
        DescribeProducersResponse,
        DescribeTransactionsRequest,
        DescribeTransactionsResponse,
        EndTxnRequest,
        EndTxnResponse,
        ListTransactionsRequest,
        ListTransactionsResponse,
        TxnOffsetCommitRequest,
        TxnOffsetCommitResponse,
        WriteTxnMarkersRequest,
        WriteTxnMarkersResponse,
    )

_TOPICS = [
    F("name", "string"),
    F("partitions", "[]int32"),
]

_TOPIC_RESULTS = [
    F("name", "string"),
    F("results_by_partition", [
        F("partition_index", "int32"),
        F("partition_error_code", "int16"),
    ]),
]

ADD_PARTITIONS_TO_TXN: Api[AddPartitionsToTxnRequest, AddPartitionsToTxnResponse] = Api(
    24, "AddPartitionsToTxn", versions=(0, 5), flexible=3,
    request=[
        F("transactions", [
            F("transactional_id", "string"),
            F("producer_id", "int64"),
            F("producer_epoch", "int16"),
            F("verify_only", "bool", default=False),
            F("topics", list(_TOPICS)),
        ], "4+"),
        F("v3_and_below_transactional_id", "string", "0-3"),
        F("v3_and_below_producer_id", "int64", "0-3"),
        F("v3_and_below_producer_epoch", "int16", "0-3"),
        F("v3_and_below_topics", list(_TOPICS), "0-3"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16", "4+"),
        F("results_by_transaction", [
            F("transactional_id", "string"),
            F("topic_results", list(_TOPIC_RESULTS)),
        ], "4+"),
        F("results_by_topic_v3_and_below", list(_TOPIC_RESULTS), "0-3"),
    ],
)

ADD_OFFSETS_TO_TXN: Api[AddOffsetsToTxnRequest, AddOffsetsToTxnResponse] = Api(
    25, "AddOffsetsToTxn", versions=(0, 4), flexible=3,
    request=[
        F("transactional_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("group_id", "string"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
    ],
)

END_TXN: Api[EndTxnRequest, EndTxnResponse] = Api(
    26, "EndTxn", versions=(0, 4), flexible=3,
    request=[
        F("transactional_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("committed", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
    ],
)

WRITE_TXN_MARKERS: Api[WriteTxnMarkersRequest, WriteTxnMarkersResponse] = Api(
    27, "WriteTxnMarkers", versions=(0, 1), flexible=1,
    request=[
        F("markers", [
            F("producer_id", "int64"),
            F("producer_epoch", "int16"),
            F("transaction_result", "bool"),
            F("topics", [
                F("name", "string"),
                F("partition_indexes", "[]int32"),
            ]),
            F("coordinator_epoch", "int32"),
        ]),
    ],
    response=[
        F("markers", [
            F("producer_id", "int64"),
            F("topics", [
                F("name", "string"),
                F("partitions", [
                    F("partition_index", "int32"),
                    F("error_code", "int16"),
                ]),
            ]),
        ]),
    ],
)

TXN_OFFSET_COMMIT: Api[TxnOffsetCommitRequest, TxnOffsetCommitResponse] = Api(
    28, "TxnOffsetCommit", versions=(0, 4), flexible=3,
    request=[
        F("transactional_id", "string"),
        F("group_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("generation_id", "int32", "3+", default=-1),
        F("member_id", "string", "3+", default=""),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("committed_offset", "int64"),
                F("committed_leader_epoch", "int32", "2+", default=-1),
                F("committed_metadata", "string", nullable="0+"),
            ]),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("error_code", "int16"),
            ]),
        ]),
    ],
)

DESCRIBE_PRODUCERS: Api[DescribeProducersRequest, DescribeProducersResponse] = Api(
    61, "DescribeProducers", versions=(0, 0), flexible=0,
    request=[
        F("topics", [
            F("name", "string"),
            F("partition_indexes", "[]int32"),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+", default=None),
                F("active_producers", [
                    F("producer_id", "int64"),
                    F("producer_epoch", "int32"),
                    F("last_sequence", "int32", default=-1),
                    F("last_timestamp", "int64", default=-1),
                    F("coordinator_epoch", "int32"),
                    F("current_txn_start_offset", "int64", default=-1),
                ]),
            ]),
        ]),
    ],
)

DESCRIBE_TRANSACTIONS: Api[DescribeTransactionsRequest, DescribeTransactionsResponse] = Api(
    65, "DescribeTransactions", versions=(0, 0), flexible=0,
    request=[
        F("transactional_ids", "[]string"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("transaction_states", [
            F("error_code", "int16"),
            F("transactional_id", "string"),
            F("transaction_state", "string"),
            F("transaction_timeout_ms", "int32"),
            F("transaction_start_time_ms", "int64"),
            F("producer_id", "int64"),
            F("producer_epoch", "int16"),
            F("topics", [
                F("topic", "string"),
                F("partitions", "[]int32"),
            ]),
        ]),
    ],
)

LIST_TRANSACTIONS: Api[ListTransactionsRequest, ListTransactionsResponse] = Api(
    66, "ListTransactions", versions=(0, 1), flexible=0,
    request=[
        F("state_filters", "[]string"),
        F("producer_id_filters", "[]int64"),
        F("duration_filter", "int64", "1+", default=-1),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("unknown_state_filters", "[]string"),
        F("transaction_states", [
            F("transactional_id", "string"),
            F("producer_id", "int64"),
            F("transaction_state", "string"),
        ]),
    ],
)
