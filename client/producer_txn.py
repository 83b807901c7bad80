"""The transactional methods of the asyncio producer (a mixin of :class:`moldau.producer.Producer`, which holds
the state): ``init_transactions``, ``begin_transaction``, ``send_offsets_to_transaction``,
``commit_transaction``, ``abort_transaction``. The protocol side is :mod:`moldau.transaction_manager`."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from moldau.errors import ClientError, TransactionAbortedError, TransactionError
from moldau.group import ConsumerGroupMetadata, OffsetAndMetadata
from moldau.producer_records import Batch
from moldau.protocol.errors import ErrorCode
from moldau.transaction_manager import TransactionManager


class TransactionalApi:
    """Kafka's transactional producer API; ``transactional.id`` must be set."""

    if TYPE_CHECKING:  # the Producer's state these methods use
        _txn: TransactionManager | None
        _started: bool
        _closed: bool
        _producer_id: int
        _producer_epoch: int
        _next_seq: dict[tuple[str, int], int]
        _queues: dict[tuple[str, int], deque[Batch]]

        async def flush(self, timeout: float | None = None) -> None: ...

        def _complete(self, batch: Batch, *, base_offset: int = -1, append_time: int = -1,
                      error: BaseException | None = None) -> None: ...

    def _require_txn(self) -> TransactionManager:
        if self._txn is None:
            raise TransactionError(ErrorCode.INVALID_TXN_STATE, "transactional.id is not set", fatal=False)
        if not self._started or self._closed:
            raise ClientError("producer is closed" if self._closed else "producer not started; await start()")
        return self._txn

    async def init_transactions(self) -> None:
        """Registers ``transactional.id`` with its coordinator: gets the producer id and a new epoch, fencing any
        older producer with the same id (its open transaction is aborted). Call once, before the first
        transaction."""
        txn = self._require_txn()
        await txn.init()
        self._producer_id, self._producer_epoch = txn.producer_id, txn.producer_epoch
        self._next_seq.clear()

    def begin_transaction(self) -> None:
        """Starts a transaction: the records sent until commit/abort belong to it."""
        self._require_txn().begin()

    async def send_offsets_to_transaction(self, offsets: Mapping[Any, int | OffsetAndMetadata],
                                          group_metadata: ConsumerGroupMetadata | str) -> None:
        """Adds the consumer's offsets (``{TopicPartition: next offset}``) to the transaction: they are committed
        for the group if and only if the transaction commits. ``group_metadata`` is the consumer's
        ``group_metadata()`` (a group id alone skips KIP-447's member checks)."""
        await self._require_txn().send_offsets(offsets, group_metadata)

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Flushes the transaction's records, then commits it (EndTxn). An abortable error (a record failed)
        raises :class:`TransactionError` with ``txn_requires_abort``; a fatal one with ``fatal``."""
        txn = self._require_txn()
        txn.start_ending(commit=True)
        await self.flush(timeout)
        await txn.end(commit=True)

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Aborts the transaction: records not yet sent fail with TransactionAbortedError, those
        in flight are awaited, then EndTxn(abort). Allowed after an abortable error; raises after a fatal one."""
        txn = self._require_txn()
        txn.start_ending(commit=False)
        unsent = {tp for tp, q in self._queues.items() if any(b.data is None for b in q)}
        self._fail_partitions(unsent, TransactionAbortedError("the transaction was aborted before the record was sent"))
        await self.flush(timeout)
        await txn.end(commit=False)
        if (txn.producer_id, txn.producer_epoch) != (self._producer_id, self._producer_epoch):  # epoch bumped
            self._producer_id, self._producer_epoch = txn.producer_id, txn.producer_epoch
            self._next_seq.clear()

    def _fail_partitions(self, tps: set[tuple[str, int]], error: BaseException) -> None:
        """Fails the batches of ``tps`` not yet sent (the partition could not join the transaction, or it aborts)."""
        for tp in tps:
            queue = self._queues.get(tp)
            if not queue:
                continue
            keep = deque(b for b in queue if b.data is not None)
            for b in queue:
                if b.data is None:
                    self._complete(b, error=error)
            self._queues[tp] = keep
