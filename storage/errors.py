"""Exceptions raised by the storage layer.

Each carries an ``error_code`` (a :class:`protocol.errors.ErrorCode`) so a handler can turn it into the Kafka error
of the response without a lookup table of its own.
"""

from __future__ import annotations

from moldau.protocol.errors import ErrorCode


class StorageError(Exception):
    """Base class; also used for unexpected on-disk states (KAFKA_STORAGE_ERROR)."""

    error_code: ErrorCode = ErrorCode.KAFKA_STORAGE_ERROR


class CorruptRecordError(StorageError):
    """A batch failed its CRC32C check, has an impossible size, or the request ends in a torn batch."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class RecordTooLargeError(StorageError):
    """A batch is larger than the topic's ``max.message.bytes``."""

    error_code = ErrorCode.MESSAGE_TOO_LARGE


class InvalidRecordError(StorageError):
    """A structurally valid batch that the broker refuses (bad count, control batch from a client, ...).

    ``legacy`` is True when the batch uses message format v0/v1 (magic 0 or 1), which Moldau does not store;
    the error code is then UNSUPPORTED_FOR_MESSAGE_FORMAT instead of INVALID_RECORD.
    """

    error_code = ErrorCode.INVALID_RECORD

    def __init__(self, message: str, *, legacy: bool = False,
                 record_errors: list[tuple[int, str | None]] | None = None) -> None:
        super().__init__(message)
        self.legacy = legacy
        # KIP-467: (index of the record in its batch, message) of every refused record, for ProduceResponse
        self.record_errors: list[tuple[int, str | None]] = record_errors or []
        if legacy:
            self.error_code = ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT


class OffsetOutOfRangeError(StorageError):
    """A read outside ``[log_start_offset, log_end_offset]``."""

    error_code = ErrorCode.OFFSET_OUT_OF_RANGE

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class UnexpectedAppendOffsetError(StorageError):
    """A follower append whose offsets are not above the log end offset or not increasing."""

    error_code = ErrorCode.UNKNOWN_SERVER_ERROR


class OutOfOrderSequenceError(StorageError):
    """An idempotent producer skipped sequence numbers (or started a new epoch at a sequence other than 0)."""

    error_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(StorageError):
    """An idempotent producer wrote with an epoch older than the one the partition has seen."""

    error_code = ErrorCode.INVALID_PRODUCER_EPOCH


class DuplicateSequence(StorageError):
    """The batch repeats one of the producer's last five batches; nothing was appended.

    Not a failure for the client: the broker answers success with the offsets of the original append
    (``first_offset``..``last_offset``), exactly as Kafka does.
    """

    error_code = ErrorCode.NONE

    def __init__(self, producer_id: int, first_offset: int, last_offset: int, timestamp: int) -> None:
        super().__init__(
            f"duplicate batch from producer {producer_id}, originally at offsets {first_offset}..{last_offset}"
        )
        self.producer_id = producer_id
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.timestamp = timestamp


class CorruptIndexError(StorageError):
    """An index file failed its sanity check; the segment rebuilds it from the log."""


class LogDirLockedError(StorageError):
    """Another process (or another LogManager in this process) holds the log directory's lock."""


class InvalidTxnStateError(StorageError):
    """A producer with an open transaction wrote a non-transactional batch (Kafka's InvalidTxnStateException)."""

    error_code = ErrorCode.INVALID_TXN_STATE


class TransactionCoordinatorFencedError(StorageError):
    """A transaction marker from a coordinator epoch older than the one the partition has seen."""

    error_code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class OffsetMovedToTieredStorageError(StorageError):
    """A read below the local log start offset of a tiered log: the data is in remote storage."""

    error_code = ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE

    def __init__(self, offset: int, local_log_start_offset: int) -> None:
        super().__init__(f"offset {offset} is below the local log start offset {local_log_start_offset}")
        self.offset = offset
        self.local_log_start_offset = local_log_start_offset
