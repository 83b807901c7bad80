"""Keys and values of the records in ``__consumer_offsets``, in Kafka's binary formats.

Every key and value starts with an int16 version. Keys: version 0/1 = an offset commit (group, topic,
partition), version 2 = a group's metadata (group), versions 3-8 = the records of a KIP-848 consumer group
(``ConsumerKey``: 3 the group epoch, 4 its subscribed topics' metadata, 5 a member's metadata, 6 the target
assignment's epoch, 7 a member's target assignment, 8 a member's current assignment); their values are flexible
version-0 structs (compact strings, tagged fields) as in Kafka. We write offset commit values as version 3 (offset, leader
epoch, metadata, commit timestamp) and group metadata values as version 3 (with static member instance ids); we
read the older versions too. A null value (tombstone) deletes the key; compaction keeps the latest per key.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from moldau.protocol.schema import F, compile_decoder, compile_encoder

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3

_VERSION = struct.Struct(">h")

_OFFSET_KEY = [F("group", "string"), F("topic", "string"), F("partition", "int32")]
_GROUP_KEY = [F("group", "string")]
_OFFSET_VALUE = [
    F("offset", "int64"),
    F("leader_epoch", "int32", "3+", default=-1),
    F("metadata", "string"),
    F("commit_timestamp", "int64"),
    F("expire_timestamp", "int64", "1", default=-1),
]
_GROUP_VALUE = [
    F("protocol_type", "string"),
    F("generation", "int32"),
    F("protocol", "string", nullable="0+"),
    F("leader", "string", nullable="0+"),
    F("current_state_timestamp", "int64", "2+", default=-1),
    F("members", [
        F("member_id", "string"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
        F("client_id", "string"),
        F("client_host", "string"),
        F("rebalance_timeout", "int32", "1+"),
        F("session_timeout", "int32"),
        F("subscription", "bytes"),
        F("assignment", "bytes"),
    ]),
]

_OFFSET_KEY_CODEC = (compile_encoder(_OFFSET_KEY, 1, False), compile_decoder(_OFFSET_KEY, 1, False))
_GROUP_KEY_CODEC = (compile_encoder(_GROUP_KEY, 2, False), compile_decoder(_GROUP_KEY, 2, False))
_OFFSET_VALUE_DECODERS = {v: compile_decoder(_OFFSET_VALUE, v, False) for v in range(4)}
_OFFSET_VALUE_ENCODER = compile_encoder(_OFFSET_VALUE, OFFSET_COMMIT_VALUE_VERSION, False)
_GROUP_VALUE_DECODERS = {v: compile_decoder(_GROUP_VALUE, v, False) for v in range(4)}
_GROUP_VALUE_ENCODER = compile_encoder(_GROUP_VALUE, GROUP_METADATA_VALUE_VERSION, False)


# KIP-848 consumer group records: key version (Kafka's record type) -> the value's fields (value version 0).
_TOPIC_PARTITIONS = [F("topic_id", "uuid"), F("partitions", "[]int32")]
CONSUMER_GROUP_METADATA, CONSUMER_PARTITION_METADATA, CONSUMER_MEMBER_METADATA = 3, 4, 5
CONSUMER_TARGET_METADATA, CONSUMER_TARGET_MEMBER, CONSUMER_CURRENT_ASSIGNMENT = 6, 7, 8
_CONSUMER_VALUES: dict[int, list[F]] = {
    CONSUMER_GROUP_METADATA: [F("epoch", "int32")],
    CONSUMER_PARTITION_METADATA: [F("topics", [F("topic_id", "uuid"), F("topic_name", "string"),
                                               F("num_partitions", "int32")])],
    CONSUMER_MEMBER_METADATA: [
        F("instance_id", "string", nullable="0+"), F("rack_id", "string", nullable="0+"), F("client_id", "string"),
        F("client_host", "string"), F("subscribed_topic_names", "[]string"),
        F("subscribed_topic_regex", "string", nullable="0+"), F("rebalance_timeout_ms", "int32", default=-1),
        F("server_assignor", "string", nullable="0+")],
    CONSUMER_TARGET_METADATA: [F("assignment_epoch", "int32")],
    CONSUMER_TARGET_MEMBER: [F("topic_partitions", list(_TOPIC_PARTITIONS))],
    CONSUMER_CURRENT_ASSIGNMENT: [
        F("member_epoch", "int32"), F("previous_member_epoch", "int32"), F("state", "int8"),
        F("assigned_partitions", list(_TOPIC_PARTITIONS)),
        F("partitions_pending_revocation", list(_TOPIC_PARTITIONS))],
}
_WITH_MEMBER = frozenset({CONSUMER_MEMBER_METADATA, CONSUMER_TARGET_MEMBER, CONSUMER_CURRENT_ASSIGNMENT})
_CONSUMER_KEYS = {v: [F("group_id", "string")] + ([F("member_id", "string")] if v in _WITH_MEMBER else [])
                  for v in _CONSUMER_VALUES}
_CONSUMER_KEY_CODECS = {v: (compile_encoder(f, 0, False), compile_decoder(f, 0, False))
                        for v, f in _CONSUMER_KEYS.items()}
_CONSUMER_VALUE_CODECS = {v: (compile_encoder(f, 0, True), compile_decoder(f, 0, True))
                          for v, f in _CONSUMER_VALUES.items()}


class FormatError(ValueError):
    """A key or value this broker cannot read."""


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


def _encode(version: int, encoder: Any, body: dict[str, Any]) -> bytes:
    buf = bytearray(_VERSION.pack(version))
    encoder(buf, [], body)
    return bytes(buf)


@dataclass(frozen=True, slots=True)
class ConsumerKey:
    """A KIP-848 consumer group record's key: its type (3-8), the group, and the member (types 5, 7, 8)."""

    type: int
    group: str
    member: str = ""


def consumer_key(record_type: int, group: str, member: str = "") -> bytes:
    body = {"group_id": group, "member_id": member} if record_type in _WITH_MEMBER else {"group_id": group}
    return _encode(record_type, _CONSUMER_KEY_CODECS[record_type][0], body)


def consumer_value(record_type: int, body: dict[str, Any]) -> bytes:
    """A consumer group record's value (version 0, flexible; see _CONSUMER_VALUES for the fields)."""
    return _encode(0, _CONSUMER_VALUE_CODECS[record_type][0], body)


def read_consumer_value(record_type: int, buf: bytes) -> dict[str, Any]:
    if _version(buf) != 0:
        raise FormatError(f"unknown consumer group record value version {_version(buf)}")
    return _decode(_CONSUMER_VALUE_CODECS[record_type][1], buf)


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return _encode(OFFSET_COMMIT_KEY_VERSION, _OFFSET_KEY_CODEC[0],
                   {"group": group, "topic": topic, "partition": partition})


def group_key(group: str) -> bytes:
    return _encode(GROUP_METADATA_KEY_VERSION, _GROUP_KEY_CODEC[0], {"group": group})


def offset_value(offset: int, leader_epoch: int, metadata: str, commit_timestamp: int) -> bytes:
    return _encode(OFFSET_COMMIT_VALUE_VERSION, _OFFSET_VALUE_ENCODER,
                   {"offset": offset, "leader_epoch": leader_epoch, "metadata": metadata,
                    "commit_timestamp": commit_timestamp})


def group_value(body: dict[str, Any]) -> bytes:
    """body: protocol_type, generation, protocol, leader, current_state_timestamp, members (see _GROUP_VALUE)."""
    return _encode(GROUP_METADATA_VALUE_VERSION, _GROUP_VALUE_ENCODER, body)


def _version(buf: bytes) -> int:
    if len(buf) < 2:
        raise FormatError("record shorter than its version")
    return int(_VERSION.unpack_from(buf, 0)[0])


def _decode(decoder: Any, buf: bytes) -> dict[str, Any]:
    try:
        body, _ = decoder(memoryview(buf), 2)
    except Exception as exc:  # the schema decoder raises DecodeError; anything else is as bad
        raise FormatError(str(exc)) from exc
    result: dict[str, Any] = body
    return result


def read_key(buf: bytes) -> OffsetKey | GroupKey | ConsumerKey:
    version = _version(buf)
    if version in (0, 1):
        body = _decode(_OFFSET_KEY_CODEC[1], buf)
        return OffsetKey(body["group"], body["topic"], body["partition"])
    if version == 2:
        return GroupKey(_decode(_GROUP_KEY_CODEC[1], buf)["group"])
    if version in _CONSUMER_KEY_CODECS:
        body = _decode(_CONSUMER_KEY_CODECS[version][1], buf)
        return ConsumerKey(version, body["group_id"], body.get("member_id", ""))
    raise FormatError(f"unknown key version {version}")


def read_offset_value(buf: bytes) -> dict[str, Any]:
    version = _version(buf)
    decoder = _OFFSET_VALUE_DECODERS.get(version)
    if decoder is None:
        raise FormatError(f"unknown offset commit value version {version}")
    return _decode(decoder, buf)


def read_group_value(buf: bytes) -> dict[str, Any]:
    version = _version(buf)
    decoder = _GROUP_VALUE_DECODERS.get(version)
    if decoder is None:
        raise FormatError(f"unknown group metadata value version {version}")
    return _decode(decoder, buf)
