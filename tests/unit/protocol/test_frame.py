"""The frame decoder (protocol/frame.py): whatever way the bytes are cut, every frame comes out whole, in order, as
a writable bytearray of its own; a large frame (>= direct_at) gets its buffer at its size prefix and can be
received straight into it (rest/filled, as the broker's connection does); hostile sizes are refused before any
allocation."""

from __future__ import annotations

import random
import struct

import pytest

from moldau.protocol.frame import FrameDecoder, FrameTooLarge, InvalidFrame

DIRECT_AT = 1000  # small, so that the tests' "large" frames are cheap


def _payloads(rng: random.Random) -> list[bytes]:
    sizes = [0, 3, 999, 1000, 1001, 5000, 17, 250_000, 1, 4096, 2, 30_000]
    return [rng.randbytes(n) for n in sizes]


def _stream(payloads: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


def _cuts(rng: random.Random, total: int, most: int) -> list[int]:
    cuts, at = [], 0
    while at < total:
        step = rng.choice((1, 2, 3, 5, rng.randint(1, most)))
        cuts.append(min(step, total - at))
        at += step
    return cuts


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("most", [7, 1200, 70_000])
def test_feed_gives_every_frame_whole_however_the_bytes_are_cut(seed: int, most: int) -> None:
    rng = random.Random(seed)
    payloads = _payloads(rng)
    data = _stream(payloads)
    d = FrameDecoder(1 << 20, direct_at=DIRECT_AT)
    out: list[bytearray] = []
    at = 0
    for n in _cuts(rng, len(data), most):
        piece = data[at:at + n]
        out += d.feed(rng.choice((piece, bytearray(piece), memoryview(piece))))
        at += n
    assert [bytes(f) for f in out] == payloads
    assert all(type(f) is bytearray for f in out)
    assert len({id(f) for f in out}) == len(out)  # a buffer each: patching one leaves the others alone
    assert d.buffered == 0 and d.rest() is None


@pytest.mark.parametrize("seed", range(8))
def test_a_large_frame_received_in_place_comes_out_whole_and_the_next_frames_after_it(seed: int) -> None:
    """The broker's way: while a large frame is partly in, read into ``rest()`` (never past the frame's end, so
    the next frame's bytes stay for ``feed``), else into the shared buffer."""
    rng = random.Random(seed)
    payloads = _payloads(rng)
    data = memoryview(_stream(payloads))
    d = FrameDecoder(1 << 20, direct_at=DIRECT_AT)
    out: list[bytearray] = []
    at = 0
    direct_reads = 0
    while at < len(data):
        n = rng.choice((1, 3, rng.randint(1, 4000), 65536))
        target = d.rest()
        if target is None:
            piece = data[at:at + n]
            out += d.feed(piece)
            at += len(piece)
        else:
            n = min(n, len(target))  # recv_into fills at most the view
            target[:n] = data[at:at + n]
            target.release()
            out += d.filled(n)
            at += n
            direct_reads += 1
    assert [bytes(f) for f in out] == payloads
    assert direct_reads > 0
    assert d.buffered == 0


def test_a_large_frame_is_buffered_whole_from_its_size_prefix() -> None:
    d = FrameDecoder(1 << 20, direct_at=DIRECT_AT)
    assert d.feed(struct.pack(">i", 5000) + b"x" * 10) == []
    assert d.buffered == 5000  # the budget of partial frames sees the allocation
    view = d.rest()
    assert view is not None and len(view) == 4990
    view[:4000] = b"y" * 4000  # as recv_into would
    view.release()
    assert d.filled(4000) == []
    frames = d.feed(b"y" * 990 + struct.pack(">i", 2) + b"ab" + struct.pack(">i", 3))
    assert [bytes(f) for f in frames] == [b"x" * 10 + b"y" * 4990, b"ab"]
    assert d.buffered == 0  # the third frame's size is known, none of its bytes: nothing held yet
    frames[0][0:1] = b"z"  # writable in place
    with pytest.raises(ValueError):
        d.filled(1)  # no large frame pending


def test_hostile_sizes_are_refused_before_any_allocation() -> None:
    with pytest.raises(FrameTooLarge):
        FrameDecoder(1 << 20, direct_at=DIRECT_AT).feed(struct.pack(">i", (1 << 20) + 1))
    with pytest.raises(InvalidFrame):
        FrameDecoder(1 << 20, direct_at=DIRECT_AT).feed(struct.pack(">i", -1))
    d = FrameDecoder(1 << 20, direct_at=DIRECT_AT)
    d.feed(struct.pack(">i", 5000) + b"x")
    with pytest.raises(ValueError):
        d.filled(5000)  # more than the frame has room for


def test_without_direct_at_memory_follows_what_was_sent() -> None:
    """The broker's decoder (direct_at=None): a client announcing a large frame and sending a little of it makes
    the decoder hold that little, not the announced size."""
    d = FrameDecoder(100 << 20, direct_at=None)
    assert d.feed(struct.pack(">i", (100 << 20) - 1) + b"x" * 1000) == []
    assert d.buffered == 1000 and d.rest() is None
    payload = bytes(range(256)) * 4000
    d = FrameDecoder(100 << 20, direct_at=None)
    data = struct.pack(">i", len(payload)) + payload
    out = []
    for at in range(0, len(data), 65536):
        out += d.feed(data[at:at + 65536])
        assert d.buffered <= at + 65536
    assert [bytes(f) for f in out] == [payload]
