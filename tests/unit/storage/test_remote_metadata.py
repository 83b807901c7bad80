"""Remote log metadata records and their replay: idempotent, forward-only, no orphans or double counting."""

from __future__ import annotations

import itertools

import pytest

from moldau.storage.remote.api import RemoteLogSegmentId, RemoteLogSegmentMetadata, SegmentState
from moldau.storage.remote.metadata import (
    RemoteLogMetadataCache,
    SegmentUpdate,
    decode_event,
    encode_event,
    java_string_hash,
    metadata_partition,
)

S = SegmentState


def seg(start: int, end: int, *, topic: str = "t", size: int = 100) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(RemoteLogSegmentId.generate(topic, 0), start, end, 1000 + end, 1, 5, size,
                                    ((0, start),))


def update(m: RemoteLogSegmentMetadata, state: SegmentState) -> SegmentUpdate:
    return SegmentUpdate(m.segment_id, 2, 9, state)


def test_records_round_trip() -> None:
    m = RemoteLogSegmentMetadata(RemoteLogSegmentId.generate("tópico", 7), 100, 199, 123456, 3, 99, 4096,
                                 ((2, 100), (5, 150)))
    assert decode_event(encode_event(m)) == m
    u = update(m, S.DELETE_SEGMENT_STARTED)
    assert decode_event(encode_event(u)) == u
    with pytest.raises(ValueError):
        decode_event(encode_event(m)[:-3])
    with pytest.raises(ValueError):
        decode_event(b"\x00\x09\x00\x00" + encode_event(m)[4:])


def test_partitioning_is_javas_string_hash() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322  # "hello".hashCode() in Java
    assert java_string_hash("polygenelubricants") == -2147483648  # Integer.MIN_VALUE: abs() stays negative
    assert all(0 <= metadata_partition("t", p, 50) < 50 for p in range(100))


def test_lifecycle_and_queries() -> None:
    cache = RemoteLogMetadataCache()
    a, b = seg(0, 99), seg(100, 199)
    for e in (a, update(a, S.COPY_SEGMENT_FINISHED), b):
        assert cache.apply(e)
    assert [m.segment_id for m in cache.copied_segments("t", 0)] == [a.segment_id]
    assert [m.segment_id for m in cache.unfinished_segments("t", 0)] == [b.segment_id]
    assert cache.highest_copied_offset("t", 0) == 99 and cache.log_start_offset("t", 0) == 0
    cache.apply(update(b, S.COPY_SEGMENT_FINISHED))
    assert cache.highest_copied_offset("t", 0) == 199 and cache.size("t", 0) == 200
    assert cache.segment_for_offset("t", 0, 150) is not None
    assert cache.segment_for_offset("t", 0, 150).segment_id == b.segment_id  # type: ignore[union-attr]
    assert cache.segment_for_offset("t", 0, 200) is None
    cache.apply(update(a, S.DELETE_SEGMENT_STARTED))
    assert cache.log_start_offset("t", 0) == 100 and cache.size("t", 0) == 100
    assert [m.segment_id for m in cache.unfinished_segments("t", 0)] == [a.segment_id]
    cache.apply(update(a, S.DELETE_SEGMENT_FINISHED))
    assert cache.unfinished_segments("t", 0) == []
    assert cache.segments("t", 1) == [] and cache.highest_copied_offset("t", 1) == -1


def test_states_only_move_forward_and_replays_change_nothing() -> None:
    a = seg(0, 99)
    events = [a, update(a, S.COPY_SEGMENT_FINISHED), update(a, S.DELETE_SEGMENT_STARTED),
              update(a, S.DELETE_SEGMENT_FINISHED)]
    cache = RemoteLogMetadataCache()
    for e in events:
        cache.apply(e)
    for e in events:  # a full replay after the events were applied on publishing
        assert not cache.apply(e)
    assert cache.segments("t", 0) == []
    fresh = RemoteLogMetadataCache()
    fresh.apply(a)
    fresh.apply(update(a, S.DELETE_SEGMENT_STARTED))
    assert not fresh.apply(update(a, S.COPY_SEGMENT_FINISHED))  # a copy that finished after its delete started
    assert not fresh.apply(update(seg(5, 6), S.COPY_SEGMENT_FINISHED))  # an update of an unknown segment


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_leader_died_mid_copy(order: tuple[int, ...]) -> None:
    """Leader 1 announced a copy of [0, 99] and died; leader 2 copied the same segment again and finished. The
    dead attempt is an orphan to delete, never counted, whatever order the replays meet them."""
    dead, retry = seg(0, 99), seg(0, 99)
    events = [dead, retry, update(retry, S.COPY_SEGMENT_FINISHED)]
    cache = RemoteLogMetadataCache()
    for i in order:
        cache.apply(events[i])
    assert cache.size("t", 0) == (100 if cache.highest_copied_offset("t", 0) == 99 else 0)
    if cache.highest_copied_offset("t", 0) == 99:
        assert [m.segment_id for m in cache.unfinished_segments("t", 0)] == [dead.segment_id]


def test_double_copies_are_redundant_not_counted() -> None:
    """Two leaders both finished copies of overlapping ranges: one chain, the covered copy listed to delete."""
    cache = RemoteLogMetadataCache()
    first, again, big = seg(0, 99), seg(0, 99), seg(0, 149, size=150)
    for m in (first, again, big):
        cache.apply(m)
        cache.apply(update(m, S.COPY_SEGMENT_FINISHED))
    assert [m.segment_id for m in cache.copied_segments("t", 0)] == [big.segment_id]
    assert {m.segment_id for m in cache.redundant_segments("t", 0)} == {first.segment_id, again.segment_id}
    assert cache.size("t", 0) == 150
