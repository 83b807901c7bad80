"""Fuzzing every request decoder with mutated golden bytes (hypothesis).

A hostile or broken client controls every byte of a request. Whatever it sends, a decoder may only succeed or
raise ``DecodeError`` (the network layer turns that into a closed connection), and it must not allocate far
beyond the frame it was given: a length or count field claiming 2**31 items must be checked against the bytes
that are there, never used to pre-size a list or buffer. Mutations aim at exactly those fields (lengths, counts,
varints) as well as flipping, inserting, deleting and truncating bytes.

Bounded and derandomized: a fixed number of examples per (api, version), so the file runs in seconds and the
same way on every machine.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moldau.protocol.api import REGISTRY
from moldau.protocol.header import decode_request_header, request_header_version
from moldau.protocol.types import DecodeError

GOLDEN = Path(__file__).resolve().parent / "golden"
EXAMPLES = 20
# What a decoded value may cost beyond the frame: Python objects are larger than their wire form (a dict per
# struct, a list slot per array item), so the bound is a multiple of the frame plus a constant for the
# decoder's own bookkeeping; a pre-sized list of 2**31 (or even 2**20) items exceeds it by far.
ALLOC_FACTOR, ALLOC_CONSTANT = 64, 256 * 1024

# Values that make lengths and counts hostile: negative, huge, just past the end.
HOSTILE_INT32 = [b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x80\x00\x00\x00", b"\x00\x10\x00\x00"]
HOSTILE_INT16 = [b"\x7f\xff", b"\xff\xff", b"\x80\x00"]
HOSTILE_VARINT = [b"\xff\xff\xff\xff\x07", b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x80\x80", b"\xff\x7f"]


def _request_cases() -> list[tuple[str, int, int, bytes]]:
    """One golden request body per (api, version): every request decoder we have golden bytes for."""
    seen: dict[tuple[int, int], tuple[str, int, int, bytes]] = {}
    for path in sorted(GOLDEN.glob("*_request_v*.json")):
        case = json.loads(path.read_text())
        key = (case["api_key"], case["api_version"])
        seen.setdefault(key, (path.stem, *key, bytes.fromhex(case["hex"])))
    return list(seen.values())


CASES = _request_cases()


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(out)))
        kind = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "hostile"]))
        if kind == "flip" and pos < len(out):
            out[pos] = draw(st.integers(0, 255))
        elif kind == "insert":
            out[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del out[pos:pos + draw(st.integers(1, 8))]
        elif kind == "truncate":
            del out[pos:]
        else:
            hostile = draw(st.sampled_from(HOSTILE_INT32 + HOSTILE_INT16 + HOSTILE_VARINT))
            out[pos:pos + len(hostile)] = hostile
    return bytes(out)


def _decode_bounded(decode: Any, data: bytes) -> None:
    """Decodes; only DecodeError may escape, and the peak of new allocations stays near the frame's size."""
    tracemalloc.start()
    try:
        try:
            decode(memoryview(data), 0)
        except DecodeError:
            pass
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= ALLOC_FACTOR * len(data) + ALLOC_CONSTANT, f"decoding {len(data)} bytes allocated {peak}"


@pytest.mark.parametrize("name,api_key,version,golden", CASES, ids=[c[0] for c in CASES])
def test_mutated_request_bodies_decode_or_raise_decode_error(name: str, api_key: int, version: int,
                                                             golden: bytes) -> None:
    decode = REGISTRY[api_key].request_decoder(version)
    decode(memoryview(golden), 0)  # the unmutated bytes decode: the fuzzing starts from a valid message

    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(mutated(golden))
    def run(data: bytes) -> None:
        _decode_bounded(decode, data)

    run()


@pytest.mark.parametrize("name,api_key,version,golden", CASES[::7], ids=[c[0] for c in CASES[::7]])
def test_mutated_request_headers_decode_or_raise_decode_error(name: str, api_key: int, version: int,
                                                              golden: bytes) -> None:
    api = REGISTRY[api_key]
    header_version = request_header_version(api_key, api.is_flexible(version), version)
    client_id = b"\x00\x04fuzz"
    header = api_key.to_bytes(2, "big") + version.to_bytes(2, "big") + b"\x00\x00\x00\x01"
    if header_version >= 1:
        header += client_id
    if header_version >= 2:
        header += b"\x00"  # no tagged fields
    decode_request_header(memoryview(header + golden), header_version)

    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(mutated(header + golden))
    def run(data: bytes) -> None:
        _decode_bounded(lambda buf, _pos: decode_request_header(buf, header_version), data)

    run()


def test_every_advertised_request_decoder_is_fuzzed() -> None:
    """Every API we serve has at least one version among the golden request cases."""
    from moldau.broker.apis import ADVERTISED

    fuzzed = {api_key for _, api_key, _, _ in CASES}
    assert set(ADVERTISED) <= fuzzed, f"no golden request bytes for api keys {sorted(set(ADVERTISED) - fuzzed)}"
