"""Reading record batches back from a remote segment: the offset index narrows the start position, one ranged
fetch brings the bytes, whole batches go back (at least one, as a local read with ``min_one``)."""

from __future__ import annotations

import struct
import threading
from bisect import bisect_right

from moldau.protocol.records import BATCH_HEADER_SIZE, iter_headers, iter_records, read_header
from moldau.storage.remote.api import IndexType, RemoteLogSegmentMetadata, RemoteStorageManager
from moldau.storage.txn_index import ENTRY_SIZE, AbortedTxn

_ENTRY = struct.Struct(">ii")
# Read a little past max_bytes at once: the bytes between the index entry and the wanted offset come too.
_SLACK = 64 * 1024


def start_position(index: bytes, base_offset: int, offset: int) -> int:
    """Position of the batch of the largest index entry <= ``offset`` (entries hold a batch's last offset)."""
    entries = [(base_offset + rel, pos) for rel, pos in _ENTRY.iter_unpack(index[: len(index) - len(index) % 8])]
    i = bisect_right([o for o, _ in entries], offset) - 1
    return entries[i][1] if i >= 0 else 0


class IndexCache:
    """Indexes of remote segments (immutable once copied), the most recent ``capacity`` of them and at most
    ``max_bytes`` in all: a catch-up read asks for each often."""

    def __init__(self, capacity: int = 64, max_bytes: int = 256 * 1024 * 1024,
                 kind: IndexType = IndexType.OFFSET) -> None:
        self.capacity = capacity
        self.max_bytes = max_bytes
        self.kind = kind
        self.fetches = 0  # from the store (tests)
        self._entries: dict[str, bytes] = {}
        self._bytes = 0
        self._lock = threading.Lock()  # the remote-read threads share the cache

    def get(self, rsm: RemoteStorageManager, metadata: RemoteLogSegmentMetadata) -> bytes:
        key = str(metadata.segment_id)
        with self._lock:
            found = self._entries.pop(key, None)
            if found is not None:
                self._bytes -= len(found)
        if found is None:
            found = rsm.fetch_index(metadata, self.kind)
            self.fetches += 1
        with self._lock:
            if key not in self._entries:
                self._entries[key] = found
                self._bytes += len(found)
            while self._entries and (len(self._entries) > self.capacity or self._bytes > self.max_bytes):
                self._bytes -= len(self._entries.pop(next(iter(self._entries))))
        return found


def read_batches(rsm: RemoteStorageManager, metadata: RemoteLogSegmentMetadata, offset: int, max_bytes: int,
                 indexes: IndexCache) -> bytes:
    """Whole batches of the segment from the one holding ``offset`` (or the next), up to ``max_bytes`` but at
    least one batch; b"" when the segment has nothing at or after ``offset``."""
    position = start_position(indexes.get(rsm, metadata), metadata.start_offset, offset)
    want = max(max_bytes, 1)
    end = min(position + want + _SLACK, metadata.segment_size_in_bytes) - 1
    data = rsm.fetch_log_segment(metadata, position, end)
    out_start: int | None = None
    out_end = 0
    for pos, h in iter_headers(data):
        if h.last_offset < offset:
            continue
        if out_start is None:
            out_start = pos
        elif pos + h.total_size - out_start > want:
            break
        out_end = pos + h.total_size
    if out_start is None:
        # No complete batch at or after offset in what was read: a batch larger than the read, or the end.
        return read_batches_from(rsm, metadata, position, offset) if end + 1 < metadata.segment_size_in_bytes else b""
    return data[out_start:out_end]


# Segments one remote read may span: each is a store call (a ranged GET), made one after the other, and the fetch
# waits for all of them (at most remote.fetch.max.wait.ms); tiny segments would otherwise mean dozens per read.
MAX_SPAN_SEGMENTS = 16


def read_span(rsm: RemoteStorageManager, chain: list[RemoteLogSegmentMetadata], offset: int, max_bytes: int,
              indexes: IndexCache) -> tuple[bytes, int]:
    """Whole batches from ``offset`` on across the consecutive segments of ``chain`` (ascending, from the one
    holding ``offset``), up to ``max_bytes`` but at least one batch, and over at most ``MAX_SPAN_SEGMENTS``
    segments: as a local read spans segments, so a consumer catching up over small segments gets a full fetch
    per round trip, not one segment's worth. Also the offset after the last batch (``offset`` when none), found
    on the way, so the caller does not walk the headers again."""
    parts: list[bytes] = []
    size = 0
    for metadata in chain:
        if metadata.end_offset < offset:
            continue
        if len(parts) == MAX_SPAN_SEGMENTS:
            break
        data = read_batches(rsm, metadata, offset, max_bytes - size if parts else max_bytes, indexes)
        if not data:
            continue  # nothing at or after offset in this one
        if parts and size + len(data) > max_bytes:
            break  # a later segment's first batch alone is past the limit: only the first batch may be
        parts.append(data)
        size += len(data)
        offset = batches_end(data, offset)
        if size >= max_bytes or offset <= metadata.end_offset:
            break  # full, or stopped inside the segment (its next batch did not fit)
    return (parts[0] if len(parts) == 1 else b"".join(parts)), offset


def read_batches_from(rsm: RemoteStorageManager, metadata: RemoteLogSegmentMetadata, position: int,
                      offset: int) -> bytes:
    """The first batch at or after ``position`` ending at or after ``offset`` (a slow path for huge batches)."""
    while position < metadata.segment_size_in_bytes:
        header = rsm.fetch_log_segment(metadata, position, position + BATCH_HEADER_SIZE - 1)
        if len(header) < BATCH_HEADER_SIZE:
            return b""
        h = read_header(header, 0)
        if h.last_offset >= offset:
            return rsm.fetch_log_segment(metadata, position, position + h.total_size - 1)
        position += h.total_size
    return b""


_TIME_ENTRY = struct.Struct(">qi")
_TXN_ENTRY = struct.Struct(">hqqqq")  # Kafka's AbortedTxn (storage/txn_index.py)
_SCAN_BYTES = 1024 * 1024


def offset_for_timestamp(rsm: RemoteStorageManager, metadata: RemoteLogSegmentMetadata, timestamp: int,
                         min_offset: int, indexes: IndexCache) -> tuple[int, int] | None:
    """ListOffsets in a remote segment: (offset, timestamp) of the first record at or after ``min_offset`` whose
    timestamp is >= ``timestamp``, or None. The time index skips what is older (its entries hold the largest
    timestamp so far and where it was reached); then whole batches are read and only the hit is decoded."""
    index = rsm.fetch_index(metadata, IndexType.TIMESTAMP)
    offset = max(metadata.start_offset, min_offset)
    for ts, rel in _TIME_ENTRY.iter_unpack(index[: len(index) - len(index) % _TIME_ENTRY.size]):
        if ts >= timestamp:
            break
        offset = max(offset, metadata.start_offset + rel + 1)  # everything up to there is older
    while offset <= metadata.end_offset:
        data = read_batches(rsm, metadata, offset, _SCAN_BYTES, indexes)
        if not data:
            return None
        for pos, h in iter_headers(data):
            if h.max_timestamp >= timestamp and h.last_offset >= offset:
                floor = max(h.base_offset, offset)
                for record in iter_records(memoryview(data)[pos : pos + h.total_size], h, check_crc=False):
                    if record.timestamp >= timestamp and record.offset >= floor:
                        return record.offset, record.timestamp
            offset = max(offset, h.last_offset + 1)
    return None


def collect_aborted_txns(rsm: RemoteStorageManager, segments: list[RemoteLogSegmentMetadata], fetch_offset: int,
                         upper_bound_offset: int, txn_indexes: IndexCache) -> tuple[list[AbortedTxn], bool]:
    """A read_committed fetch of remote data: the aborted transactions overlapping ``[fetch_offset,
    upper_bound_offset)`` from the stored ``.txnindex`` of ``segments`` (the one read, then the later ones), and
    whether the search is complete (an entry's last stable offset passed the bound; else the local log's indexes
    follow). Without transactions no entry ends the search, so every later segment's index is read: from
    ``txn_indexes``, each fetched from the store once (a catch-up read fetched them all for every fetch)."""
    found: list[AbortedTxn] = []
    for meta in segments:
        data = txn_indexes.get(rsm, meta)
        for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
            _version, pid, first, last, lso = _TXN_ENTRY.unpack_from(data, pos)
            if last >= fetch_offset and first < upper_bound_offset:
                found.append(AbortedTxn(pid, first, last, lso))
            if lso >= upper_bound_offset:
                return found, True
    return found, False


def batches_end(data: bytes, default: int) -> int:
    """The offset after the last whole batch in ``data`` (``default`` when there is none)."""
    end = default
    for _, h in iter_headers(data):
        end = h.last_offset + 1
    return end
