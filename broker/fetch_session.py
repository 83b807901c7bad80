"""Incremental fetch sessions (KIP-227) on the leader.

A fetcher opens a session with a full Fetch request at session epoch 0; the answer carries the session id. Its
next requests (epoch 1, 2, ...) name only the partitions whose fetch position changed (and, under "forgotten",
those to drop); the leader reads every partition of the session from the positions it keeps, and answers only
the partitions with something to say: records, an error, or a high watermark, last stable offset or log start
offset different from the last one sent. A follower of 10,000 partitions whose fetches carry a few of them with
data costs the leader and itself the work of those few in encoding and decoding, not of all 10,000.

Epoch -1 ends a session (the request is then a sessionless full fetch); epoch 0 with a session id replaces it.
An unknown id is answered FETCH_SESSION_ID_NOT_FOUND, an epoch other than the expected one
INVALID_FETCH_SESSION_EPOCH; the fetcher then starts over with a full request.

Sessions are given to followers only for now (``replica_id >= 0``): a consumer's answer carries session id 0,
which every client takes as "no session" and goes on with full requests.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from moldau.protocol.errors import ErrorCode
from moldau.protocol.types import TopicPartition

FINAL_EPOCH = -1
INITIAL_EPOCH = 0
INT32_MAX = (1 << 31) - 1
_PARTITION_FIELDS = ("current_leader_epoch", "fetch_offset", "last_fetched_epoch", "log_start_offset",
                     "partition_max_bytes")


@dataclass(slots=True)
class SessionPartition:
    request: dict[str, Any]  # the partition's fields as last sent by the fetcher
    # What the last answer told the fetcher: an incremental answer names the partition again when these change.
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1


@dataclass(slots=True)
class FetchSession:
    session_id: int
    next_epoch: int = 1
    partitions: dict[TopicPartition, SessionPartition] = field(default_factory=dict)
    last_used_ms: int = 0

    def full_topics(self) -> list[dict[str, Any]]:
        """Every partition of the session as the ``topics`` of a full request, grouped by topic."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, index), sp in self.partitions.items():
            by_topic.setdefault(topic, []).append({"partition": index, **sp.request})
        return [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]

    def changed_only(self, responses: list[dict[str, Any]], full: bool) -> list[dict[str, Any]]:
        """Records what each partition's answer tells the fetcher; an incremental answer keeps only the
        partitions with records, an error or a moved high watermark, last stable offset or log start offset."""
        out: list[dict[str, Any]] = []
        for t in responses:
            kept = []
            for p in t["partitions"]:
                sp = self.partitions.get((t["topic"], p["partition_index"]))
                if sp is None:  # an unauthorized topic's answer: always sent
                    kept.append(p)
                    continue
                changed = (sp.high_watermark != p["high_watermark"]
                           or sp.last_stable_offset != p["last_stable_offset"]
                           or sp.log_start_offset != p["log_start_offset"])
                sp.high_watermark, sp.last_stable_offset = p["high_watermark"], p["last_stable_offset"]
                sp.log_start_offset = p["log_start_offset"]
                if full or changed or p["error_code"] != ErrorCode.NONE or len(p["records"]) > 0:
                    kept.append(p)
            if kept or full:
                out.append({"topic": t["topic"], "partitions": kept})
        return out


class FetchSessionCache:
    """At most ``max_slots`` sessions (max.incremental.fetch.session.cache.slots); when full, the least recently
    used one idle for ``evict_after_ms`` makes room, else the new fetcher goes without a session."""

    def __init__(self, max_slots: int, evict_after_ms: int = 120_000) -> None:
        self.max_slots = max_slots
        self.evict_after_ms = evict_after_ms
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def resolve(self, body: dict[str, Any], now_ms: int, may_create: bool
                ) -> tuple[ErrorCode, FetchSession | None, bool]:
        """(error, session, full) for a Fetch request; applies an incremental request's partitions to its
        session and rewrites ``body["topics"]`` to every partition of it. ``full``: answer every partition."""
        session_id, epoch = body.get("session_id", 0), body.get("session_epoch", FINAL_EPOCH)
        if epoch in (FINAL_EPOCH, INITIAL_EPOCH):
            if session_id:
                self._sessions.pop(session_id, None)
            if epoch == FINAL_EPOCH or not may_create:
                return ErrorCode.NONE, None, True
            session = self._create(now_ms)
            if session is not None:
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
                session.partitions.pop((t["topic"], index), None)
        self._apply(session, body)
        body["topics"] = session.full_topics()
        return ErrorCode.NONE, session, False

    @staticmethod
    def _apply(session: FetchSession, body: dict[str, Any]) -> None:
        for t in body["topics"]:
            for p in t["partitions"]:
                tp = (t["topic"], p["partition"])
                fields = {name: p[name] for name in _PARTITION_FIELDS if name in p}
                sp = session.partitions.get(tp)
                if sp is None:
                    session.partitions[tp] = SessionPartition(fields)
                else:
                    sp.request = fields

    def _create(self, now_ms: int) -> FetchSession | None:
        if self.max_slots <= 0:
            return None
        if len(self._sessions) >= self.max_slots:
            oldest_id, oldest = next(iter(self._sessions.items()))
            if now_ms - oldest.last_used_ms < self.evict_after_ms:
                return None
            del self._sessions[oldest_id]
        session_id = 0
        while session_id == 0 or session_id in self._sessions:
            session_id = random.randint(1, INT32_MAX)
        session = FetchSession(session_id, last_used_ms=now_ms)
        self._sessions[session_id] = session
        return session


class FollowerSession:
    """The fetcher's half of a session (Kafka's FetchSessionHandler): a full request to open it, then only the
    partitions whose fields changed since they were last sent, and the ones to forget."""

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self.sent: dict[TopicPartition, dict[str, Any]] = {}

    def reset(self) -> None:
        self.session_id, self.epoch, self.sent = 0, INITIAL_EPOCH, {}

    def build(self, wanted: dict[TopicPartition, dict[str, Any]]
              ) -> tuple[int, int, dict[TopicPartition, dict[str, Any]], list[TopicPartition]]:
        """(session id, epoch, partitions to send, partitions to forget) for a fetch of ``wanted``."""
        if self.session_id == 0:
            return 0, INITIAL_EPOCH, dict(wanted), []
        changed = {tp: e for tp, e in wanted.items() if self.sent.get(tp) != e}
        return self.session_id, self.epoch, changed, [tp for tp in self.sent if tp not in wanted]

    def on_response(self, session_id: int, epoch: int, sent: dict[TopicPartition, dict[str, Any]],
                    forgotten: list[TopicPartition]) -> None:
        """A successful answer to the request ``build`` made: the leader's session now holds what was sent."""
        if session_id == 0:  # the leader keeps no session for us: full requests go on
            self.reset()
            return
        if epoch == INITIAL_EPOCH:
            self.sent = dict(sent)
        else:
            self.sent.update(sent)
            for tp in forgotten:
                self.sent.pop(tp, None)
        self.session_id = session_id
        self.epoch = 1 if epoch >= INT32_MAX else epoch + 1
