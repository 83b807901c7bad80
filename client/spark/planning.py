"""Offset ranges: Spark's JSON offsets, splitting ranges into input partitions, and the per-trigger rate limit.

Pure functions (unit-tested without Spark).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from moldau.fetcher import TopicPartition

Offsets = dict[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int  # exclusive

    @property
    def size(self) -> int:
        return max(self.end - self.start, 0)


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's checkpoint format: {"topic": {"0": next_offset}}, topics and partitions sorted."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return out


def from_json(obj: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {TopicPartition(t, int(p)): int(o) for t, ps in obj.items() for p, o in ps.items()}


def split(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Empty ranges dropped; with ``minPartitions`` larger than the count, big ranges are cut into parts
    proportional to their size (Spark's KafkaOffsetRangeCalculator), so every part reads a contiguous range."""
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is None or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        parts = max(int(math.ceil(r.size / total * min_partitions)), 1)
        step = r.size / parts
        for i in range(parts):
            start = r.start + int(round(i * step))
            end = r.end if i == parts - 1 else r.start + int(round((i + 1) * step))
            if end > start:
                out.append(OffsetRange(r.topic, r.partition, start, end))
    return out


def rate_limit(start: Offsets, latest: Offsets, limit: int) -> Offsets:
    """At most ``limit`` offsets past ``start`` in total, shared in proportion to each partition's backlog
    (Spark's maxOffsetsPerTrigger). New partitions (absent from ``start``) count from 0."""
    backlog = {tp: max(latest[tp] - start.get(tp, 0), 0) for tp in latest}
    total = sum(backlog.values())
    if total <= limit:
        return dict(latest)
    out: Offsets = {}
    for tp, off in latest.items():
        begin = start.get(tp, 0)
        share = int(limit * backlog[tp] / total)
        out[tp] = min(begin + share, off) if backlog[tp] else max(off, begin)
    # Rounding down may leave the whole trigger empty for small limits: give the remainder out in order.
    left = limit - sum(max(out[tp] - start.get(tp, 0), 0) for tp in latest if backlog[tp])
    for tp in sorted(latest):
        if left <= 0:
            break
        room = latest[tp] - out[tp]
        if room > 0 and backlog[tp]:
            take = min(room, left)
            out[tp] += take
            left -= take
    return out
