"""A tiered Log (remote.storage.enable): local retention only of copied segments, the log start offset kept below
the local segments (also across a restart), reads below the local start refused as OFFSET_MOVED_TO_TIERED."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from moldau.protocol.errors import ErrorCode
from moldau.storage import Log
from moldau.storage.errors import OffsetMovedToTieredStorageError, OffsetOutOfRangeError
from moldau.storage.log import EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP
from tests.unit.storage.conftest import batch, small_config

MakeLog = Callable[..., Log]


def test_local_retention_deletes_only_copied_segments(make_log: MakeLog) -> None:
    log = make_log(small_config(segment_bytes=600, remote_storage_enable=True, local_retention_bytes=0,
                                retention_bytes=-1))
    for _ in range(20):
        log.append_as_leader(batch(1, value_size=100), 0)
    segs = log.segments
    assert len(segs) >= 4
    assert log.delete_expired_segments(0) == 0  # nothing copied yet
    log.remote_copied_offset = segs[1].next_offset - 1
    assert log.delete_expired_segments(0) == 2
    assert log.log_start_offset == 0 and log.local_log_start_offset == segs[2].base_offset
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP) == (0, -1)
    assert log.offset_for_timestamp(EARLIEST_LOCAL_TIMESTAMP) == (segs[2].base_offset, -1)
    with pytest.raises(OffsetMovedToTieredStorageError) as info:
        log.read(1, 1000)
    assert info.value.error_code == ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE
    assert log.read(segs[2].base_offset, 1000).size > 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(log.log_end_offset + 1, 1000)


def test_a_reloaded_tiered_log_keeps_its_remote_log_start(make_log: MakeLog, log_dir: object) -> None:
    cfg = small_config(segment_bytes=600, remote_storage_enable=True, local_retention_bytes=0)
    log = make_log(cfg)
    for _ in range(20):
        log.append_as_leader(batch(1, value_size=100), 0)
    log.remote_copied_offset = log.segments[1].next_offset - 1
    log.delete_expired_segments(0)
    local_start = log.local_log_start_offset
    log.close()
    again = make_log(cfg, log_start_offset=0, recovery_point=log.log_end_offset, clean_shutdown=True)
    assert again.log_start_offset == 0 and again.local_log_start_offset == local_start
    untiered = make_log(small_config(segment_bytes=600), log_start_offset=0)
    assert untiered.log_start_offset == local_start  # an untiered log starts at its first segment


def test_a_tiered_log_loaded_before_its_settings_gets_its_log_start_back(make_log: MakeLog) -> None:
    """A broker loads its logs before it reads the topics' settings (ZooKeeper, LeaderAndIsr): loaded with the
    default (untiered) settings, the log start is raised to the first local segment; once the settings say
    tiered it goes back to the checkpointed start. Kept raised, a new leader deleted the remote segments below it
    as if DeleteRecords had removed them (moldau-verify --tiered lost 1465 acknowledged records that way)."""
    tiered = small_config(segment_bytes=600, remote_storage_enable=True, local_retention_bytes=0)
    log = make_log(tiered)
    for _ in range(20):
        log.append_as_leader(batch(1, value_size=100), 0)
    log.remote_copied_offset = log.segments[1].next_offset - 1
    log.delete_expired_segments(0)
    local_start = log.local_log_start_offset
    assert local_start > 0
    log.close()
    loaded = make_log(small_config(segment_bytes=600), log_start_offset=0, recovery_point=log.log_end_offset,
                      clean_shutdown=True)
    assert loaded.log_start_offset == local_start  # not known to be tiered yet
    loaded.config = tiered
    assert loaded.log_start_offset == 0 and loaded.local_log_start_offset == local_start
    loaded.config = small_config(segment_bytes=600)  # later settings change nothing more
    assert loaded.log_start_offset == 0
    loaded.close()
    untiered = make_log(small_config(segment_bytes=600), log_start_offset=0)
    untiered.config = small_config(segment_bytes=600, retention_ms=1000)
    assert untiered.log_start_offset == local_start  # an untiered log keeps starting at its first segment
