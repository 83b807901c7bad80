"""One partition's log: a ``<topic>-<partition>/`` directory of segments.

Offsets: ``log_start_offset`` (first readable), ``log_end_offset`` (LEO, the next offset to assign),
``recovery_point`` (everything below it is fsynced; recovery after a crash starts at its segment) and
``last_stable_offset`` (below the first open transaction and the high watermark; storage/log_txn.py).
All methods are synchronous and not thread-safe: the broker serialises calls per partition.
"""

from __future__ import annotations

import logging
import os
import random
import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from moldau.protocol.records import (
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    BatchHeader,
    Buffer,
    iter_records,
    read_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from moldau.protocol.types import TopicPartition
from moldau.storage.checkpoint import fsync_dir
from moldau.storage.config import Clock, LogConfig, SystemClock
from moldau.storage.errors import OffsetMovedToTieredStorageError, OffsetOutOfRangeError
from moldau.storage.leader_epoch import LeaderEpochCache
from moldau.storage.load_stats import LoadStats
from moldau.storage.log_txn import LogTransactions, apply_control_batch
from moldau.storage.producer_state import SNAPSHOT_SUFFIX, ProducerStateManager
from moldau.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    FileRegion,
    LogSegment,
)
from moldau.storage.swap import recover_swaps
from moldau.storage.txn_index import TXN_INDEX_SUFFIX
from moldau.storage.validation import (
    Batches,
    batches_end,
    check_keys_present,
    validate_follower_batches,
    validate_leader_batches,
)

logger = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
NO_TIMESTAMP = -1


@dataclass(slots=True)
class AppendInfo:
    """What an append wrote. ``log_append_time`` is -1 unless the topic uses LogAppendTime."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    record_count: int
    size: int


def _request_info(batches: Batches, append_time: int, log_start_offset: int) -> AppendInfo:
    """The ``AppendInfo`` of one request's batches within a larger append."""
    first = batches[0][1]
    if len(batches) == 1:  # the usual request: one batch
        return AppendInfo(first.base_offset, first.last_offset, max(first.max_timestamp, NO_TIMESTAMP),
                          first.last_offset, append_time, log_start_offset, first.records_count,
                          first.batch_length + LOG_OVERHEAD)
    max_ts, offset_of_max, count, size = NO_TIMESTAMP, first.last_offset, 0, 0
    for _, h in batches:
        count += h.records_count
        size += h.batch_length + LOG_OVERHEAD
        if h.max_timestamp > max_ts:
            max_ts, offset_of_max = h.max_timestamp, h.last_offset
    return AppendInfo(first.base_offset, batches[-1][1].last_offset, max_ts, offset_of_max, append_time,
                      log_start_offset, count, size)


@dataclass(slots=True)
class FetchData:
    """Whole batches to send, as file regions (zero-copy); ``size`` is their total length."""

    regions: list[FileRegion] = field(default_factory=list)
    size: int = 0

    def read(self) -> bytes:
        """Copies the bytes (tests and tools; the broker sends the regions with sendfile)."""
        return b"".join(r.read() for r in self.regions)


def parse_topic_partition(dir_name: str) -> TopicPartition:
    """``"my-topic.v2-3"`` -> ``("my-topic.v2", 3)``: the partition follows the last '-'."""
    topic, sep, partition = dir_name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"{dir_name!r} is not a <topic>-<partition> directory name")
    return topic, int(partition)


class Log(LogTransactions):
    def __init__(
        self,
        dir: Path,
        config: LogConfig,
        clock: Clock | None = None,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = False,
        new: bool = False,  # the directory does not exist yet (the log manager's get_or_create_log)
        stats: LoadStats | None = None,
    ) -> None:
        self.dir = Path(dir)
        self.parent_dir = self.dir.parent  # its log dir (kept: pathlib's parent is slow over 10,000 logs)
        self.topic, self.partition = parse_topic_partition(self.dir.name)
        # The checkpointed log start offset, when loading raised it to the first local segment: a broker loads its
        # logs before it knows their topics' settings, and a tiered log's start is below its local segments.
        self._unclamped_start: int | None = None
        self.config = config
        self.clock: Clock = clock if clock is not None else SystemClock()
        # Upper bound for retention (segments above it are not deleted); the broker sets it to the high watermark.
        self.high_watermark: int | None = None
        # Tiered logs (remote.storage.enable): the last offset copied to remote storage, set by the broker's remote
        # log manager; local retention deletes only segments at or below it. The log start offset is then the
        # remote log start, below the first local segment.
        self.remote_copied_offset = -1
        self.dir.mkdir(parents=True, exist_ok=True)
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._pending_flush_offset: int | None = None
        self._dir_dirty = False
        self._parent_dirty = new  # a new log's own directory entry: made durable by its first flush
        self.on_roll: Callable[[Log], None] | None = None  # the log manager flushes rolled segments soon after
        # The log manager writes a changed leader-epoch checkpoint out a little later (LogManager.take_rolled).
        self.on_epochs_changed: Callable[[Log], None] | None = None
        self.producer_state = ProducerStateManager(self.dir)
        self.leader_epoch_cache = LeaderEpochCache(self.dir, self._epochs_changed)
        self.last_flush_ms = self.clock.time_ms()
        self.log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        self.load_stats = stats if stats is not None else LoadStats()  # what loading this log took
        if new:
            # A directory just created holds nothing to load, swap or clean up: one empty segment.
            self._segments.append(self._new_segment(log_start_offset))
            self._bases.append(log_start_offset)
            self._dir_dirty = True
            self.producer_state.map_end_offset = log_start_offset
        else:
            self._load(recovery_point, log_start_offset, clean_shutdown, self.load_stats)

    def __repr__(self) -> str:
        return f"Log({self.topic}-{self.partition}, start={self.log_start_offset}, end={self.log_end_offset})"

    # --- loading ---------------------------------------------------------------------------------------------

    def _new_segment(self, base_offset: int, lazy: bool = False) -> LogSegment:
        cfg = self.config
        jitter = 0
        if cfg.segment_jitter_ms > 0:
            jitter = random.randrange(min(cfg.segment_jitter_ms, max(cfg.segment_ms, 1)))
        return LogSegment(
            self.dir,
            base_offset,
            index_interval_bytes=cfg.index_interval_bytes,
            segment_index_bytes=cfg.segment_index_bytes,
            created_ms=self.clock.time_ms(),
            roll_jitter_ms=jitter,
            lazy=lazy,
        )

    def _remove_stray_files(self, names: list[str]) -> tuple[list[int], list[int]]:
        """Deletes leftovers (``.deleted``, ``.tmp``, ``.cleaned``, orphan indexes) among ``names`` (the
        directory's listing); returns the segment bases and the producer snapshot offsets, both sorted."""
        bases: set[int] = set()
        snapshots: list[int] = []
        indexes: list[tuple[int, str]] = []
        for name in names:
            if name.endswith((DELETED_SUFFIX, ".tmp", ".cleaned")):
                (self.dir / name).unlink(missing_ok=True)
                continue
            stem, dot, suffix = name.partition(".")
            if len(stem) != 20 or not stem.isdigit():
                continue
            ext = dot + suffix
            if ext == LOG_SUFFIX:
                bases.add(int(stem))
            elif ext == SNAPSHOT_SUFFIX:
                snapshots.append(int(stem))
            elif ext in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                indexes.append((int(stem), name))
        for base, name in indexes:
            if base not in bases:
                (self.dir / name).unlink(missing_ok=True)
        return sorted(bases), sorted(snapshots)

    def _load(self, recovery_point: int, log_start_offset: int, clean_shutdown: bool, stats: LoadStats) -> None:
        started = time.perf_counter()
        recovered_before = stats.segments_recovered
        lazy_before = stats.segments_lazy
        # One listing of the directory serves the swap check, the stray-file sweep and the producer snapshots.
        names = os.listdir(self.dir)
        if any(name.endswith((SWAP_SUFFIX, CLEANED_SUFFIX)) for name in names):
            if recover_swaps(self.dir):
                clean_shutdown = False  # swapped-in segments have no trusted indexes: revalidate
            names = os.listdir(self.dir)
        bases, snapshots = self._remove_stray_files(names)
        for i, base in enumerate(bases):
            # After a clean shutdown the sealed segments open on first use (Kafka's lazy indexes): a restart
            # costs nothing per segment. Only the active one is opened, checked and its tail scanned now.
            self._segments.append(self._new_segment(base, lazy=clean_shutdown and i < len(bases) - 1))
            self._bases.append(base)
        if not self._segments:
            self._segments.append(self._new_segment(log_start_offset))
            self._bases.append(log_start_offset)
            self._dir_dirty = True
        # Segments from the one holding the recovery point on may hold unflushed data: re-validate them.
        first_unflushed = self._bases[max(bisect_right(self._bases, recovery_point) - 1, 0)]
        recovered = False
        recover_s = 0.0
        if not clean_shutdown:
            # The epochs of the unflushed segments come from their batches (the checkpoint is synced only with
            # the flush, so it may lack or outlive them).
            self.leader_epoch_cache.truncate_from_end(first_unflushed)
        for i, seg in enumerate(self._segments):
            if not seg.loaded:
                stats.segments_lazy += 1
                continue
            if clean_shutdown or seg.base_offset < first_unflushed:
                if seg.load():
                    continue
                logger.warning(
                    "%s: index of segment %d is missing or corrupt, rebuilding", self, seg.base_offset
                )
                if seg.recover():
                    logger.warning(
                        "%s: segment %d truncated while rebuilding its index", self, seg.base_offset
                    )
                recovered = True
                continue
            recovered = True
            scan_started = time.perf_counter()
            truncated = seg.recover(self._reassign_epoch)
            recover_s += time.perf_counter() - scan_started
            stats.segments_recovered += 1
            stats.bytes_recovered += seg.size
            if truncated:
                logger.warning(
                    "%s: truncated %d invalid bytes from segment %d", self, truncated, seg.base_offset
                )
                for later in self._segments[i + 1 :]:
                    later.delete()
                del self._segments[i + 1 :]
                del self._bases[i + 1 :]
                break
        leo = self.log_end_offset
        floor = 0 if self.config.remote_storage_enable else self._bases[0]
        self.log_start_offset = min(max(log_start_offset, floor), leo)
        if log_start_offset < self.log_start_offset:
            self._unclamped_start = max(log_start_offset, 0)
        flush_started = time.perf_counter()
        if recovered:
            for seg in self._segments:
                if seg.loaded and seg.next_offset > recovery_point:
                    seg.flush()
        flush_s = time.perf_counter() - flush_started
        self.recovery_point = leo if (clean_shutdown or recovered) else min(recovery_point, leo)
        self.leader_epoch_cache.truncate_from_end(leo)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        replay_started = time.perf_counter()
        self._rebuild_producer_state(snapshots)
        done = time.perf_counter()
        stats.logs += 1
        stats.segments_trusted += len(self._segments) - (stats.segments_recovered - recovered_before) - (
            stats.segments_lazy - lazy_before)
        stats.recover_s += recover_s
        stats.producer_state_s += done - replay_started
        stats.flush_s += flush_s
        stats.open_s += replay_started - started - recover_s - flush_s

    def _reassign_epoch(self, h: BatchHeader) -> None:
        if h.partition_leader_epoch > self.leader_epoch_cache.latest_epoch:
            self.leader_epoch_cache.assign(h.partition_leader_epoch, h.base_offset)

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        """The topic's settings (the broker applies them after loading). Turning out tiered, a log loaded with its
        start raised to the first local segment gets its checkpointed start back: below the local segments the
        log is in remote storage. Kept raised, a new leader would take the remote segments below it for deleted
        records (DeleteRecords) and delete them."""
        self._config = config
        start = self._unclamped_start
        if start is None or not hasattr(self, "log_start_offset"):
            return
        self._unclamped_start = None
        if config.remote_storage_enable and start < self.log_start_offset:
            logger.info("%s: tiered: log start offset back to %d (remote below %d)", self, start,
                        self.local_log_start_offset)
            self.log_start_offset = start

    def _rebuild_producer_state(self, snapshots: list[int] | None = None) -> None:
        """Loads the latest snapshot and replays the batches after it (none after a clean shutdown: the snapshot
        is at the log end). ``snapshots``: the snapshot offsets when the caller has just listed the directory."""
        leo = self.log_end_offset
        self.producer_state.delete_snapshots_above(leo, snapshots)
        if snapshots is not None:
            snapshots = [o for o in snapshots if o <= leo]
        start = self.producer_state.load_latest_snapshot(self.log_start_offset, leo, snapshots)
        if start >= leo:
            self.producer_state.map_end_offset = leo
            return
        for seg in self._segments[max(bisect_right(self._bases, start) - 1, 0) :]:
            seg.txn_index.truncate_to(start)  # the replay re-derives the aborted transactions from here
            for pos, h in seg.iter_batches(start if seg.base_offset <= start else None):
                if h.last_offset < start:
                    continue
                if h.is_control:
                    apply_control_batch(self.producer_state, seg, seg.read_batch(pos, h), h)
                else:
                    self.producer_state.update(h)
        self.producer_state.map_end_offset = leo

    # --- state -----------------------------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        seg = self._segments[-1]
        # The active segment is loaded but for a moment after truncation made a lazy one active: one property
        # call less on a path every append, read and follower report takes
        return seg._next_offset if seg._loaded else seg.next_offset

    @property
    def local_log_start_offset(self) -> int:
        """The first offset on local disk; below it (down to the log start offset) a tiered log is remote."""
        return max(self._bases[0], self.log_start_offset)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def size(self) -> int:
        return sum(seg.size for seg in self._segments)

    def sealed_segments(self) -> list[tuple[LogSegment, int]]:
        """The segments before the active one, each with the next segment's base offset: a bound on its next
        offset that needs no opening (equal unless compaction left a gap). Scans over many segments (cleaner,
        tiering) test the bound first, so a segment not yet opened since a clean shutdown stays unopened."""
        segs = self._segments
        return [(segs[k], segs[k + 1].base_offset) for k in range(len(segs) - 1)]

    @property
    def latest_epoch(self) -> int:
        return self.leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest known epoch <= leader_epoch, its end offset); (-1, -1) if unknown."""
        return self.leader_epoch_cache.end_offset_for(leader_epoch, self.log_end_offset)

    # --- appends ---------------------------------------------------------------------------------------------

    def append_as_leader(self, records: Buffer, leader_epoch: int) -> AppendInfo:
        """Validates, assigns offsets from the log end offset, stamps the leader epoch (and LogAppendTime when
        configured), checks producer sequences and appends. Nothing is written if anything fails.

        A writable buffer (the broker's own request frame) is patched in place, saving a copy of every byte on
        the produce path; a read-only one is copied first."""
        view = memoryview(records).cast("B") if isinstance(records, memoryview) else memoryview(records)
        validated = self._validate_leader(view)
        buf: memoryview | bytearray = view if not view.readonly else bytearray(view)
        return self._append_leader(buf, validated, [len(validated)], leader_epoch)[0]

    def append_many_as_leader(self, records: list[Buffer], leader_epoch: int) -> list[AppendInfo]:
        """Several Produce requests' records for this partition, in request order, as one append (one write, one
        index and epoch update): each request's own ``AppendInfo``, as ``append_as_leader`` one by one would give.
        All or nothing: if any request's records fail a check (validation, producer sequence, epoch), it raises
        and nothing is written, so the caller can append them one by one for each request's own answer. The
        records are copied into one buffer (the requests' frames stay as they came)."""
        views = [memoryview(r).cast("B") if isinstance(r, memoryview) else memoryview(r) for r in records]
        validated: Batches = []
        ends: list[int] = []
        at = 0
        for view in views:
            validated.extend((at + pos, h) for pos, h in self._validate_leader(view))
            ends.append(len(validated))
            at += len(view)
        return self._append_leader(bytearray().join(views), validated, ends, leader_epoch)

    def _validate_leader(self, view: memoryview) -> Batches:
        validated = validate_leader_batches(view, self._config.max_message_bytes)
        if self._config.compact_enabled:
            check_keys_present(view, validated, f"{self.topic}-{self.partition}")
        return validated

    def _append_leader(self, buf: memoryview | bytearray, validated: Batches, ends: list[int], leader_epoch: int
                       ) -> list[AppendInfo]:
        """Appends validated batches (``ends``: where each request's batches end in ``validated``); one
        ``AppendInfo`` per request."""
        config = self._config
        append_time = self.clock.time_ms() if config.log_append_time else NO_TIMESTAMP
        offset = self.log_end_offset
        batches: Batches = []
        producers = False
        for pos, _ in validated:
            set_base_offset(buf, pos, offset)
            set_partition_leader_epoch(buf, pos, leader_epoch)
            if append_time != NO_TIMESTAMP:
                set_log_append_time(buf, pos, append_time)
            h = read_header(buf, pos)
            batches.append((pos, h))
            offset = h.last_offset + 1
            producers = producers or h.producer_id >= 0
        # Batches without a producer id have no sequences to check (apply still moves the map's end offset)
        pending = self.producer_state.validate_leader_batches([h for _, h in batches]) if producers else []
        info = self._append(buf, batches, append_time)
        self.producer_state.apply(pending, info.last_offset + 1)
        if len(ends) == 1:
            return [info]
        infos: list[AppendInfo] = []
        start = 0
        for end in ends:
            infos.append(_request_info(batches[start:end], append_time, info.log_start_offset))
            start = end
        return infos

    def append_as_follower(self, records: Buffer) -> AppendInfo:
        """Appends batches fetched from the leader, keeping their offsets (they must start at or above the LEO).
        A trailing partial batch is ignored."""
        view = memoryview(records).cast("B") if isinstance(records, memoryview) else memoryview(records)
        batches = validate_follower_batches(view, self.log_end_offset)
        if not batches:
            leo = self.log_end_offset
            return AppendInfo(leo, leo - 1, NO_TIMESTAMP, -1, NO_TIMESTAMP, self.log_start_offset, 0, 0)
        info = self._append(view[: batches_end(batches)], batches, NO_TIMESTAMP)
        for pos, h in batches:
            if h.is_control:
                apply_control_batch(self.producer_state, self.active_segment, view[pos : pos + h.total_size], h)
            else:
                self.producer_state.update(h)
        return info

    def _append(self, data: Buffer, batches: Batches, append_time: int) -> AppendInfo:
        first = batches[0][1]
        if len(batches) == 1:  # a partition's usual append (the header's fields, not its properties)
            count, max_ts = first.records_count, first.max_timestamp
            last_offset = offset_of_max = first.base_offset + first.last_offset_delta
            if max_ts < NO_TIMESTAMP:
                max_ts = NO_TIMESTAMP
        else:
            max_ts, offset_of_max, count = NO_TIMESTAMP, first.last_offset, 0
            for _, h in batches:
                count += h.records_count
                if h.max_timestamp > max_ts:
                    max_ts, offset_of_max = h.max_timestamp, h.last_offset
            last_offset = batches[-1][1].last_offset
        seg = self._segments[-1]
        config = self._config
        if seg.should_roll(
            len(data),
            max_ts,
            last_offset,
            self.clock.time_ms(),
            config.segment_bytes,
            config.segment_ms,
        ):
            seg = self.roll(first.base_offset)
        seg.append(data, last_offset, max_ts, offset_of_max, batches)
        epochs = self.leader_epoch_cache
        for _, h in batches:
            epochs.assign(h.partition_leader_epoch, h.base_offset)
        # last_offset + 1 is the log end offset now
        if last_offset + 1 - self.recovery_point >= config.flush_interval_messages:
            self.flush()
        return AppendInfo(
            first.base_offset,
            last_offset,
            max_ts,
            offset_of_max,
            append_time,
            self.log_start_offset,
            count,
            len(data),
        )

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Starts a new active segment at ``max(expected_next_offset, log_end_offset)``."""
        new_base = max(expected_next_offset or 0, self.log_end_offset)
        active = self.active_segment
        if active.base_offset == new_base:
            return active  # empty segment at that offset already
        active.on_become_inactive()
        prefix = f"{new_base:020d}"
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            stale = self.dir / (prefix + suffix)
            if stale.exists():
                logger.warning("%s: deleting stale file %s before rolling", self, stale.name)
                stale.unlink()
        seg = self._new_segment(new_base)
        self._segments.append(seg)
        self._bases.append(new_base)
        self._dir_dirty = True
        self.producer_state.map_end_offset = new_base
        self.producer_state.take_snapshot()
        # Kafka flushes the finished segment in the background; so does the log manager (flush_rolled).
        self._pending_flush_offset = new_base
        if self.on_roll is not None:
            self.on_roll(self)
        return seg

    def _epochs_changed(self) -> None:
        if self.on_epochs_changed is not None:  # the log manager writes the checkpoint out a little later
            self.on_epochs_changed(self)
        elif self.on_roll is not None:
            self.on_roll(self)
        else:
            self.leader_epoch_cache.write_out()

    def flush_rolled(self) -> bool:
        """fsyncs the segments finished by rolls (up to the active one) and moves the recovery point there."""
        self.leader_epoch_cache.write_out()
        offset = self._pending_flush_offset
        if offset is None:
            return False
        self.flush(offset)
        return True

    # --- reads -----------------------------------------------------------------------------------------------

    def read(
        self, offset: int, max_bytes: int, max_offset: int | None = None, min_one: bool = True
    ) -> FetchData:
        """Whole batches from the one holding ``offset``, up to ``max_bytes`` (the first batch regardless, with
        ``min_one``), spanning segments, stopping before the batch holding ``max_offset`` (e.g. the high
        watermark). ``offset == log_end_offset`` reads nothing; outside the log raises OffsetOutOfRangeError."""
        leo = self.log_end_offset
        if offset == leo:
            return FetchData()
        if offset < self.log_start_offset or offset > leo:
            raise OffsetOutOfRangeError(offset, self.log_start_offset, leo)
        if offset < self._bases[0]:
            raise OffsetMovedToTieredStorageError(offset, self._bases[0])
        data = FetchData()
        if max_offset is not None and offset >= max_offset:
            return data
        remaining = max_bytes
        i = max(bisect_right(self._bases, offset) - 1, 0)
        segments = self._segments
        while i < len(segments):
            seg = segments[i]
            region = seg.read(offset, remaining, max_offset, min_one and data.size == 0)
            i += 1
            if region is None:
                continue  # nothing at or after offset here (a gap); try the next segment
            if region.length:
                data.regions.append(region)
                data.size += region.length
                remaining -= region.length
            if region.position + region.length < seg.size or remaining <= 0:
                break
            offset = seg.next_offset
        return data

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """ListOffsets: ``(offset, timestamp)``. -2 earliest, -1 latest (LEO), -3 the record with the largest
        timestamp; otherwise the first record whose timestamp is >= ``timestamp`` (None when there is none)."""
        if timestamp == EARLIEST_TIMESTAMP:
            return self.log_start_offset, NO_TIMESTAMP
        if timestamp == EARLIEST_LOCAL_TIMESTAMP:
            return self.local_log_start_offset, NO_TIMESTAMP
        if timestamp == LATEST_TIMESTAMP:
            return self.log_end_offset, NO_TIMESTAMP
        if timestamp == MAX_TIMESTAMP:
            best: LogSegment | None = None
            for seg in self._segments:
                if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                    best = seg
            if best is None:
                return None
            found = best.translate_offset(best.offset_of_max_timestamp)
            if found is None:
                return None
            return self._first_record_at(best, found[0], found[1], best.max_timestamp)
        if timestamp < 0:
            raise ValueError(f"unsupported special timestamp {timestamp}")
        for seg in self._segments:
            if seg.max_timestamp < timestamp or seg.next_offset <= self.log_start_offset:
                continue
            hit = seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
            if hit is not None:
                return self._first_record_at(seg, hit[0], hit[1], timestamp)
        return None

    def _first_record_at(self, seg: LogSegment, pos: int, h: BatchHeader, timestamp: int) -> tuple[int, int]:
        """Refines a batch hit to its first record with timestamp >= ``timestamp`` (decodes this one batch)."""
        floor = max(h.base_offset, self.log_start_offset)
        if h.timestamp_type != LOG_APPEND_TIME:
            try:
                for record in iter_records(seg.read_batch(pos, h), h, check_crc=False):
                    if record.timestamp >= timestamp and record.offset >= floor:
                        return record.offset, record.timestamp
            except ValueError as exc:
                logger.warning("%s: cannot decode batch at offset %d: %s", self, h.base_offset, exc)
        return floor, h.max_timestamp

    # --- truncation and retention ----------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Removes everything from the batch holding ``offset`` on (follower truncation); True if anything went."""
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self.log_end_offset:
            return False
        if offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        doomed = []
        while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
            doomed.append(self._segments.pop())
            self._bases.pop()
        self._schedule_delete(doomed)
        self.active_segment.truncate_to(offset, self.clock.time_ms())
        self._after_truncation()
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drops every segment and restarts the log empty at ``offset``."""
        doomed = self._segments
        self._segments, self._bases = [], []
        self._schedule_delete(doomed)
        self._segments.append(self._new_segment(offset))
        self._bases.append(offset)
        self._dir_dirty = True
        self.log_start_offset = offset
        self.recovery_point = offset
        self.leader_epoch_cache.clear()
        self.producer_state.delete_snapshots_above(-1)
        self._after_truncation()

    def _after_truncation(self) -> None:
        leo = self.log_end_offset
        self.recovery_point = min(self.recovery_point, leo)
        if self._pending_flush_offset is not None and self._pending_flush_offset > leo:
            self._pending_flush_offset = leo
        self.leader_epoch_cache.truncate_from_end(leo)
        self._rebuild_producer_state()

    def maybe_increment_log_start_offset(self, new_offset: int) -> bool:
        """DeleteRecords: moves the log start offset up (whole segments below it go at the next cleanup)."""
        upper = self.high_watermark if self.high_watermark is not None else self.log_end_offset
        if new_offset > upper:
            raise OffsetOutOfRangeError(new_offset, self.log_start_offset, upper)
        if new_offset <= self.log_start_offset:
            return False
        self.log_start_offset = new_offset
        self.leader_epoch_cache.truncate_from_start(new_offset)
        return True

    def delete_expired_segments(self, now_ms: int) -> int:
        """Retention: deletes the oldest segments breaching ``retention.ms`` (largest timestamp older than
        now - retention), ``retention.bytes`` (log larger than the limit) or lying wholly below the log start
        offset. Never the active segment. Returns how many segments went.

        A tiered log applies ``local.retention.ms/bytes`` instead, to segments already copied to remote storage
        only, and keeps its log start offset (the remote log manager applies the total retention remotely)."""
        deleted = self._delete_oldest(now_ms, lambda seg, nxt: nxt.base_offset <= self.log_start_offset)
        cfg = self.config
        tiered = cfg.remote_storage_enable
        retention_ms = cfg.effective_local_retention_ms if tiered else cfg.retention_ms
        retention_bytes = cfg.effective_local_retention_bytes if tiered else cfg.retention_bytes

        def copied(seg: LogSegment) -> bool:
            return not tiered or seg.next_offset - 1 <= self.remote_copied_offset

        if cfg.delete_enabled and retention_ms >= 0:
            deleted += self._delete_oldest(
                now_ms, lambda seg, nxt: copied(seg) and now_ms - seg.largest_timestamp() > retention_ms
            )
        if cfg.delete_enabled and retention_bytes >= 0:
            excess = self.size - retention_bytes

            def over_size(seg: LogSegment, nxt: LogSegment) -> bool:
                nonlocal excess
                if copied(seg) and excess - seg.size >= 0:
                    excess -= seg.size
                    return True
                return False

            deleted += self._delete_oldest(now_ms, over_size)
        if deleted:
            self.delete_pending_segments(now_ms)
        return deleted

    def _delete_oldest(self, now_ms: int, predicate: Callable[[LogSegment, LogSegment], bool]) -> int:
        upper = self.high_watermark if self.high_watermark is not None else self.log_end_offset
        n = 0
        while n < len(self._segments) - 1:
            seg, nxt = self._segments[n], self._segments[n + 1]
            if nxt.base_offset > upper or not predicate(seg, nxt):
                break
            n += 1
        if n == 0:
            return 0
        doomed = self._segments[:n]
        del self._segments[:n]
        del self._bases[:n]
        self._schedule_delete(doomed, now_ms)
        if self._bases[0] > self.log_start_offset and not self.config.remote_storage_enable:
            self.log_start_offset = self._bases[0]
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        self.producer_state.delete_snapshots_below(self._bases[0])
        logger.info("%s: deleted %d segment(s), log start offset now %d", self, n, self.log_start_offset)
        return n

    def _schedule_delete(self, segments: list[LogSegment], now_ms: int | None = None) -> None:
        """Renames to ``.deleted`` now and removes after ``file.delete.delay.ms`` so that in-flight sendfile
        reads of those files still complete."""
        due = (self.clock.time_ms() if now_ms is None else now_ms) + self.config.file_delete_delay_ms
        for seg in segments:
            seg.rename_for_delete()
            self._pending_deletes.append((due, seg))

    def delete_pending_segments(self, now_ms: int) -> int:
        """Removes the files of deleted segments whose delay has passed."""
        due = [seg for t, seg in self._pending_deletes if t <= now_ms]
        if due:
            self._pending_deletes = [(t, seg) for t, seg in self._pending_deletes if t > now_ms]
            for seg in due:
                seg.delete()
        return len(due)

    def replace_segments(self, old: list[LogSegment], new: LogSegment) -> bool:
        """Swaps a cleaned segment (files named ``*.swap``) in for ``old``, a contiguous run of non-active
        segments. The segment list is replaced in one assignment, so a reader sees either version. False (and
        the new files removed) when ``old`` is no longer part of the log (retention or truncation got there
        first)."""
        segs = self._segments
        try:
            i = next(k for k, s in enumerate(segs) if s is old[0])
        except StopIteration:
            i = -1
        if i < 0 or segs[i : i + len(old)] != old or i + len(old) >= len(segs) or segs[-1].closed:
            new.delete()
            return False
        self._schedule_delete(old)  # .deleted first: a crash now still completes the swap at load
        new.rename_suffix(SWAP_SUFFIX, "")
        new_segments = segs[:i] + [new] + segs[i + len(old) :]
        self._segments, self._bases = new_segments, [s.base_offset for s in new_segments]
        fsync_dir(self.dir)
        return True

    # --- durability and lifecycle ----------------------------------------------------------------------------

    def flush(self, offset: int | None = None) -> None:
        """fsyncs the segments holding offsets in [recovery_point, offset) (default: up to the LEO) and moves
        the recovery point to ``offset``."""
        target = self.log_end_offset if offset is None else min(offset, self.log_end_offset)
        if self._dir_dirty:
            fsync_dir(self.dir)
            self._dir_dirty = False
        if self._parent_dirty:
            fsync_dir(self.dir.parent)
            self._parent_dirty = False
        self.leader_epoch_cache.sync()
        if target > self.recovery_point:
            for seg in self._segments:
                # A segment not opened since the clean shutdown was fsynced then and has not changed.
                if seg.loaded and seg.base_offset < target and seg.next_offset > self.recovery_point:
                    seg.flush()
            self.recovery_point = target
        if self._pending_flush_offset is not None and self._pending_flush_offset <= target:
            self._pending_flush_offset = None
        self.last_flush_ms = self.clock.time_ms()

    def flush_due(self, now_ms: int) -> bool:
        """Runs the flush policy: segments finished by a roll, and ``flush.ms`` since the last flush."""
        flushed = False
        if self._pending_flush_offset is not None:
            self.flush(self._pending_flush_offset)
            flushed = True
        if (
            self.log_end_offset > self.recovery_point
            and now_ms - self.last_flush_ms >= self.config.flush_interval_ms
        ):
            self.flush()
            flushed = True
        return flushed

    def close(self, take_snapshot: bool = True, flush: bool = False, fsync: bool = True) -> None:
        """Closes the files. ``take_snapshot`` writes the producer state at the LEO (a clean close) unless a
        snapshot there exists already or the log holds nothing and no producer; ``flush`` fsyncs everything
        first, indexes included (clean shutdown). ``flush`` with ``fsync=False`` writes everything but leaves
        making it durable to the caller (one file-system sync for all logs, see ``LogManager.shutdown``): the
        recovery point is not moved then."""
        if self.active_segment.closed:
            return
        if flush and fsync:
            self.flush()
        if take_snapshot:
            self.leader_epoch_cache.write_out()
            producers = self.producer_state
            leo = self.log_end_offset
            producers.map_end_offset = leo
            if not producers.snapshot_path(leo).exists() and (producers.producers or leo > self.log_start_offset):
                producers.take_snapshot(durable=fsync or not flush)
        for seg in self._segments:
            seg.close(flush=flush and fsync)
        for _, seg in self._pending_deletes:
            seg.delete()
        self._pending_deletes = []
