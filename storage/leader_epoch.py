"""The leader-epoch cache of a partition: (epoch, start offset) pairs, persisted in ``leader-epoch-checkpoint``.

Every change rewrites the file (write, rename) without fsync; :meth:`sync` makes it durable and runs when the log
flushes (as Kafka since KAFKA-15046): an fsync per partition on every leader change made a LeaderAndIsr of
thousands of partitions, and each follower's first append in a new epoch, wait on the disk. After a crash the
log's recovery re-derives the epochs of the unflushed segments from their batches (``Log._load``).

Each appended batch carries the leader epoch it was written under; the first offset written under a new epoch
starts a new entry. Followers use :meth:`end_offset_for` (OffsetForLeaderEpoch) to find where to truncate.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from moldau.storage.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    CheckpointError,
    fsync_file,
    read_leader_epochs,
    write_leader_epochs,
)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

logger = logging.getLogger(__name__)


class LeaderEpochCache:
    def __init__(self, dir: Path, on_change: Callable[[], None] | None = None) -> None:
        self.path = dir / LEADER_EPOCH_CHECKPOINT
        # Called when the entries change: the owner has write_out() run soon (the log manager, within a second,
        # on a worker thread), so a leader change of 10,000 partitions does not create 10,000 files in-line.
        self.on_change = on_change
        self._version = 0  # of the entries; the file holds _written_version
        self._written_version = 0
        self._unsynced = False
        self._lock = threading.Lock()  # the event loop and the log manager's flush thread both write it out
        try:
            self.entries: list[tuple[int, int]] = read_leader_epochs(self.path)
        except CheckpointError as exc:
            logger.warning("ignoring corrupt %s: %s", self.path, exc)
            self.entries = []

    def _flush(self) -> None:
        self._version += 1
        if self.on_change is not None:
            self.on_change()
        else:
            self.write_out()

    def write_out(self) -> None:
        """Writes the entries if they changed since the last write (no fsync). Safe on another thread: a change
        made meanwhile leaves the cache marked changed."""
        with self._lock:
            version, entries = self._version, self.entries
            if version == self._written_version:
                return
            write_leader_epochs(self.path, entries, durable=False)
            self._written_version = version
            self._unsynced = True

    def sync(self) -> None:
        """Writes and fsyncs the checkpoint if it changed since the last sync."""
        self.write_out()
        if self._unsynced:
            fsync_file(self.path)
            self._unsynced = False

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Records that ``epoch`` starts at ``start_offset`` (no-op when already known or epoch < 0)."""
        if epoch < 0:
            return
        if self.entries and self.entries[-1][0] == epoch and self.entries[-1][1] <= start_offset:
            return
        # Keep the entries monotonic in both epoch and offset.
        self.entries = [(e, o) for e, o in self.entries if e < epoch and o < start_offset]
        self.entries.append((epoch, start_offset))
        self._flush()

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's ``endOffsetFor``: (the largest epoch <= requested, the start offset of the next epoch or LEO)."""
        if requested_epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self.latest_epoch:
            return requested_epoch, log_end_offset
        higher = next(((e, o) for e, o in self.entries if e > requested_epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = [(e, o) for e, o in self.entries if e <= requested_epoch]
        if not floor:
            return requested_epoch, higher[1]
        return floor[-1][0], higher[1]

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch under which ``offset`` was written (-1 when unknown)."""
        epoch = UNDEFINED_EPOCH
        for e, start in self.entries:
            if start > offset:
                break
            epoch = e
        return epoch

    def truncate_from_end(self, end_offset: int) -> None:
        """Drops the entries starting at or after ``end_offset`` (the log was truncated there)."""
        kept = [(e, o) for e, o in self.entries if o < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drops entries wholly below ``start_offset``; the last of them is moved up to start there."""
        below = [(e, o) for e, o in self.entries if o < start_offset]
        if not below:
            return
        rest = [(e, o) for e, o in self.entries if o >= start_offset]
        if not rest or rest[0][1] > start_offset:
            rest.insert(0, (below[-1][0], start_offset))
        self.entries = rest
        self._flush()

    def clear(self) -> None:
        if self.entries:
            self.entries = []
            self._flush()
