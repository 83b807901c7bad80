"""The log cleaner's record walks: one pass reads keys for the offset map, the other picks the records to keep.

Both walk the records of one batch reading only what they need (lengths, offset delta, key), and neither builds
Record objects. A kept record is copied byte for byte: its timestamp and offset deltas stay valid because the
rewritten batch keeps the original base offset and base timestamp. Only the batch header (length, record count,
max timestamp, CRC) is rewritten, and the payload recompressed with the batch's codec.

Map keys: a key shorter than 16 bytes is its own map key; a longer one is replaced by its MD5 digest (16 bytes,
as Kafka's offset map). The two kinds cannot collide (different lengths), and a short key costs no more than a
digest (a Python bytes object of up to 48 bytes either way) while skipping the hash.
"""

from __future__ import annotations

import hashlib
import struct

from moldau.protocol.compression import compress
from moldau.protocol.records import (
    BATCH_HEADER_SIZE,
    LENGTH_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    MIN_BATCH_LENGTH,
    RECORDS_COUNT_OFFSET,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    RecordBatchError,
    decode_varint,
    update_crc,
)

DIGEST_MIN_KEY_LEN = 16
_md5 = hashlib.md5
_digest = type(hashlib.md5()).digest  # the C method, for map() without a Python call per key
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")

Span = tuple[int, int]


def map_key(key: bytes) -> bytes:
    return key if len(key) < DIGEST_MIN_KEY_LEN else _md5(key).digest()


def map_keys(keys: list[bytes]) -> list[bytes]:
    """map_key over a batch's keys; the common all-short and all-long cases run without a Python-level loop."""
    if not keys:
        return keys
    lengths = list(map(len, keys))
    if max(lengths) < DIGEST_MIN_KEY_LEN:
        return keys
    if min(lengths) >= DIGEST_MIN_KEY_LEN:
        return list(map(_digest, map(_md5, keys)))
    return [k if len(k) < DIGEST_MIN_KEY_LEN else _md5(k).digest() for k in keys]


def _truncated() -> RecordBatchError:
    return RecordBatchError("record runs past the end of the batch")


def scan_keys(body: bytes, count: int, base: int) -> tuple[list[bytes], list[int], list[int]]:
    """(keys, their offsets, offsets of keyless records) of an uncompressed records section."""
    keys: list[bytes] = []
    offsets: list[int] = []
    keyless: list[int] = []
    pos = 0
    try:
        for _ in range(count):
            b = body[pos]
            if b < 0x80:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif body[pos + 1] < 0x80:  # 64-8191 bytes: two-byte varints are the common record length
                z = (b & 0x7F) | (body[pos + 1] << 7)
                length, pos = (z >> 1) ^ -(z & 1), pos + 2
            else:
                length, pos = decode_varint(body, pos)
            end = pos + length
            p = pos + 1  # attributes byte
            while body[p] >= 0x80:  # timestamp delta: not needed here
                p += 1
            p += 1
            b = body[p]
            if b < 0x80:
                delta, p = (b >> 1) ^ -(b & 1), p + 1
            elif body[p + 1] < 0x80:  # deltas 64-8191
                z = (b & 0x7F) | (body[p + 1] << 7)
                delta, p = (z >> 1) ^ -(z & 1), p + 2
            else:
                delta, p = decode_varint(body, p)
            b = body[p]
            if b < 0x80:
                key_len, p = (b >> 1) ^ -(b & 1), p + 1
            elif body[p + 1] < 0x80:  # keys of 64-8191 bytes
                z = (b & 0x7F) | (body[p + 1] << 7)
                key_len, p = (z >> 1) ^ -(z & 1), p + 2
            else:
                key_len, p = decode_varint(body, p)
            if key_len >= 0:
                keys.append(body[p : p + key_len])
                offsets.append(base + delta)
            else:
                keyless.append(base + delta)
            pos = end
    except IndexError:
        raise _truncated() from None
    if pos != len(body):
        raise RecordBatchError(f"{len(body) - pos} bytes left after the last of {count} records")
    return keys, offsets, keyless


def _ts_delta(body: bytes, pos: int) -> int:
    """The timestamp delta of the record whose attributes byte is at ``pos``."""
    b = body[pos + 1]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1)
    return decode_varint(body, pos + 1)[0]


def select_dense(body: bytes, count: int, live_index: list[int]) -> tuple[list[Span], int]:
    """Spans of the records at the (sorted) positions ``live_index`` of a batch whose offset deltas are 0..n-1,
    and the largest timestamp delta among them. Only the record lengths of the others are read."""
    spans: list[Span] = []
    max_ts = -(1 << 63)
    want = iter(live_index)
    nxt = next(want)
    pos = 0
    try:
        for i in range(count):
            start = pos
            b = body[pos]
            if b < 0x80:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif body[pos + 1] < 0x80:  # 64-8191 bytes: two-byte varints are the common record length
                z = (b & 0x7F) | (body[pos + 1] << 7)
                length, pos = (z >> 1) ^ -(z & 1), pos + 2
            else:
                length, pos = decode_varint(body, pos)
            if i == nxt:
                spans.append((start, pos + length))
                ts = _ts_delta(body, pos)
                if ts > max_ts:
                    max_ts = ts
                nxt = next(want, -1)
                if nxt < 0:
                    break
            pos += length
    except IndexError:
        raise _truncated() from None
    if nxt >= 0 or spans[-1][1] > len(body):
        raise _truncated()
    return spans, max_ts


def select_general(
    body: bytes,
    count: int,
    base: int,
    first_dirty: int,
    live: set[int],
    latest: dict[bytes, int],
    drop_tombstones: bool,
) -> tuple[list[Span], int]:
    """Spans of the records to keep, and their largest timestamp delta. A record at or above ``first_dirty``
    stays when its offset is in ``live`` (the map's latest offsets plus keyless records); one below it (the
    clean section) stays unless the map holds a later offset for its key. With ``drop_tombstones`` null values
    go too."""
    spans: list[Span] = []
    max_ts = -(1 << 63)
    pos = 0
    try:
        for _ in range(count):
            start = pos
            b = body[pos]
            if b < 0x80:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif body[pos + 1] < 0x80:  # 64-8191 bytes: two-byte varints are the common record length
                z = (b & 0x7F) | (body[pos + 1] << 7)
                length, pos = (z >> 1) ^ -(z & 1), pos + 2
            else:
                length, pos = decode_varint(body, pos)
            end = pos + length
            ts, p = decode_varint(body, pos + 1)
            delta, p = decode_varint(body, p)
            key_len, p = decode_varint(body, p)
            offset = base + delta
            if offset >= first_dirty:
                keep = offset in live
            else:
                keep = key_len < 0 or latest.get(map_key(body[p : p + key_len]), -1) <= offset
            if keep and drop_tombstones and decode_varint(body, p + max(key_len, 0))[0] < 0:
                keep = False
            if keep:
                spans.append((start, end))
                if ts > max_ts:
                    max_ts = ts
            pos = end
    except IndexError:
        raise _truncated() from None
    if pos != len(body):
        raise RecordBatchError(f"{len(body) - pos} bytes left after the last of {count} records")
    return spans, max_ts


def rebuild(data: bytes, h: BatchHeader, body: bytes, spans: list[Span], max_ts_delta: int) -> bytes:
    """The batch ``data`` holding only the records at ``spans`` of its (uncompressed) ``body``: same base
    offset, last offset delta, base timestamp, producer fields, leader epoch, attributes and codec."""
    payload: bytes = b"".join([body[s:e] for s, e in spans])
    if h.compression:
        payload = compress(h.compression, payload)
    out = bytearray(data[:BATCH_HEADER_SIZE])
    out += payload
    _INT32.pack_into(out, LENGTH_OFFSET, MIN_BATCH_LENGTH + len(payload))
    _INT32.pack_into(out, RECORDS_COUNT_OFFSET, len(spans))
    if not h.attributes & TIMESTAMP_TYPE_MASK:  # LogAppendTime keeps the batch's timestamp
        _INT64.pack_into(out, MAX_TIMESTAMP_OFFSET, h.base_timestamp + max_ts_delta)
    update_crc(out)
    return bytes(out)
