from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from moldau.protocol.records import iter_headers
from moldau.storage import Log, LogConfig, LogManager
from moldau.storage.config import ManualClock
from tests.unit.storage.conftest import batch, batch_offsets, small_config

MakeLog = Callable[..., Log]


def build_log(make_log: MakeLog, batches: int = 10, config: LogConfig | None = None) -> tuple[Log, bytes]:
    log = make_log(config or small_config(segment_bytes=1 << 20))
    for i in range(batches):
        log.append_as_leader(batch(2, ts=1000 + i, value_size=30), 0)
    data = log.read(0, 1 << 30).read()
    log.close(take_snapshot=False)  # a crash: no snapshot, no clean-shutdown marker
    return log, data


def positions(data: bytes) -> list[int]:
    return [pos for pos, _ in iter_headers(data)]


def reopen(make_log: MakeLog, config: LogConfig | None = None, **kwargs: object) -> Log:
    return make_log(config or small_config(segment_bytes=1 << 20), **kwargs)


def last_log_file(log_dir: Path) -> Path:
    return sorted(log_dir.glob("*.log"))[-1]


def test_garbage_tail_is_truncated(make_log: MakeLog, log_dir: Path) -> None:
    _, data = build_log(make_log)
    with open(last_log_file(log_dir), "ab") as f:
        f.write(os.urandom(100))
    log = reopen(make_log)
    assert log.log_end_offset == 20
    assert log.read(0, 1 << 30).read() == data
    assert last_log_file(log_dir).stat().st_size == len(data)
    assert log.append_as_leader(batch(1), 0).first_offset == 20


def test_zero_filled_tail_is_truncated(make_log: MakeLog, log_dir: Path) -> None:
    _, data = build_log(make_log)
    with open(last_log_file(log_dir), "ab") as f:
        f.write(bytes(4096))  # what a crash after preallocation leaves
    log = reopen(make_log)
    assert log.log_end_offset == 20
    assert log.read(0, 1 << 30).read() == data


def test_batch_cut_in_half(make_log: MakeLog, log_dir: Path) -> None:
    _, data = build_log(make_log)
    cut = positions(data)[-1] + 40
    os.truncate(last_log_file(log_dir), cut)
    log = reopen(make_log)
    assert log.log_end_offset == 18
    assert log.read(0, 1 << 30).read() == data[: positions(data)[-1]]


@pytest.mark.parametrize("victim", [0, 4, 9])
@pytest.mark.parametrize("where", ["payload", "crc", "length"])
def test_flipped_byte_truncates_at_that_batch(
    make_log: MakeLog, log_dir: Path, victim: int, where: str
) -> None:
    _, data = build_log(make_log)
    start = positions(data)[victim]
    offset_in_batch = {"payload": 70, "crc": 18, "length": 10}[where]
    with open(last_log_file(log_dir), "r+b") as f:
        f.seek(start + offset_in_batch)
        byte = f.read(1)
        f.seek(start + offset_in_batch)
        f.write(bytes([byte[0] ^ 0x10]))
    log = reopen(make_log)
    assert log.log_end_offset == 2 * victim
    assert log.read(0, 1 << 30).read() == data[:start] if victim else log.read(0, 1 << 30).size == 0
    assert last_log_file(log_dir).stat().st_size == start


def test_corruption_in_middle_segment_drops_later_segments(make_log: MakeLog, log_dir: Path) -> None:
    cfg = small_config(segment_bytes=500)
    log, data = build_log(make_log, batches=20, config=cfg)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 4
    middle = log_dir / f"{bases[1]:020d}.log"
    with open(middle, "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 1]))
    log = reopen(make_log, cfg)
    assert [s.base_offset for s in log.segments] == bases[:2]
    assert log.log_end_offset < bases[2]
    assert data.startswith(log.read(0, 1 << 30).read())


def test_recovery_starts_at_recovery_point(make_log: MakeLog, log_dir: Path) -> None:
    """Segments below the one holding the recovery point are trusted (not re-read)."""
    cfg = small_config(segment_bytes=500)
    log, data = build_log(make_log, batches=20, config=cfg)
    bases = [s.base_offset for s in log.segments]
    first = log_dir / f"{bases[0]:020d}.log"
    with open(first, "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 1]))
    log = reopen(make_log, cfg, recovery_point=bases[2])
    assert log.log_end_offset == 40  # nothing truncated: the flipped byte sits in a flushed segment
    log.close(take_snapshot=False)
    log = reopen(make_log, cfg, recovery_point=0)
    assert log.log_end_offset < bases[1]  # now it is found


@pytest.mark.parametrize("damage", ["delete", "garbage", "truncate-entry", "empty"])
def test_missing_or_corrupt_index_is_rebuilt(make_log: MakeLog, log_dir: Path, damage: str) -> None:
    cfg = small_config(segment_bytes=1 << 20, index_interval_bytes=50)
    log = make_log(cfg)
    for i in range(30):
        log.append_as_leader(batch(1, ts=1000 + i, value_size=30), 0)
    entries = log.active_segment.index.entries()
    time_entries = log.active_segment.time_index.entries()
    data = log.read(0, 1 << 30).read()
    log.close()
    assert len(entries) > 5
    index = log_dir / "00000000000000000000.index"
    if damage == "delete":
        index.unlink()
        (log_dir / "00000000000000000000.timeindex").unlink()
    elif damage == "garbage":
        index.write_bytes(os.urandom(len(entries) * 8))
    elif damage == "truncate-entry":
        os.truncate(index, len(entries) * 8 - 3)
    else:
        index.write_bytes(b"")
    log = reopen(make_log, cfg, clean_shutdown=True)
    assert log.active_segment.index.entries() == entries
    assert log.active_segment.time_index.entries()[: len(time_entries)] == time_entries
    assert log.read(0, 1 << 30).read() == data
    assert index.stat().st_size == len(entries) * 8
    for offset in range(30):
        assert batch_offsets(log.read(offset, 1).read())[0][0] == offset


def test_clean_shutdown_marker_skips_recovery(tmp_path: Path, clock: ManualClock) -> None:
    cfg = small_config(segment_bytes=1 << 20)
    manager = LogManager([tmp_path], cfg, clock)
    manager.load()
    log = manager.get_or_create_log("t", 0)
    for _ in range(5):
        log.append_as_leader(batch(2, value_size=30), 0)
    manager.shutdown()
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    segment = tmp_path / "t-0" / "00000000000000000000.log"
    with open(segment, "r+b") as f:  # a flipped payload byte keeps every header intact
        f.seek(80)
        byte = f.read(1)
        f.seek(80)
        f.write(bytes([byte[0] ^ 1]))

    manager = LogManager([tmp_path], cfg, clock)
    manager.load()
    assert not (tmp_path / ".kafka_cleanshutdown").exists()  # removed once loaded
    trusted = manager.get_log("t", 0)
    assert trusted is not None and trusted.log_end_offset == 10  # not re-validated
    manager.close()  # crash: no marker

    manager = LogManager([tmp_path], cfg, clock)
    manager.load()
    recovered = manager.get_log("t", 0)
    assert recovered is not None and recovered.log_end_offset == 0  # recovered: the first batch is corrupt
    manager.close()


def test_leader_epochs_of_the_unflushed_tail_come_from_its_batches(make_log: MakeLog, log_dir: Path) -> None:
    """The leader-epoch checkpoint is written without fsync (synced with the log's flush), so after a crash it may
    be gone or stale: recovery re-derives the epochs of the segments past the recovery point from their batches."""
    log = make_log(small_config(segment_bytes=1 << 20))
    for epoch in (0, 0, 3, 3, 7):
        log.append_as_leader(batch(2, value_size=30), epoch)
    assert log.leader_epoch_cache.entries == [(0, 0), (3, 4), (7, 8)]
    log.close(take_snapshot=False)
    (log_dir / "leader-epoch-checkpoint").write_text("0\n1\n9 100\n")  # a stale file from a later epoch
    again = reopen(make_log, recovery_point=0)
    assert again.leader_epoch_cache.entries == [(0, 0), (3, 4), (7, 8)]
    assert again.end_offset_for_epoch(3) == (3, 8)
    again.flush()  # syncs the rewritten checkpoint; a clean reopen trusts it
    again.close()
    assert reopen(make_log, clean_shutdown=True).leader_epoch_cache.entries == [(0, 0), (3, 4), (7, 8)]


def test_after_a_crash_only_segments_past_the_last_roll_flush_are_rescanned(tmp_path: Path,
                                                                            clock: ManualClock) -> None:
    """Rolled segments are flushed (the broker runs flush_logs on the rolled logs within a second), the recovery
    point checkpoint follows, and a restart without the clean-shutdown marker re-scans only the active segment."""
    manager = LogManager([tmp_path / "d"], small_config(segment_bytes=600), clock)
    manager.load()
    log = manager.get_or_create_log("t", 0)
    for _ in range(12):
        log.append_as_leader(batch(2, value_size=100), 0)
    segments = len(list((tmp_path / "d" / "t-0").glob("*.log")))
    assert segments >= 4 and log.recovery_point == 0
    assert LogManager.flush_logs(manager.take_rolled()) == 1 and manager.take_rolled() == []
    assert log.recovery_point == log.active_segment.base_offset > 0
    manager.checkpoint()
    manager.close()  # a crash: no clean-shutdown marker
    again = LogManager([tmp_path / "d"], small_config(segment_bytes=600), clock)
    again.load()
    assert again.load_stats.segments_recovered == 1
    assert again.load_stats.segments_trusted == segments - 1
    assert again.get_log("t", 0).log_end_offset == 24  # type: ignore[union-attr]
    again.close()


def test_leader_epoch_checkpoints_due_together_are_written_a_pass_at_a_time(
        tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first records in many new partitions change all their epochs at once: the flush task writes at most
    EPOCH_CHECKPOINTS_PER_PASS checkpoints per pass, the longest waiting first, and every one of them in the end
    (one pass wrote them all: 10,000 files per broker took both cores from the consumers of the next seconds)."""
    from moldau.storage import log_manager
    from moldau.storage.log_manager import EPOCH_CHECKPOINT_DELAY_MS

    per_pass = 4
    monkeypatch.setattr(log_manager, "EPOCH_CHECKPOINTS_PER_PASS", per_pass)
    manager = LogManager([tmp_path / "d"], small_config(), clock)
    manager.load()
    logs = [manager.get_or_create_log("t", i) for i in range(10)]
    for log in logs:
        log.leader_epoch_cache.assign(3, 0)
        clock.advance(1)
    clock.advance(EPOCH_CHECKPOINT_DELAY_MS)
    passes = [manager.take_rolled() for _ in range(4)]
    assert [len(p) for p in passes] == [per_pass, per_pass, 2, 0]
    assert [log for p in passes for log in p] == logs  # in the order of their change
    manager.shutdown()


def test_leader_epoch_checkpoints_are_written_by_the_flush_task(tmp_path: Path, clock: ManualClock) -> None:
    """A leader change does not write the checkpoint in-line: the log manager's flush task (flush_logs on the
    rolled and changed logs) writes it EPOCH_CHECKPOINT_DELAY_MS after the first change, or with the next flush
    of the log, whichever comes first; a clean close writes it too."""
    from moldau.storage.checkpoint import read_leader_epochs
    from moldau.storage.log_manager import EPOCH_CHECKPOINT_DELAY_MS

    manager = LogManager([tmp_path / "d"], small_config(segment_bytes=600), clock)
    manager.load()
    log = manager.get_or_create_log("t", 0)
    other = manager.get_or_create_log("t", 1)
    log.leader_epoch_cache.assign(4, 0)
    checkpoint = tmp_path / "d" / "t-0" / "leader-epoch-checkpoint"
    clock.advance(EPOCH_CHECKPOINT_DELAY_MS - 1)
    other.leader_epoch_cache.assign(4, 0)
    assert manager.take_rolled() == []  # not yet due
    clock.advance(1)
    assert LogManager.flush_logs(manager.take_rolled()) == 0  # nothing rolled, but t-0's epochs are written
    assert read_leader_epochs(checkpoint) == [(4, 0)]
    assert not (tmp_path / "d" / "t-1" / "leader-epoch-checkpoint").exists()
    # A roll flushes the log at once, and its epochs before the segments: the recovery point never passes an
    # epoch the file lacks.
    log.leader_epoch_cache.assign(5, 0)
    for _ in range(6):
        log.append_as_leader(batch(2, value_size=100), 5)
    assert LogManager.flush_logs(manager.take_rolled()) == 1 and log.recovery_point > 0
    assert read_leader_epochs(checkpoint) == [(5, 0)]
    log.leader_epoch_cache.assign(6, log.log_end_offset)
    manager.shutdown()
    assert read_leader_epochs(checkpoint) == [(5, 0), (6, log.log_end_offset)]
    assert read_leader_epochs(tmp_path / "d" / "t-1" / "leader-epoch-checkpoint") == [(4, 0)]
