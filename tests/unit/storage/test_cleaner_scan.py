"""The cleaner's batch-level fast paths (storage/cleaner_scan.py): record walks, byte-for-byte survivor copies,
short keys as their own map keys, and the cases that must leave the fast path (keyless records, batches with
offset gaps, LogAppendTime)."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from moldau.protocol.compression import decompress
from moldau.protocol.records import Record, build_batch, iter_headers, iter_records, read_header
from moldau.storage import Log
from moldau.storage.cleaner import CLEANER_OFFSET_CHECKPOINT, LogCleaner, OffsetMap
from moldau.storage.cleaner_scan import map_key, map_keys, rebuild, scan_keys, select_dense, select_general
from moldau.storage.config import ManualClock
from tests.unit.storage.conftest import small_config

MakeLog = Callable[..., Log]
RecordTuple = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]] | None, int]


def read_all(log: Log) -> list[Record]:
    data = log.read(log.log_start_offset, 1 << 30).read()
    return [r for pos, h in iter_headers(data) for r in iter_records(data[pos : pos + h.total_size])]


def random_records(rng: random.Random, n: int) -> list[RecordTuple]:
    """Records whose varints span one to several bytes: long keys/values/headers, large timestamp deltas."""
    out: list[RecordTuple] = []
    for i in range(n):
        key = None if rng.random() < 0.1 else b"k" * rng.choice([0, 3, 15, 16, 70, 300])
        value = None if rng.random() < 0.2 else bytes(rng.randrange(256) for _ in range(rng.choice([0, 5, 90, 9000])))
        headers = [("h", b"x" * rng.choice([1, 200]))] if rng.random() < 0.3 else None
        out.append((key, value, headers, 1_000 + rng.choice([0, 50, 70_000, 10**9]) + i))
    return out


@pytest.mark.parametrize("codec", [0, 3])
def test_walks_and_rebuild_match_the_full_decoder(codec: int) -> None:
    rng = random.Random(codec)
    for _ in range(30):
        recs = random_records(rng, rng.randrange(1, 60))
        data = build_batch(recs, base_offset=1000, compression=codec, producer_id=7, producer_epoch=2,
                           base_sequence=11, partition_leader_epoch=4)
        h = read_header(data)
        full = list(iter_records(data))
        body = data[61:] if codec == 0 else decompress(codec, data[61:])
        keys, offsets, keyless = scan_keys(body, h.records_count, h.base_offset)
        assert keys == [r.key for r in full if r.key is not None]
        assert offsets == [r.offset for r in full if r.key is not None]
        assert keyless == [r.offset for r in full if r.key is None]
        keep = sorted(rng.sample(range(len(full)), rng.randrange(1, len(full) + 1)))
        spans, max_ts = select_dense(body, h.records_count, keep)
        live = {full[i].offset for i in keep}
        assert select_general(body, h.records_count, 1000, 0, live, {}, False) == (spans, max_ts)
        out = rebuild(data, h, body, spans, max_ts)
        oh = read_header(out)
        kept = [full[i] for i in keep]
        assert list(iter_records(out)) == kept  # the CRC is checked here too
        assert (oh.base_offset, oh.last_offset, oh.records_count, oh.compression) == (1000, h.last_offset,
                                                                                      len(kept), codec)
        assert (oh.producer_id, oh.producer_epoch, oh.base_sequence, oh.partition_leader_epoch) == (7, 2, 11, 4)
        assert oh.max_timestamp == max(r.timestamp for r in kept)


def test_short_keys_are_their_own_map_keys() -> None:
    long_key = b"x" * 16
    assert map_key(b"short") == b"short" and len(map_key(long_key)) == 16 and map_key(long_key) != long_key
    keys = [b"a", long_key, b"b" * 40]
    assert map_keys(keys) == [map_key(k) for k in keys]
    assert map_keys([b"a", b"b"]) == [b"a", b"b"] and map_keys([long_key]) == [map_key(long_key)]
    m = OffsetMap(1 << 20)
    assert m.put_batch(keys, [1, 2, 3]) and m.get(long_key) == 2 and m.get(b"a") == 1
    assert list(m.latest_offsets([9, 0])) == [0, 1, 2, 3, 9]


def test_map_fills_part_way_through_a_batch() -> None:
    m = OffsetMap(0)
    m.capacity = 2
    assert not m.put_batch([b"a", b"b", b"c"], [1, 2, 3])
    assert (m.get(b"a"), m.get(b"b"), m.get(b"c")) == (1, 2, -1)


@pytest.mark.parametrize("codec", [0, 2])
def test_mixed_key_lengths_headers_and_compression(make_log: MakeLog, clock: ManualClock, codec: int) -> None:
    log = make_log(small_config(cleanup_policy="compact", segment_bytes=8192))
    expected: dict[bytes, tuple[int, bytes, list[tuple[str, bytes | None]]]] = {}
    rng = random.Random(5)
    keys = [b"s%d" % i for i in range(8)] + [b"long-key-%032d" % i for i in range(8)]
    for round_ in range(12):
        recs: list[RecordTuple] = []
        for _ in range(7):
            k = rng.choice(keys)
            recs.append((k, b"v%d" % round_, [("r", b"%d" % round_)], clock.now))
        info = log.append_as_leader(build_batch(recs, compression=codec), 0)
        for j, (k, v, hs, _ts) in enumerate(recs):
            assert k is not None and v is not None and hs is not None
            expected[k] = (info.first_offset + j, v, hs)
    log.roll()
    LogCleaner(1 << 20).clean(log, clock.now)
    got = {r.key: (r.offset, r.value, r.headers) for r in read_all(log)}
    assert got == expected and len(read_all(log)) == len(expected)


def test_keyless_records_of_a_former_delete_topic_are_kept(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log(small_config())
    log.append_as_leader(build_batch([(b"a", b"1", None, 1), (None, b"n1", None, 1), (b"a", b"2", None, 1)]), 0)
    log.append_as_leader(build_batch([(b"a", b"3", None, 1)]), 0)
    log.roll()
    log.close()
    log = make_log(small_config(cleanup_policy="compact"))
    LogCleaner(1 << 20).clean(log, clock.now)
    assert [(r.offset, r.key, r.value) for r in read_all(log)] == [(1, None, b"n1"), (3, b"a", b"3")]


def test_a_log_dirty_again_after_losing_its_checkpoint(make_log: MakeLog, clock: ManualClock) -> None:
    """Batches with offset gaps (cleaned before) in the dirty section take the general path."""
    log = make_log(small_config(cleanup_policy="compact"))
    latest: dict[bytes, int] = {}
    for i in range(200):
        info = log.append_as_leader(build_batch([(b"k%d" % (i % 13), b"v", None, clock.now),
                                                 (b"k%d" % (i % 7), b"w", None, clock.now)]), 0)
        latest[b"k%d" % (i % 13)] = info.first_offset
        latest[b"k%d" % (i % 7)] = info.first_offset + 1
    log.roll()
    cleaner = LogCleaner(1 << 20)
    cleaner.clean(log, clock.now)
    (log.dir.parent / CLEANER_OFFSET_CHECKPOINT).unlink()
    info = log.append_as_leader(build_batch([(b"k1", b"new", None, clock.now)]), 0)
    latest[b"k1"] = info.first_offset
    log.roll()
    cleaner.clean(log, clock.now)
    records = read_all(log)
    assert {r.key: r.offset for r in records} == latest and len(records) == len(latest)


def test_log_append_time_batches_keep_their_timestamp(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log(small_config(cleanup_policy="compact", message_timestamp_type="LogAppendTime"))
    log.append_as_leader(build_batch([(b"a", b"1", None, 5), (b"b", b"1", None, 6)]), 0)
    before = read_all(log)
    log.append_as_leader(build_batch([(b"a", b"2", None, 7)]), 0)
    log.roll()
    LogCleaner(1 << 20).clean(log, clock.now)
    after = read_all(log)
    assert [r.key for r in after] == [b"b", b"a"]
    assert after[0].timestamp == before[1].timestamp == clock.now
