"""Partitioners: murmur2 exactly as Kafka's Java client (and librdkafka's ``murmur2_random``), sticky for null keys.

A keyed record goes to ``(murmur2(key) & 0x7fffffff) % partitions`` so a key lands on the same partition whichever
client produced it. Records without a key stick to one partition until its batch is sent (KIP-480), then move on.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 of ``data`` as an unsigned int (Java's ``Utils.murmur2`` & 0xffffffff)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    end = length - (length & 3)
    for i in range(0, end, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[end + 2] << 16
    if rest >= 2:
        h ^= data[end + 1] << 8
    if rest >= 1:
        h ^= data[end]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """Java's ``toPositive(murmur2(key)) % numPartitions``."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class StickyPartitioner:
    """Null-key placement: one partition per topic until ``batch_done`` says its batch left (KIP-480)."""

    def __init__(self) -> None:
        self._current: dict[str, int] = {}

    def partition(self, topic: str, available: Sequence[int], all_partitions: Sequence[int]) -> int:
        current = self._current.get(topic)
        if current is not None and current in all_partitions:
            return current
        return self.next(topic, available or all_partitions, current)

    def next(self, topic: str, candidates: Sequence[int], previous: int | None = None) -> int:
        """Picks a new random partition, different from ``previous`` when there is a choice."""
        if len(candidates) > 1 and previous is not None:
            choice = random.choice([p for p in candidates if p != previous] or list(candidates))
        else:
            choice = random.choice(list(candidates))
        self._current[topic] = choice
        return choice

    def batch_done(self, topic: str, partition: int, candidates: Sequence[int]) -> None:
        """The sticky partition's batch was closed: move on (only if it is still the sticky one)."""
        if self._current.get(topic) == partition and candidates:
            self.next(topic, candidates, partition)
