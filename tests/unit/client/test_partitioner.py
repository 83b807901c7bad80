"""murmur2 against Kafka's published vectors (UtilsTest) and the sticky partitioner's rules."""

from __future__ import annotations

import pytest

from moldau.partitioner import StickyPartitioner, murmur2, partition_for_key


def _signed(x: int) -> int:
    return x - (1 << 32) if x >= 1 << 31 else x


@pytest.mark.parametrize(("key", "expected"), [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
])
def test_murmur2_matches_kafka(key: bytes, expected: int) -> None:
    assert _signed(murmur2(key)) == expected


def test_seed_walkthrough_keys_on_two_partitions() -> None:
    # The seeds' ch 2.4: key1 lands on partition 0 and key2 on partition 1.
    assert partition_for_key(b"key1", 2) == 0
    assert partition_for_key(b"key2", 2) == 1


def test_sticky_keeps_partition_until_batch_done() -> None:
    sticky = StickyPartitioner()
    first = sticky.partition("t", [0, 1, 2], [0, 1, 2])
    assert all(sticky.partition("t", [0, 1, 2], [0, 1, 2]) == first for _ in range(20))
    sticky.batch_done("t", first, [0, 1, 2])
    second = sticky.partition("t", [0, 1, 2], [0, 1, 2])
    assert second != first
    sticky.batch_done("t", first, [0, 1, 2])  # a stale notification does not move it
    assert sticky.partition("t", [0, 1, 2], [0, 1, 2]) == second
