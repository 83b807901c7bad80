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
