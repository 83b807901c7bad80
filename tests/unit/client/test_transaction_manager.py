"""The producer's transaction manager without a broker: the state rules (what may be called when), Kafka's
classification of fatal and abortable errors, and the configuration rules of a transactional producer. The
requests themselves are exercised against a real broker in tests/integration/test_moldau_transactions.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from moldau.cluster import Cluster
from moldau.config import producer_config
from moldau.errors import ConfigError, KafkaError, TransactionError
from moldau.producer import Producer
from moldau.protocol.errors import ErrorCode
from moldau.transaction_manager import TransactionManager, TxnState, _check, _Retry


def manager(**overrides: Any) -> tuple[TransactionManager, list[Any]]:
    config = producer_config({"bootstrap.servers": "127.0.0.1:1", "transactional.id": "tx", **overrides})
    failed: list[Any] = []
    return TransactionManager(Cluster(config), config, lambda: None,
                              lambda tps, err: failed.append((tps, err))), failed


def test_calls_out_of_order_raise_invalid_txn_state_naming_the_missing_step() -> None:
    txn, _ = manager()
    with pytest.raises(TransactionError, match="init_transactions"):
        txn.check_can_send()
    with pytest.raises(TransactionError, match="init_transactions"):
        txn.begin()
    txn.state = TxnState.READY  # as after init()
    with pytest.raises(TransactionError, match="begin_transaction"):
        txn.check_can_send()
    with pytest.raises(TransactionError):
        txn.start_ending(commit=True)
    txn.begin()
    txn.check_can_send()
    with pytest.raises(TransactionError):
        txn.begin()


def test_an_abortable_error_blocks_sends_and_commit_but_not_abort() -> None:
    txn, _ = manager()
    txn.state = TxnState.IN_TRANSACTION
    txn.set_error(KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "produce"))
    assert txn.state is TxnState.ABORTABLE_ERROR and txn.error is not None and txn.error.txn_requires_abort
    with pytest.raises(TransactionError) as caught:
        txn.check_can_send()
    assert caught.value.code is ErrorCode.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(TransactionError):
        txn.start_ending(commit=True)
    txn.start_ending(commit=False)
    assert txn.state is TxnState.ABORTING  # end() then bumps the epoch (integration-tested)


def test_ending_a_transaction_nothing_reached_needs_no_request() -> None:
    txn, _ = manager()  # its bootstrap server does not exist: any request would fail
    txn.state = TxnState.READY
    for commit in (True, False):
        txn.begin()
        txn.start_ending(commit=commit)
        asyncio.run(txn.end(commit=commit))
        assert txn.state is TxnState.READY and txn.error is None


@pytest.mark.parametrize("code", [ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH,
                                  ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED])
def test_fenced_and_unauthorized_are_fatal_even_for_abort(code: ErrorCode) -> None:
    txn, _ = manager()
    txn.state = TxnState.IN_TRANSACTION
    txn.set_error(KafkaError(code, "produce"))
    txn.set_error(KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED))  # a later abortable one changes nothing
    assert txn.state is TxnState.FATAL_ERROR
    for call in (lambda: txn.start_ending(commit=False), txn.begin, txn.check_can_send):
        with pytest.raises(TransactionError) as caught:
            call()
        assert caught.value.fatal and caught.value.code is code


def test_response_classification() -> None:
    _check({"error_code": 0}, "EndTxn")
    with pytest.raises(_Retry):
        _check({"error_code": ErrorCode.CONCURRENT_TRANSACTIONS}, "EndTxn")
    with pytest.raises(_Retry):
        _check({"error_code": ErrorCode.NOT_COORDINATOR}, "EndTxn")
    with pytest.raises(TransactionError) as caught:
        _check({"error_code": ErrorCode.PRODUCER_FENCED}, "EndTxn")
    assert caught.value.fatal
    # AddPartitionsToTxn: the refused topic decides, the others only were not attempted
    response = {"results_by_topic_v3_and_below": [
        {"name": "a", "results_by_partition": [{"partition_index": 0, "partition_error_code": 29}]},
        {"name": "b", "results_by_partition": [{"partition_index": 0, "partition_error_code": 55}]}]}
    with pytest.raises(TransactionError) as caught:
        _check(response, "AddPartitionsToTxn")
    assert caught.value.code is ErrorCode.TOPIC_AUTHORIZATION_FAILED and not caught.value.fatal
    # TxnOffsetCommit: a member the group no longer knows is abortable (KIP-447)
    with pytest.raises(TransactionError) as caught:
        _check({"topics": [{"name": "t", "partitions": [{"partition_index": 0, "error_code": 25}]}]}, "Txn")
    assert caught.value.code is ErrorCode.UNKNOWN_MEMBER_ID and caught.value.txn_requires_abort


def test_a_transactional_producer_needs_idempotence() -> None:
    base = {"bootstrap.servers": "127.0.0.1:1", "transactional.id": "tx"}
    assert Producer(base).idempotent
    with pytest.raises(ConfigError, match="enable.idempotence"):
        Producer({**base, "enable.idempotence": False})
    with pytest.raises(ConfigError, match="acks"):
        Producer({**base, "acks": "1"})
    assert producer_config(base)["transaction.timeout.ms"] == 60000


def test_transactional_calls_on_a_plain_producer_raise() -> None:
    plain = Producer({"bootstrap.servers": "127.0.0.1:1"})
    with pytest.raises(TransactionError, match="transactional.id"):
        plain.begin_transaction()


def test_the_blocking_producer_has_every_transactional_method() -> None:
    import inspect

    from moldau import producer_txn, sync

    for name, method in inspect.getmembers(producer_txn.TransactionalApi, inspect.isfunction):
        if name.startswith("_"):
            continue
        twin = getattr(sync.Producer, name)
        assert [p.name for p in inspect.signature(twin).parameters.values()] == \
            [p.name for p in inspect.signature(method).parameters.values()], name
        assert not inspect.iscoroutinefunction(twin), name
