"""The aborted transaction index: ``<base offset>.txnindex`` beside each segment, in Kafka's format.

One 34-byte entry per transaction aborted by an ABORT marker in the segment (Kafka's ``AbortedTxn``): version
int16 (0), producer id int64, first offset int64 (the transaction's first record), last offset int64 (the
marker's offset), last stable offset int64 (the LSO when the marker was written). Entries are in marker order.
A read_committed fetch lists the entries that overlap the fetched range so the consumer can drop those records.

As in Kafka the file is created on the first entry (most segments never see an abort). The entries are kept in
memory too (a few per segment) so fetches never read the file.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from moldau.storage.errors import CorruptIndexError

TXN_INDEX_SUFFIX = ".txnindex"
ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


@dataclass(slots=True, frozen=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def pack(self) -> bytes:
        return _ENTRY.pack(ABORTED_TXN_VERSION, self.producer_id, self.first_offset, self.last_offset,
                           self.last_stable_offset)


def read_entries(path: Path) -> list[AbortedTxn]:
    """The entries of a .txnindex file; a torn last entry (crash mid-write) is ignored."""
    data = path.read_bytes()
    entries: list[AbortedTxn] = []
    for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != ABORTED_TXN_VERSION:
            raise CorruptIndexError(f"{path}: unexpected aborted transaction entry version {version}")
        entries.append(AbortedTxn(pid, first, last, lso))
    return entries


class TransactionIndex:
    """The aborted transactions whose ABORT marker lies in one segment."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = read_entries(path) if path.exists() else []
        if path.exists() and path.stat().st_size != len(self.entries) * ENTRY_SIZE:
            self._rewrite()  # drop a torn tail

    def append(self, entry: AbortedTxn) -> None:
        if self.entries and entry.last_offset <= self.entries[-1].last_offset:
            raise CorruptIndexError(
                f"{self.path}: aborted transaction at {entry.last_offset} is not after the last one at "
                f"{self.entries[-1].last_offset}")
        with open(self.path, "ab") as f:
            f.write(entry.pack())
        self.entries.append(entry)

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """The entries overlapping ``[fetch_offset, upper_bound_offset)``, and whether the search may stop here:
        True once an entry's last stable offset passed the upper bound (later segments cannot hold an aborted
        transaction that started below it; Kafka's ``TxnIndexSearchResult.isComplete``)."""
        found = []
        for e in self.entries:
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound_offset:
                found.append(e)
            if e.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Removes the entries whose marker is at or above ``offset``."""
        kept = [e for e in self.entries if e.last_offset < offset]
        if len(kept) != len(self.entries):
            self.entries = kept
            self._rewrite()

    def _rewrite(self) -> None:
        if not self.entries:
            self.path.unlink(missing_ok=True)
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(b"".join(e.pack() for e in self.entries))
        os.replace(tmp, self.path)

    def reset(self) -> None:
        self.entries = []
        self.path.unlink(missing_ok=True)

    def flush(self) -> None:
        if self.entries and self.path.exists():
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def rename(self, path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, path)
        self.path = path

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
