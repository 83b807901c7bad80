"""The transaction side of a partition log: applying transaction markers (control batches) to the producer state
and the aborted transaction index, and collecting the aborted transactions of a read_committed fetch.

Kept out of log.py, which calls these: the leader writes a marker for WriteTxnMarkers, a follower applies the
markers it fetched, and loading replays the markers past the producer snapshot (re-deriving the ``.txnindex``
entries from there, so a crash between the log write and the index write loses nothing).
"""

from __future__ import annotations

from collections.abc import Iterable

from moldau.protocol.control_records import EndTxnMarker, read_marker
from moldau.protocol.records import BatchHeader, Buffer, RecordBatchError
from moldau.storage.errors import CorruptRecordError
from moldau.storage.producer_state import CompletedTxn, ProducerStateManager
from moldau.storage.segment import LogSegment
from moldau.storage.txn_index import AbortedTxn


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
