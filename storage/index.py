"""Sparse offset and time indexes of a log segment, in Kafka's file formats.

``.index``: 8-byte entries ``[int32 relative offset][int32 position]``; ``.timeindex``: 12-byte entries
``[int64 timestamp][int32 relative offset]``; big-endian; both strictly increasing.

Design choice: append-only files plus in-memory ``array`` columns, not Kafka's preallocated mmap. In Python a
binary search over an mmap pays a ``struct.unpack_from`` per probe, while ``bisect`` over an ``array`` runs in C;
the arrays cost 8 bytes per ~4 KiB of log (about 2 MiB of RAM per GiB). Entries go to a buffered file and reach the
disk on ``flush()``/``close()``. The file is always exactly ``entries * entry_size`` bytes (Kafka trims its
preallocated files to that size on close), so the files stay interchangeable with Kafka's. ``max_index_size``
(``segment.index.bytes``) still bounds the entry count: a full index makes the log roll, as in Kafka.

An index that fails ``sanity_check`` (or is missing) is rebuilt by the segment from the log; a segment whose
offset index has no entry closes without creating either file, and a missing pair loads as two empty indexes.
"""

from __future__ import annotations

import operator
import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

from moldau.storage.errors import CorruptIndexError

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
NO_TIMESTAMP = -1
_PENDING_LIMIT = 4096  # bytes of index entries kept before they are written out


def _int32_array(data: bytes) -> array[int]:
    arr = array("i")
    if arr.itemsize != 4:  # pragma: no cover - every platform we run on has a 4-byte C int
        raise RuntimeError("array('i') is not 32-bit on this platform")
    arr.frombytes(data)
    if sys.byteorder == "little":
        arr.byteswap()
    return arr


class _IndexFile:
    """The file half of an index: entries appended since the last write-out, plus truncate/flush/rename/delete.

    No descriptor is held: the entries live in memory (the index's arrays) and go to the file, opened for the
    moment, when ``_PENDING_LIMIT`` bytes are pending, on flush (with fsync), roll and close. Two descriptors
    per segment held open for its lifetime ran a broker with 10,000 partitions out of them (EMFILE at 20,000);
    Kafka too closes an index file once it is mapped. After a crash the segments past the recovery point get
    their indexes rebuilt anyway, and the ones below it were flushed."""

    entry_size = 0

    def __init__(self, path: Path, max_index_size: int) -> None:
        self.path = path
        self.max_entries = max(1, max_index_size // self.entry_size)
        self.existed = path.exists()
        self._on_disk = self.existed  # a new index's file is created with its first write-out (or at close)
        self._pending = bytearray()
        self._closed = False
        self._unsynced = False  # bytes handed to the file since its last fsync

    def _ensure_file(self) -> None:
        if not self._on_disk:
            with open(self.path, "ab"):
                pass
            self._on_disk = True

    def _read_all(self) -> bytes:
        with open(self.path, "rb") as f:
            return f.read()

    def _write(self, data: bytes) -> None:
        self._pending += data
        if len(self._pending) >= _PENDING_LIMIT:
            self.flush_buffer()

    def _truncate_file(self, entries: int) -> None:
        self.flush_buffer()
        os.truncate(self.path, entries * self.entry_size)
        self._unsynced = True

    def flush_buffer(self) -> None:
        """Hands pending entries to the OS (no fsync); the file exists afterwards."""
        if self._pending:
            with open(self.path, "ab") as f:
                f.write(self._pending)
            self._pending.clear()
            self._on_disk = True
            self._unsynced = True
        else:
            self._ensure_file()

    def flush(self) -> None:
        """Writes pending entries and fsyncs the file, if anything was written since its last fsync (an index
        with no new entries costs no fsync: a clean shutdown of thousands of idle partitions spent most of its
        time fsyncing unchanged indexes)."""
        if not self._pending and not self._unsynced:
            self._ensure_file()  # an empty new index: its file exists afterwards, with no data to make durable
            return
        self._on_disk = True
        with open(self.path, "ab") as f:
            if self._pending:
                f.write(self._pending)
                self._pending.clear()
                f.flush()
            os.fsync(f.fileno())
        self._unsynced = False

    @property
    def on_disk(self) -> bool:
        """Whether the file exists (it is created with the first write-out, or at close)."""
        return self._on_disk

    def close(self, write: bool = True) -> None:
        """Writes out pending entries (creating the file if need be) and closes; ``write=False`` drops them and
        creates nothing (see ``LogSegment.close``)."""
        if not self._closed:
            if write:
                self.flush_buffer()
            else:
                self._pending.clear()
            self._closed = True

    def rename(self, path: Path) -> None:
        self.flush_buffer()
        os.replace(self.path, path)
        self.path = path

    def delete(self) -> None:
        self._pending.clear()
        self._closed = True
        self.path.unlink(missing_ok=True)


class OffsetIndex(_IndexFile):
    """Maps offsets to file positions: the entry for a batch holds its last offset and its start position."""

    entry_size = 8

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, max_index_size)
        self.base_offset = base_offset
        self._offsets: array[int] = array("i")  # relative offsets
        self._positions: array[int] = array("i")
        data = self._read_all() if self.existed else b""
        if len(data) % self.entry_size:
            # A torn entry: keep the whole ones; sanity_check reports the file size mismatch.
            self._torn = True
            data = data[: len(data) - len(data) % self.entry_size]
        else:
            self._torn = False
        ints = _int32_array(data)
        self._offsets = ints[0::2]
        self._positions = ints[1::2]

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    @property
    def last_offset(self) -> int:
        return self.base_offset + self._offsets[-1] if self._offsets else self.base_offset

    def entry(self, n: int) -> tuple[int, int]:
        return self.base_offset + self._offsets[n], self._positions[n]

    def entries(self) -> list[tuple[int, int]]:
        base = self.base_offset
        return [(base + o, p) for o, p in zip(self._offsets, self._positions)]

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self._offsets and (rel <= self._offsets[-1] or position <= self._positions[-1]):
            raise ValueError(
                f"index entry ({offset}, {position}) is not above the last entry {self.entry(len(self) - 1)}"
            )
        if self.is_full:
            return  # the log rolls before this happens; a missing sparse entry only lengthens a scan
        self._offsets.append(rel)
        self._positions.append(position)
        self._write(_OFFSET_ENTRY.pack(rel, position))

    def lookup(self, offset: int) -> tuple[int, int]:
        """The entry with the largest offset <= ``offset``, or ``(base_offset, 0)`` when there is none."""
        i = bisect_right(self._offsets, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._offsets[i], self._positions[i]

    def floor_position(self, position: int) -> int:
        """The largest indexed batch start position <= ``position`` (0 when there is none)."""
        i = bisect_right(self._positions, position) - 1
        return self._positions[i] if i >= 0 else 0

    def truncate_to(self, offset: int) -> None:
        """Removes the entries whose offset is >= ``offset``."""
        n = bisect_right(self._offsets, offset - self.base_offset - 1)
        self._truncate_entries(n)

    def truncate_to_position(self, position: int) -> None:
        """Removes the entries pointing at ``position`` or beyond (after the log was cut there)."""
        n = bisect_right(self._positions, position - 1)
        self._truncate_entries(n)

    def reset(self) -> None:
        self._truncate_entries(0)

    def _truncate_entries(self, n: int) -> None:
        if n < len(self._offsets) or self._torn:
            del self._offsets[n:]
            del self._positions[n:]
            self._truncate_file(n)
            self._torn = False

    def sanity_check(self, log_size: int) -> None:
        """Raises CorruptIndexError unless entries are whole, increasing and point inside the log."""
        if self._torn:
            raise CorruptIndexError(f"{self.path}: size is not a multiple of {self.entry_size}")
        offsets, positions = self._offsets, self._positions
        if offsets and (offsets[0] < 0 or positions[0] < 0):
            raise CorruptIndexError(f"{self.path}: negative first entry")
        # map() over the arrays runs in C: a Python loop per entry was most of opening a segment at start-up.
        if not (all(map(operator.lt, offsets, offsets[1:])) and all(map(operator.lt, positions, positions[1:]))):
            i = next(i for i in range(1, len(offsets))
                     if offsets[i] <= offsets[i - 1] or positions[i] <= positions[i - 1])
            raise CorruptIndexError(f"{self.path}: entry {i} is not above entry {i - 1}")
        if positions and positions[-1] >= log_size:
            raise CorruptIndexError(
                f"{self.path}: last position {positions[-1]} is beyond the log ({log_size})"
            )


class TimeIndex(_IndexFile):
    """Maps the running maximum timestamp to the offset where it was reached."""

    entry_size = 12

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, max_index_size)
        self.base_offset = base_offset
        self._timestamps: array[int] = array("q")
        self._offsets: array[int] = array("i")
        data = self._read_all() if self.existed else b""
        self._torn = len(data) % self.entry_size != 0
        n = len(data) // self.entry_size
        if n:
            # The two columns cut out with strided slices (12 copies in C, whatever the entry count): a Python
            # loop per entry was most of opening an active segment.
            timestamps, offsets = bytearray(8 * n), bytearray(4 * n)
            for k in range(8):
                timestamps[k::8] = data[k : n * 12 : 12]
            for k in range(4):
                offsets[k::4] = data[8 + k : n * 12 : 12]
            self._timestamps.frombytes(timestamps)
            self._offsets = _int32_array(bytes(offsets))
            if sys.byteorder == "little":
                self._timestamps.byteswap()

    def __len__(self) -> int:
        return len(self._timestamps)

    @property
    def is_full(self) -> bool:
        # One slot stays free for the final entry written when the segment becomes inactive.
        return len(self._timestamps) >= self.max_entries - 1

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base_offset) when empty."""
        if not self._timestamps:
            return NO_TIMESTAMP, self.base_offset
        return self._timestamps[-1], self.base_offset + self._offsets[-1]

    def entries(self) -> list[tuple[int, int]]:
        base = self.base_offset
        return [(t, base + o) for t, o in zip(self._timestamps, self._offsets)]

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Appends (timestamp, offset) when the timestamp is above the last entry's."""
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return
        if timestamp < 0:
            return
        rel = offset - self.base_offset
        if self._offsets and rel < self._offsets[-1]:
            raise ValueError(f"time index offset {offset} is below the last entry's {self.last_entry[1]}")
        if len(self._timestamps) >= (self.max_entries if skip_full_check else self.max_entries - 1):
            return  # full: the log rolls before this happens; a missing sparse entry only lengthens a scan
        self._timestamps.append(timestamp)
        self._offsets.append(rel)
        self._write(_TIME_ENTRY.pack(timestamp, rel))

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """The entry with the largest timestamp <= ``timestamp``, or ``(-1, base_offset)``."""
        i = bisect_right(self._timestamps, timestamp) - 1
        if i < 0:
            return NO_TIMESTAMP, self.base_offset
        return self._timestamps[i], self.base_offset + self._offsets[i]

    def truncate_to(self, offset: int) -> None:
        """Removes the entries whose offset is >= ``offset``."""
        self._truncate_entries(bisect_left(self._offsets, offset - self.base_offset))

    def reset(self) -> None:
        self._truncate_entries(0)

    def _truncate_entries(self, n: int) -> None:
        if n < len(self._timestamps) or self._torn:
            del self._timestamps[n:]
            del self._offsets[n:]
            self._truncate_file(n)
            self._torn = False

    def sanity_check(self, next_offset: int) -> None:
        """Raises CorruptIndexError unless entries are whole and increasing and below ``next_offset``."""
        if self._torn:
            raise CorruptIndexError(f"{self.path}: size is not a multiple of {self.entry_size}")
        ts, offs = self._timestamps, self._offsets
        if offs and offs[0] < 0:
            raise CorruptIndexError(f"{self.path}: negative first entry")
        if not (all(map(operator.lt, ts, ts[1:])) and all(map(operator.le, offs, offs[1:]))):
            i = next(i for i in range(1, len(ts)) if ts[i] <= ts[i - 1] or offs[i] < offs[i - 1])
            raise CorruptIndexError(f"{self.path}: entry {i} is not above entry {i - 1}")
        if offs and self.base_offset + offs[-1] >= max(next_offset, self.base_offset + 1):
            raise CorruptIndexError(f"{self.path}: last offset is beyond the log end {next_offset}")
