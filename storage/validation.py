"""Header-only validation of incoming record batches (Kafka's ``analyzeAndValidateRecords`` and the client-origin
checks of ``LogValidator``). Never decompresses: the work is per batch, not per record.
"""

from __future__ import annotations

from crc32c import crc32c

from moldau.protocol.compression import decompress
from moldau.protocol.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    CONTROL_MASK,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    MIN_BATCH_LENGTH,
    TRANSACTIONAL_MASK,
    BatchHeader,
    Buffer,
    RecordBatchError,
    decode_varint,
    iter_headers,
    read_header,
)
from moldau.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)

Batches = list[tuple[int, BatchHeader]]


def _check_magic(buf: memoryview, pos: int) -> None:
    magic = buf[pos + MAGIC_OFFSET]
    if magic != MAGIC:
        legacy = magic in (0, 1)
        raise InvalidRecordError(
            f"record batch magic {magic} at position {pos}: only magic {MAGIC} batches are accepted",
            legacy=legacy,
        )


def validate_leader_batches(buf: memoryview, max_message_bytes: int) -> Batches:
    """Every batch of a produce request: whole, magic 2, within ``max.message.bytes``, CRC32C valid, offsets and
    count consistent, not a control batch, a sequence whenever there is a producer id, a producer id whenever
    the batch is transactional.

    Returns ``(position, header)`` pairs; raises before anything is appended if any batch fails.
    """
    end = len(buf)
    pos = 0
    batches: Batches = []
    # The header's fields are read as plain attributes here (not BatchHeader's properties): this runs for every
    # partition of every Produce request.
    while pos < end:
        if end - pos <= MAGIC_OFFSET:
            raise CorruptRecordError(f"{end - pos} trailing bytes at position {pos} are not a record batch")
        if buf[pos + MAGIC_OFFSET] != MAGIC:
            _check_magic(buf, pos)
        if end - pos < BATCH_HEADER_SIZE:
            raise CorruptRecordError(f"truncated record batch header at position {pos}")
        h = read_header(buf, pos)
        batch_length = h.batch_length
        if batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"record batch at position {pos} has invalid length {batch_length}")
        total_size = batch_length + LOG_OVERHEAD
        if total_size > max_message_bytes:
            raise RecordTooLargeError(
                f"record batch of {total_size} bytes exceeds max.message.bytes {max_message_bytes}"
            )
        if pos + total_size > end:
            raise CorruptRecordError(f"record batch at position {pos} is truncated")
        if crc32c(buf[pos + ATTRIBUTES_OFFSET : pos + total_size]) != h.crc:
            raise CorruptRecordError(f"record batch at position {pos} fails its CRC32C check")
        delta, count = h.last_offset_delta, h.records_count
        if delta < 0 or count <= 0 or delta + 1 != count:
            raise InvalidRecordError(
                f"record batch count {count} does not match its offset range (last offset delta {delta})"
            )
        attributes, producer_id = h.attributes, h.producer_id
        if attributes & CONTROL_MASK:
            raise InvalidRecordError("clients may not write control batches")
        if attributes & TRANSACTIONAL_MASK and producer_id < 0:
            raise InvalidRecordError("a transactional record batch needs a producer id")
        if producer_id >= 0 and h.base_sequence < 0:
            raise InvalidRecordError(f"invalid sequence {h.base_sequence} for producer {producer_id}")
        batches.append((pos, h))
        pos += total_size
    if not batches:
        raise InvalidRecordError("the request holds no record batch")
    return batches


def validate_follower_batches(buf: memoryview, log_end_offset: int) -> Batches:
    """Batches fetched from the leader: they keep their offsets, which must start at or above the log end offset
    and increase. A trailing partial batch is ignored (as Kafka does); the caller appends only whole batches.
    """
    batches: Batches = []
    next_offset = log_end_offset
    try:
        for pos, h in iter_headers(buf):
            if h.magic != MAGIC:
                _check_magic(buf, pos)
            # iter_headers yields whole batches only, each at least MIN_BATCH_LENGTH long
            if crc32c(buf[pos + ATTRIBUTES_OFFSET : pos + LOG_OVERHEAD + h.batch_length]) != h.crc:
                raise CorruptRecordError(f"record batch at offset {h.base_offset} fails its CRC32C check")
            if h.last_offset_delta < 0:
                raise CorruptRecordError(
                    f"record batch at offset {h.base_offset} has a negative offset delta"
                )
            if h.base_offset < next_offset:
                raise UnexpectedAppendOffsetError(
                    f"batch offset {h.base_offset} is below the expected next offset {next_offset}"
                )
            next_offset = h.last_offset + 1
            batches.append((pos, h))
    except RecordBatchError as exc:
        raise CorruptRecordError(str(exc)) from None
    return batches


def batches_end(batches: Batches) -> int:
    """The position just after the last batch."""
    if not batches:
        return 0
    pos, h = batches[-1]
    return pos + h.total_size


def _first_keyless_record(body: bytes, count: int) -> int:
    """Index of the first record with a null key, -1 if none."""
    keyless = _keyless_records(body, count, first_only=True)
    return keyless[0] if keyless else -1


def _keyless_records(body: bytes, count: int, first_only: bool = False) -> list[int]:
    """Indexes of the records with a null key: reads each record's length, skips its attributes, timestamp delta
    and offset delta, reads the key length. No values or headers are decoded; one-byte varints (the common case)
    are read inline."""
    pos = 0
    found: list[int] = []
    try:
        for i in range(count):
            b = body[pos]
            if b < 0x80:
                length, start = (b >> 1) ^ -(b & 1), pos + 1
            else:
                length, start = decode_varint(body, pos)
            p = start + 1  # attributes
            for _ in range(2):  # timestamp delta, offset delta
                if body[p] < 0x80:
                    p += 1
                else:
                    p = decode_varint(body, p)[1]
            b = body[p]
            if b == 1 or (b >= 0x80 and decode_varint(body, p)[0] < 0):  # zigzag(-1) == 1: a null key
                found.append(i)
                if first_only:
                    return found
            pos = start + length
    except (IndexError, RecordBatchError):
        raise InvalidRecordError("record runs past the end of its batch") from None
    return found


def check_keys_present(buf: Buffer, batches: Batches, topic_partition: str) -> None:
    """A compacted topic refuses records without a key (Kafka's LogValidator): the cleaner could never remove
    them. Runs only for compacted topics; raises before anything is appended, naming every keyless record (its
    index counted across the request's batches; a v2 produce request holds one) as Kafka's KIP-467 record
    errors, with Kafka's partition message."""
    view = memoryview(buf)
    errors: list[tuple[int, str | None]] = []
    message = f"Compacted topic cannot accept message without key in topic partition {topic_partition}."
    first = 0
    for pos, h in batches:
        payload = view[pos + BATCH_HEADER_SIZE : pos + h.total_size]
        body = bytes(payload) if h.compression == 0 else decompress(h.compression, payload)
        errors += [(first + i, message) for i in _keyless_records(body, h.records_count)]
        first += h.records_count
    if errors:
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
        raise InvalidRecordError(f"One or more records have been rejected due to {len(errors)} record errors in "
                                 f"total, and only showing the first three errors at most: [{shown}]",
                                 record_errors=errors)
