"""Per-log settings and the clock the storage layer reads time from."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

LONG_MAX = (1 << 63) - 1


class Clock(Protocol):
    """Where the broker and storage read wall-clock time (epoch milliseconds); the one clock type of both."""

    def time_ms(self) -> int: ...


class SystemClock:
    """Wall-clock milliseconds (timestamps in Kafka records are wall-clock epoch milliseconds)."""

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock moved by hand (tests, offline tools): set ``now`` or ``advance(ms)``."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now = now_ms

    def time_ms(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


@dataclass(slots=True)
class LogConfig:
    """Topic-level log settings; field names are Kafka's topic config names in snake_case.

    Defaults are Kafka's broker defaults. ``-1`` for ``retention_ms``/``retention_bytes`` means unlimited.
    """

    segment_bytes: int = 1024 * 1024 * 1024  # segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000  # segment.ms (log.roll.ms)
    segment_jitter_ms: int = 0  # segment.jitter.ms
    retention_ms: int = 7 * 24 * 3600 * 1000  # retention.ms
    retention_bytes: int = -1  # retention.bytes
    index_interval_bytes: int = 4096  # index.interval.bytes
    segment_index_bytes: int = 10 * 1024 * 1024  # segment.index.bytes
    flush_interval_messages: int = LONG_MAX  # flush.messages
    flush_interval_ms: int = LONG_MAX  # flush.ms
    max_message_bytes: int = 1024 * 1024 + 12  # max.message.bytes (1048588)
    message_timestamp_type: str = "CreateTime"  # message.timestamp.type: CreateTime | LogAppendTime
    file_delete_delay_ms: int = 60_000  # file.delete.delay.ms
    cleanup_policy: str = "delete"  # cleanup.policy: "delete", "compact" or "compact,delete"
    delete_retention_ms: int = 24 * 3600 * 1000  # delete.retention.ms: how long tombstones survive cleaning
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms
    max_compaction_lag_ms: int = LONG_MAX  # max.compaction.lag.ms
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    remote_storage_enable: bool = False  # remote.storage.enable (tiered storage, KIP-405)
    local_retention_ms: int = -2  # local.retention.ms: -2 = retention.ms
    local_retention_bytes: int = -2  # local.retention.bytes: -2 = retention.bytes

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def effective_local_retention_ms(self) -> int:
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def effective_local_retention_bytes(self) -> int:
        return self.retention_bytes if self.local_retention_bytes == -2 else self.local_retention_bytes

    @property
    def compact_enabled(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete_enabled(self) -> bool:
        return "delete" in self.cleanup_policy
