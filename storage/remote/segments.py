"""From a local rolled segment to what the remote storage manager stores: its files and its metadata."""

from __future__ import annotations

from moldau.storage.log import Log
from moldau.storage.remote.api import LogSegmentData, RemoteLogSegmentId, RemoteLogSegmentMetadata
from moldau.storage.segment import LogSegment


def epochs_up_to(entries: list[tuple[int, int]], end_offset: int) -> tuple[tuple[int, int], ...]:
    """The leader-epoch entries starting at or below ``end_offset`` (the checkpoint stored with a segment)."""
    return tuple((e, o) for e, o in entries if o <= end_offset)


def segment_leader_epochs(entries: list[tuple[int, int]], start: int, end: int) -> tuple[tuple[int, int], ...]:
    """(epoch, first offset in [start, end]) for each epoch that wrote into the segment."""
    out: list[tuple[int, int]] = []
    for i, (epoch, offset) in enumerate(entries):
        next_start = entries[i + 1][1] if i + 1 < len(entries) else end + 1
        if next_start <= start or offset > end:
            continue
        out.append((epoch, max(offset, start)))
    return tuple(out)


def segment_data(log: Log, seg: LogSegment) -> LogSegmentData:
    """The files of a rolled (inactive) segment. The producer snapshot at its end offset exists since the roll
    that closed it; if the log lost it (an old log), None is stored and followers rebuild from the batches."""
    snapshot = log.producer_state.snapshot_path(seg.next_offset)
    return LogSegmentData(
        log_segment=seg.log_path,
        offset_index=seg.index.path,
        time_index=seg.time_index.path,
        producer_snapshot=snapshot if snapshot.exists() else None,
        leader_epochs=epochs_up_to(log.leader_epoch_cache.entries, seg.next_offset - 1),
        transaction_index=seg.txn_index.path if seg.txn_index.path.exists() else None,
    )


def segment_metadata(log: Log, seg: LogSegment, broker_id: int, now_ms: int) -> RemoteLogSegmentMetadata:
    """COPY_SEGMENT_STARTED metadata of a new copy attempt of ``seg``."""
    end = seg.next_offset - 1
    return RemoteLogSegmentMetadata(
        segment_id=RemoteLogSegmentId.generate(log.topic, log.partition),
        start_offset=seg.base_offset,
        end_offset=end,
        max_timestamp_ms=seg.max_timestamp,
        broker_id=broker_id,
        event_timestamp_ms=now_ms,
        segment_size_in_bytes=seg.size,
        segment_leader_epochs=segment_leader_epochs(log.leader_epoch_cache.entries, seg.base_offset, end),
    )
