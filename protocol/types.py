"""Primitive readers and writers of the Kafka wire format.

Readers take a buffer (``bytes``/``memoryview``) and a position and return ``(value, new_position)``; writers
append to a ``bytearray``. Everything raises :class:`DecodeError` on malformed input so the network layer can close
the one offending connection.
"""

from __future__ import annotations

import struct
from typing import TypeAlias

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")

ZERO_UUID = bytes(16)

Buffer = bytes | bytearray | memoryview

# The one topic-partition key of broker, storage and tools: a plain ``(topic, index)`` tuple at run time. The
# client's public ``moldau.TopicPartition`` NamedTuple has the same shape, so it fits wherever this is expected.
TopicPartition: TypeAlias = tuple[str, int]


class DecodeError(ValueError):
    """The bytes do not form a valid message of the expected shape."""


def read_uvarint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 varint (at most 5 bytes for 32-bit values, 10 for 64-bit)."""
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise DecodeError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise DecodeError("varint too long")


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Zigzag-encoded signed varint/varlong."""
    v, pos = read_uvarint(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


def write_uvarint(out: bytearray, value: int) -> None:
    if value < 0:
        raise ValueError("unsigned varint must be >= 0")
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_varint(out: bytearray, value: int) -> None:
    write_uvarint(out, (value << 1) ^ (value >> 63))


def uvarint_size(value: int) -> int:
    n = 1
    while value > 0x7F:
        value >>= 7
        n += 1
    return n


def check_remaining(buf: Buffer, pos: int, n: int) -> None:
    if n < 0 or pos + n > len(buf):
        raise DecodeError(f"length {n} at position {pos} exceeds the {len(buf)}-byte message")


def read_string(buf: Buffer, pos: int, n: int) -> tuple[str, int]:
    end = pos + n
    if n < 0 or end > len(buf):
        raise DecodeError(f"string of {n} bytes at position {pos} exceeds the message")
    try:
        return str(buf[pos:end], "utf-8"), end
    except UnicodeDecodeError as exc:
        raise DecodeError(f"invalid UTF-8 string at position {pos}") from exc


def encode_str(value: str) -> bytes:
    return value.encode("utf-8")
