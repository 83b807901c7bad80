"""Golden cases of the inter-broker APIs (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown,
OffsetForLeaderEpoch), merged into generate.py.

kafka-python 3.0 has no classes for the ZooKeeper-era controller APIs (and bundles only OffsetForLeaderEpoch
v2+), so the library encoder here is kafka-python's generic codec (``ApiMessage``) fed with Apache Kafka's own
JSON definitions from ``../shared/reference/kafka-message-schemas`` -- read at generation time, never copied into
the repository. OffsetForLeaderEpoch is cross-checked against kafka-python's hand-written ``kafka.protocol.old``
classes as well, and every API has hand-built cases (below) written field by field from the protocol guide.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kafka
import kafka.protocol.api_data as kafka_api_data
from hand_built import NO_TAGS, TOPIC_ID, Value, boolean, carr, cstr, i8, i16, i32, i64, tags
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.schemas.load_json import _resolve_common_structs

REFERENCE = Path(__file__).resolve().parents[4] / ".." / "shared" / "reference" / "kafka-message-schemas"
_COMMENTS = re.compile(r"(?m)((?:^\s*//.*\n?)+)")


def _reference_json(name: str, package: Any = None) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(_COMMENTS.sub("", (REFERENCE / f"{name}.json").read_text()))
    common = {s["name"]: s["fields"] for s in data.get("commonStructs", [])}
    if common:
        _resolve_common_structs(data["fields"], common)
    return data


def reference_message(name: str) -> Any:
    """A kafka-python ApiMessage class built from Kafka's definition of ``name`` (e.g. LeaderAndIsrRequest)."""
    original = kafka_api_data.load_json
    kafka_api_data.load_json = _reference_json
    try:
        cls = type(name, (ApiMessage,), {})
    finally:
        kafka_api_data.load_json = original
    cls.golden_source = f"kafka-python {kafka.__version__} ApiMessage codec over Kafka's {name}.json"
    return cls


def _pair(name: str) -> tuple[Any, Any]:
    return reference_message(name + "Request"), reference_message(name + "Response")


# name -> (api key, versions, (request class, response class), kafka.protocol.old names, aiokafka names)
API_SPECS: dict[str, tuple[int, range, tuple[Any, Any], tuple[str, str, str] | None,
                           tuple[str, str, str] | None]] = {
    "leader_and_isr": (4, range(0, 8), _pair("LeaderAndIsr"), None, None),
    "stop_replica": (5, range(0, 5), _pair("StopReplica"), None, None),
    "update_metadata": (6, range(0, 9), _pair("UpdateMetadata"), None, None),
    "controlled_shutdown": (7, range(0, 4), _pair("ControlledShutdown"), None, None),
    "offset_for_leader_epoch": (23, range(0, 5), _pair("OffsetForLeaderEpoch"),
                                ("offset_for_leader_epoch", "OffsetForLeaderEpochRequest",
                                 "OffsetForLeaderEpochResponse"), None),
}

# kafka-python spells isKRaftController as is_k_raft_controller.
RENAMED = {"is_kraft_controller": "is_k_raft_controller"}


def _lai_state(partition: int, leader: int) -> Value:
    return {"topic_name": "orders", "partition_index": partition, "controller_epoch": 3, "leader": leader,
            "leader_epoch": 7, "isr": [1, 2], "partition_epoch": 11, "replicas": [1, 2, 3],
            "adding_replicas": [3] if partition == 0 else [], "removing_replicas": [],
            "is_new": partition == 1, "leader_recovery_state": 0}


def _um_state(partition: int) -> Value:
    return {"topic_name": "orders", "partition_index": partition, "controller_epoch": 3, "leader": 1 + partition,
            "leader_epoch": 7, "isr": [1, 2], "zk_version": 11, "replicas": [1, 2],
            "offline_replicas": [2] if partition else []}


_BROKERS = [
    {"id": 1, "v0_host": "broker1.example", "v0_port": 9092,
     "endpoints": [{"port": 9092, "host": "broker1.example", "listener": "PLAINTEXT", "security_protocol": 0},
                   {"port": 9093, "host": "broker1.example", "listener": "SSL", "security_protocol": 1}],
     "rack": "rack-a"},
    {"id": 2, "v0_host": "broker2.example", "v0_port": 9092,
     "endpoints": [{"port": 9092, "host": "broker2.example", "listener": "PLAINTEXT", "security_protocol": 0}],
     "rack": None},
]

SAMPLES: dict[tuple[str, str], Value] = {
    ("leader_and_isr", "request"): {
        "controller_id": 1, "is_kraft_controller": False, "controller_epoch": 3, "broker_epoch": (1 << 32) + 5,
        "type": 1, "ungrouped_partition_states": [_lai_state(0, 1), _lai_state(1, 2)],
        "topic_states": [{"topic_name": "orders", "topic_id": TOPIC_ID,
                          "partition_states": [_lai_state(0, 1), _lai_state(1, 2)]}],
        "live_leaders": [{"broker_id": 1, "host_name": "broker1.example", "port": 9092},
                         {"broker_id": 2, "host_name": "broker2.example", "port": 9092}],
    },
    ("leader_and_isr", "response"): {
        "error_code": 0,
        "partition_errors": [{"topic_name": "orders", "partition_index": 0, "error_code": 0},
                             {"topic_name": "orders", "partition_index": 1, "error_code": 6}],
        "topics": [{"topic_id": TOPIC_ID, "partition_errors": [
            {"topic_name": "orders", "partition_index": 0, "error_code": 0},
            {"topic_name": "orders", "partition_index": 1, "error_code": 6}]}],
    },
    ("stop_replica", "request"): {
        "controller_id": 1, "is_kraft_controller": False, "controller_epoch": 3, "broker_epoch": 77,
        "delete_partitions": True,
        "ungrouped_partitions": [{"topic_name": "orders", "partition_index": 0},
                                 {"topic_name": "payments", "partition_index": 2}],
        "topics": [{"name": "orders", "partition_indexes": [0, 1]}, {"name": "payments", "partition_indexes": []}],
        "topic_states": [{"topic_name": "orders", "partition_states": [
            {"partition_index": 0, "leader_epoch": 7, "delete_partition": True},
            {"partition_index": 1, "leader_epoch": -1, "delete_partition": False}]}],
    },
    ("stop_replica", "response"): {
        "error_code": 0,
        "partition_errors": [{"topic_name": "orders", "partition_index": 0, "error_code": 0},
                             {"topic_name": "payments", "partition_index": 2, "error_code": 3}],
    },
    ("update_metadata", "request"): {
        "controller_id": 1, "is_kraft_controller": False, "type": 0, "controller_epoch": 3, "broker_epoch": 77,
        "ungrouped_partition_states": [_um_state(0), _um_state(1)],
        "topic_states": [{"topic_name": "orders", "topic_id": TOPIC_ID,
                          "partition_states": [_um_state(0), _um_state(1)]}],
        "live_brokers": _BROKERS,
    },
    ("update_metadata", "response"): {"error_code": 0},
    ("controlled_shutdown", "request"): {"broker_id": 2, "broker_epoch": 77},
    ("controlled_shutdown", "response"): {
        "error_code": 0, "remaining_partitions": [{"topic_name": "orders", "partition_index": 1},
                                                  {"topic_name": "payments", "partition_index": 0}],
    },
    ("offset_for_leader_epoch", "request"): {
        "replica_id": 2, "topics": [{"topic": "orders", "partitions": [
            {"partition": 0, "current_leader_epoch": 7, "leader_epoch": 6},
            {"partition": 1, "current_leader_epoch": -1, "leader_epoch": 3}]}],
    },
    ("offset_for_leader_epoch", "response"): {
        "throttle_time_ms": 0, "topics": [{"topic": "orders", "partitions": [
            {"error_code": 0, "partition": 0, "leader_epoch": 6, "end_offset": 120},
            {"error_code": 74, "partition": 1, "leader_epoch": -1, "end_offset": -1}]}],
    },
}

VARIANTS: list[tuple[str, str, int, Value]] = [
    # A tagged field set: UpdateMetadata v8's type (tag 0) is written only when it differs from 0.
    ("update_metadata", "request", 8, {**SAMPLES[("update_metadata", "request")], "type": 2,
                                       "is_kraft_controller": True}),
    # A consumer asking (replica_id -2), no topics.
    ("offset_for_leader_epoch", "request", 3, {"replica_id": -2, "topics": []}),
    ("controlled_shutdown", "response", 1, {"error_code": 41, "remaining_partitions": []}),
]


# ------------------------------------------------------------------ hand-built, field by field

def _lai_state_v5(partition: int, leader: int, adding: list[int], is_new: bool) -> bytes:
    """LeaderAndIsrPartitionState at v5 (flexible): no topic name, compact arrays, tagged-field section."""
    return (i32(partition) + i32(3) + i32(leader) + i32(7)
            + carr(2) + i32(1) + i32(2) + i32(11) + carr(3) + i32(1) + i32(2) + i32(3)
            + carr(len(adding)) + b"".join(i32(b) for b in adding) + carr(0) + boolean(is_new) + NO_TAGS)


def hand_leader_and_isr_request_v5() -> tuple[Value, bytes]:
    state = {"partition_index": 0, "controller_epoch": 3, "leader": 1, "leader_epoch": 7, "isr": [1, 2],
             "partition_epoch": 11, "replicas": [1, 2, 3], "adding_replicas": [3], "removing_replicas": [],
             "is_new": False}
    value = {"controller_id": 1, "controller_epoch": 3, "broker_epoch": 9, "type": 1,
             "topic_states": [{"topic_name": "orders", "topic_id": TOPIC_ID, "partition_states": [state]}],
             "live_leaders": [{"broker_id": 1, "host_name": "b1", "port": 9092}]}
    data = (i32(1) + i32(3) + i64(9) + i8(1)
            + carr(1) + cstr("orders") + TOPIC_ID.bytes + carr(1) + _lai_state_v5(0, 1, [3], False) + NO_TAGS
            + carr(1) + i32(1) + cstr("b1") + i32(9092) + NO_TAGS
            + NO_TAGS)
    return value, data


def hand_leader_and_isr_request_v1() -> tuple[Value, bytes]:
    """v1 (not flexible): the flat partition list, each state carrying its topic name; INT16 strings."""
    state = {"topic_name": "orders", "partition_index": 2, "controller_epoch": 3, "leader": 2, "leader_epoch": 0,
             "isr": [2], "partition_epoch": 0, "replicas": [2], "is_new": True}
    value = {"controller_id": 1, "controller_epoch": 3, "ungrouped_partition_states": [state],
             "live_leaders": []}
    data = (i32(1) + i32(3)
            + i32(1) + i16(6) + b"orders" + i32(2) + i32(3) + i32(2) + i32(0) + i32(1) + i32(2) + i32(0)
            + i32(1) + i32(2) + boolean(True)
            + i32(0))
    return value, data


def hand_leader_and_isr_response_v5() -> tuple[Value, bytes]:
    value = {"error_code": 0, "topics": [{"topic_id": TOPIC_ID, "partition_errors": [
        {"partition_index": 0, "error_code": 0}, {"partition_index": 1, "error_code": 75}]}]}
    data = (i16(0) + carr(1) + TOPIC_ID.bytes
            + carr(2) + i32(0) + i16(0) + NO_TAGS + i32(1) + i16(75) + NO_TAGS
            + NO_TAGS + NO_TAGS)
    return value, data


def hand_stop_replica_request_v3() -> tuple[Value, bytes]:
    value = {"controller_id": 1, "controller_epoch": 3, "broker_epoch": 9, "topic_states": [
        {"topic_name": "orders", "partition_states": [
            {"partition_index": 0, "leader_epoch": 7, "delete_partition": True},
            {"partition_index": 1, "leader_epoch": -2, "delete_partition": False}]}]}
    data = (i32(1) + i32(3) + i64(9)
            + carr(1) + cstr("orders")
            + carr(2) + i32(0) + i32(7) + boolean(True) + NO_TAGS + i32(1) + i32(-2) + boolean(False) + NO_TAGS
            + NO_TAGS + NO_TAGS)
    return value, data


def hand_stop_replica_response_v3() -> tuple[Value, bytes]:
    value = {"error_code": 0, "partition_errors": [{"topic_name": "orders", "partition_index": 1,
                                                    "error_code": 56}]}
    return value, i16(0) + carr(1) + cstr("orders") + i32(1) + i16(56) + NO_TAGS + NO_TAGS


def hand_update_metadata_request_v8() -> tuple[Value, bytes]:
    state = {"partition_index": 0, "controller_epoch": 3, "leader": 1, "leader_epoch": 7, "isr": [1],
             "zk_version": 4, "replicas": [1], "offline_replicas": []}
    value = {"controller_id": 1, "is_kraft_controller": False, "type": 1, "controller_epoch": 3,
             "broker_epoch": 9,
             "topic_states": [{"topic_name": "orders", "topic_id": TOPIC_ID, "partition_states": [state]}],
             "live_brokers": [{"id": 1, "endpoints": [
                 {"port": 9092, "host": "b1", "listener": "PLAINTEXT", "security_protocol": 0}], "rack": None}]}
    data = (i32(1) + boolean(False) + i32(3) + i64(9)
            + carr(1) + cstr("orders") + TOPIC_ID.bytes
            + carr(1) + i32(0) + i32(3) + i32(1) + i32(7) + carr(1) + i32(1) + i32(4) + carr(1) + i32(1) + carr(0)
            + NO_TAGS  # partition state
            + NO_TAGS  # topic state
            + carr(1) + i32(1) + carr(1) + i32(9092) + cstr("b1") + cstr("PLAINTEXT") + i16(0) + NO_TAGS
            + cstr(None) + NO_TAGS  # broker
            + tags((0, i8(1))))  # type is tag 0 of the request
    return value, data


def hand_update_metadata_response_v6() -> tuple[Value, bytes]:
    return {"error_code": 11}, i16(11) + NO_TAGS


def hand_controlled_shutdown_request_v3() -> tuple[Value, bytes]:
    return {"broker_id": 2, "broker_epoch": 4242}, i32(2) + i64(4242) + NO_TAGS


def hand_controlled_shutdown_response_v3() -> tuple[Value, bytes]:
    value = {"error_code": 0, "remaining_partitions": [{"topic_name": "orders", "partition_index": 3}]}
    return value, i16(0) + carr(1) + cstr("orders") + i32(3) + NO_TAGS + NO_TAGS


def hand_offset_for_leader_epoch_request_v4() -> tuple[Value, bytes]:
    value = {"replica_id": 1, "topics": [{"topic": "orders", "partitions": [
        {"partition": 0, "current_leader_epoch": 7, "leader_epoch": 5}]}]}
    data = i32(1) + carr(1) + cstr("orders") + carr(1) + i32(0) + i32(7) + i32(5) + NO_TAGS + NO_TAGS + NO_TAGS
    return value, data


def hand_offset_for_leader_epoch_response_v4() -> tuple[Value, bytes]:
    value = {"throttle_time_ms": 0, "topics": [{"topic": "orders", "partitions": [
        {"error_code": 0, "partition": 0, "leader_epoch": 5, "end_offset": 1234}]}]}
    data = (i32(0) + carr(1) + cstr("orders") + carr(1) + i16(0) + i32(0) + i32(5) + i64(1234) + NO_TAGS
            + NO_TAGS + NO_TAGS)
    return value, data


HAND_BUILT: list[tuple[str, str, int, Callable[[], tuple[Value, bytes]]]] = [
    ("leader_and_isr", "request", 5, hand_leader_and_isr_request_v5),
    ("leader_and_isr", "request", 1, hand_leader_and_isr_request_v1),
    ("leader_and_isr", "response", 5, hand_leader_and_isr_response_v5),
    ("stop_replica", "request", 3, hand_stop_replica_request_v3),
    ("stop_replica", "response", 3, hand_stop_replica_response_v3),
    ("update_metadata", "request", 8, hand_update_metadata_request_v8),
    ("update_metadata", "response", 6, hand_update_metadata_response_v6),
    ("controlled_shutdown", "request", 3, hand_controlled_shutdown_request_v3),
    ("controlled_shutdown", "response", 3, hand_controlled_shutdown_response_v3),
    ("offset_for_leader_epoch", "request", 4, hand_offset_for_leader_epoch_request_v4),
    ("offset_for_leader_epoch", "response", 4, hand_offset_for_leader_epoch_response_v4),
]
