"""``__transaction_state``: where the transaction coordinator keeps each transactional id's state.

A transactional id belongs to partition ``abs(java_string_hashcode(id)) % transaction.state.log.num.partitions``
(Kafka's rule). The broker leading a partition coordinates its ids, with the partition's leader epoch as its
*coordinator epoch*: markers carry it, so partition leaders can refuse a stale coordinator, and a write or a
marker round that outlives this broker's leadership of the partition is dropped (``epoch_of`` changed).

Writes are acks=all: a transit counts only once the high watermark passed it. Loading walks the partition's log to
its end (a new leader's high watermark may lag behind what was acknowledged) and keeps the last value per key (a
null value removes the id), as the cleaner would.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from moldau.broker.coordinator.offsets import java_string_hashcode, kafka_abs
from moldau.broker.coordinator.txn_metadata import TransactionMetadata, TxnState, TxnTransit
from moldau.protocol import transaction_log as fmt
from moldau.protocol.errors import ErrorCode
from moldau.protocol.records import RecordBatchError, build_batch, iter_headers, iter_records
from moldau.storage.config import Clock

log = logging.getLogger("moldau.coordinator.txn_log")

TRANSACTION_STATE_TOPIC = "__transaction_state"

# Append errors -> what a transactional client should hear (Kafka's mapping in TransactionStateManager).
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}


def partition_for(transactional_id: str, num_partitions: int) -> int:
    return kafka_abs(java_string_hashcode(transactional_id)) % num_partitions


class TxnStateStore:
    """The transactional ids of the ``__transaction_state`` partitions led here, and their persistence."""

    def __init__(self, replica_manager: Any, clock: Clock, num_partitions: int, *,
                 load_buffer_size: int = 5 * 1024 * 1024, write_timeout_ms: int = 5000) -> None:
        self.replica_manager = replica_manager
        self.clock = clock
        self.num_partitions = num_partitions
        self.load_buffer_size = load_buffer_size
        self.write_timeout_ms = write_timeout_ms
        self.txns: dict[str, TransactionMetadata] = {}
        self.owned: dict[int, int] = {}  # partition -> coordinator epoch
        self.loading: dict[int, int] = {}
        # Per partition, bumped on every load and unload: a load that outlived its ownership sees the change.
        self._generations: dict[int, int] = {}

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def epoch_of(self, partition: int) -> int | None:
        """The coordinator epoch while this broker coordinates the partition (loaded), else None."""
        return self.owned.get(partition)

    def is_local(self, transactional_id: str) -> bool:
        p = self.partition_for(transactional_id)
        return p in self.owned or p in self.loading

    def is_loading(self, transactional_id: str) -> bool:
        return self.partition_for(transactional_id) in self.loading

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        return self.txns.get(transactional_id)

    def put_if_absent(self, meta: TransactionMetadata) -> TransactionMetadata:
        return self.txns.setdefault(meta.transactional_id, meta)

    # ------------------------------------------------------------------------------------------ ownership
    def _bump(self, partition: int) -> int:
        generation = self._generations[partition] = self._generations.get(partition, 0) + 1
        return generation

    def begin_load(self, partition: int, coordinator_epoch: int) -> int:
        self.owned.pop(partition, None)
        self.loading[partition] = coordinator_epoch
        return self._bump(partition)

    def unload_partition(self, partition: int) -> list[TransactionMetadata]:
        self._bump(partition)
        self.owned.pop(partition, None)
        self.loading.pop(partition, None)
        gone = [m for tid, m in self.txns.items() if self.partition_for(tid) == partition]
        for meta in gone:
            del self.txns[meta.transactional_id]
        return gone

    async def load_partition(self, partition: int, generation: int) -> list[TransactionMetadata] | None:
        """Read the partition's log into metadata. None when ownership changed meanwhile."""
        loaded: dict[str, fmt.TransactionLogValue | None] = {}
        try:
            await self._read_log(partition, generation, loaded)
        except (RecordBatchError, fmt.FormatError) as exc:
            log.error("%s-%d holds a record that cannot be read (%s); loaded what came before it",
                      TRANSACTION_STATE_TOPIC, partition, exc)
        if self._generations.get(partition) != generation or partition not in self.loading:
            return None
        metas = []
        for tid, value in loaded.items():
            if value is None:
                continue
            try:
                meta = TransactionMetadata.from_log(tid, value)
            except ValueError as exc:
                log.error("%s-%d: %s", TRANSACTION_STATE_TOPIC, partition, exc)
                continue
            if meta.state is not TxnState.DEAD:
                metas.append(meta)
        for meta in metas:
            self.txns[meta.transactional_id] = meta
        self.owned[partition] = self.loading.pop(partition)
        (log.info if metas else log.debug)("loaded %d transactional ids from %s-%d (coordinator epoch %d)",
                                           len(metas), TRANSACTION_STATE_TOPIC, partition, self.owned[partition])
        return metas

    async def _read_log(self, partition: int, generation: int,
                        loaded: dict[str, fmt.TransactionLogValue | None]) -> None:
        # Not get_partition(): the metadata that made this broker coordinator may precede the LeaderAndIsr that
        # opens the local replica (after a restart), whose log would look empty until then.
        p = await self.replica_manager.wait_until_leader(TRANSACTION_STATE_TOPIC, partition)
        log_ = p.log
        offset = log_.log_start_offset
        # To the log end, not the high watermark: a new leader's HW may still lag behind what its predecessor
        # acknowledged (a PrepareCommit the client was told about), and a leader never truncates its own log.
        end = log_.log_end_offset
        while offset < end and self._generations.get(partition) == generation:
            data = log_.read(offset, self.load_buffer_size, max_offset=end, min_one=True)
            buf = b"".join(region.read() for region in data.regions)
            progressed = False
            for pos, header in iter_headers(buf):
                if header.next_offset <= offset:
                    continue
                progressed = True
                offset = header.next_offset
                if header.is_control:
                    continue
                for record in iter_records(memoryview(buf)[pos:pos + header.total_size], header):
                    if record.key is not None:
                        tid = fmt.read_key(bytes(record.key))
                        loaded[tid] = None if record.value is None else fmt.read_value(bytes(record.value))
            if not progressed:
                break
            await asyncio.sleep(0)  # let requests (answered COORDINATOR_LOAD_IN_PROGRESS meanwhile) through

    # ------------------------------------------------------------------------------------------ writes
    async def write(self, transactional_id: str, transit: TxnTransit | tuple[TxnTransit, ...],
                    coordinator_epoch: int) -> ErrorCode:
        """Append the transit (a tombstone for Dead) and wait until it is replicated. Transits written together
        (CompleteCommit and the next Ongoing) go in one batch: replicated, and so loaded, all or none.
        NOT_COORDINATOR when the partition moved away or its coordinator epoch changed before or during the
        write."""
        partition = self.partition_for(transactional_id)
        if self.owned.get(partition) != coordinator_epoch:
            return ErrorCode.NOT_COORDINATOR
        chain = transit if isinstance(transit, tuple) else (transit,)
        transit = chain[-1]
        key, now = fmt.transaction_key(transactional_id), self.clock.time_ms()
        batch = build_batch([(key, None if t.state is TxnState.DEAD else fmt.transaction_value(t.log_value()), [],
                              now) for t in chain])
        result = self.replica_manager.append(TRANSACTION_STATE_TOPIC, partition, batch, -1)
        error = ErrorCode(result.error)
        if error == ErrorCode.NONE:
            error = await self.replica_manager.wait_for_high_watermark(
                TRANSACTION_STATE_TOPIC, partition, result.last_offset + 1, self.write_timeout_ms)
        if error != ErrorCode.NONE:
            log.warning("write of %s for %s to %s-%d failed: %s", transit.state.display, transactional_id,
                        TRANSACTION_STATE_TOPIC, partition, error.name)
            return _APPEND_ERRORS.get(error, ErrorCode.UNKNOWN_SERVER_ERROR)
        if self.owned.get(partition) != coordinator_epoch:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE
