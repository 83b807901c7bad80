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
import os
import struct
import threading
import time
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from moldau.protocol.compression import decompress
from moldau.protocol.records import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    MIN_BATCH_LENGTH,
    BatchHeader,
    iter_headers,
    read_header,
    update_crc,
)
from moldau.storage.checkpoint import CheckpointError, TopicPartition, read_offsets, write_offsets
from moldau.storage.cleaner_scan import map_key, map_keys, rebuild, scan_keys, select_dense, select_general
from moldau.storage.log import Log
from moldau.storage.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    INT32_MAX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    filename_prefix,
)

logger = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
# Measured (tests/unit/storage/test_cleaner.py::test_offset_map_entry_cost): a dict entry mapping a key (a bytes
# object of up to 48 bytes: the key itself when shorter than 16 bytes, else its 16-byte MD5 digest) to an int offset
# costs 110-141 bytes of Python heap (dict growth steps included), plus 8 bytes in the sorted array of latest
# offsets and 8 more while that array is sorted. Kafka's array costs 24.
ENTRY_COST_BYTES = 160
LOAD_FACTOR = 0.9  # Kafka's dedupe buffer load factor
_WRITE_CHUNK = 1024 * 1024
_READ_CHUNK = 4 * 1024 * 1024
_SIZE = struct.Struct(">i")


class UncleanableError(Exception):
    """A log cannot be cleaned (not even one segment fits the offset map, or its data cannot be decoded)."""


class OffsetMap:
    """Key (or its MD5 digest, see cleaner_scan) -> the largest offset seen for that key, bounded by a memory
    budget."""

    def __init__(self, memory_bytes: int) -> None:
        self.capacity = int(memory_bytes // ENTRY_COST_BYTES * LOAD_FACTOR)
        self._map: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._map)

    @property
    def entries(self) -> dict[bytes, int]:
        """The map itself, keyed by :func:`map_key` (read-only use)."""
        return self._map

    def has_room_for(self, entries: int) -> bool:
        return len(self._map) + entries <= self.capacity

    def put(self, key: bytes, offset: int) -> bool:
        """Records ``offset`` for ``key``; False (nothing stored) when the key is new and the map is full."""
        mkey = map_key(key)
        if len(self._map) >= self.capacity and mkey not in self._map:
            return False
        self._map[mkey] = offset
        return True

    def put_batch(self, keys: list[bytes], offsets: list[int]) -> bool:
        """``put`` for a batch's keys in offset order; False when the map filled up part way (the keys before
        that point stay). With room for all of them it is one C-level dict.update."""
        if len(self._map) + len(keys) <= self.capacity:
            self._map.update(zip(map_keys(keys), offsets))
            return True
        return all(self.put(k, o) for k, o in zip(keys, offsets))

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, -1 when it is not in the map."""
        return self._map.get(map_key(key), -1)

    def latest_offsets(self, extra: list[int]) -> array[int]:
        """The map's offsets plus ``extra``, sorted: a record of the dirty section is live iff its offset is
        here, so the recopy pass finds a batch's live records by bisection, without reading keys."""
        return array("q", sorted([*self._map.values(), *extra]))

    def clear(self) -> None:
        self._map.clear()


class Throttler:
    """Caps the cleaner's I/O at ``log.cleaner.io.max.bytes.per.second`` (shared by all cleaner threads)."""

    def __init__(self, bytes_per_second: float, sleep: Callable[[float], None] = time.sleep) -> None:
        self.rate = bytes_per_second
        self._sleep = sleep
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._bytes = 0.0

    def maybe_throttle(self, nbytes: int) -> None:
        if self.rate <= 0 or self.rate == float("inf"):
            return
        with self._lock:
            self._bytes += nbytes
            elapsed = time.monotonic() - self._start
            wait = self._bytes / self.rate - elapsed
            if elapsed > 1.0 and wait <= 0:
                self._start, self._bytes = time.monotonic(), 0.0
        if wait > 0:
            self._sleep(wait)


@dataclass
class CleanStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_removed: int = 0
    elapsed_s: float = 0.0


@dataclass
class PreparedClean:
    """The output of :meth:`LogCleaner.prepare`: ``.swap`` segments, each replacing a run of old segments."""

    log: Log
    end_offset: int  # the new cleaner checkpoint: everything below is clean
    swaps: list[tuple[list[LogSegment], LogSegment]] = field(default_factory=list)
    stats: CleanStats = field(default_factory=CleanStats)


def _empty_batch(h: BatchHeader, header: bytes) -> bytes:
    """A record-less batch keeping the producer metadata and offsets (Kafka keeps one for the last batch of a
    producer so its sequence state survives); uncompressed, as Kafka writes it."""
    b = bytearray(header[:BATCH_HEADER_SIZE])
    _SIZE.pack_into(b, 8, BATCH_HEADER_SIZE - 12)
    b[22] &= ~COMPRESSION_MASK & 0xFF  # attributes int16: the codec bits are in its low byte
    _SIZE.pack_into(b, 57, 0)
    update_crc(b)
    return bytes(b)


def _read_batches(seg: LogSegment, throttle: Callable[[int], None]) -> Iterator[tuple[BatchHeader, bytes]]:
    """(header, bytes) of each batch of a sealed segment, read in large chunks (not a pread per batch)."""
    fd = seg.file.fileno()
    size = seg.size
    pos = 0
    while pos < size:
        chunk = os.pread(fd, min(_READ_CHUNK, size - pos), pos)
        throttle(len(chunk))
        consumed = 0
        for rel, h in iter_headers(chunk):
            consumed = rel + h.total_size
            yield h, chunk[rel:consumed]
        if consumed == 0:  # one batch larger than the chunk, or the end of the valid data
            if len(chunk) < BATCH_HEADER_SIZE:
                return
            h = read_header(chunk)
            if h.batch_length < MIN_BATCH_LENGTH:
                return
            data = os.pread(fd, h.total_size, pos)
            if len(data) < h.total_size:
                return
            yield h, data
            consumed = h.total_size
        pos += consumed


def _payload(data: bytes, h: BatchHeader) -> bytes:
    payload = memoryview(data)[BATCH_HEADER_SIZE : h.total_size]
    return bytes(payload) if h.compression == 0 else decompress(h.compression, payload)


@dataclass
class _MapResult:
    """What the recopy pass needs from the map pass."""

    end_offset: int
    offset_map: OffsetMap
    first_dirty: int
    live: array[int] = field(default_factory=lambda: array("q"))
    irregular: set[int] = field(default_factory=set)  # dirty batches whose offsets are not base..base+n-1


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
        above the high watermark (Kafka stops at the last stable offset: an unreplicated later version of a key
        could still be truncated away, so it must not remove the older one)."""
        out: list[LogSegment] = []
        lag = log.config.min_compaction_lag_ms
        hw = log.high_watermark
        for seg in log.segments[:-1]:
            if lag > 0 and seg.largest_timestamp() > now_ms - lag:
                break
            if hw is not None and seg.next_offset > hw:
                break
            out.append(seg)
        return out

    def dirty_ratio(
        self, log: Log, now_ms: int, cache: dict[Path, dict[TopicPartition, int]] | None = None
    ) -> tuple[float, bool]:
        """(dirty bytes / cleanable bytes, whether a dirty record is past max.compaction.lag.ms)."""
        first_dirty = self.checkpoint_of(log, cache)
        clean = dirty = 0
        overdue = False
        max_lag = log.config.max_compaction_lag_ms
        for seg in self.cleanable_segments(log, now_ms):
            if seg.next_offset <= first_dirty:
                clean += seg.size
            else:
                dirty += seg.size
                if seg.size and now_ms - seg.largest_timestamp() > max_lag:
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

    def prepare(self, log: Log, now_ms: int, map_bytes: int | None = None) -> PreparedClean | None:
        """Builds the offset map and writes the replacement segments as ``.swap`` files (thread-safe w.r.t.
        appends and reads of the log). None when there is nothing dirty to clean."""
        started = time.monotonic()
        first_dirty = self.checkpoint_of(log)
        cleanable = self.cleanable_segments(log, now_ms)
        dirty = [s for s in cleanable if s.next_offset > first_dirty]
        if not dirty:
            return None
        offset_map = OffsetMap(self.dedupe_buffer_bytes if map_bytes is None else map_bytes)
        stats = CleanStats()
        mapped = self._build_offset_map(log, dirty, first_dirty, offset_map)
        prepared = PreparedClean(log, mapped.end_offset, stats=stats)
        to_clean = [s for s in cleanable if s.base_offset < mapped.end_offset]
        for group in self._group(to_clean, log.config.segment_bytes):
            retain = [self._retain_deletes(s, first_dirty, now_ms, log) for s in group]
            new = self._clean_group(log, group, retain, mapped, stats, now_ms)
            prepared.swaps.append((group, new))
        stats.elapsed_s = time.monotonic() - started
        return prepared

    @staticmethod
    def _retain_deletes(seg: LogSegment, first_dirty: int, now_ms: int, log: Log) -> bool:
        """Tombstones survive the cleaning that first sees them (their segment is dirty); afterwards they go
        once the segment's largest timestamp is older than delete.retention.ms."""
        if seg.next_offset > first_dirty:
            return True
        return seg.largest_timestamp() > now_ms - log.config.delete_retention_ms

    def _build_offset_map(
        self, log: Log, dirty: list[LogSegment], first_dirty: int, offset_map: OffsetMap
    ) -> _MapResult:
        """Fills the map from the dirty segments until it is full (Kafka's rule); the result ends where the map
        ends: the end of the last segment read completely. Keys of a partly read segment may stay in the map:
        their offsets are later than anything cleaned, so they only (rightly) drop older versions."""
        result = _MapResult(dirty[0].base_offset, offset_map, first_dirty)
        keyless: list[int] = []
        throttle = self.throttler.maybe_throttle
        for seg in dirty:
            for h, data in _read_batches(seg, throttle):
                if h.is_control or h.last_offset < first_dirty:
                    continue
                base, count = h.base_offset, h.records_count
                keys, offsets, no_key = scan_keys(_payload(data, h), count, base)
                if no_key or offsets != list(range(base, base + count)):
                    result.irregular.add(base)
                if base < first_dirty:  # the log start or checkpoint fell inside this batch
                    pairs = [(k, o) for k, o in zip(keys, offsets) if o >= first_dirty]
                    keys, offsets = [k for k, _ in pairs], [o for _, o in pairs]
                    no_key = [o for o in no_key if o >= first_dirty]
                keyless += no_key
                if not offset_map.put_batch(keys, offsets):
                    if seg is dirty[0]:
                        raise UncleanableError(
                            f"{log}: segment {seg.base_offset} holds more keys than the {offset_map.capacity} "
                            "that log.cleaner.dedupe.buffer.size allows"
                        )
                    result.live = offset_map.latest_offsets(keyless)
                    return result
            result.end_offset = seg.next_offset
        result.live = offset_map.latest_offsets(keyless)
        return result

    @staticmethod
    def _group(segments: list[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
        """Consecutive segments whose total size fits ``segment.bytes`` (and whose offsets fit one index)."""
        groups: list[list[LogSegment]] = []
        for seg in segments:
            if groups:
                g = groups[-1]
                size = sum(s.size for s in g) + seg.size
                if size <= max_bytes and seg.next_offset - 1 - g[0].base_offset <= INT32_MAX:
                    g.append(seg)
                    continue
            groups.append([seg])
        return groups

    def _clean_group(
        self,
        log: Log,
        group: list[LogSegment],
        retain: list[bool],
        mapped: _MapResult,
        stats: CleanStats,
        now_ms: int,
    ) -> LogSegment:
        cfg = log.config
        prefix = filename_prefix(group[0].base_offset)
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):  # leftovers of an abandoned attempt
            (log.dir / (prefix + suffix + CLEANED_SUFFIX)).unlink(missing_ok=True)
        new = LogSegment(
            log.dir,
            group[0].base_offset,
            index_interval_bytes=cfg.index_interval_bytes,
            segment_index_bytes=cfg.segment_index_bytes,
            created_ms=now_ms,
            suffix=CLEANED_SUFFIX,
        )
        try:
            for seg, retain_deletes in zip(group, retain):
                self._clean_segment(log, seg, new, retain_deletes, mapped, stats)
            new.on_become_inactive()
            new.flush()
            new.rename_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
        except BaseException:
            new.delete()
            raise
        return new

    def _clean_segment(
        self,
        log: Log,
        seg: LogSegment,
        new: LogSegment,
        retain_deletes: bool,
        mapped: _MapResult,
        stats: CleanStats,
    ) -> None:
        buf = bytearray()
        headers: list[tuple[int, BatchHeader]] = []
        for h, data in _read_batches(seg, self.throttler.maybe_throttle):
            stats.bytes_read += len(data)
            out = self._filter_batch(log, data, h, retain_deletes, mapped, stats)
            if out is None:
                continue
            out_h = h if out is data else read_header(out)
            headers.append((len(buf), out_h))
            buf += out
            if len(buf) >= _WRITE_CHUNK:
                self._flush_chunk(new, buf, headers)
                buf, headers = bytearray(), []
        if buf:
            self._flush_chunk(new, buf, headers)

    def _flush_chunk(self, new: LogSegment, buf: bytearray, headers: list[tuple[int, BatchHeader]]) -> None:
        max_ts, offset_of_max = -1, headers[0][1].last_offset
        for _, h in headers:
            if h.max_timestamp > max_ts:
                max_ts, offset_of_max = h.max_timestamp, h.last_offset
        new.append(buf, headers[-1][1].last_offset, max_ts, offset_of_max, headers)
        self.throttler.maybe_throttle(len(buf))

    @staticmethod
    def _filter_batch(
        log: Log, data: bytes, h: BatchHeader, retain_deletes: bool, mapped: _MapResult, stats: CleanStats
    ) -> bytes | None:
        """The batch with its obsolete records removed: ``data`` itself when all stay, None when it goes.

        Per batch first: the live offsets inside a dirty batch come from bisecting the sorted latest offsets, so
        a batch that is wholly dead or wholly live is dropped or copied without decompressing it; a partly live
        one is walked record by record (see cleaner_scan) and its survivors copied byte for byte."""
        if h.is_control:
            return data  # transaction markers: kept (Moldau has no transactions to resolve them against)
        base, count = h.base_offset, h.records_count
        stats.records_read += count
        live = mapped.live
        lo = bisect_left(live, base)
        hi = bisect_right(live, h.last_offset, lo)
        regular = base >= mapped.first_dirty and base not in mapped.irregular and retain_deletes
        if regular and hi - lo == count:
            stats.bytes_written += len(data)
            return data
        if base >= mapped.first_dirty and hi == lo:
            spans: list[tuple[int, int]] = []
        else:
            body = _payload(data, h)
            if regular:
                spans, max_ts = select_dense(body, count, [o - base for o in live[lo:hi]])
            else:
                spans, max_ts = select_general(
                    body, count, base, mapped.first_dirty, set(live[lo:hi]), mapped.offset_map.entries,
                    not retain_deletes,
                )
            if len(spans) == count:
                stats.bytes_written += len(data)
                return data
        stats.records_removed += count - len(spans)
        if not spans:
            entry = log.producer_state.last_entry(h.producer_id) if h.producer_id >= 0 else None
            if entry is not None and entry.last_offset == h.last_offset:
                out = _empty_batch(h, data)
                stats.bytes_written += len(out)
                return out
            return None
        out = rebuild(data, h, body, spans, max_ts)
        stats.bytes_written += len(out)
        return out

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
