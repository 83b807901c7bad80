"""Incremental fetch sessions (KIP-227) on the leader.

A fetcher opens a session with a full Fetch request at session epoch 0; the answer carries the session id. Its
next requests (epoch 1, 2, ...) name only the partitions whose fetch position changed (and, under "forgotten",
those to drop); the leader answers only the partitions with something to say: records, an error, or a high
watermark, last stable offset or log start offset different from the last one sent.

The leader does not visit every partition of the session on each fetch either: each session keeps a *changed*
set, the partitions that may have something to say. The replica manager's listeners put a partition there when
it is appended to or its high watermark moves (``FetchSessionCache.partition_changed``), a request puts there
the partitions it names, and a partition leaves it only when an answer was built from a read of it that left
nothing to tell: no error and no data past the fetch offset (a partition answered with records stays until the
fetcher names its new position). A read and the removal happen in one step of the event loop, so a change that
comes while a fetch is parked or in flight is in the set for the next answer. A parked fetch of the session is
woken by the same call (``FetchSession.waiter``). Every ``sweep_ms`` one fetch of the session goes over all its
partitions (a follower's caught-up time for partitions where nothing happens, log start offsets moved by
retention). With 3,333 partitions per follower session, visiting all of them cost the leader ~30 ms per fetch
and the follower's fetches arrive many times a second.

Epoch -1 ends a session (the request is then a sessionless full fetch); epoch 0 with a session id replaces it.
An unknown id is answered FETCH_SESSION_ID_NOT_FOUND, an epoch other than the expected one
INVALID_FETCH_SESSION_EPOCH; the fetcher then starts over with a full request.

Consumers get sessions as followers do (a consumer that asks: kafka-python and Kafka's Java client do,
librdkafka and aiokafka send sessionless full requests). A follower's session is privileged, as in Kafka's
cache: with every slot taken, a new follower session may push out the least recently used consumer session,
so consumers can never leave the replicas without sessions.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from moldau.protocol.errors import ErrorCode
from moldau.protocol.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, INT32_MAX
from moldau.protocol.types import TopicPartition


class Waiter(Protocol):
    def try_complete(self) -> bool: ...
    def wake(self, tp: TopicPartition) -> None: ...


@dataclass(slots=True)
class SessionPartition:
    request: dict[str, Any]  # the partition's fields as last sent by the fetcher, with "partition"
    # What the last answer told the fetcher: an incremental answer names the partition again when these change.
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1


@dataclass(slots=True, eq=False)
class FetchSession:
    session_id: int
    next_epoch: int = 1
    partitions: dict[TopicPartition, SessionPartition] = field(default_factory=dict)
    last_used_ms: int = 0
    # The partitions that may have something to say in the next answer (see the module's docstring).
    changed: set[TopicPartition] = field(default_factory=set)
    swept_ms: int = 0  # when a fetch last went over every partition
    replica_id: int = -1  # the follower's broker id (a consumer: -1)
    waiter: Waiter | None = None  # the session's parked fetch, woken when a partition changes
    # The partitions the last incremental request named (their position changed): the follower positions the
    # leader records between sweeps (see broker/apis/fetch.py _update_session).
    named: list[TopicPartition] = field(default_factory=list)

    def topics_of(self, tps: Iterable[TopicPartition]) -> list[dict[str, Any]]:
        """The partitions ``tps`` of the session as the ``topics`` of a request, grouped by topic."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        partitions = self.partitions
        for tp in tps:
            sp = partitions.get(tp)
            if sp is not None:
                by_topic.setdefault(tp[0], []).append(sp.request)
        return [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]

    def full_topics(self) -> list[dict[str, Any]]:
        """Every partition of the session as the ``topics`` of a full request, grouped by topic."""
        return self.topics_of(self.partitions)

    def changed_topics(self) -> list[dict[str, Any]]:
        """The partitions that may have news, as request ``topics`` (what an incremental fetch reads)."""
        return self.topics_of(list(self.changed))

    def mark_changed(self, tp: TopicPartition, appended: bool = False) -> None:
        """``tp`` may have something to say in the next answer. A parked fetch re-checks: at once after an
        append (``appended``), else (a high-watermark or leadership change) as it decides (``Waiter.wake``)."""
        self.changed.add(tp)
        waiter = self.waiter
        if waiter is not None:
            if appended:
                waiter.try_complete()
            else:
                waiter.wake(tp)

    def changed_only(self, responses: list[dict[str, Any]], full: bool, left: set[TopicPartition] | None = None
                     ) -> list[dict[str, Any]]:
        """Records what each partition's answer tells the fetcher; an incremental answer keeps only the
        partitions with records, an error or a moved high watermark, last stable offset or log start offset.
        With ``left`` (the partitions read that have data past their fetch offset), every other partition
        answered without an error has nothing more to say and leaves the changed set."""
        out: list[dict[str, Any]] = []
        changed_set = self.changed
        for t in responses:
            kept = []
            topic = t["topic"]
            for p in t["partitions"]:
                index = p["partition_index"]
                sp = self.partitions.get((topic, index))
                if sp is None:  # an unauthorized topic's answer: always sent
                    kept.append(p)
                    continue
                hw, lso, lso_start = p["high_watermark"], p["last_stable_offset"], p["log_start_offset"]
                changed = (sp.high_watermark != hw or sp.last_stable_offset != lso or sp.log_start_offset != lso_start)
                sp.high_watermark, sp.last_stable_offset, sp.log_start_offset = hw, lso, lso_start
                error = p["error_code"] != ErrorCode.NONE
                if full or changed or error or len(p["records"]) > 0:
                    kept.append(p)
                if not error and left is not None and (topic, index) not in left:
                    changed_set.discard((topic, index))
            if kept or full:
                out.append({"topic": topic, "partitions": kept})
        return out


class FetchSessionCache:
    """At most ``max_slots`` sessions (max.incremental.fetch.session.cache.slots); when full, the least recently
    used one idle for ``evict_after_ms`` makes room, else the new fetcher goes without a session.
    ``appended`` and ``partition_changed`` are replica manager listeners (appends, high-watermark moves)."""

    def __init__(self, max_slots: int, evict_after_ms: int = 120_000) -> None:
        self.max_slots = max_slots
        self.evict_after_ms = evict_after_ms
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        # Partition -> the sessions holding it, so a change costs the sessions it concerns.
        self._holders: dict[TopicPartition, list[FetchSession]] = {}
        self.partitions_cached = 0  # over all sessions (Kafka's NumIncrementalFetchPartitionsCached)

    def __len__(self) -> int:
        return len(self._sessions)

    def partition_changed(self, tp: TopicPartition) -> None:
        """The partition's answer may differ now (HW move, leadership): every session holding it looks at it in
        its next answer, and a parked fetch of such a session is told (``Waiter.wake``)."""
        for session in self._holders.get(tp, ()):
            session.mark_changed(tp)

    def appended(self, tp: TopicPartition) -> None:
        """``partition_changed`` for an append (or a log start move): a parked fetch of a session holding the
        partition re-checks without asking whether it may have news (an append is news to a follower)."""
        for session in self._holders.get(tp, ()):
            session.mark_changed(tp, appended=True)

    def resolve(self, body: dict[str, Any], now_ms: int, may_create: bool
                ) -> tuple[ErrorCode, FetchSession | None, bool]:
        """(error, session, full) for a Fetch request; applies the request's partitions to its session (an
        incremental request's ones also go into the session's changed set). ``full``: answer every partition
        (``body["topics"]`` then holds them all); an incremental fetch reads ``session.changed_topics()``."""
        session_id, epoch = body.get("session_id", 0), body.get("session_epoch", FINAL_EPOCH)
        if epoch in (FINAL_EPOCH, INITIAL_EPOCH):
            if session_id:
                self._remove(session_id)
            if epoch == FINAL_EPOCH or not may_create:
                return ErrorCode.NONE, None, True
            replica_id = body.get("replica_id", -1)
            session = self._create(now_ms, privileged=replica_id >= 0)
            if session is not None:
                session.replica_id = replica_id
                self._apply(session, body)
            return ErrorCode.NONE, session, True
        session = self._sessions.get(session_id)
        if session is None:
            return ErrorCode.FETCH_SESSION_ID_NOT_FOUND, None, True
        if epoch != session.next_epoch:
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH, None, True
        session.next_epoch = 1 if epoch >= INT32_MAX else epoch + 1
        session.last_used_ms = now_ms
        self._sessions.move_to_end(session_id)
        for t in body.get("forgotten_topics_data") or []:
            for index in t["partitions"]:
                tp = (t["topic"], index)
                if session.partitions.pop(tp, None) is not None:
                    session.changed.discard(tp)
                    self._release(session, tp)
        self._apply(session, body)
        named: list[TopicPartition] = []
        for t in body["topics"]:
            name = t["topic"]
            named += [(name, p["partition"]) for p in t["partitions"]]
        session.named = named
        session.changed.update(named)
        return ErrorCode.NONE, session, False

    def _apply(self, session: FetchSession, body: dict[str, Any]) -> None:
        partitions = session.partitions
        superseded: list[FetchSession] = []
        for t in body["topics"]:
            name = t["topic"]
            for p in t["partitions"]:
                tp = (name, p["partition"])
                # The decoded request's own dict (a fresh one per request, never changed after): copying its
                # fields cost a dict per named partition, 3,333 per fetch reporting a replication round.
                fields = p
                sp = partitions.get(tp)
                if sp is None:
                    partitions[tp] = SessionPartition(fields)
                    self.partitions_cached += 1
                    holders = self._holders.setdefault(tp, [])
                    if holders and session.replica_id >= 0:
                        superseded += [h for h in holders if h.replica_id == session.replica_id]
                    holders.append(session)
                else:
                    sp.request = fields
        # The same follower fetching the same partitions in a new session (it reconnected, or restarted): its
        # old session is dead. Dropped now rather than when the cache runs out of slots, since every append to
        # its partitions would go on marking it.
        for old in {id(h): h for h in superseded}.values():
            self._remove(old.session_id)

    def _release(self, session: FetchSession, tp: TopicPartition) -> None:
        self.partitions_cached -= 1
        holders = self._holders.get(tp)
        if holders is None:
            return
        holders[:] = [s for s in holders if s is not session]
        if not holders:
            del self._holders[tp]

    def _remove(self, session_id: int) -> None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            for tp in session.partitions:
                self._release(session, tp)
            session.waiter = None

    def _create(self, now_ms: int, privileged: bool) -> FetchSession | None:
        if self.max_slots <= 0:
            return None
        if len(self._sessions) >= self.max_slots:
            oldest_id, oldest = next(iter(self._sessions.items()))
            if now_ms - oldest.last_used_ms >= self.evict_after_ms:
                self._remove(oldest_id)
            else:
                # Every slot is in use: a follower (privileged) takes the least recently used consumer's.
                victim = next((sid for sid, s in self._sessions.items() if s.replica_id < 0), None) \
                    if privileged else None
                if victim is None:
                    return None
                self._remove(victim)
        session_id = 0
        while session_id == 0 or session_id in self._sessions:
            session_id = random.randint(1, INT32_MAX)
        session = FetchSession(session_id, last_used_ms=now_ms, swept_ms=now_ms)
        self._sessions[session_id] = session
        return session
