"""Property tests for every registered API and version, driven by the field declarations.

* decode(encode(x)) == x for random valid messages (absent fields carry their defaults);
* decoding never raises anything but DecodeError: not on truncated messages, not on corrupted ones, not on random
  bytes; and absurd array/string lengths are refused without allocating or looping.
"""

from __future__ import annotations

import struct
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moldau.protocol import schema
from moldau.protocol.api import REGISTRY
from moldau.protocol.schema import Api, F, assemble, in_range
from moldau.protocol.types import DecodeError

CASES = [(api, v, kind) for api in REGISTRY.values() for v in range(api.versions[0], api.versions[1] + 1)
         for kind in ("request", "response")]
case_strategy = st.sampled_from(CASES)

INT_RANGES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
SAFE_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)  # no lone surrogates
PROFILE = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def primitive(type_name: str) -> st.SearchStrategy[Any]:
    if type_name in INT_RANGES:
        bits = INT_RANGES[type_name]
        return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if type_name == "uint16":
        return st.integers(0, 0xFFFF)
    if type_name == "bool":
        return st.booleans()
    if type_name == "float64":
        return st.floats(allow_nan=False)
    if type_name == "uuid":
        return st.binary(min_size=16, max_size=16)
    if type_name == "string":
        return SAFE_TEXT
    if type_name in ("bytes", "records"):
        return st.binary(max_size=40)
    raise AssertionError(type_name)


def field_strategy(f: F, version: int) -> st.SearchStrategy[Any]:
    kind = f.kind()
    s: st.SearchStrategy[Any]
    if kind == "struct":
        s = message_strategy(f.subfields(), version)
    elif kind == "struct_array":
        s = st.lists(message_strategy(f.subfields(), version), max_size=3)
    elif kind == "array":
        s = st.lists(primitive(str(f.type)[2:]), max_size=4)
    else:
        s = primitive(str(f.type))
    if f.nullable is not None and in_range(version, f.nullable):
        s = st.none() | s
    return s


def message_strategy(fields: list[F], version: int) -> st.SearchStrategy[dict[str, Any]]:
    """Every declared field: random values for those in ``version``, defaults for the rest."""
    return st.fixed_dictionaries({
        f.name: field_strategy(f, version) if in_range(version, f.versions) else st.just(f.default_for(version))
        for f in fields
    })


def plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, (memoryview, bytearray)):
        return bytes(value)
    return value


def fields_of(api: Api, kind: str) -> list[F]:
    return api.request if kind == "request" else api.response


def encode(api: Api, version: int, kind: str, value: dict[str, Any]) -> bytes:
    return (api.encode_request if kind == "request" else api.encode_response)(version, value)


def decoder(api: Api, version: int, kind: str) -> schema.Decoder:
    return api.request_decoder(version) if kind == "request" else api.response_decoder(version)


@st.composite
def encoded_messages(draw: st.DrawFn) -> tuple[Api, int, str, dict[str, Any], bytes]:
    api, version, kind = draw(case_strategy)
    value = draw(message_strategy(fields_of(api, kind), version))
    return api, version, kind, value, encode(api, version, kind, value)


@settings(PROFILE, max_examples=400)
@given(encoded_messages())
def test_decode_encode_roundtrip(message: tuple[Api, int, str, dict[str, Any], bytes]) -> None:
    api, version, kind, value, data = message
    decoded, end = decoder(api, version, kind)(memoryview(data), 0)
    assert end == len(data)
    assert plain(decoded) == plain(value)
    assert encode(api, version, kind, decoded) == data


def test_every_version_compiles() -> None:
    for api, version, kind in CASES:
        decoder(api, version, kind)
        (api.request_encoder if kind == "request" else api.response_encoder)(version)


class FakeRegion:
    """Stands in for a storage file region: has a length but is not bytes-like."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)


@settings(PROFILE, max_examples=100)
@given(st.data())
def test_records_as_external_parts(data: st.DataObject) -> None:
    """Fetch responses with file regions encode to the same bytes once the regions are filled in."""
    fetch = REGISTRY[1]
    version = data.draw(st.integers(*fetch.versions))
    value = data.draw(message_strategy(fetch.response, version))
    expected = fetch.encode_response(version, value)
    for topic in value["responses"]:
        for partition in topic["partitions"]:
            if partition["records"] is not None:
                partition["records"] = FakeRegion(partition["records"])
    buf = bytearray()
    external: list[tuple[int, Any]] = []
    fetch.response_encoder(version)(buf, external, value)
    parts = assemble(buf, external)
    joined = b"".join(p.data if isinstance(p, FakeRegion) else bytes(p) for p in parts)
    assert joined == expected


def decodes_or_refuses(api: Api, version: int, kind: str, data: bytes) -> None:
    """Decoding returns normally or raises DecodeError -- never another exception."""
    try:
        decoder(api, version, kind)(memoryview(data), 0)
    except DecodeError:
        pass


@settings(PROFILE, max_examples=300)
@given(encoded_messages(), st.data())
def test_truncated_messages_are_refused(message: tuple[Api, int, str, dict[str, Any], bytes],
                                        data: st.DataObject) -> None:
    api, version, kind, _value, encoded = message
    if not encoded:
        return
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(DecodeError):
        decoder(api, version, kind)(memoryview(encoded[:cut]), 0)


@settings(PROFILE, max_examples=500)
@given(encoded_messages(), st.data())
def test_corrupted_messages_raise_only_decode_error(message: tuple[Api, int, str, dict[str, Any], bytes],
                                                    data: st.DataObject) -> None:
    api, version, kind, _value, encoded = message
    if not encoded:
        return
    corrupted = bytearray(encoded)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(corrupted) - 1))
        corrupted[at] = data.draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF, data.draw(st.integers(0, 255))]))
    decodes_or_refuses(api, version, kind, bytes(corrupted))


@settings(PROFILE, max_examples=500)
@given(case_strategy, st.binary(max_size=300))
def test_random_bytes_raise_only_decode_error(case: tuple[Api, int, str], data: bytes) -> None:
    decodes_or_refuses(*case, data)


HUGE_COUNTS = [
    struct.pack(">i", 0x7FFFFFFF),         # classic int32 array/bytes length
    bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F]),  # compact length 2^32 - 1 (unsigned varint)
    bytes([0xFF] * 9 + [0x01]),             # compact length near 2^64
]


@pytest.mark.parametrize("prefix", HUGE_COUNTS, ids=["int32", "uvarint32", "uvarint64"])
def test_huge_counts_are_refused_fast(prefix: bytes) -> None:
    """A length that promises more than the message holds is refused at once, for every API/version."""
    started = time.perf_counter()
    for api, version, kind in CASES:
        fields = [f for f in fields_of(api, kind) if in_range(version, f.versions)]
        if not fields:
            continue
        # Put the huge count first and after a valid prefix of small fields: either way it must be refused.
        for data in (prefix + bytes(8), bytes(4) + prefix + bytes(8), bytes(16) + prefix):
            decodes_or_refuses(api, version, kind, data)
    assert time.perf_counter() - started < 2.0


def test_metadata_huge_broker_count() -> None:
    metadata = REGISTRY[3]
    with pytest.raises(DecodeError, match="exceeds"):
        metadata.response_decoder(0)(struct.pack(">i", 1 << 30) + bytes(10), 0)
    with pytest.raises(DecodeError, match="exceeds"):
        metadata.response_decoder(9)(bytes(4) + bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F]) + bytes(10), 0)
