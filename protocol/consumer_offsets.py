"""Keys and values of the records in ``__consumer_offsets``, in Kafka's binary formats.

Every key and value starts with an int16 version. Keys: version 0/1 = an offset commit (group, topic,
partition), version 2 = a group's metadata (group). We write offset commit values as version 3 (offset, leader
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


def read_key(buf: bytes) -> OffsetKey | GroupKey:
    version = _version(buf)
    if version in (0, 1):
        body = _decode(_OFFSET_KEY_CODEC[1], buf)
        return OffsetKey(body["group"], body["topic"], body["partition"])
    if version == 2:
        return GroupKey(_decode(_GROUP_KEY_CODEC[1], buf)["group"])
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
