"""Fetch: read each partition (bounded by the HW for consumers, by the last stable offset for read_committed ones
(isolation level 1, with the aborted transactions of the range from the .txnindex), by the log end offset for
followers), or wait in the fetch purgatory (its re-reads use the same bound). A follower's fetch (replica_id >= 0) also reports its log end offset to the leader.
A consumer needs Read on each topic, a follower ClusterAction (else TOPIC_AUTHORIZATION_FAILED for the topic).
A consumer under a consumer_byte_rate quota gets at most what the quota allows over one window (docs/quotas.md).

The answer is sent as soon as ``min_bytes`` are available or ``max_wait_ms`` has passed; an append to any of the
requested partitions re-checks the waiting fetch at once. Records are file regions that the network layer sends
with sendfile.

A consumer's fetch below the local log start offset of a tiered partition (OFFSET_MOVED_TO_TIERED_STORAGE from
the log) is read from remote storage on the remote-read pool; the answer waits for it at most
``remote.fetch.max.wait.ms`` (then that partition answers empty, the client fetches again), while other requests
go on being served (docs/tiered-storage.md).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from moldau.broker.apis.context import ReplicaDeps
from moldau.broker.fetch_session import FetchSession, SessionPartition
from moldau.broker.purgatory import DelayedOperation
from moldau.broker.request_channel import Reply, Request
from moldau.broker.security.acl import Operation, ResourceType
from moldau.protocol.errors import ErrorCode
from moldau.protocol.types import TopicPartition

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        FetchRequest,
        FetchResponse,
        FetchResponseResponses,
        FetchResponseResponsesPartitions,
    )

READ_UNCOMMITTED = 0
SESSION_VERSION = 7  # the first Fetch version with session_id and session_epoch (KIP-227)
READ_COMMITTED = 1


def _sweep_ms(ctx: ReplicaDeps) -> int:
    """How often one fetch of a session goes over all its partitions: often enough that a caught-up follower's
    time stays far within replica.lag.time.max.ms."""
    return max(ctx.replica_manager.replica_lag_time_max_ms // 4, 1)


def _update_session(ctx: ReplicaDeps, session: FetchSession, replica_id: int) -> None:
    """Before an incremental fetch reads: a follower's position in each partition it named is recorded (so the
    answer carries the high watermarks this very fetch advanced). Every ``_sweep_ms`` one fetch goes over all
    partitions of the session: a follower's position in each (its fetch and caught-up times), and the partitions
    with news no listener reports (a log start offset moved by retention) join the changed set.

    A partition that changed on the leader (an append) but whose position the follower did not name is not
    recorded: its position is the one recorded last, so no high watermark can move, and only the follower's
    fetch time and the leader's log end offset at it would be noted, the next named fetch or sweep notes them
    (the caught-up time of a follower one batch behind may then be one fetch interval older than Kafka's; its
    fetch time is at most a sweep old, as for the partitions where nothing happens). Recording them cost the
    fetch that carries each replication round's data a follower update per partition, ~3 us each."""
    rm = ctx.replica_manager
    now = rm.clock.time_ms()
    sweep = now - session.swept_ms >= _sweep_ms(ctx)
    if sweep:
        session.swept_ms = now
    partitions = session.partitions
    follower = replica_id >= 0
    if follower:
        update = rm.update_follower
        with rm.high_watermark_moves_together():
            for tp in list(partitions) if sweep else session.named:
                sp = partitions.get(tp)
                if sp is not None:
                    r = sp.request
                    update(tp[0], tp[1], replica_id, r["fetch_offset"], r.get("log_start_offset", -1),
                           r.get("current_leader_epoch", -1), now)
    if sweep:
        changed = session.changed
        for tp, sp in partitions.items():
            if tp not in changed and _has_news(rm, tp[0], tp[1], sp, follower):
                changed.add(tp)


def _has_news(rm: Any, topic: str, index: int, sp: SessionPartition, follower: bool) -> bool:
    r = sp.request
    return bool(rm.may_have_news(topic, index, r["fetch_offset"], follower, sp.high_watermark, sp.log_start_offset,
                                 r.get("current_leader_epoch", -1)))


def _read_all(ctx: ReplicaDeps, body: FetchRequest, version: int, topics: Any = None,
              left: set[TopicPartition] | None = None) -> tuple[list[FetchResponseResponses], int, bool, int]:
    """(responses, bytes read, any error, bytes of throttled replicas: leader.replication.throttled.rate);
    ``topics``: the part of the request's topics to read (default: all). ``left`` gets the partitions with
    data past their fetch offset (up to the log end for a follower, the HW for a consumer) after this read."""
    replica_id = body["replica_id"]
    consumer = replica_id < 0
    read_committed = consumer and version >= 4 and body["isolation_level"] == READ_COMMITTED
    budget = body["max_bytes"] if version >= 3 else 1 << 31
    total = throttled_bytes = 0
    error = False
    responses: list[FetchResponseResponses] = []
    rm = ctx.replica_manager
    throttle = None if consumer else rm.leader_throttle
    hold_back: bool | None = None  # whether the throttled replicas' rate is over its bound: asked at the first one
    for t in body["topics"] if topics is None else topics:
        name = t["topic"]
        partitions: list[FetchResponseResponsesPartitions] = []
        topic_throttle = throttle if throttle is not None and throttle.throttles_topic(name) else None
        for p in t["partitions"]:
            index = p["partition"]
            limit = min(p["partition_max_bytes"], budget - total)
            # KIP-73: a throttled replica that is not in sync gets no data while the leader's rate is above
            # its bound (in-sync replicas never wait).
            throttled = topic_throttle is not None and topic_throttle.is_throttled(name, index) and \
                replica_id not in rm.isr_of(name, index)
            held = False
            if throttled:
                if hold_back is None:
                    assert topic_throttle is not None
                    hold_back = topic_throttle.exceeded()
                held = hold_back
            r = rm.read(name, index, p["fetch_offset"], 0 if held else max(limit, 0), consumer=consumer,
                        min_one=(total == 0 and not held),
                        current_leader_epoch=-1 if consumer else p["current_leader_epoch"],
                        read_committed=read_committed)
            aborted = r.aborted_transactions
            if throttled:
                throttled_bytes += r.size
            entry: FetchResponseResponsesPartitions = {
                "partition_index": index, "error_code": r.error,
                "high_watermark": r.high_watermark, "last_stable_offset": r.last_stable_offset,
                "log_start_offset": r.log_start_offset,
                "aborted_transactions": None if aborted is None else [
                    {"producer_id": a.producer_id, "first_offset": a.first_offset} for a in aborted],
                "preferred_read_replica": -1,
                "records": b"" if r.records is None else r.records}
            if r.error != ErrorCode.NONE:
                error = True
                entry["records"] = b""  # Kafka sends empty records, never null (librdkafka rejects -1)
            elif left is not None and p["fetch_offset"] < (r.high_watermark if consumer else r.log_end_offset):
                left.add((name, index))
            partitions.append(entry)
            total += r.size
        responses.append({"topic": name, "partitions": partitions})
    return responses, total, error, throttled_bytes


def _record_throttled(ctx: ReplicaDeps, throttled_bytes: int) -> None:
    """The bytes a follower's answer carries for throttled replicas count against the leader's rate."""
    throttle = ctx.replica_manager.leader_throttle
    if throttle is not None and throttled_bytes:
        throttle.record(throttled_bytes)


def _response(responses: list[FetchResponseResponses], session: FetchSession | None = None,
              full: bool = True, left: set[TopicPartition] | None = None) -> FetchResponse:
    """The answer; with a session, only what changed (an incremental one), and the partitions read without an
    error and without data ``left`` leave the session's changed set."""
    if session is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "session_id": 0, "responses": responses}
    kept: Any = session.changed_only(responses, full, left)  # type: ignore[arg-type]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "session_id": session.session_id,
            "responses": kept}


RemoteRequest = tuple["FetchResponseResponsesPartitions", str, int, int, int, bool]


def _remote_reads(ctx: ReplicaDeps, body: FetchRequest, responses: list[FetchResponseResponses], version: int,
                  topics: Any = None) -> list[RemoteRequest]:
    """The consumer partitions to read from remote storage: (answer entry, topic, partition, offset, max bytes,
    read_committed)."""
    if ctx.remote is None or body["replica_id"] >= 0:
        return []
    read_committed = version >= 4 and body["isolation_level"] == READ_COMMITTED
    out: list[RemoteRequest] = []
    for t, answer in zip(body["topics"] if topics is None else topics, responses, strict=True):
        for p, entry in zip(t["partitions"], answer["partitions"], strict=True):
            if entry["error_code"] == ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE:
                out.append((entry, t["topic"], p["partition"], p["fetch_offset"], p["partition_max_bytes"],
                            read_committed))
    return out


async def _with_remote(ctx: ReplicaDeps, reads: list[RemoteRequest], response: FetchResponse) -> FetchResponse:
    remote = ctx.remote
    assert remote is not None
    tasks = [asyncio.ensure_future(remote.read(topic, index, offset, max_bytes, committed))
             for _, topic, index, offset, max_bytes, committed in reads]
    done, pending = await asyncio.wait(tasks, timeout=remote.fetch_max_wait_ms / 1000)
    for task in pending:
        task.cancel()
    for (entry, *_), task in zip(reads, tasks, strict=True):
        entry["error_code"], entry["records"] = ErrorCode.NONE, b""  # not read in time: empty, fetch again
        if task in done:
            result = task.result()
            entry["error_code"], entry["records"] = result.error, result.records
            if result.aborted is not None:
                entry["aborted_transactions"] = [{"producer_id": a.producer_id, "first_offset": a.first_offset}
                                                 for a in result.aborted]
    return response


class DelayedFetch(DelayedOperation):
    """A fetch waiting for ``min_bytes``. A wake-up (an append or a high-watermark move on one of its partitions)
    only schedules a check on the next turn of the event loop: a follower's fetch moves the high watermark of
    every partition it names, and re-reading all partitions of each waiting fetch once per moved partition made
    one fetch over n partitions cost n x n reads. At most one check is pending per operation; it runs after
    every change of the turn, so no wake-up is lost, and the appends of that turn (a client's pipelined produces,
    read from one socket read and handled by a worker in one go) go out in one answer.

    A check that finds enough is the answer: its read is sent as it is, in the same callback (a second read on
    a later turn cost every replication round trip one more loop turn and read per follower, on the path of
    each acks=all write; nothing can change in between, the check runs to the end of a callback). An answer
    forced by the timeout (``max_wait_ms``) reads then.

    An incremental session fetch is not watched under each partition of the session: it is the session's
    ``waiter``, woken by a change of any of them, and reads only the session's changed set."""

    __slots__ = ("ctx", "body", "version", "future", "denied", "_check_due", "session", "full", "narrow", "_read")

    def __init__(self, ctx: ReplicaDeps, body: FetchRequest, version: int, future: asyncio.Future[Any],
                 denied: list[FetchResponseResponses]) -> None:
        super().__init__(body["max_wait_ms"])
        self.ctx = ctx
        self.body = body
        self.version = version
        self.future = future
        self.denied = denied  # the unauthorized topics' answers, added to the final response
        self._check_due = False
        self.session: FetchSession | None = None  # an incremental fetch session (KIP-227): answers what changed
        self.full = True
        self.narrow = False  # an incremental fetch that reads only the session's changed set
        # The check's read that completed the fetch, sent as the answer: (topics, responses, throttled bytes,
        # partitions with data left).
        self._read: tuple[Any, list[FetchResponseResponses], int, set[TopicPartition]] | None = None

    def _topics(self) -> Any:
        session = self.session
        if session is None or not self.narrow:
            return self.body["topics"]
        return session.changed_topics()

    def try_complete(self) -> bool:
        if self.future.done():  # the client went away
            return self.force_complete()
        if not self._check_due:
            self._check_due = True
            self.future.get_loop().call_soon(self._check)
        return False

    def wake(self, tp: TopicPartition) -> None:
        """A partition of the session changed (``FetchSession.mark_changed``). A follower's fetch waits for data
        (or an error): a move of the high watermark alone, as every other follower's report of a replication
        round trip makes, cannot complete it, so such a change schedules no check (its read would find nothing,
        one turn later, once per round trip and parked follower)."""
        if self._check_due or (self.body["replica_id"] >= 0 and self._nothing_for_follower(tp)):
            return
        self.try_complete()

    def _nothing_for_follower(self, tp: TopicPartition) -> bool:
        """True when ``tp`` has nothing a read of it would answer this follower's fetch with: its leader here,
        in the epoch the follower fetches in, with no record past (and no log start after) the follower's fetch
        offset."""
        session = self.session
        sp = session.partitions.get(tp) if session is not None else None
        if sp is None:
            return False
        r = sp.request
        return self.ctx.replica_manager.follower_caught_up(tp[0], tp[1], r["fetch_offset"],
                                                           r.get("current_leader_epoch", -1))

    def _check(self) -> None:
        self._check_due = False
        if self.is_completed:
            return
        if self.future.done():
            self.force_complete()
            return
        topics = self._topics()
        left: set[TopicPartition] = set()
        responses, total, error, throttled_bytes = _read_all(self.ctx, self.body, self.version, topics, left)
        if error or total >= self.body["min_bytes"]:
            self._read = (topics, responses, throttled_bytes, left)
            if not self.force_complete():
                self._read = None

    def on_complete(self) -> None:
        read, self._read = self._read, None
        if not self.future.done():
            self._respond(read)

    def _respond(self, read: tuple[Any, list[FetchResponseResponses], int, set[TopicPartition]] | None) -> None:
        session = self.session
        if self.narrow and session is not None:
            if session.waiter is not self:  # a later fetch of the session took over: leave its changes to it
                self.future.set_result({"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
                                        "session_id": session.session_id, "responses": []})
                return
            session.waiter = None
        if read is None:  # the timeout: read now
            topics = self._topics()
            left: set[TopicPartition] = set()
            responses, _, _, throttled_bytes = _read_all(self.ctx, self.body, self.version, topics, left)
        else:
            topics, responses, throttled_bytes, left = read
        if throttled_bytes:
            _record_throttled(self.ctx, throttled_bytes)
        reads = _remote_reads(self.ctx, self.body, responses, self.version, topics) if self.ctx.remote is not None else []
        if not reads:
            self.future.set_result(_response(responses + self.denied, session, self.full, left))
            return
        task = asyncio.ensure_future(_with_remote(self.ctx, reads, _response(responses + self.denied)))
        future = self.future

        def deliver(t: asyncio.Task[FetchResponse]) -> None:
            if not future.done():
                future.set_result(t.result())

        task.add_done_callback(deliver)


def _may_read_all(ctx: ReplicaDeps, request: Request, session: FetchSession, replica_id: int) -> bool:
    """Whether the principal may fetch every topic of the session (a follower: ClusterAction)."""
    if not ctx.auth.enabled:
        return True
    if replica_id >= 0:
        return ctx.auth.cluster(request, Operation.CLUSTER_ACTION)
    names = {tp[0] for tp in session.partitions}
    return len(ctx.auth.allowed_names(request, Operation.READ, ResourceType.TOPIC, names)) == len(names)


def _unauthorized(ctx: ReplicaDeps, request: Request, body: FetchRequest) -> list[FetchResponseResponses]:
    """Take the topics the principal may not fetch out of ``body`` and answer them TOPIC_AUTHORIZATION_FAILED:
    a follower needs ClusterAction on the cluster, a consumer Read on each topic (one decision per topic)."""
    if not ctx.auth.enabled:
        return []
    names = [t["topic"] for t in body["topics"]]
    if body["replica_id"] >= 0:
        allowed = set(names) if ctx.auth.cluster(request, Operation.CLUSTER_ACTION) else set()
    else:
        allowed = ctx.auth.allowed_names(request, Operation.READ, ResourceType.TOPIC, names)
    denied = [t for t in body["topics"] if t["topic"] not in allowed]
    body["topics"] = [t for t in body["topics"] if t["topic"] in allowed]
    return [{"topic": t["topic"], "partitions": [
        {"partition_index": p["partition"], "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "high_watermark": -1,
         "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
         "preferred_read_replica": -1, "records": b""} for p in t["partitions"]]} for t in denied]


def handle_fetch(ctx: ReplicaDeps, request: Request, body: FetchRequest
                 ) -> FetchResponse | asyncio.Future[FetchResponse]:
    session: FetchSession | None = None
    full = True
    if request.version >= SESSION_VERSION and ctx.fetch_sessions is not None:
        error_code, session, full = ctx.fetch_sessions.resolve(
            body, ctx.replica_manager.clock.time_ms(), may_create=True)  # type: ignore[arg-type]
        if error_code != ErrorCode.NONE:
            return {"throttle_time_ms": 0, "error_code": error_code, "session_id": 0, "responses": []}
    replica_id = body["replica_id"]
    follower = replica_id >= 0
    # An incremental fetch reads only the session's changed partitions ("narrow"), unless the principal may not
    # read every topic of the session: then, as before sessions kept a changed set, all of them (the
    # unauthorized ones are answered with their error).
    auth = ctx.auth.enabled  # asked once: a follower's fetch of each replication round trip passes here
    narrow = session is not None and not full and (not auth or _may_read_all(ctx, request, session, replica_id))
    if session is not None and not full and not narrow:
        body["topics"] = session.full_topics()  # type: ignore[typeddict-item]
    # As Kafka: the unauthorized topics are answered along with the readable ones (at once if none is left).
    denied = _unauthorized(ctx, request, body) if auth else []
    if replica_id < 0 and ctx.quotas is not None:
        # A consumer under consumer_byte_rate is never handed more than its quota allows over one window (as
        # Kafka's getMaxValueInQuotaWindow); the first batch still goes out whole (min_one).
        quota_bytes = ctx.quotas.fetch_limit(request)
        if quota_bytes is not None:
            body["max_bytes"] = min(body["max_bytes"], max(int(quota_bytes), 1))
    if narrow and session is not None:
        # Only the partitions named or changed are visited (the session's changed set), not all of them.
        _update_session(ctx, session, replica_id)
        topics: Any = session.changed_topics()
    else:
        if follower:
            # A follower: its fetch offset is its log end offset. Recorded before reading, so the answer carries
            # the high watermark this very fetch may have advanced.
            rm = ctx.replica_manager
            with rm.high_watermark_moves_together():
                for t in body["topics"]:
                    for p in t["partitions"]:
                        rm.update_follower(t["topic"], p["partition"], replica_id, p["fetch_offset"],
                                           p["log_start_offset"], p["current_leader_epoch"])
        topics = body["topics"]
    left: set[TopicPartition] = set()
    responses, total, error, throttled_bytes = _read_all(ctx, body, request.version, topics, left)
    reads = _remote_reads(ctx, body, responses, request.version, topics) if ctx.remote is not None and not follower else []
    if reads:
        _record_throttled(ctx, throttled_bytes)
        # The session's answer is settled now, in the step of the read (the entries read from remote storage
        # are answered: they carry an error until filled in), so no change during the remote read is lost.
        return asyncio.ensure_future(_with_remote(ctx, reads, _response(responses + denied, session, full, left)))
    if narrow and session is not None:
        keys: list[Any] = [("fetch-session", id(session))] if session.partitions else []
    else:
        keys = [(t["topic"], p["partition"]) for t in body["topics"] for p in t["partitions"]]
    if body["max_wait_ms"] <= 0 or total >= body["min_bytes"] or error or not keys:
        if throttled_bytes:
            _record_throttled(ctx, throttled_bytes)
        return _response(responses + denied, session, full, left)
    future: Reply[FetchResponse] = Reply()
    delayed = DelayedFetch(ctx, body, request.version, future, denied)
    delayed.session, delayed.full, delayed.narrow = session, full, narrow
    if narrow and session is not None:
        # Woken by a change of any partition of the session (its waiter), not through the purgatory's watch
        # lists, which only time it out (every parked follower fetch of every replication round trip).
        session.waiter = delayed
        ctx.fetch_purgatory.time_out(delayed)
        return future
    # Everything was read just now, in this same step: the purgatory's checks while it starts watching would
    # schedule a read that can find nothing new (a wasted read per parked fetch, twice per replication round
    # trip). A change from here on wakes it as usual.
    delayed._check_due = True
    ctx.fetch_purgatory.try_complete_else_watch(delayed, keys)
    delayed._check_due = False
    return future
