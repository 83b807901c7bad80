from __future__ import annotations

from pathlib import Path

import pytest

from moldau.storage import LogManager
from moldau.storage.checkpoint import read_offsets
from moldau.storage.config import ManualClock
from moldau.storage.errors import LogDirLockedError, StorageError
from tests.unit.storage.conftest import batch, small_config


def test_placement_goes_to_dir_with_fewest_partitions(tmp_path: Path, clock: ManualClock) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2", tmp_path / "d3"]
    manager = LogManager(dirs, small_config(), clock)
    manager.load()
    placed = [manager.get_or_create_log("t", p).dir.parent for p in range(6)]
    assert placed == dirs + dirs
    assert manager.partition_counts() == {d: 2 for d in dirs}
    assert manager.get_or_create_log("t", 0).dir.parent == dirs[0]  # existing log returned as is
    manager.delete_log("t", 1)
    assert manager.get_or_create_log("u", 0).dir.parent == dirs[1]
    manager.shutdown()


def test_load_finds_logs_and_removes_deleted_dirs(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager([tmp_path], small_config(), clock)
    manager.load()
    for topic, partition in [("a-b.c", 0), ("a-b.c", 11), ("x", 3)]:
        manager.get_or_create_log(topic, partition).append_as_leader(batch(2), 0)
    manager.shutdown()
    (tmp_path / "old-0.0123abcd-delete").mkdir()
    (tmp_path / "old-0.0123abcd-delete" / "00000000000000000000.log").write_bytes(b"x")
    (tmp_path / "not a partition").mkdir()

    manager = LogManager([tmp_path], small_config(), clock)
    manager.load()
    assert sorted((lg.topic, lg.partition) for lg in manager.all_logs()) == [
        ("a-b.c", 0),
        ("a-b.c", 11),
        ("x", 3),
    ]
    assert all(lg.log_end_offset == 2 for lg in manager.all_logs())
    assert not (tmp_path / "old-0.0123abcd-delete").exists()
    manager.close()


def test_delete_log_removes_directory(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager([tmp_path], small_config(), clock)
    manager.load()
    manager.get_or_create_log("t", 0).append_as_leader(batch(1), 0)
    assert manager.delete_log("t", 0)
    assert not manager.delete_log("t", 0)
    assert manager.get_log("t", 0) is None
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == []
    manager.checkpoint()
    assert read_offsets(tmp_path / "recovery-point-offset-checkpoint") == {}
    manager.close()


def test_checkpoints_and_recovery_point(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager([tmp_path], small_config(segment_bytes=300), clock)
    manager.load()
    log = manager.get_or_create_log("t", 0)
    for _ in range(10):
        log.append_as_leader(batch(1, value_size=50), 0)
    assert log.recovery_point == 0
    assert manager.flush_due(clock.now) == 1  # flushes the segments finished by rolls
    assert 0 < log.recovery_point == log.active_segment.base_offset
    manager.checkpoint()
    assert read_offsets(tmp_path / "recovery-point-offset-checkpoint") == {("t", 0): log.recovery_point}
    assert read_offsets(tmp_path / "log-start-offset-checkpoint") == {("t", 0): 0}
    manager.write_high_watermarks({("t", 0): 7, ("elsewhere", 0): 1})
    assert manager.read_high_watermarks() == {("t", 0): 7}
    manager.shutdown()
    assert read_offsets(tmp_path / "recovery-point-offset-checkpoint") == {("t", 0): 10}


def test_an_older_high_watermark_snapshot_never_overwrites_a_newer_one(tmp_path: Path, clock: ManualClock) -> None:
    """The periodic checkpoint is written on a worker thread: a snapshot taken before another write but written
    after it (the shutdown's checkpoint overtook it) is dropped, so the file keeps the newest one."""
    manager = LogManager([tmp_path], small_config(), clock)
    manager.load()
    manager.get_or_create_log("t", 0)
    older = manager.offset_files_writer(manager.high_watermark_files({("t", 0): 3}))
    manager.write_high_watermarks({("t", 0): 5})
    older()
    assert manager.read_high_watermarks() == {("t", 0): 5}
    newer = manager.offset_files_writer(manager.high_watermark_files({("t", 0): 8}))
    newer()
    assert manager.read_high_watermarks() == {("t", 0): 8}
    manager.shutdown()


def test_flush_interval_policies(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager([tmp_path], small_config(flush_interval_messages=3, flush_interval_ms=1000), clock)
    manager.load()
    log = manager.get_or_create_log("t", 0)
    log.append_as_leader(batch(2), 0)
    assert log.recovery_point == 0
    log.append_as_leader(batch(1), 0)  # 3 unflushed messages: flushed inline
    assert log.recovery_point == 3
    log.append_as_leader(batch(1), 0)
    assert manager.flush_due(clock.now + 999) == 0
    assert manager.flush_due(clock.now + 1000) == 1
    assert log.recovery_point == 4
    manager.shutdown()


def test_cleanup_runs_retention(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager([tmp_path], small_config(segment_bytes=300, retention_ms=1000), clock)
    manager.load()
    log = manager.get_or_create_log("t", 0)
    for _ in range(10):
        log.append_as_leader(batch(1, ts=clock.now, value_size=50), 0)
    assert manager.cleanup(clock.now) == 0
    clock.advance(1001)
    segments_before = len(log.segments)
    assert segments_before > 2
    assert manager.cleanup() == segments_before - 1
    assert len(log.segments) == 1
    manager.shutdown()
    manager = LogManager([tmp_path], small_config(), clock)
    manager.load()
    reopened = manager.get_log("t", 0)
    assert reopened is not None and reopened.log_start_offset == reopened.segments[0].base_offset > 0
    manager.close()


def test_log_dir_lock(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager([tmp_path], small_config(), clock)
    with pytest.raises(LogDirLockedError):
        LogManager([tmp_path], small_config(), clock)
    manager.close()
    LogManager([tmp_path], small_config(), clock).close()


def test_illegal_names(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager([tmp_path], small_config(), clock)
    for topic in ("", "a/b", "..", "sp ace"):
        with pytest.raises(ValueError):
            manager.get_or_create_log(topic, 0)
    with pytest.raises(ValueError):
        manager.get_or_create_log("ok", -1)
    manager.close()


def test_an_offline_log_dir_gets_no_new_logs_and_no_checkpoints(tmp_path: Path, clock: ManualClock) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, small_config(), clock)
    manager.load()
    manager.get_or_create_log("t", 0)  # -> a
    manager.get_or_create_log("t", 1)  # -> b
    assert manager.mark_dir_offline(dirs[1]) == [("t", 1)]
    assert manager.mark_dir_offline(dirs[1]) == []  # once
    assert manager.get_log("t", 1) is None and manager.online_dirs == [dirs[0]]
    # New logs go to the surviving dir even though it holds more partitions.
    assert manager.get_or_create_log("t", 2).dir.parent == dirs[0]
    (dirs[1] / "recovery-point-offset-checkpoint").unlink(missing_ok=True)
    manager.checkpoint()
    manager.shutdown()
    assert not (dirs[1] / "recovery-point-offset-checkpoint").exists()
    assert not (dirs[1] / ".kafka_cleanshutdown").exists()  # it must be recovered at the next start
    assert (dirs[0] / ".kafka_cleanshutdown").exists()


def test_with_every_log_dir_offline_no_log_can_be_created(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager([tmp_path / "a"], small_config(), clock)
    manager.load()
    manager.mark_dir_offline(tmp_path / "a")
    with pytest.raises(StorageError, match="offline"):
        manager.get_or_create_log("t", 0)


def test_a_new_log_dir_is_not_called_unclean(tmp_path: Path, clock: ManualClock,
                                            caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="moldau.storage.log_manager"):
        manager = LogManager([tmp_path / "new"], small_config(), clock)
        manager.load()
        manager.get_or_create_log("t", 0).append_as_leader(batch(1), 0)
        manager.shutdown()
        manager = LogManager([tmp_path / "new"], small_config(), clock)
        manager.load()
        manager.shutdown()
    loaded = [r.getMessage() for r in caplog.records if r.getMessage().startswith("loaded")]
    assert loaded == [f"loaded {tmp_path / 'new'} (new log dir)", f"loaded {tmp_path / 'new'} (clean shutdown)"]
    assert "unclean" not in caplog.text


def test_a_partition_holds_one_descriptor(tmp_path: Path, clock: ManualClock) -> None:
    """One open file per segment (its .log): index files are opened only to write entries out, so 10,000
    partitions fit under a 20,000 descriptor limit."""
    import os

    manager = LogManager([tmp_path / "d"], small_config(index_interval_bytes=1), clock)
    manager.load()
    before = len(os.listdir("/proc/self/fd"))
    for p in range(40):
        manager.get_or_create_log("t", p).append_as_leader(batch(3), 0)  # index entries on every batch
    assert len(os.listdir("/proc/self/fd")) - before <= 40
    manager.shutdown()


def test_logs_load_on_recovery_threads(tmp_path: Path, clock: ManualClock) -> None:
    """num.recovery.threads.per.data.dir: the logs of a dir open on that many threads, with the same outcome."""
    manager = LogManager([tmp_path / "d"], small_config(), clock)
    manager.load()
    for p in range(12):
        manager.get_or_create_log("t", p).append_as_leader(batch(p + 1), 0)
    manager.close()  # a crash: every log is recovered
    threaded = LogManager([tmp_path / "d"], small_config(), clock, recovery_threads=4)
    threaded.load()
    assert {p: threaded.get_log("t", p).log_end_offset for p in range(12)} == {p: p + 1 for p in range(12)}  # type: ignore[union-attr]
    assert threaded.load_stats.logs == 12 and threaded.load_stats.segments_recovered == 12
    assert threaded.partition_counts() == {tmp_path / "d": 12}
    threaded.shutdown()


def _count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts os.fsync calls from here on (each still runs)."""
    import os

    calls: list[int] = []
    real = os.fsync

    def counted(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counted)
    return calls


def test_a_clean_shutdown_syncs_per_dir_not_per_partition(tmp_path: Path, clock: ManualClock,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Closing many logs costs a few fsyncs in all (one file-system sync per dir), not several per partition:
    2,000 idle partitions took 21 s to shut down with an fsync of each index, snapshot, epoch file and dir."""
    manager = LogManager([tmp_path / "d"], small_config(index_interval_bytes=1), clock)
    manager.load()
    for p in range(60):
        log = manager.get_or_create_log("t", p)
        if p % 2:
            log.append_as_leader(batch(3, producer_id=7 + p, producer_epoch=0, base_sequence=0), 0)
    fsyncs = _count_fsyncs(monkeypatch)
    manager.shutdown()
    assert len(fsyncs) <= 8, len(fsyncs)  # checkpoints and the clean-shutdown marker
    monkeypatch.undo()
    assert read_offsets(tmp_path / "d" / "recovery-point-offset-checkpoint") == {
        ("t", p): 3 if p % 2 else 0 for p in range(60)}
    # A producer snapshot only where there is producer state: none for the empty logs.
    snapshots = {p for p in range(60) if list((tmp_path / "d" / f"t-{p}").glob("*.snapshot"))}
    assert snapshots == {p for p in range(60) if p % 2}
    reopened = LogManager([tmp_path / "d"], small_config(index_interval_bytes=1), clock)
    reopened.load()
    assert reopened.load_stats.segments_recovered == 0  # clean: nothing rescanned
    for p in range(60):
        log = reopened.get_log("t", p)
        assert log is not None and log.log_end_offset == (3 if p % 2 else 0)
        entry = log.producer_state.last_entry(7 + p)
        assert (entry is not None and entry.last_seq == 2) == bool(p % 2)
    reopened.shutdown()


def test_a_failed_file_system_sync_leaves_the_dir_to_recovery(tmp_path: Path, clock: ManualClock,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """If the sync fails, nothing claims the data durable: the recovery points stay where they were and no
    clean-shutdown marker is written, so the next start recovers the logs (and loses nothing written)."""
    import moldau.storage.log_manager as lm

    manager = LogManager([tmp_path / "d"], small_config(), clock)
    manager.load()
    for p in range(3):
        manager.get_or_create_log("t", p).append_as_leader(batch(p + 1), 0)

    def failing(path: Path) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(lm, "sync_filesystem", failing)
    manager.shutdown()
    monkeypatch.undo()
    assert not (tmp_path / "d" / ".kafka_cleanshutdown").exists()
    assert read_offsets(tmp_path / "d" / "recovery-point-offset-checkpoint") == {("t", p): 0 for p in range(3)}
    reopened = LogManager([tmp_path / "d"], small_config(), clock)
    reopened.load()
    assert reopened.load_stats.segments_recovered == 3
    assert {p: reopened.get_log("t", p).log_end_offset for p in range(3)} == {0: 1, 1: 2, 2: 3}  # type: ignore[union-attr]
    reopened.shutdown()


def test_a_clean_shutdown_logs_where_its_time_went(tmp_path: Path, clock: ManualClock,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    """One line names how many logs and dirs were closed and how long each part took (the exit watchdog ends a
    shutdown that runs too long: an operator needs to see which part did)."""
    manager = LogManager([tmp_path / "a", tmp_path / "b"], small_config(), clock)
    manager.load()
    for p in range(3):
        manager.get_or_create_log("t", p).append_as_leader(batch(2), 0)
    with caplog.at_level("INFO", logger="moldau.storage.log_manager"):
        manager.shutdown()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("clean shutdown of")]
    assert len(lines) == 1, caplog.text
    assert lines[0].startswith("clean shutdown of 3 logs in 2 dirs: ")
    for part in ("closing the logs", "syncing", "checkpoints and markers"):
        assert f"{part} " in lines[0]
