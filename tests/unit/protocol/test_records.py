import os
import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.util import decode_varint as kp_decode_varint
from kafka.record.util import encode_varint as kp_encode_varint

from moldau.protocol import records as R
from moldau.protocol.compression import Codec

CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]

# --- golden bytes, assembled by hand from the format description ----------------------------------------------

# Record 0: attributes 0, timestampDelta 0, offsetDelta 0, key b"k" (len 1 -> zigzag 2), value b"v", 0 headers.
GOLDEN_RECORD_0 = bytes.fromhex("10 00 00 00 02 6b 02 76 00")  # length 8 -> zigzag 0x10
# Record 1: timestampDelta +5 (0x0a), offsetDelta 1 (0x02), null key (0x01), value b"hello" (len 5 -> 0x0a),
# one header (0x02): key "h" (0x02 0x68), value b"1" (0x02 0x31). Body is 15 bytes -> zigzag 0x1e.
GOLDEN_RECORD_1 = bytes.fromhex("1e 00 0a 02 01 0a 68656c6c6f 02 02 68 02 31")


def _golden_batch() -> bytes:
    records = GOLDEN_RECORD_0 + GOLDEN_RECORD_1
    after_crc = struct.pack(">hiqqqhii", 0, 1, 1000, 1005, -1, -1, -1, 2) + records
    crc = crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)  # leader epoch + magic + crc + the rest
    return struct.pack(">qiibI", 0, batch_length, -1, 2, crc) + after_crc


def test_crc32c_is_castagnoli() -> None:
    # The standard CRC-32C check value (RFC 3720 appendix / every CRC catalogue).
    assert crc32c(b"123456789") == 0xE3069283


def test_golden_batch_built() -> None:
    built = R.build_batch(
        [(b"k", b"v", None, 1000), (None, b"hello", [("h", b"1")], 1005)],
    )
    assert built == _golden_batch()
    assert len(built) == 61 + len(GOLDEN_RECORD_0) + len(GOLDEN_RECORD_1)


def test_golden_batch_read() -> None:
    data = _golden_batch()
    h = R.read_header(data)
    assert h == R.BatchHeader(0, len(data) - 12, -1, 2, h.crc, 0, 1, 1000, 1005, -1, -1, -1, 2)
    assert h.crc == crc32c(data[21:])
    assert R.compute_crc(data, 0, h) == h.crc
    assert R.valid_crc(data, 0, h)
    assert h.total_size == len(data)
    assert (h.last_offset, h.next_offset) == (1, 2)
    assert list(R.iter_records(data)) == [
        R.Record(0, 1000, b"k", b"v", []),
        R.Record(1, 1005, None, b"hello", [("h", b"1")]),
    ]


def test_header_field_positions() -> None:
    data = R.build_batch(
        [(b"a", b"b", None, 7)],
        base_offset=0x0102030405060708,
        partition_leader_epoch=0x11223344,
        producer_id=0x55,
        producer_epoch=0x66,
        base_sequence=0x77,
        is_transactional=True,
    )
    assert data[0:8] == bytes.fromhex("0102030405060708")
    assert data[12:16] == bytes.fromhex("11223344")
    assert data[16] == 2
    assert data[21:23] == b"\x00\x10"  # transactional bit
    assert struct.unpack_from(">q", data, 43)[0] == 0x55
    assert struct.unpack_from(">h", data, 51)[0] == 0x66
    assert struct.unpack_from(">i", data, 53)[0] == 0x77
    assert struct.unpack_from(">i", data, 57)[0] == 1
    h = R.read_header(data)
    assert h.is_transactional and not h.is_control and h.compression == 0 and h.timestamp_type == 0


# --- interop with kafka-python's record implementation --------------------------------------------------------

BIG = b"compressible value " * 40


def _kafka_python_batch(codec: int) -> bytes:
    builder = DefaultRecordBatchBuilder(2, codec, False, 4242, 3, 17, 10 * 1024 * 1024)
    builder.append(0, 1_600_000_000_000, b"key-0", BIG, [("h1", b"v1"), ("null", None)])
    builder.append(1, 1_600_000_000_005, None, BIG + b"1", [])
    builder.append(2, 1_599_999_999_990, b"key-2", None, [])
    for i in range(3, 200):
        builder.append(i, 1_600_000_000_000 + i, f"k{i}".encode(), BIG, [])
    return bytes(builder.build())


@pytest.mark.parametrize("codec", CODECS)
def test_decode_kafka_python_batch(codec: Codec) -> None:
    data = _kafka_python_batch(codec)
    h = R.read_header(data)
    assert h.compression == codec  # the builder really compressed
    assert R.valid_crc(data, 0, h)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (4242, 3, 17)
    assert (h.records_count, h.last_offset_delta) == (200, 199)
    assert h.max_timestamp == 1_600_000_000_199
    recs = list(R.iter_records(data))
    assert len(recs) == 200
    assert recs[0] == R.Record(0, 1_600_000_000_000, b"key-0", BIG, [("h1", b"v1"), ("null", None)])
    assert recs[1] == R.Record(1, 1_600_000_000_005, None, BIG + b"1", [])
    assert recs[2] == R.Record(2, 1_599_999_999_990, b"key-2", None, [])
    assert recs[150] == R.Record(150, 1_600_000_000_150, b"k150", BIG, [])


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_decodes_our_batch(codec: Codec) -> None:
    data = R.build_batch(
        [
            (b"key-0", BIG, [("h1", b"v1"), ("null", None)], 1_600_000_000_000),
            (None, BIG, None, 1_600_000_000_007),
            (b"key-2", None, [("\u00fc", b"")], 1_599_999_999_999),
        ],
        base_offset=1000,
        compression=codec,
        producer_id=9,
        producer_epoch=2,
        base_sequence=5,
        partition_leader_epoch=12,
    )
    theirs = DefaultRecordBatch(data)
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    assert (theirs.base_offset, theirs.leader_epoch) == (1000, 12)
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (9, 2, 5)
    assert theirs.max_timestamp == 1_600_000_000_007
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in theirs]
    assert got == [
        (1000, 1_600_000_000_000, b"key-0", BIG, [("h1", b"v1"), ("null", None)]),
        (1001, 1_600_000_000_007, None, BIG, []),
        (1002, 1_599_999_999_999, b"key-2", None, [("\u00fc", b"")]),
    ]


# --- in-place patching (broker hot path) ----------------------------------------------------------------------


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.LZ4])
def test_patch_offset_and_epoch_keep_crc(codec: Codec) -> None:
    buf = bytearray(b"\xee" * 5) + bytearray(_kafka_python_batch(codec))  # batch at a non-zero position
    crc_before = R.read_header(buf, 5).crc
    R.set_base_offset(buf, 5, 123_456_789_000)
    R.set_partition_leader_epoch(memoryview(buf), 5, 77)
    h = R.read_header(buf, 5)
    assert (h.base_offset, h.partition_leader_epoch, h.crc) == (123_456_789_000, 77, crc_before)
    assert R.valid_crc(buf, 5, h)
    theirs = DefaultRecordBatch(bytes(buf[5:]))
    assert theirs.validate_crc() and theirs.leader_epoch == 77
    assert [r.offset for r in theirs][:3] == [123_456_789_000, 123_456_789_001, 123_456_789_002]
    assert buf[:5] == b"\xee" * 5


def test_set_log_append_time() -> None:
    buf = bytearray(_kafka_python_batch(Codec.GZIP))
    old = R.read_header(buf)
    R.set_log_append_time(buf, 0, 1_700_000_000_000)
    h = R.read_header(buf)
    assert h.timestamp_type == R.LOG_APPEND_TIME
    assert h.max_timestamp == 1_700_000_000_000
    assert h.base_timestamp == old.base_timestamp
    assert h.compression == Codec.GZIP and h.crc != old.crc
    assert R.valid_crc(buf, 0, h)
    assert {r.timestamp for r in R.iter_records(buf)} == {1_700_000_000_000}
    theirs = DefaultRecordBatch(bytes(buf))
    assert theirs.validate_crc() and theirs.timestamp_type == 1
    R.set_max_timestamp_and_type(buf, 0, old.max_timestamp, R.CREATE_TIME)
    assert bytes(buf) == _kafka_python_batch(Codec.GZIP)  # back to the original bytes


def test_crc_covers_attributes_to_end_only() -> None:
    data = _golden_batch()
    for i in range(21, len(data)):  # every byte inside the CRC range matters
        bad = bytearray(data)
        bad[i] ^= 0x01
        assert not R.valid_crc(bad, 0, R.read_header(bad)), i
    for i in list(range(0, 8)) + list(range(12, 16)):  # base offset and leader epoch do not
        ok = bytearray(data)
        ok[i] ^= 0xFF
        assert R.valid_crc(ok, 0, R.read_header(ok)), i


def test_update_crc() -> None:
    buf = bytearray(_golden_batch())
    buf[-1] = ord("2")  # change the header value
    assert not R.valid_crc(buf, 0, R.read_header(buf))
    assert R.update_crc(buf) == crc32c(bytes(buf[21:]))
    assert list(R.iter_records(buf))[1].headers == [("h", b"2")]


# --- walking a log buffer -------------------------------------------------------------------------------------


def test_iter_headers_stops_before_partial_batch() -> None:
    a = R.build_batch([(b"a", b"1", None, 1)], base_offset=0)
    b = R.build_batch([(b"b", b"2", None, 2), (b"c", b"3", None, 3)], base_offset=1, compression=Codec.ZSTD)
    c = R.build_batch([(b"d", b"4", None, 4)], base_offset=3)
    buf = a + b + c
    assert [(pos, h.base_offset) for pos, h in R.iter_headers(buf)] == [(0, 0), (len(a), 1), (len(a + b), 3)]
    for cut in (1, 11, 12, 61, len(c) - 1):
        assert [pos for pos, _ in R.iter_headers(buf[:-cut])] == [0, len(a)]
    assert [pos for pos, _ in R.iter_headers(memoryview(buf), len(a))] == [len(a), len(a + b)]
    assert list(R.iter_headers(b"")) == []


def test_iter_headers_rejects_impossible_length() -> None:
    buf = bytearray(R.build_batch([(b"a", b"1", None, 1)]))
    struct.pack_into(">i", buf, 8, 10)
    with pytest.raises(R.RecordBatchError):
        list(R.iter_headers(bytes(buf) + b"\x00" * 100))


def test_legacy_magic_detection() -> None:
    legacy = LegacyRecordBatchBuilder(1, 0, 1024 * 1024)
    legacy.append(0, 1_600_000_000_000, b"k", b"v")
    legacy_bytes = bytes(legacy.build())
    assert legacy_bytes[16] == 1
    assert R.is_legacy_magic(legacy_bytes, 0)
    assert R.is_legacy_magic(b"\x00" * 4 + legacy_bytes, 4)
    assert not R.is_legacy_magic(_golden_batch(), 0)
    with pytest.raises(R.RecordBatchError, match="magic"):
        list(R.iter_records(legacy_bytes + b"\x00" * 64, check_crc=False))


# --- malformed input ------------------------------------------------------------------------------------------


def test_read_header_short_buffer() -> None:
    with pytest.raises(R.RecordBatchError):
        R.read_header(_golden_batch()[:60])
    with pytest.raises(R.RecordBatchError):
        R.read_header(_golden_batch(), 30)  # 85 bytes: only 55 from position 30


def test_truncated_batch() -> None:
    data = _golden_batch()
    h = R.read_header(data)
    assert not R.valid_crc(data[:-1], 0, h)
    with pytest.raises(R.RecordBatchError):
        list(R.iter_records(data[:-1]))


def test_corrupt_crc_rejected_unless_skipped() -> None:
    bad = bytearray(_golden_batch())
    bad[-3] ^= 0x40  # inside the last record: "h" header key becomes "(" -- still decodable
    with pytest.raises(R.RecordBatchError, match="CRC"):
        R.iter_records(bad)
    assert list(R.iter_records(bad, check_crc=False))[1].headers == [("(", b"1")]


def test_inconsistent_record_lengths() -> None:
    buf = bytearray(_golden_batch())
    buf[61] = 0x12  # first record claims 9 bytes, holds 8
    R.update_crc(buf)
    with pytest.raises(R.RecordBatchError):
        list(R.iter_records(buf))
    buf = bytearray(_golden_batch())
    struct.pack_into(">i", buf, 57, 3)  # three records declared, two present
    R.update_crc(buf)
    with pytest.raises(R.RecordBatchError):
        list(R.iter_records(buf))
    buf = bytearray(_golden_batch())
    struct.pack_into(">i", buf, 57, 1)  # one declared, two present
    R.update_crc(buf)
    with pytest.raises(R.RecordBatchError):
        list(R.iter_records(buf))


def test_corrupt_compressed_payload() -> None:
    buf = bytearray(R.build_batch([(b"k", b"v" * 1000, None, 1)], compression=Codec.LZ4))
    buf[70:80] = b"\xff" * 10
    R.update_crc(buf)
    with pytest.raises(ValueError):
        list(R.iter_records(buf))


# --- builder options ------------------------------------------------------------------------------------------


def test_offset_deltas_for_compaction() -> None:
    data = R.build_batch(
        [(b"a", b"1", None, 10), (b"b", b"2", None, 20)],
        base_offset=100,
        offset_deltas=[3, 7],
        last_offset_delta=9,
        producer_id=1,
        base_sequence=50,
    )
    h = R.read_header(data)
    assert (h.last_offset_delta, h.last_offset, h.records_count, h.last_sequence) == (9, 109, 2, 59)
    assert [r.offset for r in R.iter_records(data)] == [103, 107]
    assert [r.offset for r in DefaultRecordBatch(data)] == [103, 107]
    with pytest.raises(ValueError):
        R.build_batch([(b"a", b"1", None, 1), (b"b", b"2", None, 2)], offset_deltas=[1, 1])
    with pytest.raises(ValueError):
        R.build_batch([(b"a", b"1", None, 1)], offset_deltas=[2], last_offset_delta=1)
    with pytest.raises(ValueError):
        R.build_batch([])


def test_control_and_timestamp_type_flags() -> None:
    data = R.build_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05", None, 5)], is_control=True)
    h = R.read_header(data)
    assert h.is_control and DefaultRecordBatch(data).is_control_batch
    data = R.build_batch([(None, b"x", None, 5)], timestamp_type=R.LOG_APPEND_TIME)
    assert R.read_header(data).timestamp_type == 1


def test_none_timestamp_means_now() -> None:
    import time

    before = int(time.time() * 1000)
    data = R.build_batch([(None, b"x", None, None), (None, b"y", None, None)])
    after = int(time.time() * 1000)
    stamps = [r.timestamp for r in R.iter_records(data)]
    assert before <= stamps[0] == stamps[1] <= after


def test_last_sequence_wraps() -> None:
    h = R.read_header(R.build_batch([(None, b"x", None, 1)] * 3, producer_id=1, base_sequence=2**31 - 2))
    assert h.last_sequence == 0  # 2**31-2, 2**31-1, 0
    h = R.read_header(R.build_batch([(None, b"x", None, 1)]))
    assert h.last_sequence == -1


# --- varints --------------------------------------------------------------------------------------------------

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


def _kp_varint(value: int) -> bytes:
    out = bytearray()
    kp_encode_varint(value, out.append)
    return bytes(out)


@given(INT64)
def test_varint_matches_kafka_python(value: int) -> None:
    encoded = R.encode_varint(value)
    assert encoded == _kp_varint(value)
    assert R.decode_varint(encoded + b"\xff", 0) == (value, len(encoded))
    assert kp_decode_varint(encoded, 0) == (value, len(encoded))


def test_varint_known_values() -> None:
    # Zigzag: 0->0, -1->1, 1->2, -2->3, 63->126, -64->127, 64->128 (two bytes 0x80 0x01).
    assert [R.encode_varint(v) for v in (0, -1, 1, -2, 63, -64)] == [
        bytes([b]) for b in (0, 1, 2, 3, 126, 127)
    ]
    assert R.encode_varint(64) == b"\x80\x01"
    assert R.encode_varint(-(2**63)) == b"\xff" * 9 + b"\x01"
    with pytest.raises(ValueError):
        R.encode_varint(2**63)
    with pytest.raises(R.RecordBatchError):
        R.decode_varint(b"\x80\x80")
    with pytest.raises(R.RecordBatchError):
        R.decode_varint(b"\xff" * 11)


# --- record round trips ---------------------------------------------------------------------------------------

_bytes_or_none = st.one_of(st.none(), st.binary(max_size=300))
_headers = st.lists(st.tuples(st.text(max_size=20), _bytes_or_none), max_size=4)
_record = st.tuples(
    _bytes_or_none,
    _bytes_or_none,
    _headers,
    st.integers(min_value=0, max_value=2**42),
)


@settings(max_examples=150, deadline=None)
@given(
    recs=st.lists(_record, min_size=1, max_size=30),
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(min_value=0, max_value=2**62),
)
def test_record_round_trip(
    recs: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    codec: Codec,
    base_offset: int,
) -> None:
    data = R.build_batch(recs, base_offset=base_offset, compression=codec)
    h = R.read_header(data)
    assert h.total_size == len(data) and R.valid_crc(data, 0, h)
    assert h.max_timestamp == max(r[3] for r in recs)
    expected = [R.Record(base_offset + i, ts, k, v, hs) for i, (k, v, hs, ts) in enumerate(recs)]
    assert list(R.iter_records(data)) == expected
    theirs = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in DefaultRecordBatch(data)]
    assert theirs == [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in expected]


@settings(max_examples=60, deadline=None)
@given(recs=st.lists(_record, min_size=1, max_size=20), codec=st.sampled_from(CODECS))
def test_kafka_python_round_trip(
    recs: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]], codec: Codec
) -> None:
    builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 10 * 1024 * 1024)
    for i, (k, v, hs, ts) in enumerate(recs):
        builder.append(i, ts, k, v, hs)
    data = bytes(builder.build())
    assert list(R.iter_records(data)) == [R.Record(i, ts, k, v, hs) for i, (k, v, hs, ts) in enumerate(recs)]


def test_large_random_values_all_codecs() -> None:
    values = [os.urandom(n) for n in (0, 1, 127, 128, 16383, 16384, 100_000)]
    for codec in CODECS:
        data = R.build_batch([(None, v, None, 1) for v in values], compression=codec)
        assert [r.value for r in R.iter_records(data)] == values


def test_byte_identical_to_kafka_python_builder() -> None:
    """Uncompressed, the same records must encode to the same bytes (base timestamp = first record's)."""
    recs = [
        (b"key-0", b"v0", [("h1", b"v1"), ("null", None)], 1_600_000_000_100),
        (None, b"v1" * 100, [], 1_600_000_000_000),  # earlier than the first record
        (b"key-2", None, [], 1_600_000_000_300),
    ]
    builder = DefaultRecordBatchBuilder(2, 0, True, 77, 1, 1000, 1024 * 1024)
    for i, (k, v, hs, ts) in enumerate(recs):
        builder.append(i, ts, k, v, hs)
    theirs = bytes(builder.build())
    ours = R.build_batch(
        recs,
        producer_id=77,
        producer_epoch=1,
        base_sequence=1000,
        is_transactional=True,
        partition_leader_epoch=0,
    )
    assert ours == theirs
    assert R.read_header(ours).base_timestamp == 1_600_000_000_100
