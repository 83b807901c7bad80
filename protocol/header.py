"""Request header v0-v2 and response header v0-v1."""

from __future__ import annotations

from dataclasses import dataclass

from moldau.protocol import types as T
from moldau.protocol.types import DecodeError

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def request_header_version(api_key: int, flexible: bool, api_version: int) -> int:
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    return 2 if flexible else 1


def response_header_version(api_key: int, flexible: bool) -> int:
    # ApiVersions keeps response header v0 in every version, so a client can always read the error code.
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if flexible else 0


def peek_api(buf: T.Buffer) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) from the first 8 bytes common to every header version."""
    if len(buf) < 8:
        raise DecodeError("request shorter than a header")
    api_key, api_version = T.INT16.unpack_from(buf, 0)[0], T.INT16.unpack_from(buf, 2)[0]
    return api_key, api_version, T.INT32.unpack_from(buf, 4)[0]


def decode_request_header(buf: T.Buffer, header_version: int) -> tuple[RequestHeader, int]:
    api_key, api_version, correlation_id = peek_api(buf)
    return decode_request_header_rest(buf, header_version, api_key, api_version, correlation_id)


def decode_request_header_rest(buf: T.Buffer, header_version: int, api_key: int, api_version: int,
                               correlation_id: int) -> tuple[RequestHeader, int]:
    """``decode_request_header`` for a caller that has read the first 8 bytes (``peek_api``) already."""
    pos = 8
    client_id: str | None = None
    if header_version >= 1:
        if len(buf) < pos + 2:
            raise DecodeError("truncated client id")
        n = T.INT16.unpack_from(buf, pos)[0]
        pos += 2
        if n >= 0:
            client_id, pos = T.read_string(buf, pos, n)
    if header_version >= 2:
        pos = skip_tagged_fields(buf, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def skip_tagged_fields(buf: T.Buffer, pos: int) -> int:
    count, pos = T.read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = T.read_uvarint(buf, pos)
        size, pos = T.read_uvarint(buf, pos)
        T.check_remaining(buf, pos, size)
        pos += size
    return pos


def encode_request_header(out: bytearray, header: RequestHeader, header_version: int) -> None:
    out += T.INT16.pack(header.api_key)
    out += T.INT16.pack(header.api_version)
    out += T.INT32.pack(header.correlation_id)
    if header_version >= 1:
        if header.client_id is None:
            out += b"\xff\xff"
        else:
            e = header.client_id.encode()
            out += T.INT16.pack(len(e))
            out += e
    if header_version >= 2:
        out.append(0)


def encode_response_header(out: bytearray, correlation_id: int, header_version: int) -> None:
    out += T.INT32.pack(correlation_id)
    if header_version >= 1:
        out.append(0)


def decode_response_header(buf: T.Buffer, header_version: int) -> tuple[int, int]:
    if len(buf) < 4:
        raise DecodeError("truncated response header")
    correlation_id = T.INT32.unpack_from(buf, 0)[0]
    pos = 4
    if header_version >= 1:
        pos = skip_tagged_fields(buf, pos)
    return correlation_id, pos
