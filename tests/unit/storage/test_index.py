from __future__ import annotations

import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moldau.storage.errors import CorruptIndexError
from moldau.storage.index import OffsetIndex, TimeIndex


def test_offset_index_file_format_and_lookup(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "x.index", 100, 1024)
    assert idx.lookup(150) == (100, 0)  # empty: base offset, position 0
    idx.append(110, 500)
    idx.append(120, 900)
    idx.flush()
    assert (tmp_path / "x.index").read_bytes() == struct.pack(">iiii", 10, 500, 20, 900)
    assert idx.lookup(109) == (100, 0)
    assert idx.lookup(110) == (110, 500)
    assert idx.lookup(119) == (110, 500)
    assert idx.lookup(10_000) == (120, 900)
    assert idx.floor_position(899) == 500
    assert idx.floor_position(900) == 900
    assert idx.floor_position(10) == 0
    idx.close()
    again = OffsetIndex(tmp_path / "x.index", 100, 1024)
    assert again.entries() == [(110, 500), (120, 900)]
    again.sanity_check(1000)
    with pytest.raises(CorruptIndexError):
        again.sanity_check(900)  # the last entry must point inside the log
    again.close()


def test_offset_index_rejects_non_increasing_entries(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "x.index", 0, 1024)
    idx.append(5, 100)
    with pytest.raises(ValueError):
        idx.append(5, 200)
    with pytest.raises(ValueError):
        idx.append(6, 100)
    idx.close()


def test_offset_index_truncate(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "x.index", 0, 1024)
    for i in range(1, 6):
        idx.append(i * 10, i * 100)
    idx.truncate_to(30)  # removes entries with offset >= 30
    assert idx.entries() == [(10, 100), (20, 200)]
    assert (tmp_path / "x.index").stat().st_size == 16
    idx.truncate_to_position(200)
    assert idx.entries() == [(10, 100)]
    idx.reset()
    assert len(idx) == 0
    assert (tmp_path / "x.index").stat().st_size == 0
    idx.close()


def test_offset_index_corrupt_files_fail_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(struct.pack(">ii", 1, 10) + b"\x00\x00\x00")  # torn entry
    idx = OffsetIndex(path, 0, 1024)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check(100)
    idx.close()
    path.write_bytes(struct.pack(">iiii", 5, 10, 3, 20))  # offsets going down
    idx = OffsetIndex(path, 0, 1024)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check(100)
    idx.close()
    # A Kafka index left preallocated by a crash: zero entries after the real ones.
    path.write_bytes(struct.pack(">ii", 5, 10) + bytes(80))
    idx = OffsetIndex(path, 0, 1024)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check(100)
    idx.close()


def test_offset_index_full(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "x.index", 0, 16)  # room for two entries
    idx.append(1, 10)
    assert not idx.is_full
    idx.append(2, 20)
    assert idx.is_full
    idx.append(3, 30)  # silently skipped: the log rolls before this matters
    assert len(idx) == 2
    idx.close()


@settings(max_examples=60, deadline=None)
@given(
    gaps=st.lists(st.tuples(st.integers(1, 50), st.integers(1, 5000)), min_size=0, max_size=80),
    targets=st.lists(st.integers(0, 6000), min_size=1, max_size=30),
)
def test_offset_index_lookup_matches_brute_force(gaps: list[tuple[int, int]], targets: list[int]) -> None:
    with tempfile.TemporaryDirectory() as d:
        idx = OffsetIndex(Path(d) / "x.index", 1000, 1 << 20)
        entries = []
        offset, position = 1000, 0
        for doff, dpos in gaps:
            offset += doff
            position += dpos
            idx.append(offset, position)
            entries.append((offset, position))
        for t in targets:
            target = 1000 + t
            below = [e for e in entries if e[0] <= target]
            expected = below[-1] if below else (1000, 0)
            assert idx.lookup(target) == expected
        idx.close()
        reloaded = OffsetIndex(Path(d) / "x.index", 1000, 1 << 20)
        assert reloaded.entries() == entries
        reloaded.close()


def test_time_index_monotonic_and_lookup(tmp_path: Path) -> None:
    idx = TimeIndex(tmp_path / "x.timeindex", 50, 1024)
    assert idx.last_entry == (-1, 50)
    assert idx.lookup(123) == (-1, 50)
    idx.maybe_append(1000, 52)
    idx.maybe_append(1000, 55)  # not above the last timestamp: ignored
    idx.maybe_append(900, 56)  # ignored
    idx.maybe_append(2000, 60)
    idx.flush()
    assert (tmp_path / "x.timeindex").read_bytes() == struct.pack(">qiqi", 1000, 2, 2000, 10)
    assert idx.lookup(999) == (-1, 50)
    assert idx.lookup(1000) == (1000, 52)
    assert idx.lookup(1999) == (1000, 52)
    assert idx.lookup(5000) == (2000, 60)
    idx.truncate_to(60)
    assert idx.entries() == [(1000, 52)]
    idx.close()
    again = TimeIndex(tmp_path / "x.timeindex", 50, 1024)
    assert again.entries() == [(1000, 52)]
    again.sanity_check(53)
    with pytest.raises(CorruptIndexError):
        again.sanity_check(52)
    again.close()


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(st.tuples(st.integers(-50, 100), st.integers(0, 5)), min_size=0, max_size=60),
    targets=st.lists(st.integers(-10, 4000), min_size=1, max_size=20),
)
def test_time_index_lookup_matches_brute_force(steps: list[tuple[int, int]], targets: list[int]) -> None:
    with tempfile.TemporaryDirectory() as d:
        idx = TimeIndex(Path(d) / "x.timeindex", 0, 1 << 20)
        entries: list[tuple[int, int]] = []
        ts, offset = 0, 0
        for dts, doff in steps:
            ts += dts
            offset += doff
            idx.maybe_append(ts, offset)
            if ts >= 0 and (not entries or ts > entries[-1][0]):
                entries.append((ts, offset))
        assert idx.entries() == entries
        for t in targets:
            below = [e for e in entries if e[0] <= t]
            assert idx.lookup(t) == (below[-1] if below else (-1, 0))
        idx.close()
        reloaded = TimeIndex(Path(d) / "x.timeindex", 0, 1 << 20)
        assert reloaded.entries() == entries
        reloaded.close()


def test_time_index_reload_keeps_extreme_entries_and_drops_a_torn_tail(tmp_path: Path) -> None:
    entries = [(0, 0), (2**31, 1), (2**40 + 7, 2**31 - 2), (2**62, 2**31 - 1)]
    path = tmp_path / "x.timeindex"
    path.write_bytes(b"".join(struct.pack(">qi", ts, rel) for ts, rel in entries) + b"\x01\x02\x03")
    idx = TimeIndex(path, 10, 1 << 20)
    assert idx.entries() == [(ts, 10 + rel) for ts, rel in entries]
    assert idx.last_entry == (2**62, 10 + 2**31 - 1)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check(2**40)  # torn
    idx.close()
