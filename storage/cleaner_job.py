"""The work of one cleaning, runnable in another process: build the offset map, recopy, write ``.swap`` files.

A :class:`CleanJob` describes the log by plain values (segment file paths and sizes, the settings that matter,
the last offset of every producer), so the work can run on a thread or in a cleaner process that shares no
interpreter (and no GIL) with the broker. :func:`run_job` only reads sealed segment files and writes new ones; it
returns the base offsets of each replaced run and of its ``.swap`` replacement, which the log's owner then swaps
in (storage/cleaner.py).
"""

from __future__ import annotations

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
from moldau.protocol.control_records import read_marker
from moldau.protocol.records import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    MIN_BATCH_LENGTH,
    BatchHeader,
    iter_headers,
    read_header,
    update_crc,
)
from moldau.storage.cleaner_scan import map_key, map_keys, rebuild, scan_keys, select_dense, select_general
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
from moldau.storage.txn_index import TXN_INDEX_SUFFIX, read_entries

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


def _empty_batch(h: BatchHeader, header: bytes) -> bytes:
    """A record-less batch keeping the producer metadata and offsets (Kafka keeps one for the last batch of a
    producer so its sequence state survives); uncompressed, as Kafka writes it."""
    b = bytearray(header[:BATCH_HEADER_SIZE])
    _SIZE.pack_into(b, 8, BATCH_HEADER_SIZE - 12)
    b[22] &= ~COMPRESSION_MASK & 0xFF  # attributes int16: the codec bits are in its low byte
    _SIZE.pack_into(b, 57, 0)
    update_crc(b)
    return bytes(b)


def _read_batches(seg: SegmentRef, throttle: Callable[[int], None]) -> Iterator[tuple[BatchHeader, bytes]]:
    """(header, bytes) of each batch of a sealed segment, read in large chunks (not a pread per batch)."""
    with open(seg.path, "rb") as f:
        yield from _read_file(f.fileno(), seg.size, throttle)


def _read_file(fd: int, size: int, throttle: Callable[[int], None]) -> Iterator[tuple[BatchHeader, bytes]]:
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


@dataclass(frozen=True)
class SegmentRef:
    """A sealed segment as the job sees it: its file and the state the log had when the job was planned."""

    base_offset: int
    path: str
    size: int
    next_offset: int
    largest_timestamp: int


@dataclass
class CleanJob:
    name: str  # for messages: topic-partition
    dir: str
    first_dirty: int
    now_ms: int
    map_bytes: int
    cleanable: list[SegmentRef]
    producer_last_offsets: dict[int, int]  # producer id -> offset of its last batch
    segment_bytes: int
    index_interval_bytes: int
    segment_index_bytes: int
    delete_retention_ms: int
    io_max_bytes_per_second: float = float("inf")
    # producer id -> [(first offset, marker offset)] of its aborted transactions (from the .txnindex files)
    aborted_txns: dict[int, list[tuple[int, int]]] = field(default_factory=dict)


@dataclass
class JobResult:
    end_offset: int  # the new cleaner checkpoint: everything below is clean
    swaps: list[tuple[list[int], int]]  # (base offsets of a replaced run, base offset of its .swap segment)
    stats: CleanStats
    now_ms: int  # the job's clock: the creation time of the new segments


def run_job(job: CleanJob, throttler: Throttler | None = None) -> JobResult | None:
    """Cleans what the job describes; None when nothing is dirty. ``throttler`` defaults to one at the job's
    rate (a cleaner process has its own)."""
    return _Runner(job, throttler or Throttler(job.io_max_bytes_per_second)).run()


class _Runner:
    def __init__(self, job: CleanJob, throttler: Throttler) -> None:
        self.job = job
        self.throttle = throttler.maybe_throttle
        self.stats = CleanStats()
        self._txn_read: set[int] = set()  # producers with a transactional batch read since their last marker
        self._dropped_aborts: set[int] = set()  # offsets of removed ABORT markers: their .txnindex entries go

    def _aborted(self, h: BatchHeader) -> bool:
        """A data batch of an aborted transaction: its producer aborted one spanning its offset (a producer has
        one transaction open at a time, so the span from first offset to ABORT marker is all of it)."""
        spans = self.job.aborted_txns.get(h.producer_id) if h.is_transactional and not h.is_control else None
        return spans is not None and any(first <= h.base_offset < last for first, last in spans)

    def run(self) -> JobResult | None:
        started = time.monotonic()
        job = self.job
        dirty = [s for s in job.cleanable if s.next_offset > job.first_dirty]
        if not dirty:
            return None
        mapped = self._build_offset_map(dirty, job.first_dirty, OffsetMap(job.map_bytes))
        result = JobResult(mapped.end_offset, [], self.stats, job.now_ms)
        to_clean = [s for s in job.cleanable if s.base_offset < mapped.end_offset]
        for group in self._group(to_clean, job.segment_bytes):
            retain = [self._retain_deletes(s) for s in group]
            result.swaps.append(([s.base_offset for s in group], self._clean_group(group, retain, mapped)))
        self.stats.elapsed_s = time.monotonic() - started
        return result

    def _retain_deletes(self, seg: SegmentRef) -> bool:
        """Tombstones survive the cleaning that first sees them (their segment is dirty); afterwards they go
        once the segment's largest timestamp is older than delete.retention.ms."""
        if seg.next_offset > self.job.first_dirty:
            return True
        return seg.largest_timestamp > self.job.now_ms - self.job.delete_retention_ms

    def _build_offset_map(
        self, dirty: list[SegmentRef], first_dirty: int, offset_map: OffsetMap
    ) -> _MapResult:
        """Fills the map from the dirty segments until it is full (Kafka's rule); the result ends where the map
        ends: the end of the last segment read completely. Keys of a partly read segment may stay in the map:
        their offsets are later than anything cleaned, so they only (rightly) drop older versions."""
        result = _MapResult(dirty[0].base_offset, offset_map, first_dirty)
        keyless: list[int] = []
        throttle = self.throttle
        for seg in dirty:
            for h, data in _read_batches(seg, throttle):
                if h.is_control or h.last_offset < first_dirty or self._aborted(h):
                    continue  # an aborted version of a key never replaces a committed one
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
                            f"{self.job.name}: segment {seg.base_offset} holds more keys than the {offset_map.capacity} "
                            "that log.cleaner.dedupe.buffer.size allows"
                        )
                    result.live = offset_map.latest_offsets(keyless)
                    return result
            result.end_offset = seg.next_offset
        result.live = offset_map.latest_offsets(keyless)
        return result

    @staticmethod
    def _group(segments: list[SegmentRef], max_bytes: int) -> list[list[SegmentRef]]:
        """Consecutive segments whose total size fits ``segment.bytes`` (and whose offsets fit one index)."""
        groups: list[list[SegmentRef]] = []
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
        self, group: list[SegmentRef], retain: list[bool], mapped: _MapResult
    ) -> int:
        """Writes the group's replacement as ``<base>.log.swap`` (+ indexes); returns its base offset."""
        job = self.job
        log_dir = Path(job.dir)
        prefix = filename_prefix(group[0].base_offset)
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):  # an abandoned attempt
            (log_dir / (prefix + suffix + CLEANED_SUFFIX)).unlink(missing_ok=True)
        new = LogSegment(
            log_dir,
            group[0].base_offset,
            index_interval_bytes=job.index_interval_bytes,
            segment_index_bytes=job.segment_index_bytes,
            created_ms=job.now_ms,
            suffix=CLEANED_SUFFIX,
        )
        try:
            for seg, retain_deletes in zip(group, retain):
                self._clean_segment(seg, new, retain_deletes, mapped)
                # An aborted transaction keeps its .txnindex entry while its ABORT marker stays (Kafka's
                # cleanedIndex): without the marker a consumer would skip the producer's later batches.
                txn_index = Path(seg.path).with_name(filename_prefix(seg.base_offset) + TXN_INDEX_SUFFIX)
                for entry in read_entries(txn_index) if txn_index.exists() else []:
                    if entry.last_offset not in self._dropped_aborts:
                        new.txn_index.append(entry)
            new.on_become_inactive()
            new.flush()
            new.rename_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
            new.close()
        except BaseException:
            new.delete()
            raise
        return group[0].base_offset

    def _clean_segment(
        self, seg: SegmentRef, new: LogSegment, retain_deletes: bool, mapped: _MapResult
    ) -> None:
        stats = self.stats
        buf = bytearray()
        headers: list[tuple[int, BatchHeader]] = []
        for h, data in _read_batches(seg, self.throttle):
            stats.bytes_read += len(data)
            out = self._filter_batch(data, h, retain_deletes, mapped)
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
        self.throttle(len(buf))

    def _filter_marker(self, data: bytes, h: BatchHeader, retain_deletes: bool) -> bytes | None:
        """Kafka's rule for a transaction marker: it goes once no batch of its transaction was read in this
        cleaning (its data went in an earlier one) and, like a tombstone, its segment is clean and older than
        delete.retention.ms. Other control records stay."""
        read = h.producer_id in self._txn_read
        self._txn_read.discard(h.producer_id)
        if read or retain_deletes:
            return data
        try:
            marker = read_marker(data, h)
        except ValueError:  # RecordBatchError included: keep what we cannot read
            return data
        if marker is None:
            return data
        if not marker.committed:
            self._dropped_aborts.add(h.base_offset)
        self.stats.records_read += h.records_count
        self.stats.records_removed += h.records_count
        return None

    def _filter_batch(self, data: bytes, h: BatchHeader, retain_deletes: bool, mapped: _MapResult) -> bytes | None:
        """The batch with its obsolete records removed: ``data`` itself when all stay, None when it goes.

        Per batch first: the live offsets inside a dirty batch come from bisecting the sorted latest offsets, so
        a batch that is wholly dead or wholly live is dropped or copied without decompressing it; a partly live
        one is walked record by record (see cleaner_scan) and its survivors copied byte for byte."""
        if h.is_control:
            return self._filter_marker(data, h, retain_deletes)
        stats = self.stats
        if h.is_transactional:
            self._txn_read.add(h.producer_id)
        if self._aborted(h):  # aborted data: removed, as Kafka's cleaner does
            stats.records_read += h.records_count
            stats.records_removed += h.records_count
            if self.job.producer_last_offsets.get(h.producer_id) == h.last_offset:
                out = _empty_batch(h, data)  # keeps the producer's sequence state, as for compacted batches
                stats.bytes_written += len(out)
                return out
            return None
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
            if h.producer_id >= 0 and self.job.producer_last_offsets.get(h.producer_id) == h.last_offset:
                out = _empty_batch(h, data)
                stats.bytes_written += len(out)
                return out
            return None
        out = rebuild(data, h, body, spans, max_ts)
        stats.bytes_written += len(out)
        return out

