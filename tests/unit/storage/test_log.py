from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from moldau.protocol.records import build_batch, iter_headers, iter_records, read_header, update_crc
from moldau.storage import Log
from moldau.storage.config import ManualClock
from moldau.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from moldau.storage.log import parse_topic_partition
from tests.unit.storage.conftest import batch, batch_offsets, small_config

MakeLog = Callable[..., Log]


def test_parse_topic_partition() -> None:
    assert parse_topic_partition("my.topic-name-12") == ("my.topic-name", 12)
    assert parse_topic_partition("a-0") == ("a", 0)
    for bad in ("nodash", "-3", "topic-", "topic-x"):
        with pytest.raises(ValueError):
            parse_topic_partition(bad)


def test_append_assigns_offsets_and_epoch(make_log: MakeLog) -> None:
    log = make_log()
    assert (log.topic, log.partition) == ("my.topic-name", 0)
    assert log.log_end_offset == 0
    info = log.append_as_leader(batch(3, ts=500), leader_epoch=7)
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 2, 3)
    assert info.max_timestamp == 500 and info.log_append_time == -1
    info = log.append_as_leader(batch(2) + batch(4), leader_epoch=7)
    assert (info.first_offset, info.last_offset, info.record_count) == (3, 8, 6)
    assert log.log_end_offset == 9
    data = log.read(0, 1 << 20).read()
    assert batch_offsets(data) == [(0, 2), (3, 4), (5, 8)]
    assert {h.partition_leader_epoch for _, h in iter_headers(data)} == {7}
    assert [
        r.offset for _, h in iter_headers(data) for r in iter_records(data[_ : _ + h.total_size])
    ] == list(range(9))
    assert log.leader_epoch_cache.entries == [(7, 0)]
    log.append_as_leader(batch(1), leader_epoch=9)
    assert log.leader_epoch_cache.entries == [(7, 0), (9, 9)]


def test_log_append_time(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log(small_config(message_timestamp_type="LogAppendTime"))
    info = log.append_as_leader(batch(2, ts=5), leader_epoch=0)
    assert info.log_append_time == clock.now
    assert info.max_timestamp == clock.now
    data = log.read(0, 1 << 20).read()
    h = read_header(data)
    assert h.timestamp_type == 1 and h.max_timestamp == clock.now
    assert [r.timestamp for r in iter_records(data)] == [clock.now, clock.now]  # CRC was recomputed


def test_validation_rejects_the_whole_request(make_log: MakeLog) -> None:
    log = make_log(small_config(max_message_bytes=500))
    good = batch(1)
    corrupt = bytearray(batch(1))
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError) as exc:
        log.append_as_leader(good + bytes(corrupt), 0)
    assert exc.value.error_code.name == "CORRUPT_MESSAGE"
    with pytest.raises(RecordTooLargeError) as too_large:
        log.append_as_leader(good + batch(1, value_size=600), 0)
    assert too_large.value.error_code.name == "MESSAGE_TOO_LARGE"
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(good + good[:30], 0)  # torn trailing batch
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(b"", 0)
    control = build_batch([(b"\x00\x00\x00\x00", b"", None, 1)], is_control=True)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(control, 0)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(batch(1, producer_id=5, producer_epoch=0, base_sequence=-1), 0)
    assert log.log_end_offset == 0 and log.size == 0


def test_legacy_magic_is_flagged(make_log: MakeLog) -> None:
    log = make_log()
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    builder.append(0, timestamp=1, key=None, value=b"old")
    with pytest.raises(InvalidRecordError) as exc:
        log.append_as_leader(bytes(builder.build()), 0)
    assert exc.value.legacy
    assert exc.value.error_code.name == "UNSUPPORTED_FOR_MESSAGE_FORMAT"
    bad_magic = bytearray(batch(1))
    bad_magic[16] = 3
    with pytest.raises(InvalidRecordError) as exc2:
        log.append_as_leader(bytes(bad_magic), 0)
    assert not exc2.value.legacy
    assert exc2.value.error_code.name == "INVALID_RECORD"


def test_read_across_rolls(make_log: MakeLog, log_dir: Path) -> None:
    log = make_log(small_config(segment_bytes=1000))
    for _ in range(40):
        log.append_as_leader(batch(2, value_size=40), 0)
    assert len(log.segments) > 3
    names = sorted(p.name for p in log_dir.glob("*.log"))
    assert names == [f"{s.base_offset:020d}.log" for s in log.segments]
    everything = log.read(0, 1 << 20)
    assert len(everything.regions) == len(log.segments)
    assert batch_offsets(everything.read()) == [(i, i + 1) for i in range(0, 80, 2)]
    for start in range(80):
        data = log.read(start, 300).read()
        offsets = batch_offsets(data)
        assert offsets[0][0] <= start <= offsets[0][1]
        assert len(data) <= 300
        # contiguous
        assert all(b == a[1] + 1 for a, (b, _) in zip(offsets, offsets[1:]))


def test_read_bounds(make_log: MakeLog) -> None:
    log = make_log()
    for _ in range(5):
        log.append_as_leader(batch(2), 0)
    assert log.read(10, 100).size == 0  # LEO
    with pytest.raises(OffsetOutOfRangeError) as exc:
        log.read(11, 100)
    assert exc.value.error_code.name == "OFFSET_OUT_OF_RANGE"
    size = len(batch(2))
    assert log.read(0, size - 1).size == size  # min_one
    assert log.read(0, size - 1, min_one=False).size == 0
    assert batch_offsets(log.read(0, 1 << 20, max_offset=6).read()) == [(0, 1), (2, 3), (4, 5)]
    assert log.read(6, 1 << 20, max_offset=6).size == 0


def test_max_offset_stops_across_segments(make_log: MakeLog) -> None:
    log = make_log(small_config(segment_bytes=300))
    for _ in range(10):
        log.append_as_leader(batch(1, value_size=50), 0)
    assert len(log.segments) >= 4
    assert batch_offsets(log.read(1, 1 << 20, max_offset=7).read()) == [(i, i) for i in range(1, 7)]


def test_time_based_roll(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log(small_config(segment_bytes=1 << 20, segment_ms=1000))
    log.append_as_leader(batch(1, ts=10_000), 0)
    log.append_as_leader(batch(1, ts=11_000), 0)  # exactly segment.ms later: no roll
    assert len(log.segments) == 1
    log.append_as_leader(batch(1, ts=11_001), 0)
    assert [s.base_offset for s in log.segments] == [0, 2]
    # Without timestamps the segment's creation time counts.
    log2_cfg = small_config(segment_bytes=1 << 20, segment_ms=1000)
    log.config = log2_cfg
    log.roll()
    log.append_as_leader(batch(1, ts=-1), 0)
    clock.advance(1001)
    log.append_as_leader(batch(1, ts=-1), 0)
    assert [s.base_offset for s in log.segments] == [0, 2, 3, 4]


def test_offset_for_timestamp(make_log: MakeLog) -> None:
    log = make_log(small_config(segment_bytes=400, index_interval_bytes=0))
    # Batches of 3 records, timestamps 1000+10*i .. +2
    for i in range(20):
        log.append_as_leader(batch(3, ts=1000 + 10 * i, ts_step=1), 0)
    assert len(log.segments) > 2
    assert log.offset_for_timestamp(-2) == (0, -1)
    assert log.offset_for_timestamp(-1) == (60, -1)
    assert log.offset_for_timestamp(-3) == (59, 1192)
    assert log.offset_for_timestamp(0) == (0, 1000)
    assert log.offset_for_timestamp(1001) == (1, 1001)  # inside a batch: the exact record
    assert log.offset_for_timestamp(1003) == (3, 1010)
    assert log.offset_for_timestamp(1100) == (30, 1100)
    assert log.offset_for_timestamp(1192) == (59, 1192)
    assert log.offset_for_timestamp(1193) is None


def test_offset_for_timestamp_non_monotonic(make_log: MakeLog) -> None:
    log = make_log(small_config(index_interval_bytes=0))
    for ts in (100, 500, 200, 600, 300):
        log.append_as_leader(batch(1, ts=ts), 0)
    assert log.offset_for_timestamp(150) == (1, 500)
    assert log.offset_for_timestamp(550) == (3, 600)
    assert log.offset_for_timestamp(-3) == (3, 600)


def test_follower_append_keeps_offsets(make_log: MakeLog, tmp_path: Path, clock: ManualClock) -> None:
    leader = Log(tmp_path / "t-0", small_config(), clock)
    for epoch in (1, 1, 2):
        leader.append_as_leader(batch(3), epoch)
    data = leader.read(0, 1 << 20).read()
    follower = make_log()
    info = follower.append_as_follower(data[:-5])  # trailing partial batch ignored
    assert (info.first_offset, info.last_offset) == (0, 5)
    assert follower.log_end_offset == 6
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(data[:20] + data[20:])  # offsets 0.. again
    info = follower.append_as_follower(data[len(data) - len(batch(3)) :])
    assert follower.log_end_offset == 9
    assert follower.read(0, 1 << 20).read() == data
    assert follower.leader_epoch_cache.entries == [(1, 0), (2, 6)]
    assert follower.leader_epoch_cache.end_offset_for(1, follower.log_end_offset) == (1, 6)
    assert follower.leader_epoch_cache.end_offset_for(2, follower.log_end_offset) == (2, 9)
    leader.close()


def test_batches_failing_a_check_are_refused(make_log: MakeLog, tmp_path: Path, clock: ManualClock) -> None:
    """The header checks both append paths run per batch: a follower refuses a batch whose CRC32C fails (after a
    good one: nothing is appended) or whose magic is not 2; a leader refuses a transactional batch without a
    producer id and a count that does not match the offset range."""
    leader = Log(tmp_path / "t-0", small_config(), clock)
    leader.append_as_leader(batch(2), 0)
    leader.append_as_leader(batch(3), 0)
    data = bytearray(leader.read(0, 1 << 20).read())
    follower = make_log()
    flipped = bytearray(data)
    flipped[-1] ^= 0x01  # the last record of the second batch
    with pytest.raises(CorruptRecordError):
        follower.append_as_follower(bytes(flipped))
    bad_magic = bytearray(data)
    bad_magic[16] = 3
    with pytest.raises(InvalidRecordError):
        follower.append_as_follower(bytes(bad_magic))
    assert follower.log_end_offset == 0 and follower.size == 0
    assert follower.append_as_follower(bytes(data)).last_offset == 4
    transactional = bytearray(build_batch([(None, b"v", [], None)], is_transactional=True))
    with pytest.raises(InvalidRecordError):
        leader.append_as_leader(transactional, 0)
    miscounted = bytearray(batch(2))
    miscounted[23:27] = (5).to_bytes(4, "big")  # last offset delta 5 for 2 records
    update_crc(miscounted)
    with pytest.raises(InvalidRecordError):
        leader.append_as_leader(miscounted, 0)
    assert leader.log_end_offset == 5
    leader.close()


def test_truncate_to(make_log: MakeLog) -> None:
    log = make_log(small_config(segment_bytes=500))
    for epoch in range(10):
        log.append_as_leader(batch(2, value_size=60), epoch)
    segments_before = len(log.segments)
    assert log.truncate_to(9)  # batch [8, 9] goes entirely
    assert log.log_end_offset == 8
    assert len(log.segments) < segments_before
    assert batch_offsets(log.read(0, 1 << 20).read())[-1] == (6, 7)
    assert log.leader_epoch_cache.latest_epoch == 3
    assert not log.truncate_to(100)
    info = log.append_as_leader(batch(1), 11)
    assert info.first_offset == 8
    log.truncate_fully_and_start_at(50)
    assert (log.log_start_offset, log.log_end_offset) == (50, 50)
    assert log.append_as_leader(batch(1), 12).first_offset == 50


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 200)), min_size=1, max_size=30),
    segment_bytes=st.integers(150, 2000),
    interval=st.sampled_from([0, 100, 4096]),
    data=st.data(),
)
def test_read_matches_brute_force(
    tmp_path_factory: pytest.TempPathFactory,
    sizes: list[tuple[int, int]],
    segment_bytes: int,
    interval: int,
    data: st.DataObject,
) -> None:
    log = Log(
        tmp_path_factory.mktemp("log") / "t-0",
        small_config(segment_bytes=segment_bytes, index_interval_bytes=interval),
        ManualClock(),
    )
    for n, value_size in sizes:
        log.append_as_leader(batch(n, value_size=value_size), 0)
    everything = log.read(0, 1 << 30).read()
    spans = [(pos, h.base_offset, h.last_offset, h.total_size) for pos, h in iter_headers(everything)]
    assert spans[-1][2] + 1 == log.log_end_offset
    for _ in range(15):
        offset = data.draw(st.integers(0, log.log_end_offset - 1))
        max_bytes = data.draw(st.integers(0, 3000))
        max_offset = data.draw(st.one_of(st.none(), st.integers(offset, log.log_end_offset + 1)))
        min_one = data.draw(st.booleans())
        expected = b""
        for pos, _base, last, size in spans:
            if last < offset:
                continue
            if max_offset is not None and last >= max_offset:
                break
            if len(expected) + size > max_bytes and not (min_one and not expected):
                break
            expected += everything[pos : pos + size]
        got = log.read(offset, max_bytes, max_offset=max_offset, min_one=min_one)
        assert got.size == len(expected)
        assert got.read() == expected
    log.close()
