"""Sealed segments open on first use after a clean shutdown (issue #21): a clean restart reads no file of them,
and every reader (fetch, offsets for times, retention, DeleteRecords, truncation, compaction) sees the same log
as before the restart. Real files throughout; an audit hook records which files the process opens."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from moldau.protocol.records import build_batch, iter_headers
from moldau.storage import Log, LogConfig, LogManager
from moldau.storage.cleaner import LogCleaner
from moldau.storage.config import ManualClock
from moldau.storage.segment import LogSegment
from tests.unit.storage.conftest import small_config
from tests.unit.storage.test_cleaner import check_compacted, compact_config, fill, latest

MakeLog = Callable[..., Log]
SEGMENT_FILES = (".log", ".index", ".timeindex", ".txnindex")

_opened: list[str] | None = None


def _audit(event: str, args: tuple[object, ...]) -> None:
    if _opened is not None and event == "open" and isinstance(args[0], (str, os.PathLike)):
        _opened.append(os.fspath(args[0]))  # type: ignore[arg-type]


sys.addaudithook(_audit)  # process-wide and permanent (audit hooks cannot be removed): records only inside


@contextmanager
def recording_opens() -> Iterator[list[str]]:
    """The paths of the files opened (``open``, ``os.open``, ``io.FileIO``) inside the block."""
    global _opened
    _opened = []
    try:
        yield _opened
    finally:
        _opened = None


TS = ManualClock().now - 3_600_000  # an hour before the tests' clock: within the default retention


def write_log(log: Log, batches: int = 60, ts: int = TS) -> None:
    """Batches of 5 records, timestamps ts, ts+1, ... (+10 per batch): about a dozen batches per 4 KiB segment."""
    for i in range(batches):
        log.append_as_leader(build_batch([(b"k%d" % j, b"v" * 40, None, ts + 10 * i + j) for j in range(5)]), 0)


def files_of(seg: LogSegment) -> set[str]:
    prefix = seg.log_path.name[:20]
    return {prefix + suffix for suffix in SEGMENT_FILES}


def opened_names(opened: list[str]) -> set[str]:
    return {Path(p).name for p in opened}


@pytest.fixture
def written(make_log: MakeLog) -> tuple[Log, bytes]:
    """A log of several sealed segments, shut down cleanly; returns it and all its bytes."""
    log = make_log()
    write_log(log)
    assert len(log.segments) >= 4
    data = log.read(0, 1 << 30).read()
    log.close(flush=True)
    return log, data


def test_clean_restart_reads_no_file_of_a_sealed_segment(make_log: MakeLog, written: tuple[Log, bytes]) -> None:
    before, data = written
    with recording_opens() as opened:
        log = make_log(clean_shutdown=True)
    sealed = log.segments[:-1]
    assert len(sealed) == len(before.segments) - 1
    assert not any(seg.loaded for seg in sealed)
    touched = opened_names(opened)
    assert not touched & set().union(*(files_of(seg) for seg in sealed))
    assert log.active_segment.log_path.name in touched  # the hook sees the files that are opened
    assert log.load_stats.segments_lazy == len(sealed)
    # what the log knows without opening them: base offsets, sizes (stat), the bounds of Log.sealed_segments
    assert [seg.base_offset for seg in sealed] == [seg.base_offset for seg in before.segments[:-1]]
    assert log.size == len(data)
    assert [end for _, end in log.sealed_segments()] == [seg.base_offset for seg in log.segments[1:]]
    assert log.log_end_offset == before.log_end_offset and log.log_start_offset == 0
    assert not any(seg.loaded for seg in sealed)


def test_reads_across_lazily_opened_segments_return_what_was_written(make_log: MakeLog) -> None:
    log = make_log()
    write_log(log)
    leo = log.log_end_offset
    whole = log.read(0, 1 << 30).read()
    pieces = {o: log.read(o, 700, max_offset=leo - 3).read() for o in range(0, leo, 7)}
    times = {t: log.offset_for_timestamp(t) for t in (0, TS, TS + 3, TS + 257, TS + 400, TS + 594, TS + 595, -3, -2, -1)}
    log.close(flush=True)

    again = make_log(clean_shutdown=True)
    assert {o: again.read(o, 700, max_offset=leo - 3).read() for o in range(0, leo, 7)} == pieces
    assert again.read(0, 1 << 30).read() == whole
    assert {t: again.offset_for_timestamp(t) for t in times} == times
    assert all(seg.loaded for seg in again.segments)


def test_a_fetch_opens_only_the_segments_it_reads(make_log: MakeLog, written: tuple[Log, bytes]) -> None:
    log = make_log(clean_shutdown=True)
    second = log.segments[1]
    with recording_opens() as opened:
        got = log.read(second.base_offset, 100)
    assert got.size > 0 and second.loaded
    assert [seg.loaded for seg in log.segments] == [False, True] + [False] * (len(log.segments) - 3) + [True]
    assert opened_names(opened) <= files_of(second)


def test_first_use_from_many_threads_loads_once_and_reads_the_same(
    make_log: MakeLog, written: tuple[Log, bytes]
) -> None:
    _, data = written
    log = make_log(clean_shutdown=True)
    results: list[bytes] = []
    barrier = threading.Barrier(6)

    def fetch() -> None:
        barrier.wait(timeout=10)
        results.append(log.read(0, 1 << 30).read())

    threads = [threading.Thread(target=fetch) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert results == [data] * 6
    files = [seg.file for seg in log.segments]
    assert len({id(f) for f in files}) == len(files) and not any(f.closed for f in files)


@pytest.mark.parametrize("damage", ["garbage", "missing", "torn", "beyond the log"])
def test_a_bad_index_found_at_first_use_is_rebuilt(
    make_log: MakeLog, written: tuple[Log, bytes], damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    before, data = written
    seg = before.segments[1]
    index = seg.log_path.with_suffix(".index")
    timeindex = seg.log_path.with_suffix(".timeindex")
    good = index.read_bytes()
    assert len(good) >= 16
    if damage == "garbage":
        index.write_bytes(bytes(reversed(good)))  # entries out of order
    elif damage == "missing":
        index.unlink()
        timeindex.unlink()
    elif damage == "torn":
        index.write_bytes(good[:-3])
    else:
        index.write_bytes(good[:-8] + good[-8:-4] + (seg.size + 100).to_bytes(4, "big"))
    log = make_log(clean_shutdown=True)
    assert not log.segments[1].loaded  # a clean restart does not look at it
    mid = log.segments[1].base_offset + 3
    assert log.read(0, 1 << 30).read() == data
    assert log.read(mid, 1 << 30).read() == before_read(data, mid)
    assert index.read_bytes() == good  # rebuilt from the log, as the appends wrote it, and written out
    assert timeindex.exists()
    assert "index missing or corrupt at first use" in caplog.text


def before_read(data: bytes, offset: int) -> bytes:
    """The bytes from the batch holding ``offset`` to the end."""
    start = next(pos for pos, h in iter_headers(data) if h.last_offset >= offset)
    return data[start:]


def test_retention_by_size_deletes_unopened_segments_without_opening_them(
    make_log: MakeLog, written: tuple[Log, bytes], clock: ManualClock
) -> None:
    before, data = written
    keep = sum(seg.size for seg in before.segments[-2:])
    # retention.ms off: by default the time check opens the oldest segment (for its largest timestamp)
    log = make_log(small_config(retention_bytes=keep, retention_ms=-1), clean_shutdown=True)
    doomed = log.segments[:-2]
    files = [files_of(seg) for seg in doomed]
    with recording_opens() as opened:
        assert log.delete_expired_segments(clock.time_ms()) == len(doomed)
    assert not any(seg.loaded for seg in doomed)
    assert not opened_names(opened) & set().union(*files)
    left = set(os.listdir(log.dir))
    assert not any(name in left or name + ".deleted" in left for name in set().union(*files))
    assert log.log_start_offset == log.segments[0].base_offset
    assert log.read(log.log_start_offset, 1 << 30).read() == before_read(data, log.log_start_offset)


def test_retention_by_time_opens_only_the_segments_it_examines(
    make_log: MakeLog, written: tuple[Log, bytes], clock: ManualClock
) -> None:
    before, data = written
    expired_until = before.segments[1].max_timestamp  # segments 0 and 1 hold older records than the rest
    clock.now = expired_until + 100_000
    log = make_log(small_config(retention_ms=100_000 - 1), clean_shutdown=True)
    later = log.segments[3:-1]
    assert log.delete_expired_segments(clock.time_ms()) == 2
    assert log.log_start_offset == before.segments[2].base_offset
    assert log.segments[0].loaded  # the first one kept had to be examined
    assert later and not any(seg.loaded for seg in later)  # the ones after it were not
    assert log.read(log.log_start_offset, 1 << 30).read() == before_read(data, log.log_start_offset)


def test_delete_records_then_cleanup_on_unopened_segments(
    make_log: MakeLog, written: tuple[Log, bytes], clock: ManualClock
) -> None:
    before, data = written
    new_start = before.segments[3].base_offset + 2
    log = make_log(clean_shutdown=True)
    doomed = log.segments[:3]
    assert log.maybe_increment_log_start_offset(new_start)
    assert log.delete_expired_segments(clock.time_ms()) == 3
    assert not any(seg.loaded for seg in doomed)
    assert log.log_start_offset == new_start
    assert log.read(new_start, 1 << 30).read() == before_read(data, new_start)


def test_truncation_into_an_unopened_segment(make_log: MakeLog, written: tuple[Log, bytes]) -> None:
    before, data = written
    cut = before.segments[2].base_offset + 7
    log = make_log(clean_shutdown=True)
    assert log.truncate_to(cut)
    headers = [(pos, h) for pos, h in iter_headers(data)]
    kept_end = next(pos for pos, h in headers if h.last_offset >= cut)
    expected_leo = max(h.last_offset + 1 for pos, h in headers if pos < kept_end)
    assert log.log_end_offset == expected_leo
    assert log.read(0, 1 << 30).read() == data[:kept_end]
    info = log.append_as_leader(build_batch([(b"k", b"after", None, TS + 9_999)]), 1)
    assert info.first_offset == expected_leo
    assert log.read(expected_leo, 1 << 30).size == info.size


def test_compaction_of_unopened_segments(make_log: MakeLog, clock: ManualClock) -> None:
    cfg = compact_config(segment_bytes=600)
    log = make_log(cfg)
    written = fill(log, rounds=6, keys=20, ts=clock.now)
    log.roll()
    log.close(flush=True)

    again = make_log(cfg, clean_shutdown=True)
    assert not any(seg.loaded for seg in again.segments[:-1])
    cleaner = LogCleaner(1 << 20)
    ratio, _ = cleaner.dirty_ratio(again, clock.now)
    assert ratio == 1.0
    prepared = cleaner.clean(again, clock.now)
    assert prepared is not None and prepared.stats.records_removed == 100
    check_compacted(again, latest(written, False), again.log_end_offset)


def test_clean_shutdown_of_a_log_with_unopened_segments_leaves_them_intact(
    make_log: MakeLog, written: tuple[Log, bytes]
) -> None:
    before, data = written
    stamps = {p.name: p.stat().st_mtime_ns for p in before.dir.iterdir()}
    log = make_log(clean_shutdown=True)
    log.close(flush=True)
    for seg in log.segments[:-1]:
        for name in files_of(seg):
            if name in stamps:
                assert (log.dir / name).stat().st_mtime_ns == stamps[name], name
    again = make_log(clean_shutdown=True)
    assert again.read(0, 1 << 30).read() == data


def test_crash_restart_still_opens_and_checks_every_segment(make_log: MakeLog) -> None:
    log = make_log()
    write_log(log)
    recovery_point = log.segments[-2].base_offset
    log.flush(recovery_point)
    log.close(take_snapshot=False)  # a crash: no clean-shutdown marker
    again = make_log(recovery_point=recovery_point)
    assert all(seg.loaded for seg in again.segments)
    assert again.load_stats.segments_lazy == 0


def test_log_manager_clean_restart_leaves_sealed_segments_unopened(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager([tmp_path], small_config(), clock)
    manager.load()
    write_log(manager.get_or_create_log("t", 0))
    data = manager.get_log("t", 0).read(0, 1 << 30).read()  # type: ignore[union-attr]
    manager.shutdown()

    manager = LogManager([tmp_path], small_config(), clock)
    manager.load()
    try:
        log = manager.get_log("t", 0)
        assert log is not None
        sealed = log.segments[:-1]
        assert len(sealed) >= 4 and not any(seg.loaded for seg in sealed)
        assert manager.load_stats.segments_lazy == len(sealed)
        assert "left to open on first use" in manager.load_stats.summary()
        assert log.read(0, 1 << 30).read() == data
    finally:
        manager.shutdown()


def test_unclean_restart_after_a_lazy_run_is_still_recovered(tmp_path: Path, clock: ManualClock) -> None:
    """A crash after a clean restart (segments never opened): the next start recovers as after any crash."""
    cfg: LogConfig = small_config()
    manager = LogManager([tmp_path], cfg, clock)
    manager.load()
    write_log(manager.get_or_create_log("t", 0))
    manager.shutdown()
    manager = LogManager([tmp_path], cfg, clock)
    manager.load()
    log = manager.get_log("t", 0)
    assert log is not None
    log.append_as_leader(build_batch([(b"k", b"more", None, TS + 5_000)]), 0)
    data = log.read(0, 1 << 30).read()
    manager.close()  # no marker, nothing flushed

    manager = LogManager([tmp_path], cfg, clock)
    manager.load()
    try:
        log = manager.get_log("t", 0)
        assert log is not None
        assert all(seg.loaded for seg in log.segments)
        assert log.read(0, 1 << 30).read() == data
    finally:
        manager.shutdown()
