from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from moldau.protocol.records import build_batch, iter_headers, read_header, set_base_offset
from moldau.storage.segment import FileRegion, LogSegment, filename_prefix


def open_segment(d: Path, base: int = 0, interval: int = 100) -> LogSegment:
    return LogSegment(d, base, index_interval_bytes=interval, segment_index_bytes=1 << 20, created_ms=0)


def append_batches(
    seg: LogSegment, sizes: list[tuple[int, int]], ts0: int = 1000
) -> list[tuple[int, int, int]]:
    """Appends batches of (record count, value size); returns (base offset, last offset, position) per batch."""
    out = []
    offset = seg.next_offset
    for i, (count, value_size) in enumerate(sizes):
        data = bytearray(
            build_batch([(None, b"x" * value_size, None, ts0 + i) for _ in range(count)], base_offset=0)
        )
        set_base_offset(data, 0, offset)
        h = read_header(data)
        out.append((offset, h.last_offset, seg.size))
        seg.append(data, h.last_offset, h.max_timestamp, h.last_offset)
        offset = h.last_offset + 1
    return out


def test_file_names_have_20_digits(tmp_path: Path) -> None:
    assert filename_prefix(0) == "00000000000000000000"
    assert filename_prefix(12345) == "00000000000000012345"
    seg = open_segment(tmp_path, 12345)
    seg.flush()  # creates the index files of a new segment (a close without an index entry leaves them out)
    seg.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000012345.index",
        "00000000000000012345.log",
        "00000000000000012345.timeindex",
    ]


def _names(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def test_a_segment_without_an_index_entry_closes_without_index_files_and_loads_as_before(tmp_path: Path) -> None:
    """Closing creates no empty index files (a file creation each was most of a clean shutdown of thousands of
    idle or small partitions); reopened, the missing pair is two empty indexes and the segment's last offset, max
    timestamp and lookups are what they were."""
    empty = tmp_path / "empty"
    empty.mkdir()
    open_segment(empty, 0, interval=4096).close()
    assert _names(empty) == ["00000000000000000000.log"]
    small = tmp_path / "small"
    small.mkdir()
    seg = open_segment(small, 0, interval=4096)
    batches = append_batches(seg, [(2, 50), (3, 50), (1, 50)], ts0=5000)
    assert len(seg.index) == 0
    expected = (seg.next_offset, seg.max_timestamp, seg.offset_of_max_timestamp)
    seg.close(flush=True)
    assert _names(small) == ["00000000000000000000.log"]
    for lazy in (False, True):
        again = LogSegment(small, 0, index_interval_bytes=4096, segment_index_bytes=1 << 20, created_ms=0, lazy=lazy)
        if not lazy:
            assert again.load()
        assert (again.next_offset, again.max_timestamp, again.offset_of_max_timestamp) == expected
        found = again.find_offset_by_timestamp(5001, 0)
        assert found is not None and found[1].base_offset == batches[1][0]
        translated = again.translate_offset(batches[2][0])
        assert translated is not None and translated[0] == batches[2][2]
        again.close()
        assert _names(small) == ["00000000000000000000.log"]


def test_a_segment_with_an_index_entry_writes_both_files(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, 0, interval=100)
    append_batches(seg, [(2, 100), (2, 100), (2, 100)])
    assert len(seg.index) > 0
    seg.close()
    assert _names(tmp_path) == ["00000000000000000000.index", "00000000000000000000.log",
                                "00000000000000000000.timeindex"]


def test_missing_index_files_that_should_hold_entries_are_rebuilt(tmp_path: Path) -> None:
    """Both files of a segment that needs entries deleted (Kafka's remedy for a bad index): the tail scan finds
    the missing entry, ``load`` refuses, and recovery rebuilds. One of the pair missing: refused as well."""
    seg = open_segment(tmp_path, 0, interval=100)
    append_batches(seg, [(2, 100), (2, 100), (2, 100)])
    entries = len(seg.index)
    seg.close()
    index, time_index = tmp_path / "00000000000000000000.index", tmp_path / "00000000000000000000.timeindex"
    time_index.unlink()
    half = open_segment(tmp_path, 0, interval=100)
    assert not half.load()
    half.close()
    index.unlink(missing_ok=True)  # the close may have written the offset index again
    time_index.unlink(missing_ok=True)
    again = open_segment(tmp_path, 0, interval=100)
    assert not again.load()
    again.recover()
    assert len(again.index) == entries
    again.close()
    assert index.exists() and time_index.exists()


def test_append_read_and_file_region(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, 10)
    batches = append_batches(seg, [(3, 50), (2, 50), (1, 50)])
    assert seg.next_offset == 16
    region = seg.read(10, 10_000)
    assert isinstance(region, FileRegion)
    assert region.position == 0 and region.length == seg.size
    assert region.read() == (tmp_path / "00000000000000000010.log").read_bytes()
    # An offset inside the second batch starts at that batch.
    region = seg.read(14, 10_000)
    assert region is not None and region.position == batches[1][2]
    # Beyond the segment: None.
    assert seg.read(16, 10_000) is None
    seg.close()


def test_read_returns_whole_batches_only(tmp_path: Path) -> None:
    seg = open_segment(tmp_path)
    append_batches(seg, [(1, 100)] * 5)
    one = read_header(os.pread(seg.file.fileno(), 61, 0)).total_size
    region = seg.read(0, one * 2 + one // 2)
    assert region is not None and region.length == 2 * one
    # Too small for the first batch: empty, unless min_one.
    region = seg.read(0, one - 1)
    assert region is not None and region.length == 0
    region = seg.read(0, one - 1, min_one=True)
    assert region is not None and region.length == one
    # max_offset stops before the batch holding it.
    region = seg.read(0, 10_000, max_offset=3)
    assert region is not None and region.length == 3 * one
    seg.close()


def test_kafka_python_batches_are_indexed(tmp_path: Path) -> None:
    """Independent bytes: batches built by kafka-python's builder."""
    seg = open_segment(tmp_path, 0, interval=0)
    offset = 0
    for n in range(1, 6):
        builder = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=0,
            is_transactional=0,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=1 << 20,
        )
        for i in range(n):
            builder.append(i, timestamp=5000 + offset + i, key=None, value=b"v" * 30, headers=[])
        data = builder.build()
        set_base_offset(data, 0, offset)
        h = read_header(data)
        seg.append(data, h.last_offset, h.max_timestamp, h.last_offset)
        offset = h.last_offset + 1
    assert seg.next_offset == 15
    assert seg.recover() == 0  # every CRC checks out
    assert len(seg.index) == 4  # interval 0: every batch after the first gets an entry
    assert seg.translate_offset(7) is not None
    seg.close()


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 5), st.integers(0, 300)), min_size=1, max_size=40),
    interval=st.sampled_from([0, 64, 300, 4096]),
    data=st.data(),
)
def test_translate_offset_matches_brute_force(
    sizes: list[tuple[int, int]], interval: int, data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as d:
        seg = open_segment(Path(d), 1000, interval)
        batches = append_batches(seg, sizes)
        raw = (Path(d) / "00000000000000001000.log").read_bytes()
        scanned = [(pos, h.base_offset, h.last_offset) for pos, h in iter_headers(raw)]
        assert [(p, b, last) for b, last, p in batches] == scanned
        targets = data.draw(st.lists(st.integers(1000, seg.next_offset + 3), min_size=1, max_size=20))
        for target in targets:
            expected = next(((p, b) for p, b, last in scanned if last >= target), None)
            found = seg.translate_offset(target)
            assert (None if found is None else (found[0], found[1].base_offset)) == expected
        # Reopening (indexes from disk, tail scan) gives the same state.
        next_offset, size, max_ts = seg.next_offset, seg.size, seg.max_timestamp
        entries = seg.index.entries()
        seg.close()
        again = open_segment(Path(d), 1000, interval)
        assert again.load()
        assert (again.next_offset, again.size, again.max_timestamp) == (next_offset, size, max_ts)
        assert again.index.entries() == entries
        # Recovery rebuilds the very same index.
        assert again.recover() == 0
        assert again.index.entries() == entries
        again.close()


def test_time_lookup_finds_first_batch_reaching_timestamp(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, 0, interval=0)
    stamps = [100, 300, 200, 400, 400, 500]
    for i, ts in enumerate(stamps):
        data = bytearray(build_batch([(None, b"v", None, ts)]))
        set_base_offset(data, 0, i)
        seg.append(data, i, ts, i)
    for target, expected in [(0, 0), (100, 0), (101, 1), (250, 1), (300, 1), (301, 3), (400, 3), (450, 5)]:
        found = seg.find_offset_by_timestamp(target, 0)
        assert found is not None and found[1].base_offset == expected, target
    assert seg.find_offset_by_timestamp(501, 0) is None
    assert seg.max_timestamp == 500 and seg.offset_of_max_timestamp == 5
    seg.close()


def test_should_roll_rules(tmp_path: Path) -> None:
    seg = open_segment(tmp_path)
    assert not seg.should_roll(10, 0, 0, 0, segment_bytes=100, segment_ms=1000)  # empty never rolls
    append_batches(seg, [(1, 10)], ts0=5_000)
    size = seg.size
    assert seg.should_roll(101 - size, 5_000, 1, 0, segment_bytes=100, segment_ms=10_000)
    assert not seg.should_roll(100 - size, 5_000, 1, 0, segment_bytes=100, segment_ms=10_000)
    # Time counts from the first batch's timestamp to the incoming batch's timestamp.
    assert not seg.should_roll(1, 15_000, 1, 0, segment_bytes=1 << 30, segment_ms=10_000)
    assert seg.should_roll(1, 15_001, 1, 0, segment_bytes=1 << 30, segment_ms=10_000)
    # Offsets must fit in a 32-bit relative offset.
    assert seg.should_roll(1, 5_000, 2**31, 0, segment_bytes=1 << 30, segment_ms=10_000)
    seg.close()


def test_truncate_to_cuts_at_batch_holding_offset(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, 0, interval=0)
    batches = append_batches(seg, [(2, 20)] * 6)
    assert seg.truncate_to(5, now_ms=0) > 0  # offset 5 is in the batch [4, 5]
    assert seg.size == batches[2][2]
    assert seg.next_offset == 4
    assert all(o < 4 for o, _ in seg.index.entries())
    assert seg.read(4, 1000) is None
    assert seg.truncate_to(100, now_ms=0) == 0
    seg.close()


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 5), st.integers(0, 300)), min_size=1, max_size=30),
    more=st.lists(st.tuples(st.integers(1, 5), st.integers(0, 300)), max_size=12),
    interval=st.sampled_from([0, 64, 4096]),
    data=st.data(),
)
def test_reads_from_recent_batches_match_a_segment_without_them(
    sizes: list[tuple[int, int]], more: list[tuple[int, int]], interval: int, data: st.DataObject
) -> None:
    """The segment keeps its last appended batches to find a fetch's start without the index and a header scan;
    every read answers the same region as the same segment reopened (nothing recent kept), also after a
    truncation and more appends."""
    with tempfile.TemporaryDirectory() as d:
        seg = open_segment(Path(d), 1000, interval)
        append_batches(seg, sizes)
        cut = data.draw(st.integers(1000, seg.next_offset))
        if data.draw(st.booleans()):
            seg.truncate_to(cut, 0)
        append_batches(seg, more)
        reads = data.draw(st.lists(st.tuples(
            st.integers(1000, seg.next_offset + 2), st.integers(0, 2000), st.none() | st.integers(1000, seg.next_offset + 2),
            st.booleans()), min_size=1, max_size=25))
        got = []
        for start, max_size, max_offset, min_one in reads:
            region = seg.read(start, max_size, max_offset, min_one)
            got.append(None if region is None else (region.position, region.length))
        seg.close()
        again = open_segment(Path(d), 1000, interval)
        assert again.load()
        expected = []
        for start, max_size, max_offset, min_one in reads:
            region = again.read(start, max_size, max_offset, min_one)
            expected.append(None if region is None else (region.position, region.length))
        assert got == expected
        again.close()


def test_a_fetch_from_a_recent_batch_reads_no_header(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A follower fetching from its log end offset, one of the leader's last batches: no pread to find it."""
    import moldau.storage.segment as segment_module

    seg = open_segment(tmp_path, 0, 4096)
    batches = append_batches(seg, [(2, 100)] * 40)
    preads: list[int] = []
    real = os.pread

    def counting(fd: int, n: int, pos: int) -> bytes:
        preads.append(pos)
        return real(fd, n, pos)

    monkeypatch.setattr(segment_module.os, "pread", counting)
    base, _, position = batches[-3]
    region = seg.read(base, 1 << 20)
    assert region is not None and (region.position, region.length) == (position, seg.size - position)
    assert preads == []
    seg.close()
