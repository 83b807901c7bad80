"""The partitions hosted on this broker: append and read, and the wake-ups of delayed fetches.

Handlers call only ``append``/``read``/``get_partition``; whether a partition is led here or followed (when
replication arrives) is the partition's business, so adding follower fetchers changes no handler.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker.metadata import PartitionState, TopicMetadata
from broker.partition import Partition
from protocol.errors import ErrorCode
from storage.errors import DuplicateSequence, OffsetOutOfRangeError, StorageError
from storage.log_manager import LogManager
from storage.segment import FileRegion

log = logging.getLogger("moldau.replica_manager")

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class AppendResult:
    error: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None


@dataclass(slots=True)
class ReadResult:
    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    records: Any = None
    size: int = 0


class RecordsView:
    """The file regions of one partition's fetch answer; the encoder writes its length, the network sends it."""

    __slots__ = ("regions", "size")

    def __init__(self, regions: list[FileRegion], size: int) -> None:
        self.regions = regions
        self.size = size

    def __len__(self) -> int:
        return self.size


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager,
                 log_config_for: Callable[[dict[str, str]], Any], min_insync_replicas: int = 1) -> None:
        self.broker_id = broker_id
        self.min_insync_replicas = min_insync_replicas
        self.log_manager = log_manager
        self.log_config_for = log_config_for
        self.partitions: dict[TopicPartition, Partition] = {}
        # Called with the topic-partition after every append (delayed fetches watch these keys).
        self.append_listeners: list[Callable[[TopicPartition], None]] = []
        # Called with (partition, became_leader) after a LeaderAndIsr changed its role; the follower fetchers of
        # the replication issue hook in here, so the LeaderAndIsr handler does not change.
        self.role_listeners: list[Callable[[Partition, bool], None]] = []
        self.track_followers = False  # see Partition.track_followers

    # ------------------------------------------------------------------ state changes
    def on_topic_change(self, name: str, topic: TopicMetadata | None) -> None:
        if topic is None:
            for tp in [tp for tp in self.partitions if tp[0] == name]:
                self.remove_partition(tp, delete=True)
            return
        config = self.log_config_for(topic.configs)
        for index, state in topic.partitions.items():
            tp = (name, index)
            if self.broker_id not in state.replicas:
                if tp in self.partitions:
                    self.remove_partition(tp, delete=True)
                continue
            partition = self.partitions.get(tp)
            if partition is None:
                log_ = self.log_manager.get_or_create_log(name, index, config)
                partition = Partition(name, index, self.broker_id, log_)
                partition.high_watermark = log_.log_end_offset if state.replicas == [self.broker_id] else 0
                self.partitions[tp] = partition
            partition.log.config = config
            partition.min_insync_replicas = int(topic.configs.get("min.insync.replicas",
                                                                  self.min_insync_replicas))
            partition.apply_state(state)

    def become_leader_or_follower(self, topic: str, state: PartitionState, configs: dict[str, str]) -> ErrorCode:
        """Applies one partition of a LeaderAndIsr (ZooKeeper mode): creates the log when needed, takes the new
        leader/ISR/epoch unless the request's leader epoch is older than the one we have."""
        tp = (topic, state.partition)
        partition = self.partitions.get(tp)
        if partition is not None and state.leader_epoch < partition.leader_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        config = self.log_config_for(configs)
        if partition is None:
            try:
                log_ = self.log_manager.get_or_create_log(topic, state.partition, config)
            except (OSError, StorageError) as exc:
                log.error("cannot create the log of %s-%d: %s", topic, state.partition, exc)
                return ErrorCode.KAFKA_STORAGE_ERROR
            partition = Partition(topic, state.partition, self.broker_id, log_, track_followers=self.track_followers)
            partition.high_watermark = log_.log_end_offset if not self.track_followers else 0
            self.partitions[tp] = partition
        was_leader = partition.is_leader and partition.leader_epoch == state.leader_epoch
        partition.log.config = config
        partition.min_insync_replicas = int(configs.get("min.insync.replicas", self.min_insync_replicas))
        partition.apply_state(state)
        if partition.is_leader != was_leader or not partition.is_leader:
            for listener in self.role_listeners:
                listener(partition, partition.is_leader)
        return ErrorCode.NONE

    def stop_replica(self, topic: str, index: int, delete: bool) -> ErrorCode:
        """StopReplica: stop serving the partition here; with delete, remove its log too."""
        tp = (topic, index)
        partition = self.partitions.get(tp)
        if partition is not None:
            partition.leader_id = -1
            for listener in self.role_listeners:
                listener(partition, False)
        if delete:
            self.remove_partition(tp, delete=True)
        return ErrorCode.NONE

    def remove_partition(self, tp: TopicPartition, delete: bool) -> None:
        self.partitions.pop(tp, None)
        if delete:
            self.log_manager.delete_log(tp[0], tp[1])

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def leader_partition(self, topic: str, index: int) -> tuple[Partition | None, ErrorCode]:
        partition = self.partitions.get((topic, index))
        if partition is None:
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if not partition.is_leader:
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return partition, ErrorCode.NONE

    # ------------------------------------------------------------------ data path
    def append(self, topic: str, index: int, records: Any, acks: int = 1) -> AppendResult:
        partition, error = self.leader_partition(topic, index)
        if partition is None:
            return AppendResult(error)
        if records is None or len(records) == 0:
            return AppendResult(ErrorCode.CORRUPT_MESSAGE, message="empty records")
        if acks == -1 and len(partition.isr) < partition.min_insync_replicas:
            return AppendResult(ErrorCode.NOT_ENOUGH_REPLICAS,
                                message=f"The size of the current ISR {partition.isr} is insufficient to satisfy "
                                        f"the min.isr requirement of {partition.min_insync_replicas}")
        try:
            info = partition.append_as_leader(records)
        except DuplicateSequence as dup:
            return AppendResult(ErrorCode.NONE, dup.first_offset, -1, partition.log.log_start_offset)
        except StorageError as exc:
            log.info("append to %s-%d refused: %s", topic, index, exc)
            return AppendResult(exc.error_code, message=str(exc))
        for listener in self.append_listeners:
            listener((topic, index))
        append_time = info.log_append_time if partition.log.config.log_append_time else -1
        return AppendResult(ErrorCode.NONE, info.first_offset, append_time, partition.log.log_start_offset)

    def read(self, topic: str, index: int, offset: int, max_bytes: int, *, consumer: bool,
             min_one: bool = True) -> ReadResult:
        partition = self.partitions.get((topic, index))
        if partition is None:
            return ReadResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if not partition.is_leader:
            return ReadResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        log_ = partition.log
        hw = partition.high_watermark
        result = ReadResult(ErrorCode.NONE, hw, log_.log_start_offset, log_.log_end_offset)
        # Consumers read only below the high watermark: a fetch at or above it is an empty answer, not an
        # error, as long as it is within the log.
        upper = hw if consumer else None
        if consumer and hw <= offset <= log_.log_end_offset:
            return result
        try:
            data = log_.read(offset, max_bytes, max_offset=upper, min_one=min_one)
        except OffsetOutOfRangeError:
            result.error = ErrorCode.OFFSET_OUT_OF_RANGE
            return result
        except StorageError as exc:
            result.error = exc.error_code
            return result
        result.records = RecordsView(data.regions, data.size)
        result.size = data.size
        return result

    # ------------------------------------------------------------------ metrics
    def under_replicated_count(self) -> int:
        return sum(1 for p in self.partitions.values() if p.is_leader and len(p.isr) < len(p.replicas))

    def leader_count(self) -> int:
        return sum(1 for p in self.partitions.values() if p.is_leader)
