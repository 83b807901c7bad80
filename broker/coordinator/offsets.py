"""``__consumer_offsets``: where groups and their committed offsets live, and the cache of them.

Each group belongs to one partition of the internal topic: ``abs(java_string_hashcode(group_id)) % partitions``
(Kafka's rule, so a group maps to the same partition number on Kafka and on Moldau). This broker coordinates the
groups of the partitions it leads; ``load_partition``/``unload_partition`` are the hooks for leadership changes.

Writes go through the replica manager like any produce (acks=-1); reads at load time walk the partition's log (to
its end: a new leader's high watermark may lag) with ``protocol.records.iter_records`` and keep the latest value
per key (a null value deletes the key).

Transactional offset commits (TxnOffsetCommit) are written as a transactional batch of the producer (its id,
epoch and next sequence on this partition) and stay pending in the group until the producer's COMMIT marker
reaches the partition (then they count) or its ABORT marker (then they are dropped); at load time the same
happens with the markers in the log, and transactions still open at its end stay pending.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from moldau.broker.coordinator.group import GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata
from moldau.protocol import consumer_offsets as fmt
from moldau.protocol.control_records import COMMIT, control_type
from moldau.protocol.errors import ErrorCode
from moldau.protocol.records import RecordBatchError, build_batch, iter_headers, iter_records
from moldau.protocol.types import TopicPartition
from moldau.storage.config import Clock

log = logging.getLogger("moldau.coordinator.offsets")

OFFSETS_TOPIC = "__consumer_offsets"


def java_string_hashcode(s: str) -> int:
    """Java's String.hashCode: h = 31*h + c over UTF-16 code units, as a signed 32-bit int."""
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's Utils.abs: Math.abs, except that Integer.MIN_VALUE maps to 0."""
    return 0 if n == -(1 << 31) else abs(n)


@functools.lru_cache(maxsize=4096)  # every group request asks; the hash walks the id in Python
def partition_for(group_id: str, num_partitions: int) -> int:
    return kafka_abs(java_string_hashcode(group_id)) % num_partitions


# Append errors -> what a coordinator client should hear (Kafka's mapping for group and offset writes).
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    # Transactional offset commits: the producer state's refusals reach the producer as they are.
    ErrorCode.INVALID_PRODUCER_EPOCH: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.PRODUCER_FENCED: ErrorCode.PRODUCER_FENCED,
    ErrorCode.INVALID_TXN_STATE: ErrorCode.INVALID_TXN_STATE,
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER: ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
}


@dataclass(slots=True)
class _LoadedGroup:
    """What a partition's log says about one group, while loading."""

    value: dict[str, Any] | None = None
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    pending: dict[int, dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)
    # A KIP-848 consumer group's records: (record type, member id) -> latest value.
    consumer: dict[tuple[int, str], dict[str, Any]] = field(default_factory=dict)


class OffsetStore:
    """The groups of the ``__consumer_offsets`` partitions led here, and their persistence."""

    def __init__(self, replica_manager: Any, clock: Clock, num_partitions: int, *,
                 load_buffer_size: int = 5 * 1024 * 1024, max_metadata_size: int = 4096,
                 broker_id: int = -1) -> None:
        self.replica_manager = replica_manager
        self.clock = clock
        self.num_partitions = num_partitions
        self.load_buffer_size = load_buffer_size
        self.max_metadata_size = max_metadata_size
        self.broker_id = broker_id
        self.groups: dict[str, GroupMetadata] = {}
        self.owned: set[int] = set()
        self.loading: set[int] = set()
        # Bumped on every unload, so a load that finishes after its partition moved away is discarded.
        self._epochs: dict[int, int] = {}
        # The end offset of the latest write to each partition: a commit is durable once the HW passed it.
        self.written_end: dict[int, int] = {}
        # Transaction markers replicated while a partition loads: applied once the load is done.
        self.markers_during_load: dict[int, list[tuple[int, bool]]] = {}
        # Builds a consumer group (KIP-848) from its replayed records; set by the coordinator.
        self.consumer_loader: Callable[[str, dict[tuple[int, str], dict[str, Any]]], Any] | None = None

    # ------------------------------------------------------------------------------------------ ownership
    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def is_local(self, group_id: str) -> bool:
        p = self.partition_for(group_id)
        return p in self.owned or p in self.loading

    def is_loading(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.loading

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def add_group(self, group: GroupMetadata) -> GroupMetadata:
        return self.groups.setdefault(group.group_id, group)

    def remove_group(self, group_id: str) -> None:
        self.groups.pop(group_id, None)

    def begin_load(self, partition: int) -> int:
        self.markers_during_load.pop(partition, None)
        self.loading.add(partition)
        self.owned.discard(partition)
        epoch = self._epochs.get(partition, 0) + 1
        self._epochs[partition] = epoch
        return epoch

    def unload_partition(self, partition: int) -> list[GroupMetadata]:
        """Forget the groups of a partition this broker no longer leads; returns them (for timer clean-up)."""
        self._epochs[partition] = self._epochs.get(partition, 0) + 1
        self.owned.discard(partition)
        self.loading.discard(partition)
        gone = [g for g in self.groups.values() if g.partition == partition]
        for group in gone:
            del self.groups[group.group_id]
        return gone

    async def load_partition(self, partition: int, epoch: int) -> list[GroupMetadata] | None:
        """Read the partition's log into groups and offsets. None when ownership changed meanwhile."""
        loaded: dict[str, _LoadedGroup] = {}
        try:
            await self._read_log(partition, epoch, loaded)
        except (RecordBatchError, fmt.FormatError) as exc:
            log.error("%s-%d holds a record that cannot be read (%s); loaded what came before it",
                      OFFSETS_TOPIC, partition, exc)
        if self._epochs.get(partition) != epoch:
            return None
        groups = [self._build_group(group_id, partition, lg) for group_id, lg in loaded.items()
                  if lg.value is not None or lg.offsets or lg.pending or lg.consumer]
        for group in groups:
            self.groups[group.group_id] = group
        self.loading.discard(partition)
        self.owned.add(partition)
        for producer_id, committed in self.markers_during_load.pop(partition, []):
            self.complete_txn_offsets(partition, producer_id, committed)
        (log.info if groups else log.debug)("loaded %d groups from %s-%d", len(groups),
                                            OFFSETS_TOPIC, partition)
        return groups

    async def _read_log(self, partition: int, epoch: int, loaded: dict[str, _LoadedGroup]) -> None:
        # Not get_partition(): the metadata that made this broker coordinator may precede the LeaderAndIsr that
        # opens the local replica (after a restart), whose log would look empty until then.
        p = await self.replica_manager.wait_until_leader(OFFSETS_TOPIC, partition)
        log_ = p.log
        offset = log_.log_start_offset
        # To the log end, as Kafka's GroupMetadataManager: a new leader's high watermark may lag behind commits its
        # predecessor acknowledged, and a leader never truncates its own log.
        end = log_.log_end_offset
        open_txns: dict[int, list[tuple[bytes, bytes | None]]] = {}  # producer id -> its transaction's records
        while offset < end and self._epochs.get(partition) == epoch:
            data = log_.read(offset, self.load_buffer_size, max_offset=end, min_one=True)
            buf = b"".join(region.read() for region in data.regions)
            progressed = False
            for pos, header in iter_headers(buf):
                if header.next_offset <= offset:
                    continue
                progressed = True
                offset = header.next_offset
                records = iter_records(memoryview(buf)[pos:pos + header.total_size], header)
                if header.is_control:
                    txn = open_txns.pop(header.producer_id, [])
                    if any(control_type(r.key) == COMMIT for r in records):
                        for key, value in txn:
                            self._replay(key, value, loaded)
                    continue
                for record in records:
                    if record.key is None:
                        continue
                    if header.is_transactional:
                        open_txns.setdefault(header.producer_id, []).append((record.key, record.value))
                    else:
                        self._replay(record.key, record.value, loaded)
            if not progressed:
                break
            await asyncio.sleep(0)  # let requests (answered LOAD_IN_PROGRESS meanwhile) through
        for producer_id, txn in open_txns.items():  # still open: pending until their marker
            for key, value in txn:
                k = fmt.read_key(key)
                if isinstance(k, fmt.OffsetKey) and value is not None:
                    v = fmt.read_offset_value(value)
                    entry = loaded.setdefault(k.group, _LoadedGroup())
                    entry.pending.setdefault(producer_id, {})[(k.topic, k.partition)] = OffsetAndMetadata(
                        v["offset"], v["leader_epoch"], v["metadata"], v["commit_timestamp"])

    @staticmethod
    def _replay(key_bytes: bytes, value: bytes | None, loaded: dict[str, _LoadedGroup]) -> None:
        key = fmt.read_key(key_bytes)
        entry = loaded.setdefault(key.group, _LoadedGroup())
        if isinstance(key, fmt.OffsetKey):
            tp = (key.topic, key.partition)
            if value is None:
                entry.offsets.pop(tp, None)
            else:
                v = fmt.read_offset_value(value)
                entry.offsets[tp] = OffsetAndMetadata(v["offset"], v["leader_epoch"], v["metadata"],
                                                      v["commit_timestamp"])
        elif isinstance(key, fmt.ConsumerKey):
            if value is None:
                entry.consumer.pop((key.type, key.member), None)
            elif key.type != fmt.CONSUMER_PARTITION_METADATA:  # not needed: counts come from the metadata
                entry.consumer[(key.type, key.member)] = fmt.read_consumer_value(key.type, value)
        else:
            entry.value = None if value is None else fmt.read_group_value(value)

    def _build_group(self, group_id: str, partition: int, lg: _LoadedGroup) -> GroupMetadata:
        group = GroupMetadata(group_id, partition, offsets=dict(lg.offsets), pending_txn_offsets=dict(lg.pending))
        if (fmt.CONSUMER_GROUP_METADATA, "") in lg.consumer and self.consumer_loader is not None:
            group.consumer = self.consumer_loader(group_id, lg.consumer)
            group.protocol_type = "consumer"
            return group
        v = lg.value
        if v is None:
            return group  # offsets only: a group that commits without group management
        group.protocol_type = v["protocol_type"] or None
        group.generation_id = v["generation"]
        group.protocol_name = v["protocol"]
        ts = v["current_state_timestamp"]
        group.current_state_timestamp = ts if ts >= 0 else None
        for m in v["members"]:
            protocols = [(group.protocol_name, m["subscription"])] if group.protocol_name else []
            member = MemberMetadata(m["member_id"], m["group_instance_id"], m["client_id"], m["client_host"],
                                    m["rebalance_timeout"], m["session_timeout"], group.protocol_type or "",
                                    protocols, assignment=m["assignment"])
            group.add(member, None)
        group.leader_id = v["leader"] if v["leader"] in group.members else group.leader_id
        # Kafka loads a group with members as Stable: its members carry on heartbeating with their generation.
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        return group

    # ------------------------------------------------------------------------------------------ writes
    def _append(self, partition: int, records: Sequence[tuple[bytes, bytes | None]],
                producer: tuple[int, int] | None = None) -> ErrorCode:
        now = self.clock.time_ms()
        if producer is None:
            batch = build_batch([(k, v, [], now) for k, v in records])
        else:
            producer_id, epoch = producer
            batch = build_batch([(k, v, [], now) for k, v in records], producer_id=producer_id,
                                producer_epoch=epoch, base_sequence=self._next_sequence(partition, producer_id, epoch),
                                is_transactional=True)
        result = self.replica_manager.append(OFFSETS_TOPIC, partition, batch, -1)
        if result.error == ErrorCode.NONE:
            self.written_end[partition] = result.last_offset + 1
            return ErrorCode.NONE
        log.warning("write to %s-%d failed: %s", OFFSETS_TOPIC, partition,
                    ErrorCode(result.error).name)
        return _APPEND_ERRORS.get(ErrorCode(result.error), ErrorCode.UNKNOWN_SERVER_ERROR)

    async def replicated(self, partition: int, timeout_ms: int) -> ErrorCode:
        """Waits until the latest write to ``partition`` is below its high watermark (acks=all semantics)."""
        end = self.written_end.get(partition)
        if end is None:
            return ErrorCode.NONE
        error = await self.replica_manager.wait_for_high_watermark(OFFSETS_TOPIC, partition, end, timeout_ms)
        return ErrorCode.NONE if error == ErrorCode.NONE else _APPEND_ERRORS.get(error, ErrorCode.UNKNOWN_SERVER_ERROR)

    def group_record_value(self, group: GroupMetadata, assignment: dict[str, bytes]) -> bytes:
        members = []
        for m in group.members.values():
            subscription = m.metadata_for(group.protocol_name) if group.protocol_name else b""
            members.append({"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id, "client_host": m.client_host,
                            "rebalance_timeout": m.rebalance_timeout_ms, "session_timeout": m.session_timeout_ms,
                            "subscription": subscription, "assignment": assignment.get(m.member_id, b"")})
        ts = group.current_state_timestamp
        return fmt.group_value({"protocol_type": group.protocol_type or "", "generation": group.generation_id,
                                "protocol": group.protocol_name, "leader": group.leader_id,
                                "current_state_timestamp": -1 if ts is None else ts, "members": members})

    def append_records(self, partition: int, records: Sequence[tuple[bytes, bytes | None]]) -> ErrorCode:
        """Append coordinator records (a consumer group's changes) to the partition; acks=-1, not awaited."""
        return self._append(partition, records) if records else ErrorCode.NONE

    def store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> ErrorCode:
        return self._append(group.partition, [(fmt.group_key(group.group_id),
                                               self.group_record_value(group, assignment))])

    def metadata_too_large(self, metadata: str | None) -> bool:
        return metadata is not None and len(metadata) > self.max_metadata_size

    def store_offsets(self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata]) -> ErrorCode:
        """Append the commits as one batch; on success they become visible in the group's cache."""
        if not offsets:
            return ErrorCode.NONE
        records: list[tuple[bytes, bytes | None]] = [
            (fmt.offset_key(group.group_id, t, p),
             fmt.offset_value(o.offset, o.leader_epoch, o.metadata, o.commit_timestamp))
            for (t, p), o in offsets.items()]
        error = self._append(group.partition, records)
        if error == ErrorCode.NONE:
            group.offsets.update(offsets)
        return error

    def _next_sequence(self, partition: int, producer_id: int, epoch: int) -> int:
        """The sequence the producer's next batch on this partition must carry: all of its batches here are this
        coordinator's transactional offset commits (Kafka skips the check for coordinator writes instead)."""
        p = self.replica_manager.get_partition(OFFSETS_TOPIC, partition)
        entry = None if p is None else p.log.producer_state.producers.get(producer_id)
        if entry is None or entry.producer_epoch != epoch or not entry.batches:
            return 0
        return (entry.last_seq + 1) & 0x7FFFFFFF

    def store_txn_offsets(self, group: GroupMetadata, producer_id: int, epoch: int,
                          offsets: dict[TopicPartition, OffsetAndMetadata]) -> ErrorCode:
        """TxnOffsetCommit: one transactional batch of the producer; pending in the group until its marker."""
        if not offsets:
            return ErrorCode.NONE
        records: list[tuple[bytes, bytes | None]] = [
            (fmt.offset_key(group.group_id, t, p),
             fmt.offset_value(o.offset, o.leader_epoch, o.metadata, o.commit_timestamp))
            for (t, p), o in offsets.items()]
        error = self._append(group.partition, records, (producer_id, epoch))
        if error == ErrorCode.NONE:
            group.pending_txn_offsets.setdefault(producer_id, {}).update(offsets)
        return error

    def complete_txn_offsets(self, partition: int, producer_id: int, committed: bool) -> int:
        """The producer's marker reached this partition: its pending offsets count (COMMIT) or are dropped.
        Returns how many groups had pending offsets of it."""
        count = 0
        for group in self.groups.values():
            if group.partition != partition:
                continue
            pending = group.pending_txn_offsets.pop(producer_id, None)
            if pending is None:
                continue
            count += 1
            if committed:
                group.offsets.update(pending)
        return count

    def delete_offsets(self, group: GroupMetadata, partitions: Iterable[TopicPartition],
                       with_group: bool = False) -> ErrorCode:
        """Tombstones for the partitions' offsets (and the group's metadata when with_group)."""
        partitions = list(partitions)
        records: list[tuple[bytes, bytes | None]] = [(fmt.offset_key(group.group_id, t, p), None)
                                                      for t, p in partitions]
        if with_group:
            records.append((fmt.group_key(group.group_id), None))
            if group.consumer is not None:
                records += [(k, None) for k in group.consumer.persisted]
        if not records:
            return ErrorCode.NONE
        error = self._append(group.partition, records)
        if error == ErrorCode.NONE:
            for tp in partitions:
                group.offsets.pop(tp, None)
            if with_group and group.consumer is not None:
                group.consumer.persisted.clear()
        return error

    # ------------------------------------------------------------------------------------------ expiry
    def expired_offsets(self, group: GroupMetadata, now_ms: int, retention_ms: int) -> list[TopicPartition]:
        """Offsets of an empty group older than the retention (KIP-211): measured from when the group became
        empty, or from the commit for groups that never used group management."""
        if not group.is_empty():
            return []
        expired = []
        for tp, o in group.offsets.items():
            base = group.current_state_timestamp if group.protocol_type is not None and \
                group.current_state_timestamp is not None else o.commit_timestamp
            if base + retention_ms <= now_ms:
                expired.append(tp)
        return expired
