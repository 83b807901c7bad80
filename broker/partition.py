"""One partition on this broker: its log, leadership state, ISR and high watermark."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.metadata import PartitionState
from storage.log import Log


@dataclass(slots=True)
class Partition:
    topic: str
    index: int
    broker_id: int
    log: Log
    leader_id: int = -1
    leader_epoch: int = 0
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    high_watermark: int = 0
    min_insync_replicas: int = 1
    # Log end offsets of followers as the leader last saw them (filled in by replication).
    follower_leo: dict[int, int] = field(default_factory=dict)
    # Whether followers' log end offsets bound the high watermark. Off until follower fetchers exist (the
    # replication issue): followers then copy nothing, so the leader's own log end offset is the HW.
    track_followers: bool = False

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    def apply_state(self, state: PartitionState) -> None:
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.replicas = list(state.replicas)
        self.isr = list(state.isr)
        self.maybe_advance_high_watermark()

    def append_as_leader(self, records: Any) -> Any:
        info = self.log.append_as_leader(records, self.leader_epoch)
        self.maybe_advance_high_watermark()
        return info

    def maybe_advance_high_watermark(self) -> bool:
        """HW = the smallest log end offset among in-sync replicas (only ourselves until replication)."""
        leo = self.log.log_end_offset
        candidates = [leo]
        if self.track_followers:
            candidates += [self.follower_leo.get(r, 0) for r in self.isr if r != self.broker_id]
        new_hw = min(candidates)
        advanced = False
        if new_hw > self.high_watermark or new_hw < self.log.log_start_offset:
            self.high_watermark = max(new_hw, self.log.log_start_offset)
            advanced = True
        elif self.high_watermark > leo:
            self.high_watermark = leo
        # Retention never deletes what consumers cannot read yet.
        self.log.high_watermark = self.high_watermark
        return advanced
