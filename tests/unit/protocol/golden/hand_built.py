"""Shared sample data for generate.py, and the golden cases built by hand, field by field.

Each function returns (value, bytes): the value as kafka-python names the fields, and the message body written with
``struct.pack`` following the protocol guide (https://kafka.apache.org/protocol.html). COMPACT_STRING, COMPACT_BYTES
and COMPACT_ARRAY lengths are unsigned varints of length + 1 (0 = null), and every struct of a flexible version
ends with its tagged-field section.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder

Value = dict[str, Any]
TOPIC_ID = uuid.UUID("5f2b7c1e-9a0d-4e31-8b6a-2c4d5e6f7a8b")
ZERO_ID = uuid.UUID(int=0)
MIN_INT32 = -(1 << 31)


def record_batch() -> bytes:
    """A small v2 record batch built by kafka-python (two records, one with a header)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    builder.append(0, timestamp=1_700_000_000_000, key=b"k1", value=b"v1", headers=[])
    builder.append(1, timestamp=1_700_000_000_005, key=None, value=b"v2", headers=[("h", b"x")])
    return bytes(builder.build())


BATCH = record_batch()


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def boolean(v: bool) -> bytes:
    return struct.pack(">?", v)


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def cstr(s: str | None) -> bytes:
    """COMPACT_(NULLABLE_)STRING: unsigned varint of length + 1 (0 = null), then UTF-8."""
    if s is None:
        return uvarint(0)
    data = s.encode()
    return uvarint(len(data) + 1) + data


def cbytes(b: bytes | None) -> bytes:
    """COMPACT_(NULLABLE_)BYTES / COMPACT_RECORDS."""
    return uvarint(0) if b is None else uvarint(len(b) + 1) + b


def carr(n: int | None) -> bytes:
    """Length of a COMPACT_(NULLABLE_)ARRAY."""
    return uvarint(0) if n is None else uvarint(n + 1)


def tags(*fields: tuple[int, bytes]) -> bytes:
    """A tagged-field section: count, then (tag, size, data) in tag order."""
    return uvarint(len(fields)) + b"".join(uvarint(t) + uvarint(len(d)) + d for t, d in fields)


NO_TAGS = tags()


def hand_produce_request() -> tuple[Value, bytes]:
    value = {"transactional_id": "txn-1", "acks": 1, "timeout_ms": 1500, "topic_data": [
        {"name": "orders", "partition_data": [{"index": 3, "records": BATCH}, {"index": 4, "records": None}]}]}
    data = (cstr("txn-1") + i16(1) + i32(1500)
            + carr(1) + cstr("orders")
            + carr(2) + i32(3) + cbytes(BATCH) + NO_TAGS + i32(4) + cbytes(None) + NO_TAGS
            + NO_TAGS  # topic
            + NO_TAGS)  # request
    return value, data


def hand_produce_response() -> tuple[Value, bytes]:
    value = {"responses": [{"name": "orders", "partition_responses": [
        {"index": 3, "error_code": 0, "base_offset": 1000, "log_append_time_ms": 1_700_000_000_123,
         "log_start_offset": 10, "record_errors": [], "error_message": None}]}], "throttle_time_ms": 25}
    data = (carr(1) + cstr("orders")
            + carr(1) + i32(3) + i16(0) + i64(1000) + i64(1_700_000_000_123) + i64(10) + carr(0) + cstr(None)
            + NO_TAGS  # partition
            + NO_TAGS  # topic
            + i32(25) + NO_TAGS)
    return value, data


def hand_fetch_request() -> tuple[Value, bytes]:
    value = {"cluster_id": "moldau-cluster", "replica_id": -1, "max_wait_ms": 100, "min_bytes": 1,
             "max_bytes": 1024, "isolation_level": 0, "session_id": 7, "session_epoch": 2,
             "topics": [{"topic": "orders", "partitions": [
                 {"partition": 0, "current_leader_epoch": 3, "fetch_offset": 55, "last_fetched_epoch": 3,
                  "log_start_offset": -1, "partition_max_bytes": 65536}]}],
             "forgotten_topics_data": [{"topic": "old", "partitions": [0, 1]}], "rack_id": ""}
    data = (i32(-1) + i32(100) + i32(1) + i32(1024) + i8(0) + i32(7) + i32(2)
            + carr(1) + cstr("orders")
            + carr(1) + i32(0) + i32(3) + i64(55) + i32(3) + i64(-1) + i32(65536) + NO_TAGS
            + NO_TAGS  # topic
            + carr(1) + cstr("old") + carr(2) + i32(0) + i32(1) + NO_TAGS
            + cstr("")
            + tags((0, cstr("moldau-cluster"))))  # cluster_id is tag 0
    return value, data


def hand_fetch_response() -> tuple[Value, bytes]:
    value = {"throttle_time_ms": 0, "error_code": 0, "session_id": 7, "responses": [{"topic": "orders", "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 120, "last_stable_offset": 120,
         "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1, "records": BATCH},
        {"partition_index": 1, "error_code": 6, "high_watermark": -1, "last_stable_offset": -1,
         "log_start_offset": -1, "diverging_epoch": {"epoch": 4, "end_offset": 90},
         "current_leader": {"leader_id": 2, "leader_epoch": 5}, "snapshot_id": {"end_offset": 80, "epoch": 3},
         "aborted_transactions": [], "preferred_read_replica": -1, "records": None},
    ]}]}
    diverging = i32(4) + i64(90) + NO_TAGS
    leader = i32(2) + i32(5) + NO_TAGS
    snapshot = i64(80) + i32(3) + NO_TAGS
    data = (i32(0) + i16(0) + i32(7)
            + carr(1) + cstr("orders") + carr(2)
            + i32(0) + i16(0) + i64(120) + i64(120) + i64(0) + carr(None) + i32(-1) + cbytes(BATCH) + NO_TAGS
            + i32(1) + i16(6) + i64(-1) + i64(-1) + i64(-1) + carr(0) + i32(-1) + cbytes(None)
            + tags((0, diverging), (1, leader), (2, snapshot))
            + NO_TAGS  # topic
            + NO_TAGS)
    return value, data


def hand_list_offsets_request() -> tuple[Value, bytes]:
    value = {"replica_id": -1, "isolation_level": 1, "topics": [{"name": "orders", "partitions": [
        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2}]}]}
    data = (i32(-1) + i8(1) + carr(1) + cstr("orders") + carr(1) + i32(0) + i32(-1) + i64(-2) + NO_TAGS
            + NO_TAGS + NO_TAGS)
    return value, data


def hand_list_offsets_response() -> tuple[Value, bytes]:
    value = {"throttle_time_ms": 0, "topics": [{"name": "orders", "partitions": [
        {"partition_index": 0, "error_code": 0, "timestamp": -1, "offset": 0, "leader_epoch": 0}]}]}
    data = (i32(0) + carr(1) + cstr("orders") + carr(1) + i32(0) + i16(0) + i64(-1) + i64(0) + i32(0) + NO_TAGS
            + NO_TAGS + NO_TAGS)
    return value, data


def hand_metadata_request() -> tuple[Value, bytes]:
    value = {"topics": [{"topic_id": TOPIC_ID, "name": None}], "allow_auto_topic_creation": False,
             "include_topic_authorized_operations": True}
    data = carr(1) + TOPIC_ID.bytes + cstr(None) + NO_TAGS + boolean(False) + boolean(True) + NO_TAGS
    return value, data


def hand_metadata_response() -> tuple[Value, bytes]:
    value = {"throttle_time_ms": 5,
             "brokers": [{"node_id": 1, "host": "localhost", "port": 9092, "rack": None}],
             "cluster_id": "moldau-cluster", "controller_id": 1,
             "topics": [{"error_code": 100, "name": None, "topic_id": TOPIC_ID, "is_internal": False,
                         "partitions": [], "topic_authorized_operations": MIN_INT32}]}
    data = (i32(5)
            + carr(1) + i32(1) + cstr("localhost") + i32(9092) + cstr(None) + NO_TAGS
            + cstr("moldau-cluster") + i32(1)
            + carr(1) + i16(100) + cstr(None) + TOPIC_ID.bytes + boolean(False) + carr(0) + i32(MIN_INT32) + NO_TAGS
            + NO_TAGS)
    return value, data


def hand_create_topics_request() -> tuple[Value, bytes]:
    value = {"topics": [{"name": "orders", "num_partitions": -1, "replication_factor": -1,
                         "assignments": [{"partition_index": 0, "broker_ids": [1]}],
                         "configs": [{"name": "retention.ms", "value": "1000"}]}],
             "timeout_ms": 60000, "validate_only": True}
    data = (carr(1) + cstr("orders") + i32(-1) + i16(-1)
            + carr(1) + i32(0) + carr(1) + i32(1) + NO_TAGS
            + carr(1) + cstr("retention.ms") + cstr("1000") + NO_TAGS
            + NO_TAGS  # topic
            + i32(60000) + boolean(True) + NO_TAGS)
    return value, data


def hand_create_topics_response() -> tuple[Value, bytes]:
    value = {"throttle_time_ms": 0, "topics": [
        {"name": "orders", "error_code": 0, "error_message": None, "topic_config_error_code": 29,
         "num_partitions": 3, "replication_factor": 1, "configs": None}]}
    data = (i32(0) + carr(1) + cstr("orders") + i16(0) + cstr(None) + i32(3) + i16(1) + carr(None)
            + tags((0, i16(29)))  # topic_config_error_code is tag 0
            + NO_TAGS)
    return value, data


def hand_delete_topics_request() -> tuple[Value, bytes]:
    value = {"topics": [{"name": None, "topic_id": TOPIC_ID}, {"name": "orders", "topic_id": ZERO_ID}],
             "timeout_ms": 5000}
    data = (carr(2) + cstr(None) + TOPIC_ID.bytes + NO_TAGS + cstr("orders") + bytes(16) + NO_TAGS
            + i32(5000) + NO_TAGS)
    return value, data


def hand_delete_topics_response() -> tuple[Value, bytes]:
    value = {"throttle_time_ms": 0, "responses": [
        {"name": None, "topic_id": TOPIC_ID, "error_code": 100, "error_message": "unknown topic id"}]}
    data = i32(0) + carr(1) + cstr(None) + TOPIC_ID.bytes + i16(100) + cstr("unknown topic id") + NO_TAGS + NO_TAGS
    return value, data


def hand_init_producer_id_request() -> tuple[Value, bytes]:
    value = {"transactional_id": "txn-1", "transaction_timeout_ms": 60000, "producer_id": 4000,
             "producer_epoch": 3}
    return value, cstr("txn-1") + i32(60000) + i64(4000) + i16(3) + NO_TAGS


def hand_init_producer_id_response() -> tuple[Value, bytes]:
    value = {"throttle_time_ms": 0, "error_code": 0, "producer_id": 4001, "producer_epoch": 0}
    return value, i32(0) + i16(0) + i64(4001) + i16(0) + NO_TAGS


def hand_api_versions_request() -> tuple[Value, bytes]:
    value = {"client_software_name": "kcat", "client_software_version": "1.7.1"}
    return value, cstr("kcat") + cstr("1.7.1") + NO_TAGS


def hand_api_versions_response() -> tuple[Value, bytes]:
    value = {"error_code": 0, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}],
             "throttle_time_ms": 0,
             "supported_features": [{"name": "metadata.version", "min_version": 1, "max_version": 20}],
             "finalized_features_epoch": 5,
             "finalized_features": [{"name": "metadata.version", "max_version_level": 20, "min_version_level": 1}],
             "zk_migration_ready": True}
    supported = carr(1) + cstr("metadata.version") + i16(1) + i16(20) + NO_TAGS
    finalized = carr(1) + cstr("metadata.version") + i16(20) + i16(1) + NO_TAGS
    data = (i16(0) + carr(1) + i16(18) + i16(0) + i16(3) + NO_TAGS + i32(0)
            + tags((0, supported), (1, i64(5)), (2, finalized), (3, boolean(True))))
    return value, data


HAND_BUILT: list[tuple[str, str, int, Callable[[], tuple[Value, bytes]]]] = [
    ("produce", "request", 9, hand_produce_request),
    ("produce", "response", 9, hand_produce_response),
    ("fetch", "request", 12, hand_fetch_request),
    ("fetch", "response", 12, hand_fetch_response),
    ("list_offsets", "request", 6, hand_list_offsets_request),
    ("list_offsets", "response", 6, hand_list_offsets_response),
    ("metadata", "request", 12, hand_metadata_request),
    ("metadata", "response", 12, hand_metadata_response),
    ("create_topics", "request", 5, hand_create_topics_request),
    ("create_topics", "response", 5, hand_create_topics_response),
    ("delete_topics", "request", 6, hand_delete_topics_request),
    ("delete_topics", "response", 6, hand_delete_topics_response),
    ("init_producer_id", "request", 4, hand_init_producer_id_request),
    ("init_producer_id", "response", 2, hand_init_producer_id_response),
    ("api_versions", "request", 3, hand_api_versions_request),
    ("api_versions", "response", 3, hand_api_versions_response),
]
