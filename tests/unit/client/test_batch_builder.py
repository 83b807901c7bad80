"""The producer's fast batch encoder makes exactly the bytes of protocol.records.build_batch."""

from __future__ import annotations

import pytest

from moldau.batch_builder import encode_batch
from moldau.protocol.records import build_batch, iter_records, read_header


def _records(n: int) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]]:
    return [(None if i % 5 == 0 else b"k%d" % i, None if i % 7 == 0 else b"v" * (i % 300 + i // 1000 * 200),
             [("h", b"x"), ("n", None)] if i % 3 == 0 else [], 1_700_000_000_000 + i * (1 if i % 11 else -3))
            for i in range(n)]


@pytest.mark.parametrize("n", [1, 64, 3000, 17000])
def test_same_bytes_as_build_batch(n: int) -> None:
    recs = _records(n)
    fast = encode_batch(recs, producer_id=5, producer_epoch=1, base_sequence=7)
    assert fast == build_batch(recs, producer_id=5, producer_epoch=1, base_sequence=7)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batches_decode_to_the_records(codec: int) -> None:
    recs = _records(500)
    data = encode_batch(recs, compression=codec)
    header = read_header(data)
    assert header.compression == codec and header.records_count == 500
    decoded = [(r.key, r.value, [(k, v) for k, v in r.headers], r.timestamp) for r in iter_records(data)]
    assert decoded == [(k, v, list(h), ts) for k, v, h, ts in recs]


def test_transactional_batches_carry_attribute_bit_4_like_build_batch() -> None:
    recs = _records(10)
    fast = encode_batch(recs, producer_id=5, producer_epoch=3, base_sequence=0, transactional=True)
    assert fast == build_batch(recs, producer_id=5, producer_epoch=3, base_sequence=0, is_transactional=True)
    header = read_header(fast)
    assert header.is_transactional and not header.is_control
    assert read_header(encode_batch(recs, compression=3, transactional=True)).compression == 3
