"""RecordBatch v2 (magic 2): the on-wire and on-disk unit of Kafka data.

Batch layout (big-endian), 61 bytes up to and including the records count::

    0  baseOffset            int64
    8  batchLength           int32   bytes after this field (total size = batchLength + 12)
    12 partitionLeaderEpoch  int32
    16 magic                 int8    2
    17 crc                   uint32  CRC32C (Castagnoli) of bytes 21 .. end of batch
    21 attributes            int16   bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control,
                                     6 delete horizon set
    23 lastOffsetDelta       int32
    27 baseTimestamp         int64
    35 maxTimestamp          int64
    43 producerId            int64
    51 producerEpoch         int16
    53 baseSequence          int32
    57 recordsCount          int32
    61 records               compressed as one unit when the codec is not 0

Record: length varint, attributes int8, timestampDelta varlong, offsetDelta varint, keyLength varint (-1 null),
key, valueLength varint (-1 null), value, headersCount varint, then per header keyLength varint, key (UTF-8),
valueLength varint (-1 null), value. Varints are zigzag-encoded.

The broker's produce and fetch paths only touch the header (``read_header``, ``valid_crc``, the ``set_*``
patchers); base offset and partition leader epoch lie outside the CRC, so patching them needs no CRC update.
``iter_records`` and ``build_batch`` decode and encode individual records for tools, compaction and the client.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final, NamedTuple

from crc32c import crc32c

from moldau.protocol.compression import compress as _compress
from moldau.protocol.compression import decompress

Buffer = bytes | bytearray | memoryview
WritableBuffer = bytearray | memoryview
Headers = Sequence[tuple[str, Buffer | None]]
# What build_batch takes per record: (key, value, headers, timestamp_ms or None for "now").
RecordTuple = tuple[Buffer | None, Buffer | None, Headers | None, int | None]

MAGIC: Final = 2
BATCH_HEADER_SIZE: Final = 61
LOG_OVERHEAD: Final = 12  # base offset + batch length

BASE_OFFSET_OFFSET: Final = 0
LENGTH_OFFSET: Final = 8
PARTITION_LEADER_EPOCH_OFFSET: Final = 12
MAGIC_OFFSET: Final = 16
CRC_OFFSET: Final = 17
ATTRIBUTES_OFFSET: Final = 21
LAST_OFFSET_DELTA_OFFSET: Final = 23
BASE_TIMESTAMP_OFFSET: Final = 27
MAX_TIMESTAMP_OFFSET: Final = 35
PRODUCER_ID_OFFSET: Final = 43
PRODUCER_EPOCH_OFFSET: Final = 51
BASE_SEQUENCE_OFFSET: Final = 53
RECORDS_COUNT_OFFSET: Final = 57
# The smallest legal batchLength: a header with no records.
MIN_BATCH_LENGTH: Final = BATCH_HEADER_SIZE - LOG_OVERHEAD

COMPRESSION_MASK: Final = 0x07
TIMESTAMP_TYPE_MASK: Final = 0x08
TRANSACTIONAL_MASK: Final = 0x10
CONTROL_MASK: Final = 0x20
DELETE_HORIZON_MASK: Final = 0x40

CREATE_TIME: Final = 0
LOG_APPEND_TIME: Final = 1
NO_TIMESTAMP: Final = -1
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1
_INT32_MAX: Final = 2**31 - 1

_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_INT64: Final = struct.Struct(">q")
_INT32: Final = struct.Struct(">i")
_UINT32: Final = struct.Struct(">I")
_INT16: Final = struct.Struct(">h")
assert _HEADER.size == BATCH_HEADER_SIZE


class RecordBatchError(ValueError):
    """A record batch (or a record inside one) is malformed, truncated or fails its CRC."""


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """CREATE_TIME (0) or LOG_APPEND_TIME (1)."""
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def total_size(self) -> int:
        """Bytes the whole batch occupies: batch_length plus the 12 bytes before it."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_sequence(self) -> int:
        """The producer sequence of the last record; sequences wrap from 2**31-1 to 0, as in Kafka."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & _INT32_MAX


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


# --- header access (the broker hot path: per batch, never per record) -------------------------------------------

# tuple.__new__ skips NamedTuple._make's length check (the struct always yields 13 fields): ~1/3 faster.
_make_header: Callable[[type[BatchHeader], tuple[Any, ...]], BatchHeader] = tuple.__new__


def read_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Decode the 61-byte batch header at ``pos``; RecordBatchError when fewer bytes are available."""
    try:
        return _make_header(BatchHeader, _HEADER.unpack_from(buf, pos))
    except struct.error:
        raise RecordBatchError(
            f"need {BATCH_HEADER_SIZE} bytes for a batch header at position {pos}, have {len(buf) - pos}"
        ) from None


def iter_headers(buf: Buffer, pos: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each complete batch in ``buf``, stopping before a partial batch.

    A batch whose length field is below the v2 minimum (49) cannot be skipped safely, so it raises
    RecordBatchError. The magic is not checked: callers that need v2 look at ``header.magic``.
    """
    end = len(buf)
    unpack_length = _INT32.unpack_from
    while pos + LOG_OVERHEAD <= end:
        (length,) = unpack_length(buf, pos + LENGTH_OFFSET)
        if length < MIN_BATCH_LENGTH:
            raise RecordBatchError(f"batch at position {pos} has invalid length {length}")
        if pos + LOG_OVERHEAD + length > end:
            return
        yield pos, _make_header(BatchHeader, _HEADER.unpack_from(buf, pos))
        pos += LOG_OVERHEAD + length


def is_legacy_magic(buf: Buffer, pos: int = 0) -> bool:
    """True when the entry at ``pos`` is a legacy (magic 0 or 1) message set entry, which we do not accept."""
    return buf[pos + MAGIC_OFFSET] < MAGIC


def compute_crc(buf: Buffer, pos: int, header: BatchHeader) -> int:
    """CRC32C over the batch at ``pos`` from its attributes to its end (what the crc field must hold)."""
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + LOG_OVERHEAD + header.batch_length])


def valid_crc(buf: Buffer, pos: int, header: BatchHeader) -> bool:
    """True when the stored CRC matches the batch bytes; False also when the batch is truncated in ``buf``."""
    end = pos + LOG_OVERHEAD + header.batch_length
    if end > len(buf) or header.batch_length < MIN_BATCH_LENGTH:
        return False
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : end]) == header.crc


def update_crc(buf: WritableBuffer, pos: int = 0) -> int:
    """Recompute the CRC of the batch at ``pos`` and store it; returns the new CRC."""
    (length,) = _INT32.unpack_from(buf, pos + LENGTH_OFFSET)
    crc = crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + LOG_OVERHEAD + length])
    _UINT32.pack_into(buf, pos + CRC_OFFSET, crc)
    return crc


def set_base_offset(buf: WritableBuffer, pos: int, offset: int) -> None:
    """Overwrite the base offset in place (outside the CRC, so the CRC stays valid)."""
    _INT64.pack_into(buf, pos + BASE_OFFSET_OFFSET, offset)


def set_partition_leader_epoch(buf: WritableBuffer, pos: int, epoch: int) -> None:
    """Overwrite the partition leader epoch in place (outside the CRC, so the CRC stays valid)."""
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_max_timestamp_and_type(
    buf: WritableBuffer, pos: int, max_timestamp: int, timestamp_type: int
) -> None:
    """Set the timestamp-type attribute bit and maxTimestamp, then recompute the CRC (both are inside it)."""
    (attributes,) = _INT16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    elif timestamp_type == CREATE_TIME:
        attributes &= ~TIMESTAMP_TYPE_MASK
    else:
        raise ValueError(f"invalid timestamp type {timestamp_type}")
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
    update_crc(buf, pos)


def set_log_append_time(buf: WritableBuffer, pos: int, timestamp: int) -> None:
    """Stamp the batch at ``pos`` with LogAppendTime ``timestamp`` (readers then use it for every record)."""
    set_max_timestamp_and_type(buf, pos, timestamp, LOG_APPEND_TIME)


# --- varints ------------------------------------------------------------------------------------------------------

_ONE_BYTE: Final = [bytes((i,)) for i in range(128)]


def encode_varint(value: int) -> bytes:
    """Zigzag varint (Kafka's varint and varlong; the same bytes for values that fit in 32 bits)."""
    z = (value << 1) ^ (value >> 63)
    if 0 <= z < 0x80:
        return _ONE_BYTE[z]
    if z < 0 or z >> 64:
        raise ValueError(f"varint out of the int64 range: {value}")
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def decode_varint(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Decode a zigzag varint at ``pos``; returns ``(value, next_position)``."""
    try:
        return _read_varint(buf, pos)
    except IndexError:
        raise RecordBatchError(f"truncated varint at position {pos}") from None


def _read_varint(data: Buffer, pos: int) -> tuple[int, int]:
    b = data[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    result = b & 0x7F
    shift = 7
    while True:
        pos += 1
        b = data[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos + 1
        shift += 7
        if shift > 63:
            raise RecordBatchError(f"varint longer than 10 bytes at position {pos}")


# --- records --------------------------------------------------------------------------------------------------------


def iter_records(
    batch: Buffer, header: BatchHeader | None = None, *, check_crc: bool = True
) -> Iterator[Record]:
    """Decode the records of the batch starting at ``batch[0]`` (decompressing as needed).

    Offsets are absolute (base offset + delta). Under LogAppendTime every record carries the batch's
    maxTimestamp, as Kafka readers do. Malformed input raises RecordBatchError (DecompressionError, also a
    ValueError, for bad compressed data); header problems are reported before the first record.
    """
    h = read_header(batch) if header is None else header
    if h.magic != MAGIC:
        raise RecordBatchError(f"unsupported record batch magic {h.magic}")
    end = h.total_size
    if h.batch_length < MIN_BATCH_LENGTH or end > len(batch):
        raise RecordBatchError(f"batch of {end} bytes does not fit in a buffer of {len(batch)}")
    if check_crc and not valid_crc(batch, 0, h):
        raise RecordBatchError(f"CRC mismatch in batch at offset {h.base_offset}")
    if h.records_count < 0:
        raise RecordBatchError(f"negative record count {h.records_count}")
    payload = memoryview(batch)[BATCH_HEADER_SIZE:end]
    codec = h.attributes & COMPRESSION_MASK
    data = bytes(payload) if codec == 0 else decompress(codec, payload)
    append_time = h.max_timestamp if h.attributes & TIMESTAMP_TYPE_MASK else None
    return _decode_records(data, h.records_count, h.base_offset, h.base_timestamp, append_time)


def _decode_records(
    data: bytes, count: int, base_offset: int, base_timestamp: int, append_time: int | None
) -> Iterator[Record]:
    rv = _read_varint
    pos = 0
    end = len(data)
    try:
        for _ in range(count):
            length, pos = rv(data, pos)
            record_end = pos + length
            if length < 6 or record_end > end:  # 6: the smallest record (all varints one byte, no key/value)
                raise RecordBatchError(f"record length {length} at position {pos} is invalid")
            # data[pos] is the record attributes byte: unused by Kafka so far.
            b = data[pos + 1]
            if b < 0x80:
                ts_delta, p = (b >> 1) ^ -(b & 1), pos + 2
            else:
                ts_delta, p = rv(data, pos + 1)
            b = data[p]
            if b < 0x80:
                offset_delta, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                offset_delta, p = rv(data, p)
            b = data[p]
            if b < 0x80:
                key_len, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                key_len, p = rv(data, p)
            if key_len < 0:
                key = None
            else:
                key = data[p : p + key_len]
                p += key_len
            value_len, p = rv(data, p)
            if value_len < 0:
                value = None
            else:
                value = data[p : p + value_len]
                p += value_len
            header_count = data[p]
            headers: list[tuple[str, bytes | None]] = []
            if header_count == 0:
                p += 1
            else:
                header_count, p = rv(data, p)
                if header_count < 0 or header_count > record_end - p:
                    raise RecordBatchError(f"invalid header count {header_count}")
                for _h in range(header_count):
                    hk_len, p = rv(data, p)
                    if hk_len < 0:
                        raise RecordBatchError("record header key cannot be null")
                    hkey = data[p : p + hk_len].decode("utf-8")
                    p += hk_len
                    hv_len, p = rv(data, p)
                    if hv_len < 0:
                        hvalue = None
                    else:
                        hvalue = data[p : p + hv_len]
                        p += hv_len
                    headers.append((hkey, hvalue))
            if p != record_end:
                raise RecordBatchError(
                    f"record at position {pos} declares {length} bytes but holds {p - pos}"
                )
            yield Record(
                base_offset + offset_delta,
                base_timestamp + ts_delta if append_time is None else append_time,
                key,
                value,
                headers,
            )
            pos = record_end
    except IndexError:
        raise RecordBatchError("record runs past the end of the batch") from None
    except UnicodeDecodeError as exc:
        raise RecordBatchError(f"record header key is not UTF-8: {exc}") from None
    if pos != end:
        raise RecordBatchError(f"{end - pos} bytes left after the last of {count} records")


def build_batch(
    records: Iterable[RecordTuple],
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    timestamp_type: int = CREATE_TIME,
    is_transactional: bool = False,
    is_control: bool = False,
    offset_deltas: Sequence[int] | None = None,
    last_offset_delta: int | None = None,
    compression_level: int | None = None,
) -> bytes:
    """Encode one v2 batch from ``(key, value, headers, timestamp_ms | None)`` tuples.

    A None timestamp means "now". The base timestamp is the first record's, maxTimestamp the largest.
    ``offset_deltas`` (strictly increasing, default 0..n-1) and ``last_offset_delta`` (default: the last delta)
    let compaction rewrite a batch keeping the original offsets. ``compression`` is a codec id (0-4).
    """
    recs = list(records)
    if not recs:
        raise ValueError("a record batch needs at least one record")
    count = len(recs)
    if offset_deltas is None:
        deltas: Sequence[int] = range(count)
    else:
        deltas = offset_deltas
        if len(deltas) != count:
            raise ValueError(f"{len(deltas)} offset deltas for {count} records")
        if deltas[0] < 0 or any(b <= a for a, b in zip(deltas, deltas[1:])):
            raise ValueError("offset deltas must be non-negative and strictly increasing")
    lod = deltas[-1] if last_offset_delta is None else last_offset_delta
    if lod < deltas[-1]:
        raise ValueError(f"last_offset_delta {lod} is below the last record's delta {deltas[-1]}")
    if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
        raise ValueError(f"invalid timestamp type {timestamp_type}")

    now: int | None = None
    timestamps: list[int] = []
    for rec in recs:
        ts = rec[3]
        if ts is None:
            if now is None:
                now = int(time.time() * 1000)
            ts = now
        timestamps.append(ts)
    base_timestamp = timestamps[0]

    enc = encode_varint
    body = bytearray()
    for (key, value, headers, _ts), ts, delta in zip(recs, timestamps, deltas):
        rec_bytes = bytearray(b"\x00")  # record attributes
        rec_bytes += enc(ts - base_timestamp)
        rec_bytes += enc(delta)
        if key is None:
            rec_bytes += b"\x01"  # zigzag(-1)
        else:
            rec_bytes += enc(len(key))
            rec_bytes += key
        if value is None:
            rec_bytes += b"\x01"
        else:
            rec_bytes += enc(len(value))
            rec_bytes += value
        if not headers:
            rec_bytes += b"\x00"
        else:
            rec_bytes += enc(len(headers))
            for hkey, hvalue in headers:
                kb = hkey.encode("utf-8")
                rec_bytes += enc(len(kb))
                rec_bytes += kb
                if hvalue is None:
                    rec_bytes += b"\x01"
                else:
                    rec_bytes += enc(len(hvalue))
                    rec_bytes += hvalue
        body += enc(len(rec_bytes))
        body += rec_bytes

    payload = body if compression == 0 else _compress(compression, body, level=compression_level)
    attributes = (
        (compression & COMPRESSION_MASK)
        | (TIMESTAMP_TYPE_MASK if timestamp_type == LOG_APPEND_TIME else 0)
        | (TRANSACTIONAL_MASK if is_transactional else 0)
        | (CONTROL_MASK if is_control else 0)
    )
    out = bytearray(BATCH_HEADER_SIZE)
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        MIN_BATCH_LENGTH + len(payload),
        partition_leader_epoch,
        MAGIC,
        0,  # crc, filled in below
        attributes,
        lod,
        base_timestamp,
        max(timestamps),
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    out += payload
    update_crc(out, 0)
    return bytes(out)
