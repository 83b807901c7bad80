"""The transaction coordinator's decisions, as Kafka's TransactionCoordinator makes them. Pure: each function
looks at one transactional id's metadata and a request, and either raises ``TxnError`` (the client's error),
returns a ``TxnTransit`` to write to ``__transaction_state``, or says there is nothing to write.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from moldau.broker.coordinator.txn_metadata import (
    NO_PRODUCER_EPOCH,
    TransactionMetadata,
    TxnError,
    TxnState,
    TxnTransit,
)
from moldau.protocol.errors import ErrorCode
from moldau.protocol.types import TopicPartition

S = TxnState


@dataclass(frozen=True, slots=True)
class FenceFirst:
    """InitProducerId found an ongoing transaction: it was fenced (epoch bumped, pending PrepareEpochFence); the
    coordinator aborts it and answers CONCURRENT_TRANSACTIONS, so the client retries and then gets a new epoch."""


def check_timeout(timeout_ms: int, max_timeout_ms: int) -> None:
    """``transaction.max.timeout.ms``: InitProducerId refuses a larger (or non-positive) transaction timeout."""
    if timeout_ms <= 0 or timeout_ms > max_timeout_ms:
        raise TxnError(ErrorCode.INVALID_TRANSACTION_TIMEOUT,
                       f"transaction timeout {timeout_ms} ms is not in (0, {max_timeout_ms}]")


def init_producer_id(meta: TransactionMetadata, timeout_ms: int, expected: tuple[int, int] | None,
                     next_producer_id: Callable[[], int], now_ms: int) -> TxnTransit | FenceFirst:
    """InitProducerId for a transactional id already known (a new one starts as ``TransactionMetadata`` with a
    fresh producer id and epoch -1). ``expected``: the (producer id, epoch) a KIP-360 client presents."""
    if meta.pending_transition_in_progress:
        raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
    if expected is not None and expected[1] != NO_PRODUCER_EPOCH \
            and not meta.is_valid_producer_id(expected[0], expected[1]):
        raise TxnError(ErrorCode.PRODUCER_FENCED, f"{meta.transactional_id}: producer {expected} was fenced")
    if meta.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
        raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)  # markers on their way: retry shortly
    if meta.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        expected_epoch = None if expected is None or expected[1] == NO_PRODUCER_EPOCH else expected[1]
        if meta.is_producer_epoch_exhausted() and (expected_epoch is None or expected_epoch == meta.producer_epoch):
            return meta.prepare_producer_id_rotation(next_producer_id(), timeout_ms, now_ms,
                                                     expected_epoch is not None)
        return meta.prepare_increment_producer_epoch(timeout_ms, expected_epoch, now_ms)
    if meta.state is S.ONGOING:
        meta.prepare_fence_producer_epoch()
        return FenceFirst()
    raise TxnError(ErrorCode.INVALID_TXN_STATE, f"{meta.transactional_id} is {meta.state.display}")


def _check_producer(meta: TransactionMetadata, producer_id: int, epoch: int) -> None:
    if meta.producer_id != producer_id:
        raise TxnError(ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                       f"{meta.transactional_id} has producer id {meta.producer_id}, not {producer_id}")
    if meta.producer_epoch != epoch:
        raise TxnError(ErrorCode.PRODUCER_FENCED,
                       f"{meta.transactional_id} is at epoch {meta.producer_epoch}, not {epoch}")


def add_partitions(meta: TransactionMetadata, producer_id: int, epoch: int, partitions: set[TopicPartition],
                   now_ms: int) -> TxnTransit | None:
    """AddPartitionsToTxn / AddOffsetsToTxn. None: the partitions are in the transaction already."""
    _check_producer(meta, producer_id, epoch)
    if meta.pending_transition_in_progress or meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
    if meta.state is S.ONGOING and partitions <= meta.partitions:
        return None
    return meta.prepare_add_partitions(partitions, now_ms)


def end_transaction(meta: TransactionMetadata, producer_id: int, epoch: int, commit: bool, from_client: bool,
                    now_ms: int) -> TxnTransit | None:
    """EndTxn (from_client) or an abort by the coordinator (timeout, fencing). None: already done (a retry)."""
    if meta.producer_id != producer_id:
        raise TxnError(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    if (from_client and epoch != meta.producer_epoch) or epoch < meta.producer_epoch:
        raise TxnError(ErrorCode.PRODUCER_FENCED,
                       f"{meta.transactional_id} is at epoch {meta.producer_epoch}, not {epoch}")
    if meta.pending_transition_in_progress and meta.pending_state is not S.PREPARE_EPOCH_FENCE:
        raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
    state = meta.state
    if state is S.ONGOING:
        return meta.prepare_abort_or_commit(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, now_ms)
    done, preparing = (S.COMPLETE_COMMIT, S.PREPARE_COMMIT) if commit else (S.COMPLETE_ABORT, S.PREPARE_ABORT)
    if state is done:
        return None
    if state is preparing:
        raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
    raise TxnError(ErrorCode.INVALID_TXN_STATE,
                   f"{meta.transactional_id}: cannot {'commit' if commit else 'abort'} in {state.display}")
