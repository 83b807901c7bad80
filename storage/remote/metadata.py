"""Remote log metadata (KIP-405): the records of ``__remote_log_metadata`` and the state they add up to.

Records follow Kafka's ``RemoteLogSegmentMetadataRecord`` (api key 0) and ``RemoteLogSegmentMetadataUpdateRecord``
(api key 1) field by field; the value is ``api key (int16), version (int16)`` then the fields in classic
big-endian encoding (strings int16-prefixed, uuids 16 bytes). The record key is ``<topic>-<partition>``; the
metadata partition is Java's hashCode of that text modulo the partition count, so one data partition's events
stay in order in one metadata partition.

:class:`RemoteLogMetadataCache` replays records idempotently: a state may only move forward
(STARTED -> FINISHED -> DELETE_STARTED -> DELETE_FINISHED, or STARTED -> DELETE_STARTED), so a replayed or
duplicated record changes nothing, and a segment id whose copy never finished stays visible as *unfinished*
until a leader deletes it.
"""

from __future__ import annotations

import struct
import uuid
from bisect import bisect_right
from dataclasses import dataclass

from moldau.storage.remote.api import RemoteLogSegmentId, RemoteLogSegmentMetadata, SegmentState

METADATA_TOPIC = "__remote_log_metadata"
SEGMENT_RECORD, UPDATE_RECORD = 0, 1
_HEADER = struct.Struct(">hh")
_SEGMENT_FIXED = struct.Struct(">qqiqqi")  # start, end, broker, max ts, event ts, size
_UPDATE_FIXED = struct.Struct(">iq")  # broker, event ts
_EPOCH = struct.Struct(">iq")
_ALLOWED = {
    SegmentState.COPY_SEGMENT_STARTED: (SegmentState.COPY_SEGMENT_FINISHED, SegmentState.DELETE_SEGMENT_STARTED),
    SegmentState.COPY_SEGMENT_FINISHED: (SegmentState.DELETE_SEGMENT_STARTED,),
    SegmentState.DELETE_SEGMENT_STARTED: (SegmentState.DELETE_SEGMENT_FINISHED,),
    SegmentState.DELETE_SEGMENT_FINISHED: (),
}


@dataclass(frozen=True, slots=True)
class SegmentUpdate:
    """A state change of a known segment (RemoteLogSegmentMetadataUpdateRecord)."""

    segment_id: RemoteLogSegmentId
    broker_id: int
    event_timestamp_ms: int
    state: SegmentState


MetadataEvent = RemoteLogSegmentMetadata | SegmentUpdate


def java_string_hash(text: str) -> int:
    h = 0
    for unit in struct.unpack(f">{len(text.encode('utf-16-be')) // 2}H", text.encode("utf-16-be")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def metadata_partition(topic: str, partition: int, num_partitions: int) -> int:
    return abs(java_string_hash(f"{topic}-{partition}")) % num_partitions


def record_key(segment_id: RemoteLogSegmentId) -> bytes:
    return f"{segment_id.topic}-{segment_id.partition}".encode()


def _write_id(out: bytearray, sid: RemoteLogSegmentId) -> None:
    name = sid.topic.encode()
    out += struct.pack(">h", len(name)) + name + struct.pack(">i", sid.partition) + sid.id.bytes


def _read_id(buf: bytes, pos: int) -> tuple[RemoteLogSegmentId, int]:
    (n,) = struct.unpack_from(">h", buf, pos)
    topic = buf[pos + 2 : pos + 2 + n].decode()
    pos += 2 + n
    (partition,) = struct.unpack_from(">i", buf, pos)
    segment = uuid.UUID(bytes=bytes(buf[pos + 4 : pos + 20]))
    return RemoteLogSegmentId(topic, partition, segment), pos + 20


def encode_event(event: MetadataEvent) -> bytes:
    out = bytearray()
    if isinstance(event, RemoteLogSegmentMetadata):
        out += _HEADER.pack(SEGMENT_RECORD, 0)
        _write_id(out, event.segment_id)
        out += _SEGMENT_FIXED.pack(event.start_offset, event.end_offset, event.broker_id, event.max_timestamp_ms,
                                   event.event_timestamp_ms, event.segment_size_in_bytes)
        out += struct.pack(">i", len(event.segment_leader_epochs))
        for epoch, offset in event.segment_leader_epochs:
            out += _EPOCH.pack(epoch, offset)
        out += struct.pack(">b", event.state)
    else:
        out += _HEADER.pack(UPDATE_RECORD, 0)
        _write_id(out, event.segment_id)
        out += _UPDATE_FIXED.pack(event.broker_id, event.event_timestamp_ms) + struct.pack(">b", event.state)
    return bytes(out)


def decode_event(buf: bytes) -> MetadataEvent:
    """Raises ValueError on a record this version does not know (or a malformed one)."""
    try:
        api_key, _version = _HEADER.unpack_from(buf, 0)
        sid, pos = _read_id(buf, _HEADER.size)
        if api_key == SEGMENT_RECORD:
            start, end, broker, max_ts, event_ts, size = _SEGMENT_FIXED.unpack_from(buf, pos)
            pos += _SEGMENT_FIXED.size
            (count,) = struct.unpack_from(">i", buf, pos)
            pos += 4
            epochs = tuple(_EPOCH.unpack_from(buf, pos + i * _EPOCH.size) for i in range(count))
            (state,) = struct.unpack_from(">b", buf, pos + count * _EPOCH.size)
            return RemoteLogSegmentMetadata(sid, start, end, max_ts, broker, event_ts, size, epochs,
                                            SegmentState(state))
        if api_key == UPDATE_RECORD:
            broker, event_ts = _UPDATE_FIXED.unpack_from(buf, pos)
            (state,) = struct.unpack_from(">b", buf, pos + _UPDATE_FIXED.size)
            return SegmentUpdate(sid, broker, event_ts, SegmentState(state))
    except (struct.error, UnicodeDecodeError) as exc:
        raise ValueError(f"malformed remote log metadata record: {exc}") from None
    raise ValueError(f"unknown remote log metadata record type {api_key}")


class RemoteLogMetadataCache:
    """Every known remote segment per partition, built by replaying events (in any number of repeats)."""

    def __init__(self) -> None:
        self._segments: dict[tuple[str, int], dict[uuid.UUID, RemoteLogSegmentMetadata]] = {}
        self._deleted: set[uuid.UUID] = set()  # a late replay of a deleted segment's announcement stays ignored

    def apply(self, event: MetadataEvent) -> bool:
        """True if the event changed anything."""
        sid = event.segment_id
        segments = self._segments.setdefault((sid.topic, sid.partition), {})
        current = segments.get(sid.id)
        if isinstance(event, RemoteLogSegmentMetadata):
            if current is not None or sid.id in self._deleted:
                return False  # a replayed announcement never moves a segment back
            segments[sid.id] = event
            return True
        if current is None or event.state not in _ALLOWED[current.state]:
            return False
        if event.state == SegmentState.DELETE_SEGMENT_FINISHED:
            del segments[sid.id]
            self._deleted.add(sid.id)
        else:
            segments[sid.id] = current.with_state(event.state, event.broker_id, event.event_timestamp_ms)
        return True

    def segments(self, topic: str, partition: int) -> list[RemoteLogSegmentMetadata]:
        """All known segments of the partition, by start offset."""
        return sorted(self._segments.get((topic, partition), {}).values(),
                      key=lambda m: (m.start_offset, -m.end_offset))

    def copied_segments(self, topic: str, partition: int) -> list[RemoteLogSegmentMetadata]:
        """The COPY_SEGMENT_FINISHED segments forming the remote log: ascending, each reaching beyond the one
        before (a segment wholly inside another, e.g. copied twice by two leaders, is redundant and skipped)."""
        chain: list[RemoteLogSegmentMetadata] = []
        for m in self.segments(topic, partition):
            if m.state != SegmentState.COPY_SEGMENT_FINISHED:
                continue
            if chain and m.end_offset <= chain[-1].end_offset:
                continue
            chain.append(m)
        return chain

    def redundant_segments(self, topic: str, partition: int) -> list[RemoteLogSegmentMetadata]:
        """Finished segments wholly covered by the chain (double copies): to delete, never to count."""
        chain = {m.segment_id for m in self.copied_segments(topic, partition)}
        return [m for m in self.segments(topic, partition)
                if m.state == SegmentState.COPY_SEGMENT_FINISHED and m.segment_id not in chain]

    def unfinished_segments(self, topic: str, partition: int) -> list[RemoteLogSegmentMetadata]:
        """Copies that started and never finished, and deletes that started: a leader completes their deletion."""
        return [m for m in self.segments(topic, partition)
                if m.state in (SegmentState.COPY_SEGMENT_STARTED, SegmentState.DELETE_SEGMENT_STARTED)]

    def highest_copied_offset(self, topic: str, partition: int) -> int:
        chain = self.copied_segments(topic, partition)
        return chain[-1].end_offset if chain else -1

    def log_start_offset(self, topic: str, partition: int) -> int | None:
        chain = self.copied_segments(topic, partition)
        return chain[0].start_offset if chain else None

    def size(self, topic: str, partition: int) -> int:
        return sum(m.segment_size_in_bytes for m in self.copied_segments(topic, partition))

    def segment_for_offset(self, topic: str, partition: int, offset: int) -> RemoteLogSegmentMetadata | None:
        """The copied segment holding ``offset``, else the first one after it (a gap left by compaction-free
        retention never happens, but an offset inside a batch may precede the segment's first batch)."""
        chain = self.copied_segments(topic, partition)
        i = bisect_right([m.start_offset for m in chain], offset) - 1
        if i >= 0 and chain[i].end_offset >= offset:
            return chain[i]
        return chain[i + 1] if i + 1 < len(chain) else None

    def partitions(self) -> list[tuple[str, int]]:
        return [tp for tp, segs in self._segments.items() if segs]
