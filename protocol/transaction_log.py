"""Keys and values of the records in ``__transaction_state``, in Kafka's binary formats.

Every key and value starts with an int16 version. Key version 0 holds the transactional id. Value version 0
(Kafka's TransactionLogValue, what Kafka 2.x-3.x write) holds the producer id, its epoch, the transaction
timeout, the state as an int8, the partitions of the transaction (nullable: written as null when empty, as
Kafka does) and the last-update and start timestamps. Version 1 is the same fields in the flexible encoding
(with tagged fields, which we skip). We write version 0. A null value (tombstone) removes the transactional id.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from moldau.protocol.schema import F, compile_decoder, compile_encoder

KEY_VERSION = 0
VALUE_VERSION = 0

_VERSION = struct.Struct(">h")

_KEY = [F("transactional_id", "string")]
_VALUE = [
    F("producer_id", "int64"),
    F("producer_epoch", "int16"),
    F("transaction_timeout_ms", "int32"),
    F("transaction_status", "int8"),
    F("transaction_partitions", [
        F("topic", "string"),
        F("partition_ids", "[]int32"),
    ], nullable="0+"),
    F("transaction_last_update_timestamp_ms", "int64"),
    F("transaction_start_timestamp_ms", "int64"),
]

_KEY_ENCODER = compile_encoder(_KEY, 0, False)
_KEY_DECODER = compile_decoder(_KEY, 0, False)
_VALUE_ENCODER = compile_encoder(_VALUE, VALUE_VERSION, False)
_VALUE_DECODERS = {0: compile_decoder(_VALUE, 0, False), 1: compile_decoder(_VALUE, 1, True)}


class FormatError(ValueError):
    """A key or value this broker cannot read."""


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state_id: int
    partitions: frozenset[tuple[str, int]]
    last_update_timestamp_ms: int
    start_timestamp_ms: int


def _encode(version: int, encoder: Any, body: dict[str, Any]) -> bytes:
    buf = bytearray(_VERSION.pack(version))
    encoder(buf, [], body)
    return bytes(buf)


def _decode(buf: bytes, decoders: dict[int, Any], what: str) -> dict[str, Any]:
    if len(buf) < 2:
        raise FormatError(f"{what} shorter than its version")
    version = int(_VERSION.unpack_from(buf, 0)[0])
    decoder = decoders.get(version)
    if decoder is None:
        raise FormatError(f"unknown {what} version {version}")
    try:
        body, _ = decoder(memoryview(buf), 2)
    except Exception as exc:  # the schema decoder raises DecodeError; anything else is as bad
        raise FormatError(str(exc)) from exc
    result: dict[str, Any] = body
    return result


def transaction_key(transactional_id: str) -> bytes:
    return _encode(KEY_VERSION, _KEY_ENCODER, {"transactional_id": transactional_id})


def read_key(buf: bytes) -> str:
    """The transactional id of a ``__transaction_state`` key."""
    return str(_decode(buf, {0: _KEY_DECODER}, "transaction log key")["transactional_id"])


def transaction_value(v: TransactionLogValue) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(v.partitions):
        by_topic.setdefault(topic, []).append(partition)
    partitions = [{"topic": t, "partition_ids": ps} for t, ps in by_topic.items()] or None
    return _encode(VALUE_VERSION, _VALUE_ENCODER, {
        "producer_id": v.producer_id, "producer_epoch": v.producer_epoch,
        "transaction_timeout_ms": v.transaction_timeout_ms, "transaction_status": v.state_id,
        "transaction_partitions": partitions, "transaction_last_update_timestamp_ms": v.last_update_timestamp_ms,
        "transaction_start_timestamp_ms": v.start_timestamp_ms})


def read_value(buf: bytes) -> TransactionLogValue:
    body = _decode(buf, _VALUE_DECODERS, "transaction log value")
    partitions = frozenset((t["topic"], p) for t in body["transaction_partitions"] or [] for p in t["partition_ids"])
    return TransactionLogValue(body["producer_id"], body["producer_epoch"], body["transaction_timeout_ms"],
                               body["transaction_status"], partitions,
                               body["transaction_last_update_timestamp_ms"], body["transaction_start_timestamp_ms"])
