"""The remote storage manager contract on the filesystem backend, with segments of a real Log."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from moldau.storage import Log
from moldau.storage.checkpoint import read_leader_epochs
from moldau.storage.remote.api import (
    IndexType,
    RemoteResourceNotFoundError,
    RemoteStorageManager,
    load_remote_storage_manager,
    rsm_configs,
)
from moldau.storage.remote.filesystem import FileSystemRemoteStorageManager
from moldau.storage.remote.segments import segment_data, segment_leader_epochs, segment_metadata
from tests.unit.storage.conftest import batch, small_config

MakeLog = Callable[..., Log]


def rolled_log(make_log: MakeLog) -> Log:
    log = make_log(small_config(segment_bytes=700))
    for i in range(20):
        log.append_as_leader(batch(2, ts=1000 + i, value_size=50), 0 if i < 8 else 3)
    assert len(log.segments) >= 3
    return log


def test_copy_fetch_and_delete_round_trip(make_log: MakeLog, tmp_path: Path) -> None:
    log = rolled_log(make_log)
    rsm = FileSystemRemoteStorageManager()
    rsm.configure({"dir": str(tmp_path / "remote")})
    seg = log.segments[1]
    meta = segment_metadata(log, seg, broker_id=1, now_ms=5)
    assert meta.start_offset == seg.base_offset and meta.end_offset == seg.next_offset - 1
    rsm.copy_log_segment_data(meta, segment_data(log, seg))
    local = seg.log_path.read_bytes()
    assert rsm.fetch_log_segment(meta, 0) == local
    assert rsm.fetch_log_segment(meta, 10, 19) == local[10:20]  # end position inclusive, as Kafka's
    assert rsm.fetch_index(meta, IndexType.OFFSET) == seg.index.path.read_bytes()
    assert rsm.fetch_index(meta, IndexType.TIMESTAMP) == seg.time_index.path.read_bytes()
    snapshot = log.producer_state.snapshot_path(seg.next_offset)
    assert rsm.fetch_index(meta, IndexType.PRODUCER_SNAPSHOT) == snapshot.read_bytes()
    assert rsm.fetch_index(meta, IndexType.TRANSACTION) == b""
    epochs_file = tmp_path / "epochs"
    epochs_file.write_bytes(rsm.fetch_index(meta, IndexType.LEADER_EPOCH))
    assert read_leader_epochs(epochs_file) == [e for e in log.leader_epoch_cache.entries if e[1] < seg.next_offset]
    # A retried copy of the same attempt overwrites; a delete is idempotent and leaves nothing behind.
    rsm.copy_log_segment_data(meta, segment_data(log, seg))
    rsm.delete_log_segment_data(meta)
    rsm.delete_log_segment_data(meta)
    assert not [p for p in (tmp_path / "remote").rglob("*") if p.is_file()]
    with pytest.raises(RemoteResourceNotFoundError):
        rsm.fetch_log_segment(meta, 0)
    with pytest.raises(RemoteResourceNotFoundError):
        rsm.fetch_index(meta, IndexType.OFFSET)


def test_each_copy_attempt_has_its_own_objects(make_log: MakeLog, tmp_path: Path) -> None:
    log = rolled_log(make_log)
    rsm = FileSystemRemoteStorageManager(tmp_path / "remote")
    rsm.configure({})
    seg = log.segments[0]
    first, second = (segment_metadata(log, seg, 1, 0) for _ in range(2))
    assert first.segment_id != second.segment_id
    rsm.copy_log_segment_data(first, segment_data(log, seg))
    rsm.copy_log_segment_data(second, segment_data(log, seg))
    rsm.delete_log_segment_data(first)  # cleaning up a dead attempt leaves the good copy intact
    assert rsm.fetch_log_segment(second, 0) == seg.log_path.read_bytes()


def test_segment_leader_epochs() -> None:
    entries = [(0, 0), (3, 16), (5, 40)]
    assert segment_leader_epochs(entries, 0, 15) == ((0, 0),)
    assert segment_leader_epochs(entries, 10, 30) == ((0, 10), (3, 16))
    assert segment_leader_epochs(entries, 16, 60) == ((3, 16), (5, 40))
    assert segment_leader_epochs(entries, 45, 50) == ((5, 45),)


def test_loading_by_entry_point_and_dotted_path(tmp_path: Path) -> None:
    by_name = load_remote_storage_manager("filesystem", {"dir": str(tmp_path / "a")})
    assert isinstance(by_name, FileSystemRemoteStorageManager) and isinstance(by_name, RemoteStorageManager)
    dotted = "moldau.storage.remote.filesystem.FileSystemRemoteStorageManager"
    by_path = load_remote_storage_manager(dotted, {"dir": str(tmp_path / "b")})
    assert isinstance(by_path, FileSystemRemoteStorageManager) and (tmp_path / "b").is_dir()
    by_colon = load_remote_storage_manager(dotted.replace(".FileSystem", ":FileSystem"), {"dir": str(tmp_path)})
    assert isinstance(by_colon, FileSystemRemoteStorageManager)
    with pytest.raises(ValueError, match="neither a registered"):
        load_remote_storage_manager("nosuch", {})
    with pytest.raises(ValueError, match="cannot load"):
        load_remote_storage_manager("moldau.storage.remote.filesystem.Nope", {})
    with pytest.raises(ValueError, match="does not implement"):
        load_remote_storage_manager("pathlib.PurePath", {})
    with pytest.raises(ValueError, match="rsm.config.dir"):
        load_remote_storage_manager("filesystem", {})


def test_rsm_configs_strip_the_prefix() -> None:
    assert rsm_configs({"rsm.config.dir": "/x", "log.dirs": "/y", "rsm.config.s3.bucket": "b"}) == {
        "dir": "/x", "s3.bucket": "b"}
