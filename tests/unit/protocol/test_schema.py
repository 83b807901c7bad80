"""The schema compiler itself: tagged fields, nullability, external (sendfile) parts, hostile input."""

from __future__ import annotations

import pytest

from moldau.protocol.schema import Api, F, Struct, assemble, compile_decoder, compile_encoder
from moldau.protocol.types import DecodeError

FIELDS = [
    F("id", "int32"),
    F("name", "string", nullable="1+"),
    F("items", [F("k", "int16"), F("v", "bytes", nullable="0+")]),
    F("extra", "int64", "1+", tag=3, tagged="1+", default=-1),
    F("leader", Struct([F("leader_id", "int32"), F("epoch", "int32")]), "1+", tag=1, tagged="1+"),
]


def encode(fields: list[F], version: int, flexible: bool, body: dict) -> bytes:
    buf = bytearray()
    ext: list = []
    compile_encoder(fields, version, flexible)(buf, ext, body)
    assert not ext
    return bytes(buf)


def test_classic_layout_by_hand() -> None:
    body = {"id": 7, "name": "ab", "items": [{"k": 1, "v": b"x"}, {"k": 2, "v": None}]}
    expected = (b"\x00\x00\x00\x07" + b"\x00\x02ab" + b"\x00\x00\x00\x02"
                + b"\x00\x01" + b"\x00\x00\x00\x01x" + b"\x00\x02" + b"\xff\xff\xff\xff")
    assert encode(FIELDS, 0, False, body) == expected
    decoded, pos = compile_decoder(FIELDS, 0, False)(expected, 0)
    assert pos == len(expected)
    assert decoded["items"] == body["items"] and decoded["name"] == "ab"
    # fields absent from this version still appear, with their defaults
    assert decoded["extra"] == -1


def test_flexible_layout_with_tags_in_ascending_order() -> None:
    body = {"id": 1, "name": None, "items": [], "extra": 5, "leader": {"leader_id": 2, "epoch": 9}}
    raw = encode(FIELDS, 1, True, body)
    # id, null compact string (0), empty compact array (1), then 2 tags: tag 1 (struct) before tag 3 (int64)
    assert raw[:6] == b"\x00\x00\x00\x01\x00\x01"
    assert raw[6] == 2 and raw[7] == 1
    assert raw[8] == 9  # size of the struct: two int32 plus its own empty tag section
    decoded, _ = compile_decoder(FIELDS, 1, True)(raw, 0)
    assert decoded["extra"] == 5 and decoded["leader"] == {"leader_id": 2, "epoch": 9}


def test_default_tagged_fields_are_omitted() -> None:
    raw = encode(FIELDS, 1, True, {"id": 1, "name": "n", "items": []})
    assert raw.endswith(b"\x00")  # zero tagged fields
    assert compile_decoder(FIELDS, 1, True)(raw, 0)[0]["leader"] == {"leader_id": 0, "epoch": 0}


def test_lengths_of_128_and_more_take_two_varint_bytes() -> None:
    """Compact lengths and counts under 128 are one byte, read and written inline; from 128 on, two."""
    body = {"id": 1, "name": "x" * 127, "items": [{"k": i, "v": b"y" * 200} for i in range(130)],
            "extra": 3}
    raw = encode(FIELDS, 1, True, body)
    assert raw[4] == 128 and raw[5:6] == b"\x01"  # 127 + 1 = 128: 0x80 0x01
    assert raw[4 + 2 + 127: 4 + 2 + 127 + 2] == bytes([131 & 0x7F | 0x80, 131 >> 7])  # 130 items + 1
    decoded, pos = compile_decoder(FIELDS, 1, True)(raw, 0)
    assert pos == len(raw) and decoded["name"] == body["name"] and decoded["items"] == body["items"]
    assert decoded["extra"] == 3
    short = encode(FIELDS, 1, True, {"id": 1, "name": "x" * 126, "items": []})
    assert short[4] == 127 and short[5:5 + 126] == b"x" * 126


def test_unknown_tags_are_skipped() -> None:
    raw = bytearray(encode(FIELDS, 1, True, {"id": 1, "name": "n", "items": []}))
    raw[-1] = 1
    raw += b"\x63\x02zz"  # tag 99, two bytes
    decoded, pos = compile_decoder(FIELDS, 1, True)(bytes(raw), 0)
    assert pos == len(raw) and decoded["id"] == 1


def test_non_nullable_null_is_refused_both_ways() -> None:
    with pytest.raises(ValueError):
        encode(FIELDS, 0, False, {"id": 1, "name": None, "items": []})
    with pytest.raises(DecodeError):
        compile_decoder(FIELDS, 0, False)(b"\x00\x00\x00\x01\xff\xff\x00\x00\x00\x00", 0)


@pytest.mark.parametrize("raw", [b"", b"\x00\x00", b"\x00\x00\x00\x01\x00\x05ab",
                                 b"\x00\x00\x00\x01\x00\x00\x7f\xff\xff\xff"])
def test_truncated_and_hostile_input(raw: bytes) -> None:
    with pytest.raises(DecodeError):
        compile_decoder(FIELDS, 0, False)(raw, 0)


class Region:
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n


def test_records_objects_become_external_parts() -> None:
    api = Api(99, "Test", (0, 0), None, request=[], response=[
        F("a", "int8"), F("records", "records", nullable="0+"), F("b", "int8")])
    buf = bytearray()
    ext: list = []
    region = Region(100)
    api.response_encoder(0)(buf, ext, {"a": 1, "records": region, "b": 2})
    parts = assemble(buf, ext)
    assert [bytes(p) if not isinstance(p, Region) else p for p in parts] == [
        b"\x01\x00\x00\x00\x64", region, b"\x02"]
    with pytest.raises(ValueError):
        api.encode_response(0, {"a": 1, "records": region, "b": 2})
