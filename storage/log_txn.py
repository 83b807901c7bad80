"""The transaction side of a partition log: applying transaction markers (control batches) to the producer state
and the aborted transaction index, the last stable offset, and the aborted transactions of a read_committed fetch.

Kept out of log.py (``Log`` inherits :class:`LogTransactions`): the leader writes a marker for WriteTxnMarkers, a
follower applies the markers it fetched, and loading replays the markers past the producer snapshot
(re-deriving the ``.txnindex`` entries from there, so a crash between the log write and the index write loses
nothing).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from typing import TYPE_CHECKING

from moldau.protocol.control_records import ABORT, COMMIT, EndTxnMarker, build_marker_batch, read_marker
from moldau.protocol.records import NO_TIMESTAMP, BatchHeader, Buffer, RecordBatchError, read_header
from moldau.storage.config import Clock
from moldau.storage.errors import CorruptRecordError
from moldau.storage.producer_state import CompletedTxn, ProducerStateManager
from moldau.storage.segment import LogSegment
from moldau.storage.txn_index import AbortedTxn

if TYPE_CHECKING:
    from moldau.storage.log import AppendInfo, FetchData


def complete_txn(state: ProducerStateManager, segment: LogSegment, h: BatchHeader, marker: EndTxnMarker
                 ) -> CompletedTxn | None:
    """Ends the producer's open transaction at the marker batch ``h`` (in ``segment``); an aborted one gets its
    ``.txnindex`` entry, recorded with the LSO as Kafka computes it."""
    completed = state.complete_txn(h, marker)
    if completed is not None and completed.is_aborted:
        segment.txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset,
                                            state.last_stable_offset_after(completed)))
    return completed


def apply_control_batch(state: ProducerStateManager, segment: LogSegment, batch: Buffer, h: BatchHeader
                        ) -> CompletedTxn | None:
    """A control batch read from the log or fetched from the leader (``batch`` holds exactly it). Control
    records other than transaction markers are skipped, as Kafka does."""
    try:
        marker = read_marker(batch, h)
    except (RecordBatchError, ValueError) as exc:
        raise CorruptRecordError(f"control batch at offset {h.base_offset}: {exc}") from None
    if marker is None:
        state.map_end_offset = max(state.map_end_offset, h.last_offset + 1)
        return None
    return complete_txn(state, segment, h, marker)


def collect_aborted_txns(segments: Iterable[LogSegment], fetch_offset: int, upper_bound_offset: int
                         ) -> list[AbortedTxn]:
    """The aborted transactions overlapping ``[fetch_offset, upper_bound_offset)``. ``segments`` start with the
    one holding ``fetch_offset``: a transaction aborted in an earlier segment ended before it."""
    found: list[AbortedTxn] = []
    for seg in segments:
        entries, complete = seg.txn_index.collect(fetch_offset, upper_bound_offset)
        found += entries
        if complete:
            break
    return found


class LogTransactions:
    """The transaction methods of :class:`~moldau.storage.log.Log`, which provides the state declared here."""

    producer_state: ProducerStateManager
    high_watermark: int | None
    log_start_offset: int
    clock: Clock
    _segments: list[LogSegment]
    _bases: list[int]

    @property
    def log_end_offset(self) -> int:
        raise NotImplementedError

    @property
    def active_segment(self) -> LogSegment:
        raise NotImplementedError

    def _append(self, data: Buffer, batches: list[tuple[int, BatchHeader]], append_time: int) -> AppendInfo:
        raise NotImplementedError

    def append_marker(self, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
                      leader_epoch: int) -> AppendInfo:
        """WriteTxnMarkers on the leader: a control batch ending the producer's transaction (COMMIT or ABORT).
        Refused from an older producer epoch (InvalidProducerEpochError) or coordinator epoch
        (TransactionCoordinatorFencedError). An abort gets its ``.txnindex`` entry."""
        self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        batch = bytearray(build_marker_batch(producer_id, producer_epoch, committed, coordinator_epoch,
                                             self.clock.time_ms(), base_offset=self.log_end_offset,
                                             partition_leader_epoch=leader_epoch))
        h = read_header(batch)
        info = self._append(batch, [(0, h)], NO_TIMESTAMP)
        complete_txn(self.producer_state, self.active_segment, h,
                     EndTxnMarker(COMMIT if committed else ABORT, coordinator_epoch))
        return info

    @property
    def last_stable_offset(self) -> int:
        """What read_committed consumers may read up to: min(first offset of the oldest transaction open or
        ended but not yet below the high watermark, high watermark), never below the log start offset (Kafka
        clamps the first unstable offset there when DeleteRecords or retention passed it)."""
        hw = self.high_watermark if self.high_watermark is not None else self.log_end_offset
        self.producer_state.prune_unreplicated(hw)
        first_unstable = self.producer_state.first_unstable_offset(hw)
        return hw if first_unstable is None else min(max(first_unstable, self.log_start_offset), hw)

    def last_stable_offset_lag(self) -> int:
        """High watermark minus the LSO (Kafka's LastStableOffsetLag); changes nothing (the metrics thread)."""
        hw = self.high_watermark if self.high_watermark is not None else self.log_end_offset
        first_unstable = self.producer_state.first_unstable_offset(hw)
        return 0 if first_unstable is None else max(hw - max(first_unstable, self.log_start_offset), 0)

    def aborted_txns_for(self, fetch_offset: int, data: FetchData, last_stable_offset: int) -> list[AbortedTxn]:
        """What a read_committed answer lists: the aborted transactions overlapping the returned batches, from
        ``fetch_offset`` to the offset after them (Kafka's upperBoundOffset; one header read), at most the LSO."""
        upper = last_stable_offset
        if data.regions:
            last = data.regions[-1]
            end = last.position + last.length
            seg = next((s for s in reversed(self._segments) if s.holds(last.fileobj)), None)
            if seg is not None:
                after = seg.header_at(end) if end < seg.size else None
                upper = min(upper, after.base_offset if after is not None else seg.next_offset)
        return self.collect_aborted_txns(fetch_offset, upper)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[fetch_offset, upper_bound_offset)`` (read_committed fetch)."""
        i = max(bisect_right(self._bases, fetch_offset) - 1, 0)
        return collect_aborted_txns(self._segments[i:], fetch_offset, upper_bound_offset)
