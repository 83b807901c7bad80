import gzip
import os
import struct

import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_codec

from moldau.protocol.compression import (
    XERIAL_MAGIC,
    Codec,
    DecompressionError,
    UnsupportedCodec,
    compress,
    decompress,
    is_xerial,
)

CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]

# Mixed data: incompressible random bytes plus long repetitive runs, over several snappy/lz4 blocks.
PAYLOAD = os.urandom(50_000) + b"moldau " * 30_000 + os.urandom(1000)


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(codec: Codec) -> None:
    for data in (b"", b"x", PAYLOAD):
        packed = compress(codec, data)
        assert decompress(codec, packed) == data
    if codec != Codec.NONE:
        assert len(compress(codec, b"a" * 100_000)) < 10_000


@pytest.mark.parametrize("codec", CODECS)
def test_accepts_memoryview_and_bytearray(codec: Codec) -> None:
    packed = compress(codec, memoryview(PAYLOAD))
    assert decompress(codec, bytearray(packed)) == PAYLOAD
    assert decompress(codec, memoryview(packed)) == PAYLOAD


@settings(max_examples=60, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=5000))
def test_round_trip_property(codec: Codec, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


# --- snappy ---------------------------------------------------------------------------------------------------


def _hand_made_xerial(data: bytes, block: int) -> bytes:
    """Xerial framing assembled from the format description, using raw snappy for the blocks."""
    out = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for i in range(0, len(data), block):
        chunk = snappy.compress(data[i : i + block])
        out += struct.pack(">i", len(chunk)) + chunk
    return out


def test_snappy_decodes_raw_block() -> None:
    raw = snappy.compress(PAYLOAD)
    assert not is_xerial(raw)
    assert decompress(Codec.SNAPPY, raw) == PAYLOAD


@pytest.mark.parametrize("block", [1000, 32 * 1024, 10**7])
def test_snappy_decodes_xerial(block: int) -> None:
    framed = _hand_made_xerial(PAYLOAD, block)
    assert is_xerial(framed)
    assert decompress(Codec.SNAPPY, framed) == PAYLOAD


def test_snappy_writes_xerial_by_default() -> None:
    framed = compress(Codec.SNAPPY, PAYLOAD)
    assert framed.startswith(XERIAL_MAGIC)
    magic, version, compat = struct.unpack_from(">8sii", framed)
    assert (magic, version, compat) == (b"\x82SNAPPY\x00", 1, 1)
    # Walk the blocks by hand: each is [int32 length][raw snappy] of at most 32 KiB uncompressed.
    pos, chunks = 16, []
    while pos < len(framed):
        (n,) = struct.unpack_from(">i", framed, pos)
        chunk = snappy.decompress(framed[pos + 4 : pos + 4 + n])
        assert len(chunk) <= 32 * 1024
        chunks.append(chunk)
        pos += 4 + n
    assert pos == len(framed)
    assert b"".join(chunks) == PAYLOAD


def test_snappy_raw_option() -> None:
    raw = compress(Codec.SNAPPY, PAYLOAD, xerial=False)
    assert not raw.startswith(XERIAL_MAGIC)
    assert snappy.decompress(raw) == PAYLOAD


def test_snappy_truncated_xerial_block() -> None:
    framed = _hand_made_xerial(PAYLOAD, 32 * 1024)
    with pytest.raises(DecompressionError):
        decompress(Codec.SNAPPY, framed[:-10])


# --- other codecs: wire-format details -----------------------------------------------------------------------


def test_gzip_is_a_gzip_stream() -> None:
    packed = compress(Codec.GZIP, PAYLOAD)
    assert packed[:2] == b"\x1f\x8b"
    assert gzip.decompress(packed) == PAYLOAD


def test_gzip_reads_several_members() -> None:
    packed = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(Codec.GZIP, packed) == b"first second"


def test_lz4_writes_frames_with_independent_blocks() -> None:
    packed = compress(Codec.LZ4, PAYLOAD)
    assert packed[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic, little-endian 0x184D2204
    flg = packed[4]
    assert flg >> 6 == 1  # frame version 01
    assert flg & 0x20  # block independence: Kafka's Java reader needs it
    assert lz4.frame.decompress(packed) == PAYLOAD


def test_zstd_frame_without_content_size() -> None:
    cobj = zstandard.ZstdCompressor().compressobj()
    packed = cobj.compress(PAYLOAD) + cobj.flush()
    assert zstandard.frame_content_size(packed) == -1
    assert decompress(Codec.ZSTD, packed) == PAYLOAD


def test_zstd_concatenated_frames() -> None:
    cctx = zstandard.ZstdCompressor()
    packed = cctx.compress(b"abc" * 1000) + cctx.compress(b"xyz" * 1000)
    assert decompress(Codec.ZSTD, packed) == b"abc" * 1000 + b"xyz" * 1000


def test_compression_level_is_used() -> None:
    fast = compress(Codec.ZSTD, PAYLOAD, level=1)
    strong = compress(Codec.ZSTD, PAYLOAD, level=19)
    assert len(strong) < len(fast)
    assert decompress(Codec.ZSTD, strong) == PAYLOAD
    assert decompress(Codec.GZIP, compress(Codec.GZIP, PAYLOAD, level=1)) == PAYLOAD


# --- interop with kafka-python's codec module ------------------------------------------------------------------

_KAFKA_PYTHON = {
    Codec.GZIP: (kafka_codec.gzip_encode, kafka_codec.gzip_decode),
    Codec.SNAPPY: (kafka_codec.snappy_encode, kafka_codec.snappy_decode),
    Codec.LZ4: (kafka_codec.lz4_encode, kafka_codec.lz4_decode),
    Codec.ZSTD: (kafka_codec.zstd_encode, kafka_codec.zstd_decode),
}


@pytest.mark.parametrize("codec", list(_KAFKA_PYTHON))
def test_kafka_python_interop(codec: Codec) -> None:
    encode, decode = _KAFKA_PYTHON[codec]
    assert decompress(codec, encode(PAYLOAD)) == PAYLOAD
    assert decode(compress(codec, PAYLOAD)) == PAYLOAD


def test_kafka_python_snappy_both_framings() -> None:
    assert decompress(Codec.SNAPPY, kafka_codec.snappy_encode(PAYLOAD, xerial_compatible=True)) == PAYLOAD
    assert decompress(Codec.SNAPPY, kafka_codec.snappy_encode(PAYLOAD, xerial_compatible=False)) == PAYLOAD
    assert kafka_codec.snappy_decode(compress(Codec.SNAPPY, PAYLOAD, xerial=False)) == PAYLOAD


# --- errors ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_unknown_codec(codec: int) -> None:
    with pytest.raises(UnsupportedCodec):
        compress(codec, b"data")
    with pytest.raises(UnsupportedCodec):
        decompress(codec, b"data")
    assert issubclass(UnsupportedCodec, ValueError)


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_garbage_and_truncation_raise_one_error_type(codec: Codec) -> None:
    with pytest.raises(DecompressionError):
        decompress(codec, b"\x00\x01 definitely not compressed data \xff\xfe")
    with pytest.raises(DecompressionError):
        decompress(codec, compress(codec, PAYLOAD)[:-7])


def test_codec_names() -> None:
    assert Codec.from_name("gzip") is Codec.GZIP
    assert Codec.from_name("ZSTD") is Codec.ZSTD
    assert Codec.from_name("none") is Codec.NONE
    assert Codec.from_name("uncompressed") is Codec.NONE
    with pytest.raises(UnsupportedCodec):
        Codec.from_name("brotli")
    assert [int(c) for c in CODECS] == [0, 1, 2, 3, 4]
