"""Record-batch compression codecs (the low three bits of the batch attributes).

0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd. The whole records section of a batch is compressed as one unit.

Wire formats, as Kafka clients write them:

* gzip   - a gzip stream (RFC 1952). We accept several members and a zlib header too.
* snappy - Java clients write xerial framing: magic ``b"\\x82SNAPPY\\x00"``, int32 version, int32 minimum
           compatible version, then repeated ``[int32 length][raw snappy block]``. librdkafka writes one raw
           snappy block. We read both and write xerial by default (what the Java client writes and every client
           reads).
* lz4    - the LZ4 frame format with independent blocks (Kafka's Java reader does not support linked blocks).
* zstd   - zstd frames; the frame header need not carry the content size, so we stream-decode.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from enum import IntEnum
from typing import Final

import lz4.frame
import snappy
import zstandard

Buffer = bytes | bytearray | memoryview


class UnsupportedCodec(ValueError):
    """The codec id (or name) is not one of Kafka's compression types."""


class DecompressionError(ValueError):
    """The compressed data is malformed or truncated (the codec library's error is the ``__cause__``)."""


class Codec(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> Codec:
        """Map a ``compression.type`` value (``none``/``uncompressed``, ``gzip``, ...) to a codec."""
        key = name.strip().lower()
        if key == "uncompressed":
            key = "none"
        try:
            return cls[key.upper()]
        except KeyError:
            raise UnsupportedCodec(f"unknown compression type {name!r}") from None


CODEC_MASK: Final = 0x07

# --- gzip -------------------------------------------------------------------------------------------------------

_GZIP_WBITS: Final = 16 + zlib.MAX_WBITS  # write a gzip header and trailer
_AUTO_WBITS: Final = 32 + zlib.MAX_WBITS  # read gzip or zlib, detected from the header


def _gzip_compress(data: Buffer, level: int | None) -> bytes:
    co = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION if level is None else level, zlib.DEFLATED, _GZIP_WBITS)
    return co.compress(data) + co.flush()


def _gzip_decompress(data: Buffer) -> bytes:
    d = zlib.decompressobj(_AUTO_WBITS)
    out = d.decompress(data)
    if not d.eof:
        raise ValueError("gzip: truncated stream")
    rest = d.unused_data
    if not rest:
        return out
    parts = [out]
    # Further members are concatenated, as gzip(1) does; zero padding after the last member is ignored.
    while rest.strip(b"\x00"):
        d = zlib.decompressobj(_AUTO_WBITS)
        parts.append(d.decompress(rest))
        if not d.eof:
            raise ValueError("gzip: truncated stream")
        rest = d.unused_data
    return b"".join(parts)


# --- snappy -----------------------------------------------------------------------------------------------------

XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = struct.Struct(">8sii")  # magic, version, minimum compatible version
_XERIAL_VERSION: Final = 1
_XERIAL_COMPAT_VERSION: Final = 1
_XERIAL_BLOCK_SIZE: Final = 32 * 1024  # the xerial library's default block size, used by the Java client
_INT32: Final = struct.Struct(">i")


def is_xerial(data: Buffer) -> bool:
    """True when ``data`` starts with the xerial snappy stream header."""
    return len(data) >= _XERIAL_HEADER.size and bytes(data[:8]) == XERIAL_MAGIC


def _snappy_compress(data: Buffer, xerial: bool = True, block_size: int = _XERIAL_BLOCK_SIZE) -> bytes:
    if not xerial:
        return bytes(snappy.compress(bytes(data)))
    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER.pack(XERIAL_MAGIC, _XERIAL_VERSION, _XERIAL_COMPAT_VERSION))
    for start in range(0, len(view), block_size):
        block = snappy.compress(bytes(view[start : start + block_size]))
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _snappy_decompress(data: Buffer) -> bytes:
    if not is_xerial(data):
        return bytes(snappy.decompress(bytes(data)))
    view = memoryview(data)
    pos = _XERIAL_HEADER.size
    end = len(view)
    parts: list[bytes] = []
    while pos < end:
        if pos + 4 > end:
            raise ValueError("snappy: truncated xerial block length")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise ValueError("snappy: xerial block runs past the end of the data")
        parts.append(bytes(snappy.decompress(bytes(view[pos : pos + length]))))
        pos += length
    return b"".join(parts)


# --- lz4 --------------------------------------------------------------------------------------------------------


def _lz4_compress(data: Buffer, level: int | None) -> bytes:
    return bytes(
        lz4.frame.compress(
            data,
            compression_level=0 if level is None else level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
        )
    )


def _lz4_decompress(data: Buffer) -> bytes:
    return bytes(lz4.frame.decompress(data))


# --- zstd -------------------------------------------------------------------------------------------------------

_ZSTD_DEFAULT_LEVEL: Final = 3
_zstd_compressors: dict[int, zstandard.ZstdCompressor] = {}
_zstd_decompressor = zstandard.ZstdDecompressor()


def _zstd_compress(data: Buffer, level: int | None) -> bytes:
    lvl = _ZSTD_DEFAULT_LEVEL if level is None else level
    cctx = _zstd_compressors.get(lvl)
    if cctx is None:
        cctx = _zstd_compressors[lvl] = zstandard.ZstdCompressor(level=lvl)
    return cctx.compress(data)


def _zstd_decompress(data: Buffer) -> bytes:
    # A decompression object copes with frames that lack the content size; concatenated frames are joined.
    dobj = _zstd_decompressor.decompressobj()
    out = dobj.decompress(data)
    if not dobj.eof:
        raise ValueError("zstd: truncated frame")
    rest = dobj.unused_data
    if not rest:
        return out
    parts = [out]
    while rest:
        dobj = _zstd_decompressor.decompressobj()
        parts.append(dobj.decompress(rest))
        if not dobj.eof:
            raise ValueError("zstd: truncated frame")
        rest = dobj.unused_data
    return b"".join(parts)


# --- public API -------------------------------------------------------------------------------------------------

_DECOMPRESSORS: dict[int, Callable[[Buffer], bytes]] = {
    Codec.GZIP: _gzip_decompress,
    Codec.SNAPPY: _snappy_decompress,
    Codec.LZ4: _lz4_decompress,
    Codec.ZSTD: _zstd_decompress,
}


def compress(codec: int, data: Buffer, *, level: int | None = None, xerial: bool = True) -> bytes:
    """Compress ``data`` with ``codec`` (0-4).

    ``level`` applies to gzip, lz4 and zstd (each library's default when None). ``xerial`` selects the snappy
    framing: True (default) writes the xerial stream Java clients write, False one raw snappy block.
    """
    if codec == Codec.NONE:
        return bytes(data)
    if codec == Codec.GZIP:
        return _gzip_compress(data, level)
    if codec == Codec.SNAPPY:
        return _snappy_compress(data, xerial=xerial)
    if codec == Codec.LZ4:
        return _lz4_compress(data, level)
    if codec == Codec.ZSTD:
        return _zstd_compress(data, level)
    raise UnsupportedCodec(f"unsupported compression codec {codec}")


def decompress(codec: int, data: Buffer) -> bytes:
    """Decompress ``data`` written with ``codec`` (0-4).

    Raises UnsupportedCodec for an unknown codec and DecompressionError for malformed or truncated data,
    whichever library detected it.
    """
    if codec == Codec.NONE:
        return bytes(data)
    fn = _DECOMPRESSORS.get(codec)
    if fn is None:
        raise UnsupportedCodec(f"unsupported compression codec {codec}")
    try:
        return fn(data)
    except MemoryError:
        raise
    except Exception as exc:
        # Each library raises its own types (zlib.error, RuntimeError, ZstdError, ...): give callers one.
        raise DecompressionError(
            f"{Codec(codec).name.lower()}: cannot decompress: {exc or type(exc).__name__}"
        ) from exc
