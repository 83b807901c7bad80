"""One transactional id's state, and the transaction state machine (Kafka's TransactionMetadata). Pure: no I/O,
time passed in.

A change happens in two steps, as in Kafka: ``prepare_*`` checks the change against the current state and returns a
``TxnTransit`` (the would-be state) while marking the metadata with a *pending* state; the coordinator writes the
transit to ``__transaction_state`` and only once that write is replicated calls ``complete_transition`` (or
``abort_transition`` when the write failed). While a change is pending, other requests hear
CONCURRENT_TRANSACTIONS. ``PrepareEpochFence`` is never written: it marks an ongoing transaction whose producer is
being fenced, on its way to PrepareAbort with the bumped epoch.

Epochs: a new transactional id starts with epoch -1, InitProducerId bumps it (fencing the previous producer).
When the epoch is exhausted (>= 32766) a new producer id is taken with epoch 0 (the old id is kept as
``last_producer_id``). KIP-360: a producer that presents its current id and epoch may bump it again; a retry of
that bump (presenting the previous epoch) gets the same answer.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from moldau.protocol.errors import ErrorCode
from moldau.protocol.transaction_log import TransactionLogValue
from moldau.protocol.types import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MaxValue




class TxnState(enum.Enum):
    """Kafka's TransactionState; the value is the id written to the log (TransactionStatus)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display(self) -> str:
        """Kafka's name for the state (DescribeTransactions, ListTransactions)."""
        return "".join(w.capitalize() for w in self.name.split("_"))

    @classmethod
    def from_display(cls, name: str) -> TxnState | None:
        return next((s for s in cls if s.display.lower() == name.lower()), None)


S = TxnState

# The states each state may be entered from (Kafka's validPreviousStates).
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps the last epoch free so that fencing an exhausted producer can still bump once."""
    return epoch >= MAX_EPOCH - 1


class TxnError(Exception):
    """A request the state machine refuses; ``code`` is the Kafka error the client hears."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """The state a transactional id moves to: what gets written to ``__transaction_state``."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int

    def log_value(self) -> TransactionLogValue:
        return TransactionLogValue(self.producer_id, self.producer_epoch, self.txn_timeout_ms, self.state.value,
                                   self.partitions, self.txn_last_update_timestamp, self.txn_start_timestamp)


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60000
    state: TxnState = S.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    pending_state: TxnState | None = None

    @classmethod
    def from_log(cls, transactional_id: str, v: TransactionLogValue) -> TransactionMetadata:
        try:
            state = TxnState(v.state_id)
        except ValueError as exc:
            raise ValueError(f"unknown transaction state {v.state_id} for {transactional_id!r}") from exc
        return cls(transactional_id, v.producer_id, NO_PRODUCER_ID, v.producer_epoch, NO_PRODUCER_EPOCH,
                   v.transaction_timeout_ms, state, set(v.partitions), v.start_timestamp_ms,
                   v.last_update_timestamp_ms)

    # ------------------------------------------------------------------------------------------ queries
    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def is_valid_producer_id(self, producer_id: int, epoch: int) -> bool:
        """InitProducerId with an id and epoch (KIP-360) is allowed when the metadata was just created, the id is
        the current one (its epoch is checked by the bump), or it is the previous id with an exhausted epoch (a
        retry after a rotation whose answer was lost)."""
        return (self.producer_epoch == NO_PRODUCER_EPOCH or producer_id == self.producer_id
                or (producer_id == self.last_producer_id and is_epoch_exhausted(epoch)))

    def timed_out(self, now_ms: int) -> bool:
        return (self.state is S.ONGOING and self.pending_state is None
                and self.txn_start_timestamp + self.txn_timeout_ms < now_ms)

    def expired(self, now_ms: int, expiration_ms: int) -> bool:
        """``transactional.id.expiration.ms``: an idle id (no open transaction) not used for that long."""
        return (self.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and self.pending_state is None
                and self.txn_last_update_timestamp + expiration_ms <= now_ms)

    # ------------------------------------------------------------------------------------------ transitions
    def _transit(self, state: TxnState, now_ms: int, *, producer_id: int | None = None,
                 last_producer_id: int | None = None, epoch: int | None = None, last_epoch: int | None = None,
                 timeout_ms: int | None = None, partitions: frozenset[TopicPartition] | None = None,
                 start_ms: int | None = None) -> TxnTransit:
        if self.pending_state is not None:
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS,
                           f"{self.transactional_id}: {self.pending_state.display} in progress")
        if self.state not in VALID_PREVIOUS[state]:
            raise TxnError(ErrorCode.INVALID_TXN_STATE,
                           f"{self.transactional_id}: no transition from {self.state.display} to {state.display}")
        self.pending_state = state
        return TxnTransit(
            self.producer_id if producer_id is None else producer_id,
            self.last_producer_id if last_producer_id is None else last_producer_id,
            self.producer_epoch if epoch is None else epoch,
            self.last_producer_epoch if last_epoch is None else last_epoch,
            self.txn_timeout_ms if timeout_ms is None else timeout_ms, state,
            frozenset(self.partitions) if partitions is None else partitions,
            self.txn_start_timestamp if start_ms is None else start_ms, now_ms)

    def prepare_increment_producer_epoch(self, timeout_ms: int, expected_epoch: int | None,
                                         now_ms: int) -> TxnTransit:
        """InitProducerId on an idle id: bump the epoch (fencing older producers). ``expected_epoch`` is the
        epoch a KIP-360 client presents (None for a plain InitProducerId)."""
        if self.is_producer_epoch_exhausted():
            raise TxnError(ErrorCode.INVALID_PRODUCER_EPOCH, "producer epoch exhausted")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif self.last_producer_epoch != NO_PRODUCER_EPOCH and expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch  # a retry of the bump already made
        else:
            raise TxnError(ErrorCode.PRODUCER_FENCED, f"{self.transactional_id}: epoch {expected_epoch} is stale")
        return self._transit(S.EMPTY, now_ms, epoch=epoch, last_epoch=last, timeout_ms=timeout_ms,
                             partitions=frozenset(), start_ms=-1)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransit:
        """The epoch is exhausted: continue with a new producer id at epoch 0."""
        if self.pending_state is not None:
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
        return self._transit(S.EMPTY, now_ms, producer_id=new_producer_id, last_producer_id=self.producer_id,
                             epoch=0, last_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                             timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1)

    def prepare_fence_producer_epoch(self) -> None:
        """An ongoing transaction whose producer is fenced (a new InitProducerId, or its timeout): bump the epoch
        in memory (pending PrepareEpochFence); ``prepare_abort_or_commit(PREPARE_ABORT)`` writes it."""
        if self.producer_epoch >= MAX_EPOCH:
            raise TxnError(ErrorCode.INVALID_PRODUCER_EPOCH, "cannot fence: epoch at its maximum")
        if self.pending_state is not None:
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
        if self.state not in VALID_PREVIOUS[S.PREPARE_EPOCH_FENCE]:
            raise TxnError(ErrorCode.INVALID_TXN_STATE, f"cannot fence in {self.state.display}")
        # An exhausted epoch stays; the next InitProducerId then rotates the producer id.
        self.producer_epoch = self.producer_epoch if self.is_producer_epoch_exhausted() else self.producer_epoch + 1
        self.last_producer_epoch = NO_PRODUCER_EPOCH
        self.pending_state = S.PREPARE_EPOCH_FENCE

    def prepare_add_partitions(self, added: set[TopicPartition], now_ms: int) -> TxnTransit:
        if self.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            return self._transit(S.ONGOING, now_ms, partitions=frozenset(added), start_ms=now_ms)
        return self._transit(S.ONGOING, now_ms, partitions=frozenset(self.partitions | added))

    def prepare_abort_or_commit(self, state: TxnState, now_ms: int) -> TxnTransit:
        if state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise ValueError(state)
        if self.pending_state is S.PREPARE_EPOCH_FENCE and state is S.PREPARE_ABORT:
            self.pending_state = None  # the fence goes to the log as this PrepareAbort, with the bumped epoch
        return self._transit(state, now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        return self._transit(state, now_ms, partitions=frozenset())

    def prepare_complete_and_begin(self, added: set[TopicPartition], now_ms: int) -> tuple[TxnTransit, TxnTransit]:
        """CompleteCommit/CompleteAbort and the producer's next transaction (Ongoing with ``added``, as
        ``prepare_add_partitions`` would make it from the completed state), to be written together, in one batch:
        one replication round trip instead of two for back-to-back transactions. The pending state is Ongoing;
        ``complete_transition`` takes the pair."""
        complete = self.prepare_complete(now_ms)
        self.pending_state = S.ONGOING
        return complete, replace(complete, state=S.ONGOING, partitions=frozenset(added), txn_start_timestamp=now_ms)

    def prepare_dead(self, now_ms: int) -> TxnTransit:
        return self._transit(S.DEAD, now_ms, partitions=frozenset())

    def complete_transition(self, transit: TxnTransit | tuple[TxnTransit, ...]) -> None:
        """The transit (or transits written together, in order) is in the log (replicated): make it the state."""
        chain = transit if isinstance(transit, tuple) else (transit,)
        transit = chain[-1]
        if self.pending_state is not transit.state:
            raise TxnError(ErrorCode.UNKNOWN_SERVER_ERROR,
                           f"{self.transactional_id}: completing {transit.state.display} while "
                           f"{self.pending_state.display if self.pending_state else 'nothing'} is pending")
        state = self.state
        for step in chain:
            if state not in VALID_PREVIOUS[step.state]:
                raise TxnError(ErrorCode.INVALID_TXN_STATE,
                               f"{self.transactional_id}: {state.display} -> {step.state.display}")
            state = step.state
        # Every field comes from the last transit: the earlier ones only had to be valid steps on the way.
        self.producer_id, self.last_producer_id = transit.producer_id, transit.last_producer_id
        self.producer_epoch, self.last_producer_epoch = transit.producer_epoch, transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.state = transit.state
        self.partitions = set(transit.partitions)
        self.txn_start_timestamp = transit.txn_start_timestamp
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.pending_state = None

    def abort_transition(self) -> None:
        """The write of the pending transit failed: the state stays as it was."""
        self.pending_state = None
