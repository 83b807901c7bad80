"""A segment remembers its last batch, so a read at the tail (a follower keeping up, a consumer at the end) needs
no read of the file. The answers must be exactly those of a segment that knows nothing (reopened from its files),
after appends, truncations and recovery."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moldau.protocol.records import build_batch, read_header, set_base_offset
from moldau.storage import segment as segment_module
from moldau.storage.segment import LogSegment

from .test_segment import append_batches, open_segment


def _answers(seg: LogSegment, last: int) -> list[object]:
    """translate_offset and read for every offset up to past the end, as comparable values."""
    out: list[object] = []
    for offset in range(seg.base_offset, last + 3):
        found = seg.translate_offset(offset)
        out.append(None if found is None else (found[0], found[1].base_offset, found[1].last_offset))
        region = seg.read(offset, 1 << 20)
        out.append(None if region is None else (region.position, len(region)))
    return out


def _reopened(d: Path, base: int) -> LogSegment:
    seg = open_segment(d, base)
    seg.recover()
    return seg


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 300)), min_size=1, max_size=12),
       st.lists(st.integers(0, 40), max_size=3))
def test_the_remembered_tail_answers_like_a_segment_read_from_its_files(sizes: list[tuple[int, int]],
                                                                       cuts: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        seg = open_segment(d, 5)
        append_batches(seg, sizes)
        for cut in cuts:
            seg.truncate_to(seg.base_offset + cut, 0)
            append_batches(seg, sizes[:2])  # and more after each cut
        seg.flush()
        last = seg.next_offset
        expected = _answers(_reopened(d, 5), last)
        assert _answers(seg, last) == expected
        seg.close()


def test_a_read_of_the_last_batch_or_past_the_end_reads_no_file(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    seg = open_segment(tmp_path, 0)
    batches = append_batches(seg, [(3, 50)] * 40)  # past several index entries
    base, last, position = batches[-1]
    reads: list[int] = []
    real_pread = os.pread

    def counting_pread(fd: int, length: int, offset: int) -> bytes:
        reads.append(offset)
        return real_pread(fd, length, offset)

    for offset in (base, base + 1, last):
        found = seg.translate_offset(offset)
        assert found is not None and found[0] == position and found[1].base_offset == base
    assert seg.translate_offset(last + 1) is None
    # A fetch's read of the recent batches (the segment remembers them) touches no file.
    monkeypatch.setattr(segment_module.os, "pread", counting_pread)
    for offset in (base, base + 1, last):
        region = seg.read(offset, 1 << 20, max_offset=last + 1)
        assert region is not None and region.position == position and len(region) == seg.size - position
    assert seg.read(last + 1, 1 << 20) is None
    assert reads == []
    seg.translate_offset(batches[0][0] + 1)  # a batch long before the tail is looked up in the file
    assert reads
    seg.close()


def test_after_a_truncation_and_after_recovery_the_tail_is_the_new_last_batch(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, 0)
    batches = append_batches(seg, [(2, 40)] * 10)
    seg.truncate_to(batches[6][0], 0)
    found = seg.translate_offset(batches[5][0])
    assert found is not None and found[0] == batches[5][2]
    assert seg.translate_offset(batches[6][0]) is None
    seg.recover()
    assert seg.translate_offset(batches[6][0]) is None
    found = seg.translate_offset(batches[5][1])
    assert found is not None and found[1].last_offset == batches[5][1]
    seg.close()


def _file_bytes(region: segment_module.FileRegion) -> bytes:
    return os.pread(region.fileobj.fileno(), region.length, region.position)


def test_a_kept_append_is_read_from_memory_with_the_files_bytes(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A leader's small append (``keep``) stays in memory until the next one: a read of it (or of part of it)
    carries those bytes, which are the file's; reads of anything else carry none."""
    seg = open_segment(tmp_path, 0)
    first = append_batches(seg, [(2, 40)])
    data = bytearray(build_batch([(None, b"y" * 30, None, 2000)] * 3, base_offset=0))
    set_base_offset(data, 0, seg.next_offset)
    h = read_header(data)
    position = seg.size
    seg.append(data, h.last_offset, h.max_timestamp, h.last_offset, keep=True)
    data[:] = bytes(len(data))  # the caller's buffer is reused: the segment kept a copy
    region = seg.read(h.base_offset, 1 << 20)
    assert region is not None and region.position == position and region.data is not None
    assert region.data == _file_bytes(region) and region.read() == region.data
    cut = seg.read(h.base_offset, 1 << 20, min_one=True)  # whole batches only: the same one
    assert cut is not None and cut.data == region.data
    both = seg.read(first[0][0], 1 << 20)  # from the batch before: not all in memory
    assert both is not None and both.data is None and both.read().endswith(region.data)
    reads: list[int] = []
    real_pread = os.pread
    monkeypatch.setattr(segment_module.os, "pread",
                        lambda fd, n, at: reads.append(at) or real_pread(fd, n, at))  # type: ignore[func-returns-value]
    assert seg.read(h.base_offset, 1 << 20).read() == region.data  # type: ignore[union-attr]
    assert reads == []
    monkeypatch.undo()
    seg.close()


@pytest.mark.parametrize("then", ["append", "large", "truncate", "inactive", "recover"])
def test_the_kept_bytes_go_with_any_change_of_the_tail(tmp_path: Path, then: str) -> None:
    seg = open_segment(tmp_path, 0)

    def kept_append(value_size: int, keep: bool = True, value: bytes = b"z") -> int:
        data = bytearray(build_batch([(None, value * value_size, None, 3000)], base_offset=0))
        set_base_offset(data, 0, seg.next_offset)
        h = read_header(data)
        seg.append(data, h.last_offset, h.max_timestamp, h.last_offset, keep=keep)
        return h.base_offset

    base = kept_append(50)
    assert seg.read(base, 1 << 20).data is not None  # type: ignore[union-attr]
    if then == "append":  # a follower's append (not kept) replaces it
        base = kept_append(50, keep=False)
    elif then == "large":
        base = kept_append(segment_module.TAIL_MAX_BYTES + 1)
    elif then == "truncate":  # and the same place written again, with other bytes
        base = kept_append(50)
        seg.truncate_to(base, 0)
        assert kept_append(50, keep=False, value=b"w") == base
    elif then == "inactive":
        seg.on_become_inactive()
    else:
        seg.recover()
    region = seg.read(base, 1 << 20)
    assert region is not None and region.data is None and len(region.read()) == region.length > 0
    if then == "truncate":
        assert b"w" * 50 in region.read()
    seg.close()


def test_a_leaders_append_is_kept_and_a_followers_is_not(tmp_path: Path) -> None:
    from moldau.protocol.records import build_batch as build
    from moldau.storage.config import LogConfig, ManualClock
    from moldau.storage.log import Log

    leader = Log(tmp_path / "t-0", LogConfig(), ManualClock())
    follower = Log(tmp_path / "t-1", LogConfig(), ManualClock())
    leader.append_as_leader(bytearray(build([(None, b"v", None, 1)])), leader_epoch=3)
    region = leader.read(0, 1 << 20).regions[0]
    assert region.data is not None and region.data == _file_bytes(region)
    follower.append_as_follower(region.data)
    copy = follower.read(0, 1 << 20).regions[0]
    assert copy.data is None and copy.read() == region.data
    leader.close(take_snapshot=False)
    follower.close(take_snapshot=False)
