"""Log compaction: keep the latest record of every key in logs with ``cleanup.policy`` compact.

A compacted log has a clean section (already compacted, below the cleaner checkpoint of its log dir,
``cleaner-offset-checkpoint``) and a dirty section (from there up to the first uncleanable segment: the active
one, or one holding records younger than ``min.compaction.lag.ms``). A cleaning:

1. builds an :class:`OffsetMap` (key digest -> latest offset) over the dirty section, whole segments at a time,
   as many as fit in the map's memory (at least one must, else the log is marked uncleanable);
2. recopies every segment up to the map's end, grouped so each group stays within ``segment.bytes``, dropping
   records whose key has a later offset in the map and tombstones past their horizon (see ``_retain_deletes``);
   batches keep their base and last offsets, producer id/epoch/base sequence, leader epoch, attributes and codec;
3. writes each group as ``<base>.log.cleaned``, renames it ``.swap`` (the commit point); the caller then swaps it
   into the log (:meth:`Log.replace_segments`, on the thread that owns the log) and advances the checkpoint.

Everything in :meth:`LogCleaner.prepare` only reads sealed segments (``os.pread``) and writes new files, so it
may run on a worker thread while the log keeps appending and serving fetches.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

from moldau.protocol.types import TopicPartition
from moldau.storage.checkpoint import CheckpointError, read_offsets, write_offsets
from moldau.storage.cleaner_job import (
    ENTRY_COST_BYTES,
    CleanJob,
    CleanStats,
    JobResult,
    OffsetMap,
    SegmentRef,
    Throttler,
    UncleanableError,
    run_job,
)
from moldau.storage.log import Log
from moldau.storage.segment import SWAP_SUFFIX, LogSegment

__all__ = ["CLEANER_OFFSET_CHECKPOINT", "ENTRY_COST_BYTES", "CleanJob", "CleanStats", "JobResult", "LogCleaner",
           "OffsetMap", "PreparedClean", "Throttler", "UncleanableError", "run_job"]

logger = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"


@dataclass
class PreparedClean:
    """The output of :meth:`LogCleaner.prepare`: ``.swap`` segments, each replacing a run of old segments."""

    log: Log
    end_offset: int  # the new cleaner checkpoint: everything below is clean
    swaps: list[tuple[list[LogSegment], LogSegment]] = field(default_factory=list)
    stats: CleanStats = field(default_factory=CleanStats)


class LogCleaner:
    """Compacts logs; holds the cleaner checkpoints and the logs currently being cleaned or uncleanable."""

    def __init__(self, dedupe_buffer_bytes: int, io_max_bytes_per_second: float = float("inf")) -> None:
        self.dedupe_buffer_bytes = dedupe_buffer_bytes
        self.throttler = Throttler(io_max_bytes_per_second)
        self.in_progress: set[TopicPartition] = set()
        self.uncleanable: set[TopicPartition] = set()
        self._lock = threading.Lock()

    # --- checkpoints -----------------------------------------------------------------------------------------

    @staticmethod
    def _checkpoint_path(log: Log) -> Path:
        return log.dir.parent / CLEANER_OFFSET_CHECKPOINT

    def checkpoint_of(self, log: Log, cache: dict[Path, dict[TopicPartition, int]] | None = None) -> int:
        """Where the log's dirty section starts. ``cache`` saves re-reading a log dir's file for every log."""
        path = self._checkpoint_path(log)
        offsets = cache.get(path) if cache is not None else None
        if offsets is None:
            try:
                offsets = read_offsets(path)
            except CheckpointError as exc:
                logger.warning("ignoring corrupt cleaner checkpoint: %s", exc)
                offsets = {}
            if cache is not None:
                cache[path] = offsets
        offset = offsets.get((log.topic, log.partition), 0)
        if offset > log.log_end_offset:
            offset = 0  # the log was truncated below its clean point (a follower): all of it is dirty again
        return max(offset, log.log_start_offset)

    def update_checkpoint(self, log: Log, offset: int) -> None:
        with self._lock:
            path = self._checkpoint_path(log)
            try:
                offsets = read_offsets(path)
            except CheckpointError:
                offsets = {}
            offsets[(log.topic, log.partition)] = offset
            # drop partitions deleted from this dir, so a re-created topic starts dirty
            offsets = {tp: o for tp, o in offsets.items() if (path.parent / f"{tp[0]}-{tp[1]}").is_dir()}
            write_offsets(path, offsets)

    # --- dirty section ---------------------------------------------------------------------------------------

    @staticmethod
    def cleanable_segments(log: Log, now_ms: int) -> list[LogSegment]:
        """Sealed segments, stopping at the first one holding records younger than min.compaction.lag.ms or
        above the last stable offset, as Kafka: an unreplicated later version of a key could still be truncated
        away, and one in an open transaction could still be aborted, so neither may remove the older one."""
        return [seg for seg, _ in LogCleaner._cleanable(log, now_ms)]

    @staticmethod
    def _cleanable(log: Log, now_ms: int) -> list[tuple[LogSegment, int]]:
        """cleanable_segments with each one's end bound (Log.sealed_segments); opens no segment the bound
        decides (a compacted log loaded after a clean shutdown stays unopened until it is cleaned)."""
        out: list[tuple[LogSegment, int]] = []
        lag = log.config.min_compaction_lag_ms
        stable = log.last_stable_offset  # the high watermark without open transactions (the LEO without a HW)
        for seg, end in log.sealed_segments():
            if lag > 0 and seg.largest_timestamp() > now_ms - lag:
                break
            if end > stable and seg.next_offset > stable:
                break
            out.append((seg, end))
        return out

    def dirty_ratio(
        self, log: Log, now_ms: int, cache: dict[Path, dict[TopicPartition, int]] | None = None
    ) -> tuple[float, bool]:
        """(dirty bytes / cleanable bytes, whether a dirty record is past max.compaction.lag.ms)."""
        first_dirty = self.checkpoint_of(log, cache)
        clean = dirty = 0
        overdue = False
        max_lag = log.config.max_compaction_lag_ms
        for seg, end in self._cleanable(log, now_ms):
            # Only the segment holding first_dirty needs opening to tell; the bounds decide the others.
            if end <= first_dirty or (seg.base_offset < first_dirty and seg.next_offset <= first_dirty):
                clean += seg.size
            else:
                dirty += seg.size
                # max_lag >= now_ms (the default, Long.MAX) can never be passed: no need to open the segment
                if seg.size and max_lag < now_ms and now_ms - seg.largest_timestamp() > max_lag:
                    overdue = True
        total = clean + dirty
        return (dirty / total if total else 0.0), overdue and dirty > 0

    def grab_filthiest(self, logs: list[Log], now_ms: int) -> tuple[Log, float] | None:
        """The compacted log most in need of cleaning (marked in progress), with its dirty ratio."""
        best: tuple[Log, float] | None = None
        cache: dict[Path, dict[TopicPartition, int]] = {}
        with self._lock:
            for log in logs:
                tp = (log.topic, log.partition)
                if not log.config.compact_enabled or tp in self.in_progress or tp in self.uncleanable:
                    continue
                ratio, overdue = self.dirty_ratio(log, now_ms, cache)
                if ratio <= 0 or (ratio < log.config.min_cleanable_dirty_ratio and not overdue):
                    continue
                if best is None or ratio > best[1]:
                    best = (log, ratio)
            if best is not None:
                self.in_progress.add((best[0].topic, best[0].partition))
        return best

    def done(self, log: Log) -> None:
        with self._lock:
            self.in_progress.discard((log.topic, log.partition))

    # --- cleaning --------------------------------------------------------------------------------------------

    def plan(self, log: Log, now_ms: int, map_bytes: int | None = None) -> tuple[CleanJob, list[LogSegment]]:
        """What to clean, as plain values for :func:`run_job` (call on the thread that owns the log, or at least
        where the segment list is stable); also returns the segments the job refers to."""
        cfg = log.config
        cleanable = self.cleanable_segments(log, now_ms)
        refs = [SegmentRef(s.base_offset, str(s.log_path), s.size, s.next_offset, s.largest_timestamp())
                for s in cleanable]
        producers = dict(log.producer_state.producers)  # a C-level copy: safe against concurrent appends
        job = CleanJob(
            name=f"{log.topic}-{log.partition}", dir=str(log.dir), first_dirty=self.checkpoint_of(log),
            now_ms=now_ms, map_bytes=self.dedupe_buffer_bytes if map_bytes is None else map_bytes,
            cleanable=refs, producer_last_offsets={pid: e.last_offset for pid, e in producers.items()},
            segment_bytes=cfg.segment_bytes, index_interval_bytes=cfg.index_interval_bytes,
            segment_index_bytes=cfg.segment_index_bytes, delete_retention_ms=cfg.delete_retention_ms,
            io_max_bytes_per_second=self.throttler.rate,
        )
        if refs:
            for t in log.collect_aborted_txns(refs[0].base_offset, refs[-1].next_offset):
                job.aborted_txns.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))
        return job, cleanable

    @staticmethod
    def adopt(log: Log, segments: list[LogSegment], result: JobResult) -> PreparedClean:
        """Opens the ``.swap`` segments a job wrote and pairs them with the segments they replace."""
        by_base = {s.base_offset: s for s in segments}
        prepared = PreparedClean(log, result.end_offset, stats=result.stats)
        for old_bases, new_base in result.swaps:
            new = LogSegment(log.dir, new_base, index_interval_bytes=log.config.index_interval_bytes,
                             segment_index_bytes=log.config.segment_index_bytes, created_ms=result.now_ms,
                             suffix=SWAP_SUFFIX)
            if not new.load():
                new.recover()
            prepared.swaps.append(([by_base[b] for b in old_bases], new))
        return prepared

    def prepare(self, log: Log, now_ms: int, map_bytes: int | None = None) -> PreparedClean | None:
        """plan + run_job + adopt on the calling thread, with this cleaner's shared throttle: builds the offset
        map and writes the replacement segments as ``.swap`` files (thread-safe w.r.t. appends and reads of the
        log). None when there is nothing dirty to clean."""
        job, segments = self.plan(log, now_ms, map_bytes)
        result = run_job(job, self.throttler)
        return None if result is None else self.adopt(log, segments, result)

    def finish(self, prepared: PreparedClean) -> bool:
        """Swaps the prepared segments into the log (call on the thread that owns the log) and advances the
        cleaner checkpoint. False when the log changed underneath (the cleaning is dropped, nothing lost)."""
        log = prepared.log
        ok = True
        for old, new in prepared.swaps:
            if not ok or not log.replace_segments(old, new):
                ok = False
                if not new.closed:
                    new.delete()
        if ok:
            self.update_checkpoint(log, prepared.end_offset)
        return ok

    def clean(self, log: Log, now_ms: int) -> PreparedClean | None:
        """prepare + finish in one call (tools, tests, single-threaded use)."""
        prepared = self.prepare(log, now_ms)
        if prepared is not None:
            self.finish(prepared)
        return prepared
