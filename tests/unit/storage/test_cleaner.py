from __future__ import annotations

import random
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from moldau.protocol.records import Record, build_batch, iter_headers, iter_records
from moldau.storage import Log, LogConfig
from moldau.storage.checkpoint import read_offsets
from moldau.storage.cleaner import (
    CLEANER_OFFSET_CHECKPOINT,
    ENTRY_COST_BYTES,
    LogCleaner,
    OffsetMap,
    UncleanableError,
)
from moldau.storage.config import ManualClock
from moldau.storage.segment import SWAP_SUFFIX
from tests.unit.storage.conftest import small_config

MakeLog = Callable[..., Log]
KV = tuple[bytes, bytes | None]


def kv_batch(pairs: list[KV], ts: int, **kw: int) -> bytes:
    return build_batch([(k, v, None, ts) for k, v in pairs], **kw)


def compact_config(**overrides: int | str) -> LogConfig:
    return small_config(cleanup_policy="compact", **overrides)


def read_all(log: Log) -> list[Record]:
    data = log.read(log.log_start_offset, 1 << 30).read()
    return [r for pos, h in iter_headers(data) for r in iter_records(data[pos : pos + h.total_size])]


def latest(pairs: list[tuple[int, bytes, bytes | None]], drop_tombstones: bool) -> dict[bytes, tuple[int, bytes | None]]:
    out: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, k, v in pairs:
        out[k] = (offset, v)
    if drop_tombstones:
        out = {k: ov for k, ov in out.items() if ov[1] is not None}
    return out


def fill(log: Log, rounds: int, keys: int, ts: int) -> list[tuple[int, bytes, bytes | None]]:
    """Writes ``rounds`` versions of ``keys`` keys, 5 records per batch; returns (offset, key, value)."""
    written: list[tuple[int, bytes, bytes | None]] = []
    pairs = [(b"key%d" % (i % keys), b"v%d-%d" % (i // keys, i % keys)) for i in range(rounds * keys)]
    for i in range(0, len(pairs), 5):
        chunk: list[KV] = list(pairs[i : i + 5])
        info = log.append_as_leader(kv_batch(chunk, ts), leader_epoch=3)
        written += [(info.first_offset + j, k, v) for j, (k, v) in enumerate(chunk)]
    return written


def check_compacted(log: Log, expected: dict[bytes, tuple[int, bytes | None]], upto: int) -> None:
    records = read_all(log)
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets)), "offsets must stay strictly increasing"
    cleaned = {}
    for r in records:
        if r.offset < upto:
            assert r.key not in cleaned, f"key {r.key!r} appears twice in the cleaned section"
            cleaned[r.key] = (r.offset, r.value)
    assert cleaned == {k: v for k, v in expected.items() if v[0] < upto}


def test_offset_map_bounds_and_latest() -> None:
    m = OffsetMap(1000 * ENTRY_COST_BYTES)
    assert m.capacity == 900
    m.put(b"a", 1)
    m.put(b"a", 7)
    assert m.get(b"a") == 7 and m.get(b"b") == -1 and len(m) == 1
    assert m.has_room_for(899) and not m.has_room_for(900)
    for i in range(899):
        assert m.put(b"k%d" % i, i)
    assert not m.put(b"new", 1) and m.put(b"a", 9) and len(m) == 900


def test_offset_map_entry_cost() -> None:
    """ENTRY_COST_BYTES must not understate what an entry really costs on the Python heap."""
    m = OffsetMap(1 << 30)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(50_000):
        m.put(b"key-%d" % i, 1_000_000 + i)
    live = m.latest_offsets([])  # the recopy pass's sorted offsets: at their peak while sorting
    per_entry = (tracemalloc.get_traced_memory()[1] - before) / 50_000
    tracemalloc.stop()
    assert len(live) == 50_000
    print(f"offset map entry: {per_entry:.0f} bytes", file=sys.stderr)
    assert per_entry <= ENTRY_COST_BYTES


def test_keeps_latest_value_per_key_with_offsets(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log(compact_config(segment_bytes=600))
    written = fill(log, rounds=6, keys=20, ts=clock.now)
    log.roll()
    segments_before = len(log.segments)
    assert segments_before > 3
    active_before = log.active_segment
    cleaner = LogCleaner(1 << 20)
    prepared = cleaner.clean(log, clock.now)
    assert prepared is not None and prepared.end_offset == log.log_end_offset
    assert prepared.stats.records_removed == 100
    check_compacted(log, latest(written, False), log.log_end_offset)
    assert log.active_segment is active_before
    assert read_offsets(log.dir.parent / CLEANER_OFFSET_CHECKPOINT) == {(log.topic, 0): log.log_end_offset}
    data = log.read(0, 1 << 30).read()
    assert {h.partition_leader_epoch for _, h in iter_headers(data)} == {3}
    # nothing dirty any more
    assert cleaner.clean(log, clock.now) is None
    # groups are formed by the sizes before cleaning (Kafka's rule), so the next cleaning merges the small
    # segments the first one left up to segment.bytes
    written += fill(log, rounds=1, keys=20, ts=clock.now)
    log.roll()
    cleaner.clean(log, clock.now)
    assert len(log.segments) < segments_before
    check_compacted(log, latest(written, False), log.log_end_offset)
    # a reload sees the same log
    log.close()
    again = make_log(compact_config(segment_bytes=600))
    check_compacted(again, latest(written, False), again.log_end_offset)


def test_never_touches_active_segment_nor_young_records(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log(compact_config(min_compaction_lag_ms=10_000))
    fill(log, rounds=4, keys=5, ts=clock.now - 20_000)
    log.roll()
    fill(log, rounds=4, keys=5, ts=clock.now)  # young: stays dirty
    log.roll()
    old_end = log.segments[1].base_offset if len(log.segments) > 1 else 0
    cleaner = LogCleaner(1 << 20)
    prepared = cleaner.clean(log, clock.now)
    assert prepared is not None
    assert prepared.end_offset < log.log_end_offset
    young = [r for r in read_all(log) if r.offset >= prepared.end_offset]
    assert len(young) == 20  # untouched
    assert old_end >= 0


def test_tombstones_survive_one_cleaning_then_expire(make_log: MakeLog, clock: ManualClock) -> None:
    cfg = compact_config(delete_retention_ms=1000)
    log = make_log(cfg)
    log.append_as_leader(kv_batch([(b"a", b"1"), (b"b", b"1")], clock.now), leader_epoch=0)
    log.append_as_leader(kv_batch([(b"a", None)], clock.now), leader_epoch=0)
    log.roll()
    cleaner = LogCleaner(1 << 20)
    cleaner.clean(log, clock.now)
    assert [(r.key, r.value) for r in read_all(log)] == [(b"b", b"1"), (b"a", None)]
    # more data makes the log dirty again; the tombstone's segment is clean now but still young
    clock.advance(500)
    log.append_as_leader(kv_batch([(b"c", b"1")], clock.now), leader_epoch=0)
    log.roll()
    cleaner.clean(log, clock.now)
    assert (b"a", None) in [(r.key, r.value) for r in read_all(log)]
    clock.advance(1000)
    log.append_as_leader(kv_batch([(b"d", b"1")], clock.now), leader_epoch=0)
    log.roll()
    cleaner.clean(log, clock.now)
    assert [(r.key, r.value) for r in read_all(log)] == [(b"b", b"1"), (b"c", b"1"), (b"d", b"1")]


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batches_keep_their_codec(make_log: MakeLog, clock: ManualClock, codec: int) -> None:
    log = make_log(compact_config())
    log.append_as_leader(
        kv_batch([(b"a", b"1"), (b"b", b"1"), (b"a", b"2")], clock.now, compression=codec), leader_epoch=0
    )
    log.roll()
    LogCleaner(1 << 20).clean(log, clock.now)
    data = log.read(0, 1 << 20).read()
    headers = [h for _, h in iter_headers(data)]
    assert [(h.compression, h.base_offset, h.last_offset, h.records_count) for h in headers] == [
        (codec, 0, 2, 2)
    ]
    assert [(r.offset, r.key, r.value) for r in read_all(log)] == [(1, b"b", b"1"), (2, b"a", b"2")]


def test_idempotent_batches_keep_producer_metadata(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log(compact_config())
    pid = dict(producer_id=42, producer_epoch=3)
    log.append_as_leader(kv_batch([(b"a", b"1"), (b"b", b"1")], clock.now, base_sequence=0, **pid), 5)
    log.append_as_leader(kv_batch([(b"a", b"2"), (b"c", b"1")], clock.now, base_sequence=2, **pid), 5)
    log.append_as_leader(kv_batch([(b"c", b"2")], clock.now), 5)  # supersedes the producer's last record
    log.append_as_leader(kv_batch([(b"b", b"2")], clock.now), 5)  # empties the producer's first batch
    log.roll()
    LogCleaner(1 << 20).clean(log, clock.now)
    data = log.read(0, 1 << 20).read()
    headers = [h for _, h in iter_headers(data)]
    summary = [(h.base_offset, h.last_offset, h.records_count, h.producer_id, h.producer_epoch, h.base_sequence)
               for h in headers]
    # batch 1 lost all records and is not the producer's last: gone. Batch 2 keeps a@2 with its metadata.
    # The empty-batch rule: the producer's last batch is kept even when it loses every record (below).
    assert summary == [(2, 3, 1, 42, 3, 2), (4, 4, 1, -1, -1, -1), (5, 5, 1, -1, -1, -1)]
    assert {h.partition_leader_epoch for h in headers} == {5}


def test_empty_last_batch_of_a_producer_is_kept(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log(compact_config())
    log.append_as_leader(kv_batch([(b"a", b"1")], clock.now, producer_id=7, producer_epoch=0,
                                  base_sequence=0), 0)
    log.append_as_leader(kv_batch([(b"a", b"2")], clock.now), 0)
    log.roll()
    LogCleaner(1 << 20).clean(log, clock.now)
    data = log.read(0, 1 << 20).read()
    headers = [h for _, h in iter_headers(data)]
    assert [(h.base_offset, h.last_offset, h.records_count, h.producer_id, h.base_sequence) for h in headers] == [
        (0, 0, 0, 7, 0),
        (1, 1, 1, -1, -1),
    ]
    assert [(r.offset, r.value) for r in read_all(log)] == [(1, b"2")]
    log.close()
    reloaded = make_log(compact_config())  # a clean CRC and a loadable segment
    entry = reloaded.producer_state.last_entry(7)
    assert entry is not None and entry.last_seq == 0


def test_map_too_small_cleans_the_prefix_that_fits(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log(compact_config())
    written = fill(log, rounds=1, keys=400, ts=clock.now)  # every key distinct
    written += fill(log, rounds=1, keys=400, ts=clock.now)
    log.roll()
    first = log.segments[0]
    first_count = sum(h.records_count for _, h in first.iter_batches())
    cleaner = LogCleaner(0)
    with pytest.raises(UncleanableError):
        cleaner.prepare(log, clock.now, map_bytes=ENTRY_COST_BYTES)
    room = int((first_count + 3) / 0.9) + 1
    prepared = cleaner.prepare(log, clock.now, map_bytes=room * ENTRY_COST_BYTES)
    assert prepared is not None
    cleaner.finish(prepared)
    assert prepared.end_offset == first.next_offset < log.log_end_offset
    check_compacted(log, latest([w for w in written if w[0] < prepared.end_offset], False), prepared.end_offset)


# --- crash points of the swap (files left as kill -9 would leave them, then the log is reloaded) -------------


def _crash_setup(make_log: MakeLog, clock: ManualClock) -> tuple[Log, LogCleaner, list, list[Record]]:
    log = make_log(compact_config())
    written = fill(log, rounds=5, keys=15, ts=clock.now)
    log.roll()
    before = read_all(log)
    return log, LogCleaner(1 << 20), written, before


def _reload(log: Log, make_log: MakeLog) -> Log:
    log.close(take_snapshot=False)
    again = make_log(compact_config())
    names = [p.name for p in again.dir.iterdir()]
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))], names
    return again


def test_crash_before_swap_rolls_back(make_log: MakeLog, clock: ManualClock) -> None:
    log, cleaner, _, before = _crash_setup(make_log, clock)
    prepared = cleaner.prepare(log, clock.now)
    assert prepared is not None
    for _, new in prepared.swaps:  # the state after writing .cleaned, before the rename to .swap
        new.rename_suffix(SWAP_SUFFIX, ".cleaned")
        new.close()
    again = _reload(log, make_log)
    assert read_all(again) == before


@pytest.mark.parametrize("step", ["swap_written", "old_deleted", "indexes_live", "one_swapped"])
def test_crash_after_swap_commit_completes(make_log: MakeLog, clock: ManualClock, step: str) -> None:
    log, cleaner, written, _ = _crash_setup(make_log, clock)
    end = log.log_end_offset
    prepared = cleaner.prepare(log, clock.now)
    assert prepared is not None and len(prepared.swaps) >= 1
    if step == "old_deleted":
        for old, _ in prepared.swaps:
            for seg in old:
                seg.rename_for_delete()
    elif step == "indexes_live":  # inside Log.replace_segments: old gone, new indexes renamed, .log not yet
        old, new = prepared.swaps[0]
        for seg in old:
            seg.rename_for_delete()
        for idx in (new.index, new.time_index):
            idx.rename(idx.path.with_name(idx.path.name.removesuffix(SWAP_SUFFIX)))
    elif step == "one_swapped":
        old, new = prepared.swaps[0]
        assert log.replace_segments(old, new)
    for _, new in prepared.swaps:
        new.close()
    again = _reload(log, make_log)
    check_compacted(again, latest(written, False), end)
    assert again.log_end_offset == end


def test_swap_skipped_when_segments_were_deleted_meanwhile(make_log: MakeLog, clock: ManualClock) -> None:
    log, cleaner, _, before = _crash_setup(make_log, clock)
    prepared = cleaner.prepare(log, clock.now)
    assert prepared is not None
    log.truncate_fully_and_start_at(log.log_end_offset)
    assert not cleaner.finish(prepared)
    assert not [p for p in log.dir.iterdir() if p.name.endswith(".swap")]


# --- LogCompactionTester-style ---------------------------------------------------------------------------


def compaction_tester(log: Log, clock: ManualClock, records: int, keys: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    written: list[tuple[int, bytes, bytes | None]] = []
    pairs: list[KV] = []
    for i in range(records):
        k = b"key-%d" % rng.randrange(keys)
        pairs.append((k, None if rng.random() < 0.1 else b"value-%d" % i))
    for i in range(0, records, 100):
        chunk = pairs[i : i + 100]
        info = log.append_as_leader(kv_batch(chunk, clock.now, compression=i // 100 % 2 * 4), leader_epoch=0)
        written += [(info.first_offset + j, k, v) for j, (k, v) in enumerate(chunk)]
    log.roll()
    cleaner = LogCleaner(64 << 20)
    cleaner.clean(log, clock.now)
    end = log.segments[-1].base_offset
    check_compacted(log, latest(written, False), end)
    # tombstones go once older than delete.retention.ms (after they have been through a cleaning)
    clock.advance(log.config.delete_retention_ms + 1)
    log.append_as_leader(kv_batch([(b"marker", b"x")], clock.now), leader_epoch=0)
    log.roll()
    cleaner.clean(log, clock.now)
    check_compacted(log, latest(written, True), end)
    assert log.log_start_offset == 0 and read_all(log)[0].offset >= 0


def test_log_compaction_tester_100k(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log(compact_config(segment_bytes=512 * 1024, delete_retention_ms=1000))
    compaction_tester(log, clock, records=100_000, keys=1_000)


@pytest.mark.slow
def test_log_compaction_tester_1m(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log(compact_config(segment_bytes=4 << 20, delete_retention_ms=1000))
    compaction_tester(log, clock, records=1_000_000, keys=10_000)


def test_grab_filthiest_picks_the_dirtiest_compacted_log(tmp_path: Path, clock: ManualClock) -> None:
    cleaner = LogCleaner(1 << 20)
    logs = []
    for name in ("a-0", "b-0"):
        log = Log(tmp_path / name, compact_config(min_cleanable_dirty_ratio=0.1), clock)
        fill(log, rounds=4, keys=10, ts=clock.now)
        log.roll()
        logs.append(log)
    cleaner.clean(logs[0], clock.now)
    fill(logs[0], rounds=1, keys=10, ts=clock.now)  # a: partly dirty again
    logs[0].roll()
    assert 0.1 < cleaner.dirty_ratio(logs[0], clock.now)[0] < 1.0
    plain = Log(tmp_path / "c-0", small_config(), clock)
    fill(plain, rounds=6, keys=10, ts=clock.now)
    plain.roll()
    picked = cleaner.grab_filthiest([*logs, plain], clock.now)
    assert picked is not None and picked[0] is logs[1] and picked[1] == 1.0
    again = cleaner.grab_filthiest([*logs, plain], clock.now)
    assert again is not None and again[0] is logs[0]  # b is in progress
    cleaner.clean(logs[0], clock.now)
    cleaner.done(logs[0])
    cleaner.done(logs[1])
    picked = cleaner.grab_filthiest([*logs, plain], clock.now)
    assert picked is not None and picked[0] is logs[1]
    for lg in (*logs, plain):
        lg.close()


def test_compacted_topic_refuses_null_keys(make_log: MakeLog, clock: ManualClock) -> None:
    from moldau.protocol.errors import ErrorCode
    from moldau.storage.errors import InvalidRecordError

    log = make_log(compact_config())
    log.append_as_leader(kv_batch([(b"a", b"1")], clock.now), 0)
    bad = kv_batch([(b"a", b"1")], clock.now) + build_batch([(b"b", b"1", None, 1), (None, b"x", None, 1)])
    with pytest.raises(InvalidRecordError) as exc:
        log.append_as_leader(bad, 0)
    assert exc.value.error_code == ErrorCode.INVALID_RECORD
    assert "1 record errors" in str(exc.value) and "without key" in str(exc.value)
    # KIP-467: each keyless record by its index (across the request's batches) and Kafka's message
    assert [i for i, _ in exc.value.record_errors] == [2]
    assert "Compacted topic cannot accept message without key" in str(exc.value.record_errors[0][1])
    assert log.log_end_offset == 1  # nothing of the request was appended
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(build_batch([(b"k", b"1", [("h", b"v")], 1), (None, None, None, 1)], compression=3), 0)
    log.append_as_leader(build_batch([(b"k", b"1", [("h", b"v")], 1), (b"", None, None, 1)], compression=3), 0)
    assert log.log_end_offset == 3
    plain = Log(log.dir.with_name("plain-0"), small_config(), clock)
    plain.append_as_leader(build_batch([(None, b"x", None, 1)]), 0)  # fine on a delete-policy topic
    plain.close()


def test_appends_and_reads_continue_while_a_thread_cleans(make_log: MakeLog, clock: ManualClock) -> None:
    import threading

    log = make_log(compact_config(segment_bytes=2048))
    written = fill(log, rounds=20, keys=30, ts=clock.now)
    log.roll()
    end = log.log_end_offset
    cleaner = LogCleaner(1 << 20)
    result: list[object] = []
    worker = threading.Thread(target=lambda: result.append(cleaner.prepare(log, clock.now)))
    worker.start()
    appended = 0
    while worker.is_alive() or appended < 50:
        info = log.append_as_leader(kv_batch([(b"new-%d" % appended, b"x")], clock.now), 0)
        assert info.first_offset == end + appended
        assert log.read(info.first_offset, 1 << 16).size > 0
        appended += 1
    worker.join()
    prepared = result[0]
    assert prepared is not None and cleaner.finish(prepared)  # type: ignore[arg-type]
    records = read_all(log)
    check_compacted(log, latest(written, False), end)
    assert [r.key for r in records if r.offset >= end] == [b"new-%d" % i for i in range(appended)]


def test_max_compaction_lag_forces_a_cleaning_below_the_ratio(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log(compact_config(min_cleanable_dirty_ratio=0.99))
    fill(log, rounds=4, keys=10, ts=clock.now)
    log.roll()
    cleaner = LogCleaner(1 << 20)
    cleaner.clean(log, clock.now)
    fill(log, rounds=1, keys=10, ts=clock.now)
    log.roll()
    assert cleaner.grab_filthiest([log], clock.now) is None
    log.config.max_compaction_lag_ms = 1000
    clock.advance(1001)
    picked = cleaner.grab_filthiest([log], clock.now)
    assert picked is not None and picked[0] is log and picked[1] < 0.99


def test_never_cleans_above_the_high_watermark(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log(compact_config(segment_bytes=1024))
    fill(log, rounds=10, keys=10, ts=clock.now)
    log.roll()
    log.high_watermark = log.segments[2].base_offset
    prepared = LogCleaner(1 << 20).clean(log, clock.now)
    assert prepared is not None and prepared.end_offset <= log.high_watermark
    assert [r.offset for r in read_all(log) if r.offset >= log.high_watermark] == list(
        range(log.high_watermark, log.log_end_offset)
    )


def test_throttler_sleeps_to_hold_the_rate() -> None:
    from moldau.storage.cleaner import Throttler

    slept: list[float] = []
    t = Throttler(1000.0, sleep=slept.append)
    t.maybe_throttle(500)
    assert slept and 0.4 < slept[0] <= 0.5
    unlimited = Throttler(float("inf"), sleep=slept.append)
    unlimited.maybe_throttle(10**9)
    assert len(slept) == 1


def test_swap_dropped_when_the_log_was_closed_meanwhile(make_log: MakeLog, clock: ManualClock) -> None:
    log, cleaner, _, _ = _crash_setup(make_log, clock)
    prepared = cleaner.prepare(log, clock.now)
    assert prepared is not None
    log.close()
    assert not cleaner.finish(prepared)
    assert not [p for p in log.dir.iterdir() if p.name.endswith((".swap", ".deleted"))]


def test_keyless_scan_handles_multi_byte_varints() -> None:
    from moldau.storage.validation import _first_keyless_record

    recs = [(b"k" * (i * 50), b"v" * 300, [("h", b"x" * 200)], 1_000 + i * 10_000_000) for i in range(200)]
    body = build_batch(recs)[61:]
    assert _first_keyless_record(body, 200) == -1
    recs[150] = (None, b"v", None, 5)
    assert _first_keyless_record(build_batch(recs)[61:], 200) == 150
