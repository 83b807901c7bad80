"""Control records: the single record of a control batch (attributes bit 5), written by a partition leader for a
WriteTxnMarkers request (Kafka's ``EndTransactionMarker`` and ``ControlRecordType``).

Key: version int16 (0), type int16 (0 = ABORT, 1 = COMMIT). Value of a transaction marker: version int16 (0),
coordinator epoch int32. Transaction markers are also transactional batches (bit 4) carrying the producer id and
epoch of the transaction they end, with no sequence.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from moldau.protocol.records import BatchHeader, Buffer, RecordBatchError, build_batch, iter_records

ABORT: Final = 0
COMMIT: Final = 1
CONTROL_KEY_VERSION: Final = 0
END_TXN_MARKER_VERSION: Final = 0

_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")


@dataclass(slots=True, frozen=True)
class EndTxnMarker:
    """A decoded transaction marker: COMMIT or ABORT, and the epoch of the coordinator that wrote it."""

    control_type: int
    coordinator_epoch: int

    @property
    def committed(self) -> bool:
        return self.control_type == COMMIT


def control_type(key: Buffer | None) -> int:
    """The type in a control record's key (ABORT 0, COMMIT 1, or another, future type)."""
    if key is None or len(key) < _KEY.size:
        raise RecordBatchError("control record key is missing or shorter than 4 bytes")
    version, type_ = _KEY.unpack_from(key)
    if version < 0:
        raise RecordBatchError(f"invalid control record key version {version}")
    return int(type_)


def decode_marker(key: Buffer | None, value: Buffer | None) -> EndTxnMarker:
    type_ = control_type(key)
    if type_ not in (ABORT, COMMIT):
        raise RecordBatchError(f"control record type {type_} is not a transaction marker")
    if value is None or len(value) < _MARKER_VALUE.size:
        raise RecordBatchError("transaction marker value is missing or shorter than 6 bytes")
    version, coordinator_epoch = _MARKER_VALUE.unpack_from(value)
    if version < 0:
        raise RecordBatchError(f"invalid transaction marker version {version}")
    return EndTxnMarker(type_, coordinator_epoch)


def read_marker(batch: Buffer, header: BatchHeader) -> EndTxnMarker | None:
    """The transaction marker of a control batch (``batch`` holds the whole batch); None for another control
    type (Kafka skips unknown control records)."""
    for record in iter_records(batch, header, check_crc=False):
        type_ = control_type(record.key)
        if type_ not in (ABORT, COMMIT):
            return None
        return decode_marker(record.key, record.value)
    raise RecordBatchError("control batch without a record")


def build_marker_batch(producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
                       timestamp_ms: int, *, base_offset: int = 0, partition_leader_epoch: int = -1) -> bytes:
    """One control batch holding a COMMIT or ABORT marker for the producer's transaction."""
    key = _KEY.pack(CONTROL_KEY_VERSION, COMMIT if committed else ABORT)
    value = _MARKER_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)
    return build_batch([(key, value, None, timestamp_ms)], base_offset=base_offset, producer_id=producer_id,
                       producer_epoch=producer_epoch, partition_leader_epoch=partition_leader_epoch,
                       is_transactional=True, is_control=True)
