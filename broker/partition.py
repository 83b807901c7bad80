"""One partition on this broker: its log, leadership state, ISR and high watermark.

The leader tracks each follower from its fetches (Kafka's ``Replica``/``Partition``): the offset it fetched from is
its log end offset; it is *caught up* at the time of a fetch from the leader's log end offset (or from the log end
offset the leader had at the follower's previous fetch, which covers a follower that keeps pace with a steady
stream). The high watermark is the smallest log end offset over the ISR. The ISR changes only after ZooKeeper
accepted the new one (``isr`` is what ZooKeeper holds, ``pending_isr`` a change being written); while a change is
in flight the high watermark counts the larger of the two sets, so it never runs ahead of a replica that may still
be in the ISR. Everything here is pure state: time is passed in, I/O is the replica manager's business.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from moldau.broker.metadata import PartitionState
from moldau.storage.log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    NO_TIMESTAMP,
    Log,
)
from moldau.storage.producer_state import ProducerStateEntry

UNKNOWN_OFFSET = -1


class IsrOutcome(enum.Enum):
    """How an ISR write the leader started ended (:meth:`Partition.finish_isr_change`)."""

    SUPERSEDED = "superseded"  # a LeaderAndIsr came in meanwhile: it has the final word
    CONFLICT = "conflict"  # the znode changed under us: wait for the controller
    DIVERGED = "diverged"  # ZooKeeper holds another ISR than the one proposed: build on that one
    APPLIED = "applied"


@dataclass(slots=True)
class FollowerState:
    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    # The leader's log end offset when this follower last fetched.
    leader_leo_at_last_fetch: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET  # as its last fetch reported it (DeleteRecords waits on it)


@dataclass(slots=True)
class Partition:
    topic: str
    index: int
    broker_id: int
    log: Log
    leader_id: int = -1
    leader_epoch: int = 0
    # Version of the partition state znode (Kafka's zkVersion / partition epoch): the leader's ISR writes are
    # conditional on it.
    zk_version: int = -1
    controller_epoch: int = 0
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    pending_isr: list[int] | None = None
    high_watermark: int = 0
    min_insync_replicas: int = 1
    # The leader's log end offset when it took this leader epoch: a follower rejoins the ISR only once it has
    # everything up to there (it holds no divergent tail from an older epoch).
    leader_epoch_start_offset: int = 0
    followers: dict[int, FollowerState] = field(default_factory=dict)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    @property
    def follower_leo(self) -> dict[int, int]:
        return {r: f.log_end_offset for r, f in self.followers.items()}

    @property
    def maximal_isr(self) -> list[int]:
        """The ISR the high watermark must respect: the committed one plus any being written."""
        if self.pending_isr is None:
            return self.isr
        return self.isr + [r for r in self.pending_isr if r not in self.isr]

    def apply_state(self, state: PartitionState, now_ms: int = 0) -> bool:
        """Takes a LeaderAndIsr (or standalone metadata) state; True if this broker became the leader of a new
        leader epoch (follower tracking starts afresh then)."""
        new_leadership = state.leader == self.broker_id and (not self.is_leader
                                                             or state.leader_epoch != self.leader_epoch)
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.zk_version = state.zk_version
        self.controller_epoch = state.controller_epoch
        self.replicas = list(state.replicas)
        self.isr = list(state.isr)
        self.pending_isr = None
        if new_leadership:
            leo = self.log.log_end_offset
            self.leader_epoch_start_offset = leo
            self.log.leader_epoch_cache.assign(self.leader_epoch, leo)
            self.followers = {r: FollowerState(last_caught_up_ms=now_ms if r in self.isr else 0,
                                               last_fetch_ms=now_ms)
                              for r in self.replicas if r != self.broker_id}
        elif self.is_leader:
            for r in self.replicas:
                if r != self.broker_id and r not in self.followers:
                    self.followers[r] = FollowerState(last_fetch_ms=now_ms)
        else:
            self.followers = {}
        if self.is_leader:
            self.maybe_advance_high_watermark()
        return new_leadership

    def append_as_leader(self, records: Any) -> Any:
        info = self.log.append_as_leader(records, self.leader_epoch)
        self._advance_high_watermark(info.last_offset + 1)  # the log end offset now
        return info

    def append_many_as_leader(self, records: list[Any]) -> list[Any]:
        """Several requests' records as one append (storage's ``append_many_as_leader``: all or nothing)."""
        infos = self.log.append_many_as_leader(records, self.leader_epoch)
        self._advance_high_watermark(infos[-1].last_offset + 1)
        return infos

    @property
    def offsets_settling(self) -> bool:
        """KIP-207: a new leader's high watermark can still be below the log end offset it took the leadership
        with. Until it reaches it, the latest offset it would report could be lower than one its predecessor
        already reported, so clients asking for offsets are told OFFSET_NOT_AVAILABLE (retriable) instead."""
        return self.is_leader and self.high_watermark < self.leader_epoch_start_offset

    # ------------------------------------------------------------------ leader: offset queries and DeleteRecords
    def offset_for_timestamp(self, timestamp: int, committed_only: bool, read_committed: bool = False
                             ) -> tuple[int, int] | None:
        """ListOffsets: ``(offset, timestamp)`` or None. ``committed_only`` (a consumer, not a replica) answers
        latest (-1) with the high watermark instead of the log end offset and hides a timestamp match at or
        above the high watermark as ``(-1, -1)``; earliest (-2) carries no timestamp. ``read_committed``
        (isolation level 1) bounds both by the last stable offset instead."""
        fetchable = self.log.last_stable_offset if read_committed else self.high_watermark
        if timestamp == LATEST_TIMESTAMP:
            return (fetchable if committed_only else self.log.log_end_offset), NO_TIMESTAMP
        found = self.log.offset_for_timestamp(timestamp)
        if found is None:
            return None
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return found[0], NO_TIMESTAMP
        if committed_only and timestamp >= 0 and found[0] >= fetchable:
            return -1, -1
        return found

    @property
    def remote_log_start(self) -> int | None:
        """A tiered partition with data in remote storage: its log start offset (below the local log); else None."""
        log_ = self.log
        if log_.config.remote_storage_enable and log_.local_log_start_offset > log_.log_start_offset:
            return log_.log_start_offset
        return None

    def active_producers(self) -> list[ProducerStateEntry]:
        """DescribeProducers: the producer state entries of this partition's log."""
        return list(self.log.producer_state.producers.values())

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest known epoch <= ``leader_epoch``, its end offset); (-1, -1) if unknown."""
        return self.log.end_offset_for_epoch(leader_epoch)

    def advance_log_start_offset(self, offset: int) -> bool:
        """DeleteRecords: moves the log start offset up to ``offset`` (raises the log's OffsetOutOfRangeError past
        its high watermark) and keeps the high watermark >= it; True if it moved."""
        moved = self.log.maybe_increment_log_start_offset(offset)
        self.clamp_high_watermark()
        return moved

    # ------------------------------------------------------------------ leader: followers and the ISR
    def update_follower(self, replica_id: int, fetch_offset: int, now_ms: int,
                        log_start_offset: int = UNKNOWN_OFFSET) -> bool:
        """A follower fetched from ``fetch_offset``: record its log end offset and whether it is caught up.
        Returns True when the high watermark advanced."""
        f = self.followers.get(replica_id)
        if f is None:
            if replica_id not in self.replicas:
                return False
            f = self.followers[replica_id] = FollowerState()
        leo = self.log.log_end_offset
        if fetch_offset >= leo:
            f.last_caught_up_ms = now_ms
        elif f.leader_leo_at_last_fetch != UNKNOWN_OFFSET and fetch_offset >= f.leader_leo_at_last_fetch:
            f.last_caught_up_ms = max(f.last_caught_up_ms, f.last_fetch_ms)
        f.log_end_offset = fetch_offset
        if log_start_offset >= 0:
            f.log_start_offset = log_start_offset
        f.leader_leo_at_last_fetch = leo
        f.last_fetch_ms = now_ms
        return self._advance_high_watermark(leo)

    def low_watermark(self) -> int:
        """Leader: the smallest log start offset among itself and the in-sync followers (Kafka's
        lowWatermarkIfLeader, over the ISR); UNKNOWN_OFFSET until every such follower has reported one."""
        low = self.log.log_start_offset
        for r in self.isr:
            if r != self.broker_id:
                f = self.followers.get(r)
                low = min(low, f.log_start_offset if f is not None else UNKNOWN_OFFSET)
        return low

    def out_of_sync_replicas(self, now_ms: int, max_lag_ms: int) -> list[int]:
        """Followers in the ISR that have not caught up, or not fetched at all, within ``max_lag_ms``."""
        out = []
        for r in self.isr:
            if r == self.broker_id:
                continue
            f = self.followers.get(r)
            if f is None or now_ms - f.last_caught_up_ms > max_lag_ms or now_ms - f.last_fetch_ms > max_lag_ms:
                out.append(r)
        return out

    def replicas_to_add(self) -> list[int]:
        """Followers outside the ISR that have everything up to the high watermark and this epoch's start."""
        out = []
        for r in self.replicas:
            if r == self.broker_id or r in self.isr:
                continue
            f = self.followers.get(r)
            if f is not None and f.log_end_offset >= max(self.high_watermark, self.leader_epoch_start_offset):
                out.append(r)
        return out

    # ISR changes. The rules live here; the replica manager only writes the proposals to ZooKeeper. A change is
    # proposed, written (conditional on zk_version), then applied: isr is always what ZooKeeper holds.

    def isr_with(self, replica_id: int) -> list[int] | None:
        """The ISR to propose now that ``replica_id`` caught up (None: it is in already, or not eligible)."""
        if not self.is_leader or replica_id in self.isr or replica_id not in self.replicas_to_add():
            return None
        return [r for r in self.replicas if r in self.isr or r == replica_id]

    def isr_without_lagging(self, now_ms: int, max_lag_ms: int) -> tuple[list[int], list[int]] | None:
        """``(lagging, new ISR)`` when followers fell behind (None: nothing to shrink, or a change in flight)."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        lagging = self.out_of_sync_replicas(now_ms, max_lag_ms)
        if not lagging:
            return None
        return lagging, [r for r in self.isr if r not in lagging]

    def begin_isr_change(self, new_isr: list[int]) -> bool:
        """Marks ``new_isr`` as being written; False when another change is in flight or nothing changes."""
        if self.pending_isr is not None or new_isr == self.isr:
            return False
        self.pending_isr = new_isr
        return True

    def finish_isr_change(self, new_isr: list[int], leader_epoch: int,
                          written: tuple[int, list[int]] | None) -> IsrOutcome:
        """Applies the result of writing ``new_isr`` (begun under ``leader_epoch``): ``written`` is ZooKeeper's
        ``(zk version, ISR)``, or None when the conditional write lost to a newer state."""
        if self.pending_isr is not new_isr or self.leader_epoch != leader_epoch or not self.is_leader:
            return IsrOutcome.SUPERSEDED
        self.pending_isr = None
        if written is None:
            return IsrOutcome.CONFLICT
        self.zk_version, self.isr = written
        if self.isr != new_isr:
            self.maybe_advance_high_watermark()
            return IsrOutcome.DIVERGED
        return IsrOutcome.APPLIED

    def maybe_advance_high_watermark(self) -> bool:
        """HW = the smallest log end offset among the in-sync replicas; it only moves forward."""
        return self._advance_high_watermark(self.log.log_end_offset)

    def _advance_high_watermark(self, leo: int) -> bool:
        """maybe_advance_high_watermark with the log end offset ``leo`` the caller has just read (it runs for
        every partition a follower's fetch names, twice per replication round)."""
        new_hw = leo
        followers, me = self.followers, self.broker_id
        for r in self.isr if self.pending_isr is None else self.maximal_isr:
            if r != me:
                f = followers.get(r)
                if f is None:
                    new_hw = UNKNOWN_OFFSET
                elif f.log_end_offset < new_hw:
                    new_hw = f.log_end_offset
        advanced = False
        hw = self.high_watermark
        if new_hw > hw:
            hw = new_hw
            advanced = True
        # clamp_high_watermark: log start <= HW <= LEO
        log_ = self.log
        if hw > leo:
            hw = leo
        if hw < log_.log_start_offset:
            hw = log_.log_start_offset
        self.high_watermark = log_.high_watermark = hw
        return advanced

    def clamp_high_watermark(self) -> None:
        """Keeps log start <= HW <= LEO (truncation, deleted records); retention never passes the HW."""
        self.high_watermark = max(min(self.high_watermark, self.log.log_end_offset), self.log.log_start_offset)
        self.log.high_watermark = self.high_watermark

    def max_follower_lag(self) -> int:
        leo = self.log.log_end_offset
        return max((leo - f.log_end_offset for f in self.followers.values() if f.log_end_offset >= 0), default=0)

    # ------------------------------------------------------------------ follower
    def update_follower_high_watermark(self, leader_hw: int) -> None:
        """Follower: HW = min(the leader's HW, own log end offset)."""
        log_ = self.log
        leo = log_.log_end_offset
        hw = max(self.high_watermark, min(leader_hw, leo))
        # clamp_high_watermark with the log end offset just read (every partition of every fetch answer)
        if hw > leo:
            hw = leo
        if hw < log_.log_start_offset:
            hw = log_.log_start_offset
        self.high_watermark = log_.high_watermark = hw
