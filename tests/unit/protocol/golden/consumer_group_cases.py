"""Golden cases of KIP-848's ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69), merged into generate.py.

No client library we can run encodes these two APIs (kafka-python 3.0 names them but declares no messages), so
every case here is hand-built field by field from Kafka's message definitions and the protocol guide: compact
strings and arrays, a tagged-field section after every struct, and a nullable struct (the heartbeat's
Assignment) as an int8 marker, -1 for null and 1 before the struct.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from hand_built import MIN_INT32, NO_TAGS, TOPIC_ID, Value, carr, cstr, i8, i16, i32

OTHER_ID = uuid.UUID(bytes=bytes(range(16, 32)))
TID, OID = TOPIC_ID.bytes, OTHER_ID.bytes


def _int32s(*values: int) -> bytes:
    return carr(len(values)) + b"".join(i32(v) for v in values)


def heartbeat_request_join() -> tuple[Value, bytes]:
    value = {"group_id": "orders-app", "member_id": "m-1", "member_epoch": 0, "instance_id": None,
             "rack_id": "rack-a", "rebalance_timeout_ms": 300000, "subscribed_topic_names": ["orders"],
             "subscribed_topic_regex": None, "server_assignor": "uniform", "topic_partitions": []}
    data = (cstr("orders-app") + cstr("m-1") + i32(0) + cstr(None) + cstr("rack-a") + i32(300000)
            + carr(1) + cstr("orders") + cstr(None) + cstr("uniform") + carr(0) + NO_TAGS)
    return value, data


def heartbeat_request_steady() -> tuple[Value, bytes]:
    """v0: no regex field; unchanged fields null, owned partitions by topic id."""
    value = {"group_id": "orders-app", "member_id": "m-1", "member_epoch": 3, "instance_id": None,
             "rack_id": None, "rebalance_timeout_ms": -1, "subscribed_topic_names": None,
             "server_assignor": None, "topic_partitions": [{"topic_id": TOPIC_ID, "partitions": [0, 2]}]}
    data = (cstr("orders-app") + cstr("m-1") + i32(3) + cstr(None) + cstr(None) + i32(-1)
            + carr(None) + cstr(None) + carr(1) + TID + _int32s(0, 2) + NO_TAGS + NO_TAGS)
    return value, data


def heartbeat_response_assignment() -> tuple[Value, bytes]:
    value = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "member_id": "m-1",
             "member_epoch": 4, "heartbeat_interval_ms": 5000,
             "assignment": {"topic_partitions": [{"topic_id": TOPIC_ID, "partitions": [0, 1]},
                                                 {"topic_id": OTHER_ID, "partitions": []}]}}
    data = (i32(0) + i16(0) + cstr(None) + cstr("m-1") + i32(4) + i32(5000)
            + i8(1) + carr(2) + TID + _int32s(0, 1) + NO_TAGS + OID + _int32s() + NO_TAGS + NO_TAGS
            + NO_TAGS)
    return value, data


def heartbeat_response_fenced() -> tuple[Value, bytes]:
    message = "The member epoch is fenced."
    value = {"throttle_time_ms": 0, "error_code": 110, "error_message": message, "member_id": None,
             "member_epoch": 0, "heartbeat_interval_ms": 5000, "assignment": None}
    data = i32(0) + i16(110) + cstr(message) + cstr(None) + i32(0) + i32(5000) + i8(-1) + NO_TAGS
    return value, data


def describe_request() -> tuple[Value, bytes]:
    value = {"group_ids": ["orders-app", "billing"], "include_authorized_operations": False}
    return value, carr(2) + cstr("orders-app") + cstr("billing") + b"\x00" + NO_TAGS


def describe_response() -> tuple[Value, bytes]:
    assignment = {"topic_partitions": [{"topic_id": TOPIC_ID, "topic_name": "orders", "partitions": [0, 1]}]}
    value = {"throttle_time_ms": 0, "groups": [
        {"error_code": 0, "error_message": None, "group_id": "orders-app", "group_state": "Stable",
         "group_epoch": 4, "assignment_epoch": 4, "assignor_name": "uniform",
         "members": [{"member_id": "m-1", "instance_id": None, "rack_id": None, "member_epoch": 4,
                      "client_id": "rdkafka", "client_host": "/127.0.0.1", "subscribed_topic_names": ["orders"],
                      "subscribed_topic_regex": None, "assignment": assignment,
                      "target_assignment": assignment}],
         "authorized_operations": MIN_INT32},
        {"error_code": 69, "error_message": "Group billing is not a consumer group.", "group_id": "billing",
         "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
         "authorized_operations": MIN_INT32}]}
    described = carr(1) + TID + cstr("orders") + _int32s(0, 1) + NO_TAGS + NO_TAGS
    member = (cstr("m-1") + cstr(None) + cstr(None) + i32(4) + cstr("rdkafka") + cstr("/127.0.0.1")
              + carr(1) + cstr("orders") + cstr(None) + described + described + NO_TAGS)
    data = (i32(0) + carr(2)
            + i16(0) + cstr(None) + cstr("orders-app") + cstr("Stable") + i32(4) + i32(4) + cstr("uniform")
            + carr(1) + member + i32(MIN_INT32) + NO_TAGS
            + i16(69) + cstr("Group billing is not a consumer group.") + cstr("billing") + cstr("") + i32(0)
            + i32(0) + cstr("") + carr(0) + i32(MIN_INT32) + NO_TAGS
            + NO_TAGS)
    return value, data


# (api name, api key, kind, version, builder)
CASES: list[tuple[str, int, str, int, Callable[[], tuple[Value, bytes]]]] = [
    ("consumer_group_heartbeat", 68, "request", 1, heartbeat_request_join),
    ("consumer_group_heartbeat", 68, "request", 0, heartbeat_request_steady),
    ("consumer_group_heartbeat", 68, "response", 0, heartbeat_response_assignment),
    ("consumer_group_heartbeat", 68, "response", 1, heartbeat_response_fenced),
    ("consumer_group_describe", 69, "request", 0, describe_request),
    ("consumer_group_describe", 69, "response", 0, describe_response),
]
