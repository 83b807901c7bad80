"""One log segment: ``<base offset, 20 digits>.log`` plus its ``.index`` and ``.timeindex`` (and ``.txnindex``, the
aborted transactions whose ABORT marker it holds; storage/txn_index.py).

The ``.log`` file is a plain concatenation of v2 record batches exactly as Kafka stores them. Appends write whole
request buffers with ``os.write``; reads never copy: they return a :class:`FileRegion` the broker sends with
``sendfile``. Finding batch boundaries only ever reads 61-byte batch headers (``os.pread`` of small chunks), and
the sparse offset index bounds each scan to about ``index.interval.bytes`` plus one batch.

Index entries are added per batch (Kafka >= 3.6 does the same): when more than ``index_interval_bytes`` were
appended since the last entry, the next batch gets an offset-index entry ``(batch last offset, batch position)``
and the time index gets ``(max timestamp so far, offset where it was reached)``.
"""

from __future__ import annotations

import io
import logging
import os
import threading
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path

from moldau.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MIN_BATCH_LENGTH,
    BatchHeader,
    Buffer,
    iter_headers,
    read_header,
    valid_crc,
)
from moldau.storage.errors import CorruptIndexError
from moldau.storage.index import NO_TIMESTAMP, OffsetIndex, TimeIndex
from moldau.storage.txn_index import TXN_INDEX_SUFFIX, TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"  # a replacement segment being written by the log cleaner
SWAP_SUFFIX = ".swap"  # a finished replacement segment: it wins over the segments it overlaps at load
INT32_MAX = 2**31 - 1

logger = logging.getLogger(__name__)

_SCAN_CHUNK = 16 * 1024  # header scans: holds ~4 index intervals of small batches
# The last batches appended, kept per segment as (position, base offset, last offset, size): a follower or a
# consumer that keeps up fetches from one of them, and finding it by the index and a header scan cost a pread
# and a few header decodes per partition and fetch. An int64 array: ~300 bytes per partition.
_RECENT = 8
_RECENT_FIELDS = 4
_RECOVER_CHUNK = 1024 * 1024  # recovery reads whole batches to check CRCs


def filename_prefix(offset: int) -> str:
    """Kafka's file name for an offset: 20 digits, zero-padded."""
    return f"{offset:020d}"


class FileRegion:
    """A byte range of a segment file, to be sent with ``os.sendfile`` (``read()`` copies, for tools and tests)."""

    __slots__ = ("fileobj", "position", "length")

    def __init__(self, fileobj: io.FileIO, position: int, length: int) -> None:
        self.fileobj = fileobj
        self.position = position
        self.length = length

    def __len__(self) -> int:
        return self.length

    def fileno(self) -> int:
        return self.fileobj.fileno()

    def read(self) -> bytes:
        fd = self.fileobj.fileno()
        parts: list[bytes] = []
        pos, remaining = self.position, self.length
        while remaining > 0:
            chunk = os.pread(fd, remaining, pos)
            if not chunk:
                raise EOFError(f"file ends before {self.position + self.length}")
            parts.append(chunk)
            pos += len(chunk)
            remaining -= len(chunk)
        return b"".join(parts)

    def __repr__(self) -> str:
        return f"FileRegion({self.fileobj.name!r}, position={self.position}, length={self.length})"


def _write_all(fd: int, data: Buffer) -> None:
    written = os.write(fd, data)
    if written == len(data):  # the common case: one call, no view
        return
    view = memoryview(data)[written:]
    while view:
        written = os.write(fd, view)
        view = view[written:]


class LogSegment:
    """A segment of a partition log. Not thread-safe: the owning Log serialises access; only the first use of
    a lazily loaded segment takes a lock (a partition's fetches may run on several IO workers)."""

    # Set by _open(): the files of a lazily loaded segment are opened on first use (see _require).
    _file: io.FileIO
    _fd: int
    _index: OffsetIndex
    _time_index: TimeIndex
    _txn_index: TransactionIndex
    _next_offset: int
    _max_timestamp: int
    _offset_of_max_timestamp: int

    def __init__(
        self,
        dir: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        segment_index_bytes: int,
        created_ms: int,
        roll_jitter_ms: int = 0,
        suffix: str = "",
        lazy: bool = False,
    ) -> None:
        """``suffix`` (e.g. ``.cleaned``) is appended to the three file names: the cleaner's replacement
        segments are written under such names and renamed into place by :meth:`rename_suffix`.

        ``lazy`` (a sealed segment after a clean shutdown, as Kafka's lazy indexes): nothing is opened or read
        now; the first use opens the ``.log``, reads the indexes, checks them and rebuilds them if they are bad
        (:meth:`_require`). The base offset comes from the file name; ``size`` is one ``stat`` until then."""
        prefix = filename_prefix(base_offset)
        self.base_offset = base_offset
        self.log_path = dir / (prefix + LOG_SUFFIX + suffix)  # the index files' names derive from it
        self._segment_index_bytes = segment_index_bytes
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        self.roll_jitter_ms = roll_jitter_ms
        self._first_batch_timestamp: int | None = None  # None: unknown yet (read lazily)
        self._bytes_since_last_index_entry = 0
        self._closed = False
        self._size = -1  # unknown until the .log is opened or stat-ed
        self._recent = array("q")  # the tail of the segment's batches (see _RECENT); empty: unknown
        self._loaded = False
        self._load_lock: threading.Lock | None = None
        if lazy:
            self._load_lock = threading.Lock()  # fetches of one partition may run on several IO workers
        else:
            self._open()
            self._loaded = True

    def _open(self) -> None:
        """Opens the ``.log`` and reads the index files (their entries are kept in memory)."""
        index_path, time_index_path, txn_index_path = self._index_files()
        self._file = io.FileIO(self.log_path, "a+")
        self._fd = self._file.fileno()
        self._size = os.fstat(self._fd).st_size
        self._index = OffsetIndex(index_path, self.base_offset, self._segment_index_bytes)
        self._time_index = TimeIndex(time_index_path, self.base_offset, self._segment_index_bytes)
        self._txn_index = TransactionIndex(txn_index_path)
        self._next_offset = self.base_offset
        self._max_timestamp = NO_TIMESTAMP
        self._offset_of_max_timestamp = self.base_offset

    def _require(self) -> None:
        """Opens a lazily loaded segment on its first use: the indexes are trusted if they pass the checks of
        :meth:`load`, otherwise rebuilt from the log (as after a crash) and written out, so that a corrupt index
        found by a fetch costs one scan of this segment instead of failing the fetch."""
        if self._loaded:
            return
        lock = self._load_lock
        if lock is None:  # pragma: no cover - only lazy segments start unloaded
            raise RuntimeError(f"{self.log_path}: segment not open")
        with lock:
            if self._loaded:
                return
            if self._closed:
                raise ValueError(f"{self.log_path}: segment is closed")
            self._open()
            if not self.load():
                logger.warning("%s: index missing or corrupt at first use, rebuilding", self.log_path)
                truncated = self.recover()
                if truncated:
                    logger.warning("%s: %d invalid bytes truncated while rebuilding its index", self.log_path,
                                   truncated)
                self._index.flush()
                self._time_index.flush()
                self._txn_index.flush()
            self._loaded = True  # last: another thread sees either an unloaded segment or a complete one

    @property
    def loaded(self) -> bool:
        """False while a lazily loaded segment has not been used yet (nothing of it was opened or read)."""
        return self._loaded

    @property
    def file(self) -> io.FileIO:
        if not self._loaded:
            self._require()
        return self._file

    @property
    def index(self) -> OffsetIndex:
        if not self._loaded:
            self._require()
        return self._index

    @property
    def time_index(self) -> TimeIndex:
        if not self._loaded:
            self._require()
        return self._time_index

    @property
    def txn_index(self) -> TransactionIndex:
        if not self._loaded:
            self._require()
        return self._txn_index

    @property
    def next_offset(self) -> int:
        if not self._loaded:
            self._require()
        return self._next_offset

    @property
    def max_timestamp(self) -> int:
        if not self._loaded:
            self._require()
        return self._max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        if not self._loaded:
            self._require()
        return self._offset_of_max_timestamp

    @property
    def size(self) -> int:
        """The ``.log`` file's length (of a segment not loaded yet: its ``stat``, which opens nothing)."""
        size = self._size
        if size < 0:
            size = self._size = os.stat(self.log_path).st_size
        return size

    def holds(self, fileobj: object) -> bool:
        """Whether ``fileobj`` (a FileRegion's) is this segment's open ``.log`` (never opens the segment)."""
        return self._loaded and self._file is fileobj

    def __repr__(self) -> str:
        state = f"next_offset={self._next_offset}" if self._loaded else "not loaded"
        return f"LogSegment({self.log_path.name}, size={self._size if self._size >= 0 else '?'}, {state})"

    # --- loading ---------------------------------------------------------------------------------------------

    def load(self) -> bool:
        """Loads state trusting the index files (after a clean shutdown).

        Returns False when one index file is missing, or an index fails its sanity check, or the tail does not
        parse, or the offset index lacks an entry; the caller then runs :meth:`recover`. Both files missing are
        two empty indexes (``close`` leaves them out when the offset index has no entry): the tail scan then covers
        the whole segment and fails if an entry was due.
        """
        if self._size and self._index.existed != self._time_index.existed:
            return False
        try:
            self._index.sanity_check(self._size)
            if not self._load_tail():
                return False
            self._time_index.sanity_check(self._next_offset)
        except CorruptIndexError:
            return False
        return True

    def _load_tail(self) -> bool:
        """Recomputes next offset, max timestamp and index spacing by scanning from the last index entry."""
        self._max_timestamp, self._offset_of_max_timestamp = self._time_index.last_entry
        start = self._index.entry(len(self._index) - 1)[1] if len(self._index) else 0
        self._next_offset = self.base_offset
        pos = start
        since_entry = 0
        for pos_, h in self._scan(start, self._size):
            if h.magic != MAGIC or pos_ + h.total_size > self._size or h.base_offset < self.base_offset:
                return False
            if since_entry > self.index_interval_bytes and not self._index.is_full:
                return False  # an entry is missing here: the index was emptied or cut short
            since_entry += h.total_size
            self._track_max_timestamp(h)
            self._next_offset = h.last_offset + 1
            pos = pos_ + h.total_size
        if pos != self._size:
            return False
        if len(self._index) and self._next_offset <= self._index.last_offset:
            return False
        self._bytes_since_last_index_entry = self._size - start
        return True

    def recover(self, on_batch: Callable[[BatchHeader], None] | None = None) -> int:
        """Re-validates every batch (magic, sizes, offsets, CRC32C) and rebuilds both indexes; ``on_batch`` sees
        each valid batch's header (the log re-derives its leader epochs).

        The log is truncated at the first invalid or torn batch; returns the number of bytes removed.
        """
        self._index.reset()
        self._time_index.reset()
        del self._recent[:]
        self._next_offset = self.base_offset
        self._max_timestamp = NO_TIMESTAMP
        self._offset_of_max_timestamp = self.base_offset
        self._first_batch_timestamp = None
        self._bytes_since_last_index_entry = 0
        end = self._size
        buf = b""
        buf_start = 0
        pos = 0
        while pos < end:
            rel = pos - buf_start
            if rel + BATCH_HEADER_SIZE > len(buf):
                buf, buf_start, rel = os.pread(self._fd, min(_RECOVER_CHUNK, end - pos), pos), pos, 0
                if len(buf) < BATCH_HEADER_SIZE:
                    break
            h = read_header(buf, rel)
            if not self._plausible(h) or pos + h.total_size > end:
                break
            if rel + h.total_size > len(buf):
                length = max(h.total_size, min(_RECOVER_CHUNK, end - pos))
                buf, buf_start, rel = os.pread(self._fd, length, pos), pos, 0
            if not valid_crc(buf, rel, h):
                break
            self._on_batch(pos, h)
            if on_batch is not None:
                on_batch(h)
            pos += h.total_size
        truncated = end - pos
        if truncated:
            os.ftruncate(self._fd, pos)
            self._size = pos
        self._txn_index.truncate_to(self._next_offset)  # the log's replay re-adds what lies past its snapshot
        return truncated

    def _plausible(self, h: BatchHeader) -> bool:
        return (
            h.magic == MAGIC
            and h.batch_length >= MIN_BATCH_LENGTH
            and h.last_offset_delta >= 0
            and h.base_offset >= self._next_offset
            and h.last_offset - self.base_offset <= INT32_MAX
        )

    # --- appending -------------------------------------------------------------------------------------------

    def append(
        self,
        data: Buffer,
        largest_offset: int,
        max_timestamp: int,
        offset_of_max_timestamp: int,
        headers: list[tuple[int, BatchHeader]] | None = None,
    ) -> None:
        """Appends whole batches (already carrying their final offsets) and maintains the indexes.

        ``headers`` are the ``(position in data, header)`` pairs of ``data`` when the caller has them; otherwise
        they are parsed here. ``max_timestamp``/``offset_of_max_timestamp`` describe the whole append.
        """
        if not len(data):
            return
        if largest_offset < self.base_offset or largest_offset - self.base_offset > INT32_MAX:
            raise ValueError(f"offset {largest_offset} does not fit segment {self.base_offset}")
        start = self._size
        _write_all(self._fd, data)
        self._size += len(data)
        recent = self._recent
        for rel, h in headers if headers is not None else iter_headers(data):
            self._on_batch(start + rel, h)
            if len(recent) >= _RECENT * _RECENT_FIELDS:
                del recent[:_RECENT_FIELDS]
            recent.extend((start + rel, h.base_offset, h.base_offset + h.last_offset_delta, h.batch_length
                           + LOG_OVERHEAD))
        if max_timestamp > self._max_timestamp:
            self._max_timestamp = max_timestamp
            self._offset_of_max_timestamp = offset_of_max_timestamp
        self._next_offset = largest_offset + 1

    def _track_max_timestamp(self, h: BatchHeader) -> None:
        if h.max_timestamp > self._max_timestamp:
            self._max_timestamp = h.max_timestamp
            self._offset_of_max_timestamp = h.last_offset

    def _on_batch(self, position: int, h: BatchHeader) -> None:
        """Per-batch bookkeeping shared by append and recovery."""
        self._track_max_timestamp(h)
        if position == 0:
            self._first_batch_timestamp = h.max_timestamp
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            self._index.append(h.last_offset, position)
            self._time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += h.total_size
        self._next_offset = h.last_offset + 1

    # --- rolling ---------------------------------------------------------------------------------------------

    def rolling_base_timestamp(self) -> int | None:
        """The first batch's max timestamp (what ``segment.ms`` counts from), None for an empty segment."""
        if not self._loaded:
            self._require()
        if self._size == 0:
            return None
        if self._first_batch_timestamp is None:
            self._first_batch_timestamp = read_header(os.pread(self._fd, BATCH_HEADER_SIZE, 0)).max_timestamp
        return self._first_batch_timestamp

    def should_roll(
        self,
        append_size: int,
        append_max_timestamp: int,
        append_largest_offset: int,
        now_ms: int,
        segment_bytes: int,
        segment_ms: int,
    ) -> bool:
        """Kafka's roll rule: size, time since the first batch (by record timestamps), full index, offset range."""
        if not self._loaded:
            self._require()
        if self._size == 0:
            return append_largest_offset - self.base_offset > INT32_MAX
        if self._size > segment_bytes - append_size:
            return True
        first = self._first_batch_timestamp
        if first is None:  # not known yet: read from the file
            first = self.rolling_base_timestamp()
        if first is not None and first >= 0:
            waited = append_max_timestamp - first
        else:
            waited = now_ms - self.created_ms
        return (
            waited > segment_ms - self.roll_jitter_ms
            or self._index.is_full
            or self._time_index.is_full
            or append_largest_offset - self.base_offset > INT32_MAX
        )

    def on_become_inactive(self) -> None:
        """Called when a newer segment takes over: records the final max timestamp in the time index."""
        if not self._loaded:
            self._require()
        self._time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True)
        self._index.flush_buffer()
        self._time_index.flush_buffer()

    # --- reading ---------------------------------------------------------------------------------------------

    def _scan(self, start: int, end: int) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of the batches from ``start`` (a batch boundary) whose header lies before ``end``.

        Reads only headers, in small chunks; does not check that each batch is complete.
        """
        buf = b""
        buf_start = start
        pos = start
        while pos + BATCH_HEADER_SIZE <= end:
            rel = pos - buf_start
            if rel + BATCH_HEADER_SIZE > len(buf):
                buf, buf_start, rel = os.pread(self._fd, min(_SCAN_CHUNK, end - pos), pos), pos, 0
                if len(buf) < BATCH_HEADER_SIZE:
                    return
            h = read_header(buf, rel)
            if h.batch_length < MIN_BATCH_LENGTH:
                return
            yield pos, h
            pos += h.total_size

    def header_at(self, position: int) -> BatchHeader | None:
        """The header of the batch starting at ``position`` (a batch boundary); None at or past the end."""
        if not self._loaded:
            self._require()
        return next((h for _, h in self._scan(position, self._size)), None)

    def iter_batches(self, start_offset: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) for every batch from the one holding ``start_offset`` (default: the first)."""
        if not self._loaded:
            self._require()
        start = 0
        if start_offset is not None:
            found = self.translate_offset(start_offset)
            if found is None:
                return
            start = found[0]
        yield from self._scan(start, self._size)

    def translate_offset(self, offset: int, start_position: int = 0) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset``; None past the end."""
        if not self._loaded:
            self._require()
        _, pos = self._index.lookup(offset)
        for pos_, h in self._scan(max(pos, start_position), self._size):
            if h.last_offset >= offset:
                return pos_, h
        return None

    def _locate(self, offset: int, start_position: int = 0) -> tuple[int, int] | None:
        """(position, size) of the first batch at or after ``start_position`` whose last offset is >= ``offset``
        (``translate_offset``), from the recently appended batches when they cover it."""
        recent = self._recent
        if recent and recent[1] <= offset:  # at or after the first batch recorded: it is among them, or past the end
            for i in range(0, len(recent), _RECENT_FIELDS):
                if recent[i + 2] >= offset and recent[i] >= start_position:
                    return recent[i], recent[i + 3]
            if offset > recent[-2]:
                return None
        found = self.translate_offset(offset, start_position)
        return None if found is None else (found[0], found[1].total_size)

    def read(
        self, start_offset: int, max_size: int, max_offset: int | None = None, min_one: bool = False
    ) -> FileRegion | None:
        """Whole batches from the one holding ``start_offset``, at most ``max_size`` bytes.

        ``max_offset`` (exclusive) stops before the batch that holds it. With ``min_one`` the first batch is
        returned even when it alone exceeds ``max_size``. None when no batch here reaches ``start_offset``; an
        empty region when the first batch does not fit.
        """
        found = self._locate(start_offset)
        if found is None:
            return None
        start, first_size = found
        limit = self._size
        if max_offset is not None and max_offset < self._next_offset:
            stop = self._locate(max_offset, start)
            if stop is not None:
                limit = stop[0]
        end_limit = min(limit, start + max(max_size, 0))
        if start + first_size > end_limit:
            if min_one and start + first_size <= limit:
                return FileRegion(self._file, start, first_size)
            return FileRegion(self._file, start, 0)
        if end_limit == self._size:  # everything from start: the segment ends at a batch boundary
            return FileRegion(self._file, start, end_limit - start)
        # Jump to the last indexed batch start before the limit, then walk the few headers after it.
        end = max(start + first_size, self._index.floor_position(end_limit))
        for pos, h in self._scan(end, end_limit):
            if pos + h.total_size > end_limit:
                break
            end = pos + h.total_size
        return FileRegion(self._file, start, end - start)

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch at or after ``start_offset`` whose max timestamp >= timestamp."""
        if not self._loaded:
            self._require()
        _, offset = self._time_index.lookup(timestamp)
        found = self.translate_offset(max(offset, start_offset))
        if found is None:
            return None
        for pos, h in self._scan(found[0], self._size):
            if h.max_timestamp >= timestamp and h.last_offset >= start_offset:
                return pos, h
        return None

    def read_batch(self, position: int, header: BatchHeader) -> bytes:
        if not self._loaded:
            self._require()
        return os.pread(self._fd, header.total_size, position)

    def largest_timestamp(self) -> int:
        """The largest record timestamp, or the file's mtime when no batch carries one (Kafka's rule)."""
        if not self._loaded:
            self._require()
        if self._max_timestamp >= 0:
            return self._max_timestamp
        return os.fstat(self._fd).st_mtime_ns // 1_000_000

    # --- truncation, durability, lifecycle -------------------------------------------------------------------

    def truncate_to(self, offset: int, now_ms: int) -> int:
        """Removes the batch holding ``offset`` and everything after it; returns the bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position = found[0]
        truncated = self._size - position
        del self._recent[:]
        self._index.truncate_to(offset)
        self._index.truncate_to_position(position)
        self._time_index.truncate_to(offset)
        self._txn_index.truncate_to(offset)
        os.ftruncate(self._fd, position)
        self._size = position
        if not self._load_tail():
            raise CorruptIndexError(f"{self.log_path}: cannot reload the tail after truncation")
        if position == 0:
            self._first_batch_timestamp = None
            self.created_ms = now_ms
        return truncated

    def flush(self) -> None:
        """fsyncs the log and both indexes (a segment not loaded since a clean shutdown has nothing unsynced)."""
        if not self._loaded:
            return
        os.fsync(self._fd)
        self._index.flush()
        self._time_index.flush()
        self._txn_index.flush()

    def close(self, flush: bool = False) -> None:
        """Closes the files after recording the final max timestamp; ``flush`` fsyncs the indexes first."""
        if self._load_lock is not None:
            with self._load_lock:  # not while a first use is opening it
                was_closed, self._closed = self._closed, True
        else:
            was_closed, self._closed = self._closed, True
        if was_closed or not self._loaded:
            return
        if not len(self._index) and not self._index.on_disk and not self._time_index.on_disk:
            # No offset index entry (the segment holds at most index.interval.bytes, or nothing) and neither file
            # created yet: both are left out. ``load`` reads a missing pair as empty indexes and scans the segment
            # for its last offset and max timestamp, all that the time index's closing entry would hold. Creating
            # the two files was most of a clean shutdown of thousands of idle or small partitions: a file created
            # in a directory of its own costs 250-550 us of CPU on ext4 here, and 10,000 partitions ran the
            # shutdown past its exit watchdog (25 s), which leaves every log to recovery at the next start.
            self._index.close(write=False)
            self._time_index.close(write=False)
            self._file.close()
            return
        self._time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True)
        if flush:
            self._index.flush()
            self._time_index.flush()
        self._index.close()
        self._time_index.close()
        self._file.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def _index_files(self) -> tuple[Path, Path, Path]:
        """The paths of the offset, time and transaction index: ``<prefix>.log<suffix>`` -> ``<prefix>.index<suffix>``
        and so on (built when needed: three paths per segment were a good part of a lazy segment's cost)."""
        if self._loaded:
            return self._index.path, self._time_index.path, self._txn_index.path
        name = self.log_path.name
        prefix, rest = name[:20], name[20 + len(LOG_SUFFIX):]
        with_name = self.log_path.with_name
        return (with_name(prefix + INDEX_SUFFIX + rest), with_name(prefix + TIME_INDEX_SUFFIX + rest),
                with_name(prefix + TXN_INDEX_SUFFIX + rest))

    def _rename_index_files(self, paths: tuple[Path, Path, Path], name: Callable[[str], str]) -> None:
        if self._loaded:
            for idx in (self._index, self._time_index, self._txn_index):
                idx.rename(idx.path.with_name(name(idx.path.name)))
            return
        for path in paths:  # not opened yet: the files as they are (an index may be missing)
            if path.exists():
                os.replace(path, path.with_name(name(path.name)))

    def rename_for_delete(self) -> None:
        """Adds ``.deleted`` to the three file names; open handles (and in-flight FileRegions) stay valid."""
        paths = self._index_files()
        deleted = self.log_path.with_name(self.log_path.name + DELETED_SUFFIX)
        os.replace(self.log_path, deleted)
        self.log_path = deleted
        self._rename_index_files(paths, lambda name: name + DELETED_SUFFIX)

    def rename_suffix(self, old: str, new: str) -> None:
        """Renames the three files from ``<name><old>`` to ``<name><new>`` (index files first, the ``.log``
        last: the log file's name is what recovery at load goes by)."""
        self._rename_index_files(self._index_files(), lambda name: name.removesuffix(old) + new)
        path = self.log_path.with_name(self.log_path.name.removesuffix(old) + new)
        os.replace(self.log_path, path)
        self.log_path = path

    def delete(self) -> None:
        """Closes and removes the files (without the final time-index entry: they are going away)."""
        if self._load_lock is not None:
            with self._load_lock:
                self._closed = True
        self._closed = True
        if self._loaded:
            self._index.delete()
            self._time_index.delete()
            self._txn_index.delete()
            if not self._file.closed:
                self._file.close()
        else:
            for path in self._index_files():
                path.unlink(missing_ok=True)
        self.log_path.unlink(missing_ok=True)
