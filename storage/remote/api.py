"""Kafka's ``RemoteStorageManager`` contract (KIP-405) in Python, and the types it speaks.

A segment is copied with everything a replica needs to serve and rebuild it: the ``.log`` file, its offset and
time indexes, the transaction index (none while Moldau has no transactions), the producer-state snapshot taken
at the segment's end offset, and the leader-epoch entries of the log up to the segment's end. Remote objects are
keyed by :class:`RemoteLogSegmentId`: a fresh id per copy attempt, so a copy that died half way never collides
with the retry (the dead attempt is deleted by id).
"""

from __future__ import annotations

import enum
import importlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Protocol, runtime_checkable

from moldau.protocol.errors import ErrorCode
from moldau.storage.errors import StorageError

ENTRY_POINT_GROUP = "moldau.remote_storage_managers"
# Kafka's remote.log.storage.manager.impl.prefix: broker properties with this prefix configure the manager.
RSM_CONFIG_PREFIX = "rsm.config."


class RemoteStorageError(StorageError):
    """The remote store failed (unreachable, refused, corrupt). Retriable for clients: KAFKA_STORAGE_ERROR."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class RemoteResourceNotFoundError(RemoteStorageError):
    """A segment or index that the metadata names is not in the remote store."""


class IndexType(enum.Enum):
    """Kafka's ``RemoteStorageManager.IndexType``; the value is the remote object's suffix."""

    OFFSET = ".index"
    TIMESTAMP = ".timeindex"
    TRANSACTION = ".txnindex"
    PRODUCER_SNAPSHOT = ".snapshot"
    LEADER_EPOCH = ".leader_epoch_checkpoint"


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentId:
    """One copy attempt of one segment: the partition and a random 16-byte id (Kafka's Uuid)."""

    topic: str
    partition: int
    id: uuid.UUID

    @classmethod
    def generate(cls, topic: str, partition: int) -> RemoteLogSegmentId:
        return cls(topic, partition, uuid.uuid4())

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}:{self.id}"


class SegmentState(enum.IntEnum):
    """``RemoteLogSegmentState`` with Kafka's ids; a segment moves only forward through them."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadata:
    """What is known about one remote segment. ``segment_leader_epochs`` maps each leader epoch that wrote into
    the segment to the first offset it wrote there (ascending)."""

    segment_id: RemoteLogSegmentId
    start_offset: int
    end_offset: int  # last offset in the segment, inclusive
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_size_in_bytes: int
    segment_leader_epochs: tuple[tuple[int, int], ...]
    state: SegmentState = SegmentState.COPY_SEGMENT_STARTED

    def with_state(self, state: SegmentState, broker_id: int, event_timestamp_ms: int) -> RemoteLogSegmentMetadata:
        return RemoteLogSegmentMetadata(
            self.segment_id, self.start_offset, self.end_offset, self.max_timestamp_ms, broker_id,
            event_timestamp_ms, self.segment_size_in_bytes, self.segment_leader_epochs, state,
        )


@dataclass(frozen=True, slots=True)
class LogSegmentData:
    """The local files of one rolled segment plus the leader-epoch entries to store with it."""

    log_segment: Path
    offset_index: Path
    time_index: Path
    producer_snapshot: Path | None
    leader_epochs: tuple[tuple[int, int], ...]
    transaction_index: Path | None = None
    extra: Mapping[str, str] = field(default_factory=dict)


@runtime_checkable
class RemoteStorageManager(Protocol):
    """A backend. All methods block; every one may raise :class:`RemoteStorageError`. Copies and deletes must be
    idempotent: the leader retries them after a failure or a leadership change."""

    def configure(self, configs: Mapping[str, str]) -> None:
        """Receives the broker's ``rsm.config.*`` properties with the prefix removed."""

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData) -> None:
        """Stores the segment and its indexes under ``metadata.segment_id``."""

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> bytes:
        """Bytes ``[start_position, end_position]`` (inclusive, as Kafka's) of the segment's ``.log``; to its end
        when ``end_position`` is None. Shorter only at the end of the segment."""

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        """The whole index (or snapshot, or leader-epoch checkpoint) stored with the segment."""

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Removes every object of the segment; deleting what is already gone succeeds."""

    def close(self) -> None:
        """Releases connections and threads."""


def load_remote_storage_manager(name: str, configs: Mapping[str, str]) -> RemoteStorageManager:
    """``remote.log.storage.manager.class.name``: an entry point in the ``moldau.remote_storage_managers`` group
    (``filesystem``, ``s3``) or a dotted path ``package.module.ClassName`` (or ``package.module:ClassName``).
    The instance is created without arguments and configured with ``configs``."""
    factory: object
    eps = entry_points(group=ENTRY_POINT_GROUP)
    matches = [ep for ep in eps if ep.name == name]
    if matches:
        factory = matches[0].load()
    else:
        module_name, sep, attr = name.partition(":") if ":" in name else name.rpartition(".")
        if not sep or not module_name or not attr:
            raise ValueError(f"{name!r} is neither a registered remote storage manager "
                             f"({', '.join(sorted(ep.name for ep in eps)) or 'none'}) nor a dotted path")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"cannot load remote storage manager {name!r}: {exc}") from None
    if not callable(factory):
        raise ValueError(f"remote storage manager {name!r} is not a class")
    manager = factory()
    if not isinstance(manager, RemoteStorageManager):
        raise ValueError(f"{name!r} does not implement RemoteStorageManager")
    manager.configure(configs)
    return manager


def rsm_configs(props: Mapping[str, str]) -> dict[str, str]:
    """The ``rsm.config.*`` broker properties, prefix removed."""
    return {k[len(RSM_CONFIG_PREFIX):]: v for k, v in props.items() if k.startswith(RSM_CONFIG_PREFIX)}
