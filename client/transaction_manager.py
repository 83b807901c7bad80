"""The producer's transaction manager (KIP-98, KIP-447): Kafka's TransactionManager, reduced to what an asyncio
producer needs.

States as Kafka's: UNINITIALIZED -> (init_transactions) READY -> (begin_transaction) IN_TRANSACTION ->
(commit/abort) COMMITTING/ABORTING -> READY. A failed send or request moves the transaction to ABORTABLE_ERROR
(only ``abort_transaction()`` is allowed then) or, for the errors Kafka treats as fatal (a newer producer fenced this
one, the transactional id is not authorized, the transaction state is invalid), to FATAL_ERROR: the producer must
be closed.

The producer calls :meth:`partition_ready` per batch it is about to drain: a partition not yet in the transaction
is added with AddPartitionsToTxn (one request for every partition waiting, in the background) and its batches wait
until the coordinator has answered. Requests to the transaction coordinator (FindCoordinator key type 1) are
retried on the retriable errors, after ``retry.backoff.ms``, for up to ``max.block.ms``.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from moldau.cluster import COORDINATOR_ERRORS, Cluster
from moldau.config import ClientConfig
from moldau.errors import KafkaConnectionError, KafkaError, RequestTimeoutError, TransactionError
from moldau.group import ConsumerGroupMetadata, OffsetAndMetadata
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.init_producer_id import INIT_PRODUCER_ID
from moldau.protocol.messages.transactions import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    END_TXN,
    TXN_OFFSET_COMMIT,
)
from moldau.protocol.schema import Api, Req, Resp
from moldau.tasks import cancel_and_wait

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        AddOffsetsToTxnRequest,
        AddPartitionsToTxnRequest,
        EndTxnRequest,
        InitProducerIdRequest,
        TxnOffsetCommitRequest,
        TxnOffsetCommitRequestTopicsPartitions,
    )

log = logging.getLogger("moldau.client.transactions")

TXN_COORDINATOR = 1  # FindCoordinator key type of a transactional id

# Kafka's fatal transactional errors: the producer cannot go on (close it). Anything else that is not retriable
# is abortable: abort_transaction() works and a new transaction may start.
FATAL_ERRORS = frozenset({
    ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ErrorCode.INVALID_TXN_STATE, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.UNSUPPORTED_VERSION,
    ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.TRANSACTION_COORDINATOR_FENCED,
})
# Answers that mean "ask again" (the coordinator is busy, moving or loading).
RETRY_ERRORS = frozenset({ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.REQUEST_TIMED_OUT,
                          ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNSTABLE_OFFSET_COMMIT,
                          ErrorCode.OPERATION_NOT_ATTEMPTED}) | COORDINATOR_ERRORS
ADD_PARTITIONS_MAX_VERSION = 3  # v4+ is the broker-to-broker batched form (KIP-890)


class TxnState(enum.Enum):
    UNINITIALIZED = "Uninitialized"
    INITIALIZING = "Initializing"
    READY = "Ready"
    IN_TRANSACTION = "InTransaction"
    COMMITTING = "CommittingTransaction"
    ABORTING = "AbortingTransaction"
    ABORTABLE_ERROR = "AbortableError"
    FATAL_ERROR = "FatalError"


class _Retry(Exception):
    """Internal: the coordinator asked us to try again."""


class TransactionManager:
    """Transaction state of one transactional producer (``transactional.id``)."""

    def __init__(self, cluster: Cluster, config: ClientConfig, wake: Callable[[], None],
                 fail_partitions: Callable[[set[tuple[str, int]], BaseException], None]) -> None:
        self.cluster = cluster
        self.transactional_id: str = config["transactional.id"]
        self.timeout_ms: int = config["transaction.timeout.ms"]
        self._backoff_s = config["retry.backoff.ms"] / 1000
        self._max_block_s = config["max.block.ms"] / 1000
        self._wake = wake
        self._fail_partitions = fail_partitions
        self.state = TxnState.UNINITIALIZED
        self.producer_id = -1
        self.producer_epoch = -1
        self.error: TransactionError | None = None
        self._added: set[tuple[str, int]] = set()
        self._pending: set[tuple[str, int]] = set()
        self._adding: asyncio.Task[None] | None = None
        self._offsets_added = False

    # ------------------------------------------------------------------ state checks
    @property
    def in_transaction(self) -> bool:
        return self.state is TxnState.IN_TRANSACTION

    def check_can_send(self) -> None:
        """Raises unless a record may be sent now (inside a transaction without a pending error)."""
        if self.state is not TxnState.IN_TRANSACTION:
            self._raise_state("send")

    def _raise_state(self, what: str) -> None:
        if self.error is not None and self.state in (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR):
            raise self.error
        hint = {TxnState.UNINITIALIZED: "call init_transactions() first",
                TxnState.READY: "call begin_transaction() first"}.get(self.state, "")
        raise TransactionError(ErrorCode.INVALID_TXN_STATE, f"cannot {what} in state {self.state.value}"
                               + (f": {hint}" if hint else ""), fatal=False)

    def set_error(self, error: BaseException) -> None:
        """A send or transactional request failed: the transaction becomes abortable, or the producer fatal."""
        if self.state is TxnState.FATAL_ERROR or self.state is TxnState.ABORTING and not _is_fatal(error):
            return
        if isinstance(error, TransactionError):
            txn_error = error
        else:
            code = error.code if isinstance(error, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
            txn_error = TransactionError(code, f"transaction failed: {error}", fatal=_is_fatal(error))
        if txn_error.fatal:
            log.error("transactional id %s: fatal error %s", self.transactional_id, txn_error)
            self.state = TxnState.FATAL_ERROR
            self.error = txn_error
        elif self.state is not TxnState.ABORTABLE_ERROR:
            self.state = TxnState.ABORTABLE_ERROR
            self.error = txn_error

    # ------------------------------------------------------------------ life cycle
    async def init(self) -> None:
        """InitProducerId with the transactional id: a producer id and a bumped epoch (fencing any older producer
        with this id; the coordinator aborts its open transaction)."""
        if self.state not in (TxnState.UNINITIALIZED, TxnState.READY):
            self._raise_state("init_transactions")
        self.state = TxnState.INITIALIZING
        try:
            await self._init_producer_id(-1, -1)
        except BaseException:
            self.state = TxnState.UNINITIALIZED
            raise
        self.state = TxnState.READY

    async def _init_producer_id(self, producer_id: int, producer_epoch: int) -> None:
        body: InitProducerIdRequest = {"transactional_id": self.transactional_id,
                                       "transaction_timeout_ms": self.timeout_ms, "producer_id": producer_id,
                                       "producer_epoch": producer_epoch}
        response = await self._request(INIT_PRODUCER_ID, body, "InitProducerId")
        self.producer_id = response["producer_id"]
        self.producer_epoch = response["producer_epoch"]
        log.info("transactional id %s: producer id %d epoch %d", self.transactional_id, self.producer_id,
                 self.producer_epoch)

    def begin(self) -> None:
        if self.state is not TxnState.READY:
            self._raise_state("begin_transaction")
        self.state = TxnState.IN_TRANSACTION
        self.error = None

    def start_ending(self, commit: bool) -> None:
        """Checks the state for commit/abort and enters COMMITTING/ABORTING."""
        if self.state is TxnState.FATAL_ERROR or commit and self.state is TxnState.ABORTABLE_ERROR:
            assert self.error is not None
            raise self.error
        wanted = TxnState.COMMITTING if commit else TxnState.ABORTING
        if self.state is not wanted and (self.state is not TxnState.IN_TRANSACTION and
                                         not (not commit and self.state is TxnState.ABORTABLE_ERROR)):
            self._raise_state("commit_transaction" if commit else "abort_transaction")
        self.state = wanted

    async def end(self, commit: bool) -> None:
        """EndTxn (after the producer flushed); back to READY. Nothing to end if nothing reached the coordinator."""
        if self.error is not None and (commit or self.state is TxnState.FATAL_ERROR):
            raise self.error
        bump = not commit and self.error is not None
        if self._added or self._offsets_added:
            body: EndTxnRequest = {"transactional_id": self.transactional_id, "producer_id": self.producer_id,
                                   "producer_epoch": self.producer_epoch, "committed": commit}
            try:
                await self._request(END_TXN, body, "EndTxn")
            except TransactionError as exc:
                self.set_error(exc)
                raise
        if bump:
            # A batch may have failed after taking its sequence numbers: continuing the sequence would be refused
            # (OUT_OF_ORDER_SEQUENCE_NUMBER). As Kafka 2.5+ (KIP-360), ask for a bumped epoch and start again at 0.
            await self._init_producer_id(self.producer_id, self.producer_epoch)
        self._added.clear()
        self._pending.clear()
        self._offsets_added = False
        self.error = None
        self.state = TxnState.READY

    async def close(self) -> None:
        """Stops a pending AddPartitionsToTxn (the producer is closing; its batches fail anyway)."""
        if self._adding is not None:
            await cancel_and_wait([self._adding])

    # ------------------------------------------------------------------ partitions
    def partition_ready(self, tp: tuple[str, int]) -> bool:
        """True when ``tp`` is in the transaction; else starts adding it (batches wait) and answers False."""
        if tp in self._added:
            return True
        if tp not in self._pending:
            self._pending.add(tp)
            if self._adding is None or self._adding.done():
                self._adding = asyncio.get_running_loop().create_task(self._add_partitions())
        return False

    async def _add_partitions(self) -> None:
        while self._pending:
            batch = set(self._pending)
            topics: dict[str, list[int]] = {}
            for topic, partition in sorted(batch):
                topics.setdefault(topic, []).append(partition)
            body: AddPartitionsToTxnRequest = {
                "v3_and_below_transactional_id": self.transactional_id, "v3_and_below_producer_id": self.producer_id,
                "v3_and_below_producer_epoch": self.producer_epoch,
                "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
            try:
                await self._request(ADD_PARTITIONS_TO_TXN, body, "AddPartitionsToTxn", ADD_PARTITIONS_MAX_VERSION)
            except Exception as exc:
                self._pending.clear()
                self.set_error(exc)
                self._fail_partitions(batch, self.error or exc)
                self._wake()
                return
            self._added |= batch
            self._pending -= batch
            self._wake()

    # ------------------------------------------------------------------ offsets
    async def send_offsets(self, offsets: Mapping[Any, int | OffsetAndMetadata],
                           group: ConsumerGroupMetadata | str) -> None:
        """AddOffsetsToTxn to the transaction coordinator, then TxnOffsetCommit to the group coordinator."""
        if self.state is not TxnState.IN_TRANSACTION:
            self._raise_state("send_offsets_to_transaction")
        meta = ConsumerGroupMetadata(group) if isinstance(group, str) else group
        try:
            add: AddOffsetsToTxnRequest = {"transactional_id": self.transactional_id, "producer_id": self.producer_id,
                                           "producer_epoch": self.producer_epoch, "group_id": meta.group_id}
            await self._request(ADD_OFFSETS_TO_TXN, add, "AddOffsetsToTxn")
            self._offsets_added = True
            topics: dict[str, list[TxnOffsetCommitRequestTopicsPartitions]] = {}
            for (topic, partition), value in offsets.items():
                om = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(int(value))
                topics.setdefault(topic, []).append({"partition_index": partition, "committed_offset": om.offset,
                                                     "committed_leader_epoch": -1,
                                                     "committed_metadata": om.metadata})
            commit: TxnOffsetCommitRequest = {
                "transactional_id": self.transactional_id, "group_id": meta.group_id,
                "producer_id": self.producer_id, "producer_epoch": self.producer_epoch,
                "generation_id": meta.generation_id, "member_id": meta.member_id,
                "group_instance_id": meta.group_instance_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
            await self._request(TXN_OFFSET_COMMIT, commit, "TxnOffsetCommit", group_id=meta.group_id)
        except Exception as exc:
            self.set_error(exc)
            raise self.error or exc from None

    # ------------------------------------------------------------------ requests
    async def _request(self, api: Api[Req, Resp], body: Req, what: str, max_version: int | None = None, *,
                       group_id: str | None = None) -> Resp:
        """One request to the transaction (or, with ``group_id``, the group) coordinator, retried on retriable
        answers for up to max.block.ms; a non-retriable error is raised as a :class:`TransactionError`."""
        key, key_type = (group_id, 0) if group_id is not None else (self.transactional_id, TXN_COORDINATOR)
        deadline = time.monotonic() + self._max_block_s
        last: BaseException | None = None
        while True:
            try:
                node = await self.cluster.coordinator(key, key_type=key_type)
                conn = await self.cluster.connection(node)
                response = await self.cluster.send(node, api, body, conn.version_for(api, max_version))
                _check(response, what)
                return response
            except TransactionError:
                raise  # _check's verdict: not to be retried
            except (KafkaConnectionError, RequestTimeoutError) as exc:
                self.cluster.coordinator_dead(key, key_type)
                last = exc
            except _Retry as exc:
                last = exc.__cause__
                if isinstance(last, KafkaError) and last.code in COORDINATOR_ERRORS:
                    self.cluster.coordinator_dead(key, key_type)
            except KafkaError as exc:  # from FindCoordinator
                if not exc.retriable:
                    raise TransactionError(exc.code, f"{what}: {exc}", fatal=exc.code in FATAL_ERRORS) from None
                self.cluster.coordinator_dead(key, key_type)
                last = exc
            if time.monotonic() + self._backoff_s > deadline:
                code = last.code if isinstance(last, KafkaError) else ErrorCode.REQUEST_TIMED_OUT
                raise TransactionError(code, f"{what} did not succeed within max.block.ms "
                                             f"({self._max_block_s * 1000:.0f} ms): {last}", fatal=False)
            log.debug("%s: retrying after %s", what, last)
            await asyncio.sleep(self._backoff_s)


def _codes(response: Mapping[str, Any]) -> list[int]:
    """Every error code in a transactional response (top level and per partition)."""
    codes = [response["error_code"]] if "error_code" in response else []
    for topic in response.get("results_by_topic_v3_and_below") or response.get("topics") or ():
        for part in topic.get("results_by_partition") or topic.get("partitions") or ():
            codes.append(part.get("partition_error_code", part.get("error_code", 0)))
    return codes


def _check(response: Mapping[str, Any], what: str) -> None:
    codes = [c for c in _codes(response) if c]
    if not codes:
        return
    errors = [KafkaError(c, what) for c in codes]
    fatal = [e for e in errors if e.code in FATAL_ERRORS]
    if fatal:
        raise TransactionError(fatal[0].code, what, fatal=True)
    final = [e for e in errors if e.code not in RETRY_ERRORS and not e.retriable]
    if final:
        raise TransactionError(final[0].code, what, fatal=False)
    raise _Retry() from errors[0]


def _is_fatal(error: BaseException) -> bool:
    if isinstance(error, TransactionError):
        return error.fatal
    return isinstance(error, KafkaError) and error.code in FATAL_ERRORS
