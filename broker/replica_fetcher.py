"""Follower fetchers (Kafka's ReplicaFetcherThread): one task per source broker, fetching every partition this
broker follows from it in one Fetch request (replica_id = this broker's id).

A partition joins a fetcher when a LeaderAndIsr makes this broker its follower, first in the *truncating* state:
the fetcher asks the leader (OffsetForLeaderEpoch) where the latest epoch of the local log ends in the leader's
log and truncates there (KIP-101/279), never below the high watermark; then it fetches from its log end offset,
appends the leader's batches exactly as they are, and takes the high watermark from the answers (HW = min(leader
HW, own log end offset)). FENCED_LEADER_EPOCH parks the partition until the next LeaderAndIsr. A new epoch of
the same leader (the controller only changed the ISR: after a broker death, two thirds of a survivor's followed
partitions) needs no truncation when the previous epoch's was done (``Fetcher.add``).

A partition answered with an error waits before it is asked again, while the others go on: UNKNOWN_LEADER_EPOCH /
NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION (the leader has not applied the LeaderAndIsr of its new epoch
or new partition yet, which after a broker death can take it a second or two for thousands of partitions) are
retried soon, after 50 ms, then twice as long each time up to ``replica.fetch.backoff.ms``; other errors after
``replica.fetch.backoff.ms``. Each answer's errors are logged in one line per error code (how many partitions, a
few of them), not one line per partition.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moldau.broker.log_summary import partition_examples
from moldau.broker.partition import Partition
from moldau.broker.replication_quota import ReplicationQuota
from moldau.connection import BrokerConnection, api_for
from moldau.protocol.api import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.fetch_session import INITIAL_EPOCH, FetcherSession, PartitionPosition, position_fields
from moldau.protocol.types import TopicPartition
from moldau.security import ClientSecurity
from moldau.storage.config import Clock
from moldau.storage.errors import StorageError
from moldau.storage.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from moldau.storage.log import EARLIEST_LOCAL_TIMESTAMP
from moldau.tasks import cancel_and_wait

log = logging.getLogger("moldau.replica_fetcher")
FETCH_API = api_for(ApiKey.FETCH)

# Our leader epoch is older than the leader's: a LeaderAndIsr is on its way.
PARK = (ErrorCode.FENCED_LEADER_EPOCH,)
# The leader has not applied the LeaderAndIsr of this epoch (or of a new partition) yet: it will in moments, so
# these are retried soon.
LEADER_NOT_READY = (ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
RETRY_INITIAL_MS = 50
# A steady fetcher builds the positions of only the partitions the last answer changed (see ``Fetcher._fetch``);
# at least this often it goes over every partition, for what changes a follower's log outside its fetches (its own
# retention moving the log start offset).
FULL_PASS_INTERVAL_MS = 1000


class MonotonicClock:
    """Milliseconds for retry delays (a ``Clock``; never jumps with the wall clock)."""

    def time_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


def divergence_offset(leader_epoch: int, leader_end_offset: int,
                      follower_end_for: Callable[[int], tuple[int, int]], log_end_offset: int,
                      high_watermark: int) -> tuple[int, bool]:
    """Where a follower truncates, from the leader's OffsetForLeaderEpoch answer for the follower's latest epoch.

    Returns (offset, final). Not final when the follower does not know the epoch the leader answered with: it
    then drops everything after that epoch's position and asks again with its new latest epoch. A leader that
    knows no epoch (an old log) leaves the high watermark as the only safe point. Never below the high
    watermark: what the ISR committed is on every in-sync replica, hence on the leader.
    """
    if leader_epoch == UNDEFINED_EPOCH or leader_end_offset == UNDEFINED_EPOCH_OFFSET:
        return min(high_watermark, log_end_offset), True
    follower_epoch, follower_end = follower_end_for(leader_epoch)
    if follower_epoch == leader_epoch:
        offset, final = min(leader_end_offset, follower_end, log_end_offset), True
    else:
        offset, final = min(follower_end if follower_end >= 0 else high_watermark, log_end_offset), False
    floor = min(high_watermark, log_end_offset)
    if offset < floor:
        log.warning("divergence point %d is below the high watermark %d; truncating to the high watermark", offset,
                    floor)
        return floor, True
    return offset, final


@dataclass(slots=True)
class FollowState:
    partition: Partition
    leader_epoch: int
    truncating: bool = True
    parked: bool = False
    # The leader answered OFFSET_MOVED_TO_TIERED_STORAGE (a tiered partition whose start is in remote storage):
    # the leader's log start offset, and the replica restarts at the leader's local log start (-1: not so).
    tiered_log_start: int = -1
    # After an error the partition is left out of requests until retry_at_ms; retry_delay_ms is the last delay.
    retry_at_ms: int = 0
    retry_delay_ms: int = 0

    def due(self, now_ms: int) -> bool:
        return now_ms >= self.retry_at_ms

    def retry_later(self, now_ms: int, cap_ms: int, soon: bool) -> int:
        """Schedules the next attempt after an error: ``soon`` (the leader is catching up) after RETRY_INITIAL_MS,
        doubling with each further error up to ``cap_ms``; otherwise after ``cap_ms``. Returns the delay."""
        self.retry_delay_ms = min(max(RETRY_INITIAL_MS, self.retry_delay_ms * 2), cap_ms) if soon else cap_ms
        self.retry_at_ms = now_ms + self.retry_delay_ms
        return self.retry_delay_ms

    def succeeded(self) -> None:
        self.retry_delay_ms = self.retry_at_ms = 0


@dataclass(slots=True)
class FetcherSettings:
    broker_id: int
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 10 * 1024 * 1024
    partition_max_bytes: int = 1024 * 1024
    backoff_ms: int = 1000
    socket_timeout_ms: int = 30000
    # Told (log dir, error) when writing a fetched batch fails with an I/O error: the replica manager takes the
    # dir offline, which also stops fetching for its partitions.
    on_log_dir_failure: Callable[[Path, BaseException], None] | None = None
    security: ClientSecurity | None = None  # the login to the inter-broker listener (TLS/SASL), None = PLAINTEXT
    # follower.replication.throttled.rate over the follower.replication.throttled.replicas (KIP-73).
    throttle: ReplicationQuota | None = None
    clock: Clock = field(default_factory=MonotonicClock)  # retry delays of partitions answered with an error


class Fetcher:
    """The fetch loop for the partitions led by one source broker."""

    def __init__(self, source: int, settings: FetcherSettings,
                 endpoint_for: Callable[[int], tuple[str, int] | None]) -> None:
        self.source = source
        self.settings = settings
        self.endpoint_for = endpoint_for
        self.partitions: dict[TopicPartition, FollowState] = {}
        self.lag: dict[TopicPartition, int] = {}
        self._wakeup = asyncio.Event()
        self._conn: BrokerConnection | None = None
        self.session = FetcherSession()  # KIP-227: after the first, fetches name only what changed
        # Steady: the last fetch asked for every partition and none of them needs anything else (truncation, a
        # tiered start, a retry after an error, a LeaderAndIsr): the loop then only fetches, without going over
        # the partitions for the other steps first (see ``_run``). ``_changes`` counts add() and remove() calls,
        # so a fetch that was in flight while partitions changed does not claim it.
        self._steady = False
        self._changes = 0
        # The partitions whose position the last answer may have changed (records appended, log start moved, still
        # behind the leader): a steady fetch builds only theirs, the others' are what the session last sent.
        self._touched: set[TopicPartition] = set()
        self._full_pass_ms = 0  # when a fetch last built every partition's position
        self._fetch_version = -1  # the Fetch version of the current connection
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"replica-fetcher-{source}")

    def add(self, partition: Partition) -> None:
        tp = (partition.topic, partition.index)
        current = self.partitions.get(tp)
        if current is not None and current.leader_epoch == partition.leader_epoch and current.partition is partition:
            current.parked = False
            current.retry_at_ms = 0  # asked again at once: the LeaderAndIsr may come with the leader ready
        else:
            # The same leader in the very next epoch (the controller only changed the ISR, e.g. took a dead
            # replica out): it led without a break, so a log that was already truncated for the epoch before is
            # still a prefix of the leader's and needs no OffsetForLeaderEpoch round (as Kafka's fetch-based
            # truncation asks nothing then). A skipped epoch may have had another leader: truncate then.
            continued = current is not None and current.partition is partition and not current.truncating \
                and current.tiered_log_start < 0 and partition.leader_epoch == current.leader_epoch + 1
            self.partitions[tp] = FollowState(partition, partition.leader_epoch, truncating=not continued)
        self._steady = False
        self._changes += 1
        self._wakeup.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)
        self.lag.pop(tp, None)
        self._steady = False
        self._changes += 1

    async def stop(self) -> None:
        await cancel_and_wait([self._task])
        await self._close()

    async def _close(self) -> None:
        self.session.reset()
        self._steady = False
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()

    async def _connection(self) -> BrokerConnection:
        if self._conn is not None and self._conn.connected:
            return self._conn
        await self._close()
        endpoint = self.endpoint_for(self.source)
        if endpoint is None:
            raise ConnectionError(f"no address known for broker {self.source}")
        conn = BrokerConnection(endpoint[0], endpoint[1], client_id=f"broker-{self.settings.broker_id}-fetcher",
                                request_timeout_ms=self.settings.socket_timeout_ms, security=self.settings.security)
        await conn.connect()
        self._fetch_version = conn.version_for(api_for(ApiKey.FETCH))
        self._conn = conn
        return conn

    async def _run(self) -> None:
        backoff_ms = self.settings.backoff_ms
        failures = 0
        while True:
            # Cleared before the requests, so an add() while they are in flight ends the next pause at once.
            self._wakeup.clear()
            conn = self._conn
            # Steady: nothing but the next fetch to do (each replication round trip's step), so no pass over the
            # partitions for truncation, tiered starts and retries first, which would find nothing.
            steady = self._steady and conn is not None and conn.connected
            if not steady:
                now = self.settings.clock.time_ms()
                active = [s for s in self.partitions.values() if not s.parked]
                if not active:
                    await self._wakeup.wait()
                    continue
                if not any(s.due(now) for s in active):
                    await self._pause(min(s.retry_at_ms for s in active) - now)
                    continue
            try:
                if steady:
                    assert conn is not None
                    progressed = await self._fetch(conn)
                else:
                    conn = await self._connection()
                    progressed = await self._truncate(conn)
                    progressed = await self._start_from_local_log_start(conn) or progressed
                    progressed = await self._fetch(conn) or progressed
                failures = 0
                if not progressed:
                    await self._pause(self._until_next_retry(backoff_ms))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                (log.info if failures > 1 else log.warning)("fetching from broker %d failed: %r; retrying",
                                                             self.source, exc)
                await self._close()
                await self._pause(backoff_ms)

    def _until_next_retry(self, limit_ms: int) -> int:
        """Milliseconds until the first partition waiting after an error is due, at most ``limit_ms``."""
        now = self.settings.clock.time_ms()
        waiting = [s.retry_at_ms for s in self.partitions.values() if not s.parked and s.retry_at_ms > now]
        return min([limit_ms] + [at - now for at in waiting])

    async def _pause(self, ms: int) -> None:
        """Sleeps ``ms``, or less when partitions are added meanwhile."""
        if ms <= 0:
            return
        try:
            async with asyncio.timeout(ms / 1000):
                await self._wakeup.wait()
        except TimeoutError:
            pass

    def _retry_later(self, request: str, failed: dict[ErrorCode, list[TopicPartition]], now_ms: int) -> None:
        """Schedules the partitions an answer failed and logs one line per error code."""
        cap = self.settings.backoff_ms
        for error, tps in failed.items():
            soon = error in LEADER_NOT_READY
            delay = 0
            for tp in tps:
                delay = max(delay, self.partitions[tp].retry_later(now_ms, cap, soon))
            log.info("%s from broker %d: %d partitions answered %s (%s); retrying them in %d ms", request,
                     self.source, len(tps), error.name, partition_examples(tps), delay)

    # ------------------------------------------------------------------ truncation
    async def _truncate(self, conn: BrokerConnection) -> bool:
        ask: dict[TopicPartition, FollowState] = {}
        now = self.settings.clock.time_ms()
        for tp, st in self.partitions.items():
            if not st.truncating or st.parked or not st.due(now):
                continue
            log_ = st.partition.log
            if log_.log_end_offset == log_.log_start_offset:
                st.truncating = False  # nothing to lose
            elif log_.latest_epoch == UNDEFINED_EPOCH:
                self._truncate_to(st, min(st.partition.high_watermark, log_.log_end_offset))
                st.truncating = False
            else:
                ask[tp] = st
        if not ask:
            return False
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, index), st in ask.items():
            by_topic.setdefault(topic, []).append({"partition": index, "current_leader_epoch": st.leader_epoch,
                                                   "leader_epoch": st.partition.log.latest_epoch})
        body = {"replica_id": self.settings.broker_id,
                "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}
        response = await conn.send(api_for(ApiKey.OFFSET_FOR_LEADER_EPOCH), body)
        progressed = False
        failed: dict[ErrorCode, list[TopicPartition]] = {}
        parked: list[TopicPartition] = []
        for t in response["topics"]:
            for p in t["partitions"]:
                tp = (t["topic"], p["partition"])
                asked = ask.get(tp)
                if asked is None or self.partitions.get(tp) is not asked:
                    continue  # the partition left this fetcher meanwhile
                st = asked
                error = ErrorCode.for_code(int(p["error_code"]))
                if error in PARK:
                    st.parked = True
                    parked.append(tp)
                    continue
                if error != ErrorCode.NONE:
                    failed.setdefault(error, []).append(tp)
                    continue
                st.succeeded()
                log_ = st.partition.log
                offset, final = divergence_offset(p["leader_epoch"], p["end_offset"], log_.end_offset_for_epoch,
                                                  log_.log_end_offset, st.partition.high_watermark)
                self._truncate_to(st, offset)
                st.truncating = not final
                progressed = True
        if parked:
            self._log_parked("OffsetForLeaderEpoch", parked)
        self._retry_later("OffsetForLeaderEpoch", failed, self.settings.clock.time_ms())
        return progressed

    def _log_parked(self, request: str, tps: list[TopicPartition]) -> None:
        log.info("%s from broker %d: %d partitions answered %s (%s); waiting for their next LeaderAndIsr", request,
                 self.source, len(tps), ErrorCode.FENCED_LEADER_EPOCH.name, partition_examples(tps))

    def _truncate_to(self, st: FollowState, offset: int) -> None:
        partition = st.partition
        leo = partition.log.log_end_offset
        if offset < leo and partition.log.truncate_to(offset):
            log.info("%s-%d: truncated from %d to %d (leader %d, epoch %d)", partition.topic, partition.index, leo,
                     partition.log.log_end_offset, self.source, st.leader_epoch)
        partition.clamp_high_watermark()

    # ------------------------------------------------------------------ tiered partitions
    async def _start_from_local_log_start(self, conn: BrokerConnection) -> bool:
        """Replicas of a tiered partition copy only the leader's local tail (KIP-405): ask the leader for its
        local log start offset (ListOffsets earliest-local, -4) and start the log empty there; the part below
        stays in remote storage, which this broker reads through the remote log metadata like the leader."""
        now = self.settings.clock.time_ms()
        ask = {tp: st for tp, st in self.partitions.items()
               if st.tiered_log_start >= 0 and not st.parked and st.due(now)}
        if not ask:
            return False
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, index), st in ask.items():
            by_topic.setdefault(topic, []).append({"partition_index": index, "timestamp": EARLIEST_LOCAL_TIMESTAMP,
                                                   "current_leader_epoch": st.leader_epoch})
        body = {"replica_id": self.settings.broker_id, "isolation_level": 0,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
        response = await conn.send(api_for(ApiKey.LIST_OFFSETS), body)
        progressed = False
        for t in response["topics"]:
            for p in t["partitions"]:
                tp = (t["name"], p["partition_index"])
                follow = ask.get(tp)
                if follow is None or self.partitions.get(tp) is not follow:
                    continue
                st = follow
                error = ErrorCode.for_code(int(p["error_code"]))
                if error != ErrorCode.NONE or int(p["offset"]) < 0:
                    log.info("%s-%d: ListOffsets earliest-local answered %s; retrying", *tp, error.name)
                    continue
                local_start, log_ = int(p["offset"]), st.partition.log
                log_.truncate_fully_and_start_at(local_start)
                log_.log_start_offset = min(st.tiered_log_start, local_start)  # the rest is remote
                st.partition.clamp_high_watermark()
                log.info("%s-%d: tiered; starting at the leader's local log start %d (log start %d)", *tp,
                         local_start, log_.log_start_offset)
                st.tiered_log_start, st.truncating = -1, False
                progressed = True
        return progressed

    # ------------------------------------------------------------------ fetching
    def _wanted(self, candidates: Iterable[tuple[TopicPartition, FollowState]], now: int, all_or_none: bool
                ) -> tuple[dict[TopicPartition, FollowState], dict[TopicPartition, PartitionPosition],
                           set[TopicPartition]] | None:
        """(partitions asked for, their positions, the throttled ones among them) of ``candidates``; those not due
        or held back by the throttle are left out, or with ``all_or_none`` the answer is None."""
        sent: dict[TopicPartition, FollowState] = {}
        wanted: dict[TopicPartition, PartitionPosition] = {}
        throttled: set[TopicPartition] = set()
        max_bytes = self.settings.partition_max_bytes
        throttle = self.settings.throttle
        hold_back: bool | None = None  # whether the throttled replicas' rate is over its bound: asked at the first one
        for tp, st in candidates:
            if st.parked or st.truncating or st.tiered_log_start >= 0 or st.retry_at_ms > now:  # not st.due(now)
                if all_or_none:
                    return None
                continue
            # KIP-73: a throttled replica that is not in sync (unknown lag counts as behind) is left out while
            # the follower's rate is above its bound; an in-sync one is never held back.
            if throttle is not None and self.lag.get(tp, 1) > 0 and throttle.is_throttled(*tp):
                if hold_back is None:
                    hold_back = throttle.exceeded()
                if hold_back:
                    if all_or_none:
                        return None
                    continue
                throttled.add(tp)
            log_ = st.partition.log
            sent[tp] = st
            wanted[tp] = (st.leader_epoch, log_.log_end_offset, log_.latest_epoch, log_.log_start_offset, max_bytes)
        return sent, wanted, throttled

    async def _fetch(self, conn: BrokerConnection) -> bool:
        changes = self._changes
        now = self.settings.clock.time_ms()
        throttle = self.settings.throttle
        partitions = self.partitions
        # Steady, with a session open: every partition was asked for last time and the session holds its position,
        # which only the last answer's appends can have changed (a LeaderAndIsr, a truncation or an error ends
        # steadiness), so only the partitions it touched are looked at: over 3,333 followed partitions of which
        # a few take writes, a position per partition per fetch was about half of a broker's CPU. Every
        # FULL_PASS_INTERVAL_MS, and whenever a touched partition is not simply fetched, all are.
        picked = None
        if self._steady and self.session.epoch != INITIAL_EPOCH and now - self._full_pass_ms < FULL_PASS_INTERVAL_MS:
            picked = self._wanted([(tp, partitions[tp]) for tp in self._touched if tp in partitions], now, True)
        partial = picked is not None
        if picked is None:
            every_due = self._wanted(partitions.items(), now, False)
            assert every_due is not None  # None only with all_or_none
            sent, wanted, throttled = every_due
            if not sent:
                return False
            self._full_pass_ms = now
        else:
            _, wanted, throttled = picked
            sent = dict(partitions)  # every partition is asked for: the session holds the others
        s = self.settings
        session_id, epoch, changed, forgotten = (self.session.build_changed(wanted) if partial
                                                 else self.session.build(wanted))
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, position in changed.items():
            by_topic.setdefault(tp[0], []).append(position_fields(tp[1], position))
        gone: dict[str, list[int]] = {}
        for topic, index in forgotten:
            gone.setdefault(topic, []).append(index)
        # Partitions waiting after an error are due before a long poll would end: the fetch waits no longer. (With
        # every partition asked for, none is waiting.)
        every = len(sent) == len(self.partitions)
        max_wait_ms = s.max_wait_ms if every else self._until_next_retry(s.max_wait_ms)
        body = {"replica_id": s.broker_id, "max_wait_ms": max_wait_ms, "min_bytes": s.min_bytes,
                "max_bytes": s.max_bytes, "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
                "forgotten_topics_data": [{"topic": t, "partitions": ps} for t, ps in gone.items()], "rack_id": ""}
        # The replica fetcher's own connection: written at once, the answer awaited as a plain future.
        response = await (conn.send_now(FETCH_API, body, self._fetch_version) if self._fetch_version >= 0
                          else conn.send(FETCH_API, body))
        code = response.get("error_code", 0)
        if code:
            error = ErrorCode.for_code(int(code))
            self._steady = False
            if error in (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH):
                log.info("fetch session %d at broker %d: %s; opening a new one", session_id, self.source,
                         error.name)
                self.session.reset()
                return True  # the next request is a full one, at once
            raise ConnectionError(f"fetch answered {error.name}")
        self.session.on_response(int(response.get("session_id", 0)), epoch, changed, forgotten)
        # An incremental answer leaves out the partitions with nothing new: no answer at all is no error either.
        progressed = not response["responses"]
        self._touched = set()
        throttled_bytes = 0
        failed: dict[ErrorCode, list[TopicPartition]] = {}
        disturbed = False  # a partition needs something other than the next fetch (see ``_steady``)
        for t in response["responses"]:
            for p in t["partitions"]:
                tp = (t["topic"], p["partition_index"])
                if tp in throttled and p["records"] is not None:
                    throttled_bytes += len(p["records"])
                fs = sent.get(tp)
                if fs is not None and self.partitions.get(tp) is fs and fs.partition.leader_epoch == fs.leader_epoch:
                    error = ErrorCode.for_code(int(p["error_code"]))
                    if self._on_partition(tp, fs, p, error):
                        progressed = True
                        if error != ErrorCode.NONE:
                            disturbed = True
                    else:
                        disturbed = True
                        if error != ErrorCode.NONE:
                            failed.setdefault(error, []).append(tp)
                elif fs is not None:
                    disturbed = True  # left the fetcher or changed epoch meanwhile
        if throttle is not None and throttled_bytes:
            throttle.record(throttled_bytes)
        self._steady = every and not disturbed and changes == self._changes
        if failed:
            parked = failed.pop(ErrorCode.FENCED_LEADER_EPOCH, [])
            if parked:
                self._log_parked("Fetch", parked)
            for error in (ErrorCode.OFFSET_OUT_OF_RANGE, ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE):
                failed.pop(error, None)  # handled (and logged where it matters) by _on_partition
            self._retry_later("Fetch", failed, self.settings.clock.time_ms())
        return progressed

    def _on_partition(self, tp: TopicPartition, st: FollowState, p: dict[str, Any], error: ErrorCode) -> bool:
        partition = st.partition
        log_ = partition.log
        if error == ErrorCode.NONE:
            records = p["records"]
            if records is not None and len(records) > 0:
                try:
                    log_.append_as_follower(records)
                except StorageError as exc:
                    log.warning("%s-%d: cannot append the leader's batches (%s); re-syncing", *tp, exc)
                    st.truncating = True
                    return False
                except OSError as exc:
                    if self.settings.on_log_dir_failure is None:
                        raise
                    self.settings.on_log_dir_failure(log_.dir.parent, exc)
                    return False
            partition.update_follower_high_watermark(int(p["high_watermark"]))
            # DeleteRecords on the leader: follow its log start offset (up to our own high watermark).
            leader_start = min(int(p["log_start_offset"]), partition.high_watermark)
            moved = leader_start > log_.log_start_offset and log_.maybe_increment_log_start_offset(leader_start)
            if moved:
                partition.clamp_high_watermark()
            lag = self.lag[tp] = max(0, int(p["high_watermark"]) - log_.log_end_offset)
            if moved or lag or (records is not None and len(records) > 0):
                self._touched.add(tp)  # its position may have changed, or it is behind (see ``_fetch``)
            if st.retry_delay_ms:
                st.succeeded()
            return True
        if error in PARK:
            st.parked = True
        elif error == ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE:
            st.tiered_log_start = int(p["log_start_offset"])
            return True
        elif error == ErrorCode.OFFSET_OUT_OF_RANGE:
            leader_start = int(p["log_start_offset"])
            if leader_start > log_.log_end_offset:
                log.info("%s-%d: the leader's log starts at %d, after ours ends; starting over there", *tp,
                         leader_start)
                log_.truncate_fully_and_start_at(leader_start)
                partition.clamp_high_watermark()
            else:
                st.truncating = True
        return False


class ReplicaFetcherManager:
    """Starts and stops follower fetching as LeaderAndIsr changes partitions' roles (a role listener of the
    replica manager)."""

    def __init__(self, settings: FetcherSettings, endpoint_for: Callable[[int], tuple[str, int] | None]) -> None:
        self.settings = settings
        self.endpoint_for = endpoint_for
        self.fetchers: dict[int, Fetcher] = {}

    def on_role_change(self, partition: Partition, is_leader: bool) -> None:
        tp = (partition.topic, partition.index)
        source = partition.leader_id
        for broker_id, fetcher in list(self.fetchers.items()):
            if broker_id != source or is_leader:
                fetcher.remove(tp)
        if is_leader or source < 0 or source == self.settings.broker_id:
            return
        if source not in self.fetchers:
            self.fetchers[source] = Fetcher(source, self.settings, self.endpoint_for)
        self.fetchers[source].add(partition)

    def max_lag(self) -> int:
        return max((lag for f in list(self.fetchers.values()) for lag in list(f.lag.values())), default=0)

    async def shutdown(self) -> None:
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        await asyncio.gather(*(f.stop() for f in fetchers), return_exceptions=True)
