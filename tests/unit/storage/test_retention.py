from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from moldau.storage import Log
from moldau.storage.config import ManualClock
from moldau.storage.errors import OffsetOutOfRangeError
from tests.unit.storage.conftest import batch, small_config

MakeLog = Callable[..., Log]
HOUR = 3_600_000


def fill(log: Log, n: int, ts: int, value_size: int = 100) -> None:
    for _ in range(n):
        log.append_as_leader(batch(1, ts=ts, value_size=value_size), 0)


def test_retention_by_time_keeps_active_segment(make_log: MakeLog, clock: ManualClock, log_dir: Path) -> None:
    log = make_log(small_config(segment_bytes=600, retention_ms=HOUR))
    old = clock.now - 2 * HOUR
    fill(log, 12, ts=old)
    assert len(log.segments) >= 3
    active = log.active_segment
    # Everything is expired, yet the active segment stays.
    deleted = log.delete_expired_segments(clock.now)
    assert deleted >= 2
    assert log.segments == [active]
    assert log.log_start_offset == active.base_offset
    assert log.log_end_offset == 12
    assert sorted(p.name for p in log_dir.glob("*.log")) == [f"{active.base_offset:020d}.log"]
    assert not list(log_dir.glob("*.deleted"))
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 1000)
    assert log.read(active.base_offset, 1 << 20).size == active.size
    assert log.delete_expired_segments(clock.now) == 0


def test_retention_by_time_stops_at_first_young_segment(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log(small_config(segment_bytes=600, retention_ms=HOUR))
    fill(log, 5, ts=clock.now - 2 * HOUR)
    log.roll()
    fill(log, 5, ts=clock.now - 10)
    log.roll()
    fill(log, 5, ts=clock.now - 2 * HOUR)  # old timestamps after a young segment
    log.roll()
    young_base = log.segments[[s.max_timestamp for s in log.segments].index(clock.now - 10)].base_offset
    log.delete_expired_segments(clock.now)
    assert log.segments[0].base_offset == young_base
    assert log.log_start_offset == young_base


def test_retention_by_size(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log(small_config(segment_bytes=600, retention_ms=-1, retention_bytes=1500))
    fill(log, 20, ts=clock.now)
    sizes = [s.size for s in log.segments]
    log.delete_expired_segments(clock.now)
    assert log.size <= 1500 + sizes[0]
    assert log.size > 1500 - max(sizes)  # deleted only what was needed
    # A limit smaller than the active segment still keeps the active segment.
    log.config.retention_bytes = 0
    log.delete_expired_segments(clock.now)
    assert len(log.segments) == 1 and log.active_segment.size > 0


def test_retention_respects_high_watermark(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log(small_config(segment_bytes=600, retention_ms=0))
    fill(log, 12, ts=0)
    log.high_watermark = log.segments[1].base_offset
    log.delete_expired_segments(clock.now)
    # Only the segment whose successor starts at or below the high watermark may go.
    assert log.segments[0].base_offset == log.high_watermark


def test_delete_records_then_segments(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log(small_config(segment_bytes=600, retention_ms=-1))
    fill(log, 12, ts=clock.now)
    second = log.segments[1].base_offset
    assert log.maybe_increment_log_start_offset(second + 1)
    assert log.log_start_offset == second + 1
    with pytest.raises(OffsetOutOfRangeError):
        log.read(second, 100)
    assert log.delete_expired_segments(clock.now) == 1  # the first segment lies wholly below the start
    assert log.log_start_offset == second + 1
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(log.log_end_offset + 1)


def test_file_delete_delay(make_log: MakeLog, clock: ManualClock, log_dir: Path) -> None:
    log = make_log(small_config(segment_bytes=600, retention_ms=0, file_delete_delay_ms=60_000))
    fill(log, 12, ts=0)
    region = log.read(0, 100)
    assert log.delete_expired_segments(clock.now) >= 2
    renamed = list(log_dir.glob("*.log.deleted"))
    assert renamed
    assert region.regions[0].read()  # an in-flight region still reads from the renamed file
    assert log.delete_pending_segments(clock.now + 59_999) == 0
    assert log.delete_pending_segments(clock.now + 60_000) == len(renamed)
    assert not list(log_dir.glob("*.deleted"))
