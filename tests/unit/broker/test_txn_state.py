"""The transaction state machine and the coordinator's decisions (pure: no I/O, time passed in)."""

from __future__ import annotations

import itertools

import pytest

from moldau.broker.coordinator.txn_metadata import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    VALID_PREVIOUS,
    TransactionMetadata,
    TxnError,
    TxnState,
)
from moldau.broker.coordinator.txn_rules import (
    FenceFirst,
    add_partitions,
    check_timeout,
    end_transaction,
    init_producer_id,
)
from moldau.protocol.errors import ErrorCode
from moldau.protocol.transaction_log import read_value, transaction_value

S = TxnState


def ids(start: int = 100) -> itertools.count[int]:
    return itertools.count(start)


def initialised(epoch_after: int = 0) -> TransactionMetadata:
    """A transactional id after its first InitProducerId (epoch -1 -> 0)."""
    meta = TransactionMetadata("tx", producer_id=7)
    meta.producer_epoch = epoch_after - 1
    t = init_producer_id(meta, 60000, None, ids().__next__, 1000)
    assert not isinstance(t, FenceFirst)
    meta.complete_transition(t)
    return meta


def apply(meta: TransactionMetadata, transit: object) -> None:
    assert transit is not None and not isinstance(transit, FenceFirst)
    meta.complete_transition(transit)  # type: ignore[arg-type]


def test_state_names_and_ids_are_kafkas() -> None:
    assert [(s.value, s.display) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"), (4, "CompleteCommit"),
        (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    assert S.from_display("preparecommit") is S.PREPARE_COMMIT


def test_first_init_bumps_epoch_from_minus_one() -> None:
    meta = initialised()
    assert (meta.producer_id, meta.producer_epoch, meta.state) == (7, 0, S.EMPTY)


def test_commit_cycle() -> None:
    meta = initialised()
    apply(meta, add_partitions(meta, 7, 0, {("a", 0)}, 2000))
    assert meta.state is S.ONGOING and meta.txn_start_timestamp == 2000
    apply(meta, add_partitions(meta, 7, 0, {("b", 1)}, 2500))
    assert meta.partitions == {("a", 0), ("b", 1)} and meta.txn_start_timestamp == 2000
    assert add_partitions(meta, 7, 0, {("a", 0)}, 2600) is None  # already in: nothing to write
    apply(meta, end_transaction(meta, 7, 0, True, True, 3000))
    assert meta.state is S.PREPARE_COMMIT and meta.partitions == {("a", 0), ("b", 1)}
    apply(meta, meta.prepare_complete(3100))
    assert meta.state is S.COMPLETE_COMMIT and meta.partitions == set()
    assert end_transaction(meta, 7, 0, True, True, 3200) is None  # a retried EndTxn(commit)
    with pytest.raises(TxnError) as e:
        end_transaction(meta, 7, 0, False, True, 3200)
    assert e.value.code == ErrorCode.INVALID_TXN_STATE


def test_pending_transition_refuses_concurrent_requests() -> None:
    meta = initialised()
    transit = add_partitions(meta, 7, 0, {("a", 0)}, 2000)
    assert meta.pending_state is S.ONGOING
    for call in (lambda: add_partitions(meta, 7, 0, {("b", 0)}, 2001),
                 lambda: end_transaction(meta, 7, 0, True, True, 2001),
                 lambda: init_producer_id(meta, 1000, None, ids().__next__, 2001)):
        with pytest.raises(TxnError) as e:
            call()
        assert e.value.code == ErrorCode.CONCURRENT_TRANSACTIONS
    meta.abort_transition()  # the write failed: nothing changed
    assert meta.state is S.EMPTY and meta.partitions == set()
    assert transit is not None


def test_errors_for_wrong_producer() -> None:
    meta = initialised()
    with pytest.raises(TxnError) as e:
        add_partitions(meta, 8, 0, {("a", 0)}, 1)
    assert e.value.code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    with pytest.raises(TxnError) as e:
        add_partitions(meta, 7, 1, {("a", 0)}, 1)
    assert e.value.code == ErrorCode.PRODUCER_FENCED
    with pytest.raises(TxnError) as e:
        end_transaction(meta, 7, 0, True, True, 1)
    assert e.value.code == ErrorCode.INVALID_TXN_STATE  # nothing to commit in Empty


def test_init_on_ongoing_fences_and_aborts_first() -> None:
    meta = initialised()
    apply(meta, add_partitions(meta, 7, 0, {("a", 0)}, 2000))
    assert isinstance(init_producer_id(meta, 60000, None, ids().__next__, 3000), FenceFirst)
    assert meta.pending_state is S.PREPARE_EPOCH_FENCE and meta.producer_epoch == 1
    with pytest.raises(TxnError) as e:  # the old producer is fenced at once
        end_transaction(meta, 7, 0, True, True, 3000)
    assert e.value.code == ErrorCode.PRODUCER_FENCED
    transit = end_transaction(meta, 7, meta.producer_epoch, False, False, 3000)
    assert transit is not None and transit.state is S.PREPARE_ABORT and transit.producer_epoch == 1
    apply(meta, transit)
    with pytest.raises(TxnError) as e:  # the new producer retries while markers are written
        init_producer_id(meta, 60000, None, ids().__next__, 3001)
    assert e.value.code == ErrorCode.CONCURRENT_TRANSACTIONS
    apply(meta, meta.prepare_complete(3100))
    apply(meta, init_producer_id(meta, 60000, None, ids().__next__, 3200))
    assert (meta.producer_epoch, meta.state) == (2, S.EMPTY)


def test_exhausted_epoch_rotates_the_producer_id() -> None:
    meta = initialised(epoch_after=MAX_EPOCH - 1)
    assert meta.producer_epoch == MAX_EPOCH - 1 and meta.is_producer_epoch_exhausted()
    apply(meta, init_producer_id(meta, 60000, None, ids(500).__next__, 5000))
    assert (meta.producer_id, meta.producer_epoch, meta.last_producer_id) == (500, 0, 7)


def test_kip360_bump_and_its_retry() -> None:
    meta = initialised()
    apply(meta, init_producer_id(meta, 60000, (7, 0), ids().__next__, 2000))
    assert (meta.producer_epoch, meta.last_producer_epoch) == (1, 0)
    # The answer was lost; the client retries with the epoch it had: same answer, no second bump.
    apply(meta, init_producer_id(meta, 60000, (7, 0), ids().__next__, 2100))
    assert (meta.producer_epoch, meta.last_producer_epoch) == (1, 0)
    with pytest.raises(TxnError) as e:  # an older epoch is a zombie
        init_producer_id(meta, 60000, (99, 3), ids().__next__, 2200)
    assert e.value.code == ErrorCode.PRODUCER_FENCED


def test_timeout_limits() -> None:
    check_timeout(900000, 900000)
    for bad in (0, -1, 900001):
        with pytest.raises(TxnError) as e:
            check_timeout(bad, 900000)
        assert e.value.code == ErrorCode.INVALID_TRANSACTION_TIMEOUT


def test_timed_out_and_expired() -> None:
    meta = initialised()
    meta.txn_timeout_ms = 1000
    apply(meta, add_partitions(meta, 7, 0, {("a", 0)}, 2000))
    assert not meta.timed_out(3000) and meta.timed_out(3001)
    assert not meta.expired(10**9, 1)  # an open transaction never expires
    meta.prepare_fence_producer_epoch()
    apply(meta, end_transaction(meta, 7, 1, False, False, 3001))
    apply(meta, meta.prepare_complete(3002))
    assert meta.state is S.COMPLETE_ABORT and not meta.timed_out(10**9)
    assert not meta.expired(3002 + 99, 100) and meta.expired(3002 + 100, 100)
    apply(meta, meta.prepare_dead(4000))
    assert meta.state is S.DEAD


def test_invalid_transitions_are_refused() -> None:
    for target, previous in VALID_PREVIOUS.items():
        for state in S:
            if state in previous or target in (S.PREPARE_EPOCH_FENCE,):
                continue
            meta = TransactionMetadata("tx", 1, producer_epoch=0, state=state)
            with pytest.raises(TxnError):
                meta._transit(target, 0)


def test_metadata_survives_the_log() -> None:
    meta = initialised()
    transit = add_partitions(meta, 7, 0, {("a", 0), ("b", 3)}, 2000)
    assert transit is not None
    loaded = TransactionMetadata.from_log("tx", read_value(transaction_value(transit.log_value())))
    assert (loaded.producer_id, loaded.producer_epoch, loaded.state, loaded.partitions, loaded.txn_start_timestamp,
            loaded.txn_timeout_ms) == (7, 0, S.ONGOING, {("a", 0), ("b", 3)}, 2000, 60000)
    assert loaded.last_producer_epoch == NO_PRODUCER_EPOCH
