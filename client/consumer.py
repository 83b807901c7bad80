"""The asyncio consumer: group subscription or manual assignment, prefetching fetches, commits.

    consumer = Consumer({"bootstrap.servers": "127.0.0.1:9092", "group.id": "g"})   # or bootstrap_servers=...
    await consumer.start()
    consumer.subscribe(["t"])
    async for record in consumer: ...
    batches = await consumer.getmany(timeout_ms=1000)   # {TopicPartition: [ConsumerRecord, ...]}
    await consumer.close()

Prefetching: as soon as records are handed out, the next Fetch for the partitions without buffered data is sent,
so it is in flight while the application processes the batch. Positions are the offsets of the next record the
application will see; ``commit()`` without arguments commits them.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from moldau.cluster import Cluster
from moldau.config import ClientConfig, consumer_config
from moldau.errors import ClientError, ConfigError, KafkaConnectionError, KafkaError, RequestTimeoutError
from moldau.fetcher import (
    EARLIEST,
    LATEST,
    ConsumerRecord,
    Fetched,
    Fetcher,
    PartitionRecords,
    PartitionState,
    TopicPartition,
)
from moldau.group import ConsumerGroupMetadata, GroupMember, OffsetAndMetadata
from moldau.membership_manager import ConsumerMembershipManager
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.metadata import METADATA
from moldau.tasks import cancel_and_wait

__all__ = ["Consumer", "ConsumerRecord", "TopicPartition", "OffsetAndMetadata", "ConsumerRebalanceListener",
           "NoOffsetForPartitionError", "ConsumerGroupMetadata"]

log = logging.getLogger("moldau.client.consumer")


class NoOffsetForPartitionError(ClientError):
    """auto.offset.reset=none and the partition has no committed offset (or the position is out of range)."""


class ConsumerRebalanceListener:
    """Override any of these (plain or async methods); they run inside ``getmany``/iteration."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> Any:
        pass

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> Any:
        pass

    def on_partitions_lost(self, lost: set[TopicPartition]) -> Any:
        return self.on_partitions_revoked(lost)  # Kafka's default: lost = revoked without commit


async def _call(fn: Any, arg: Any) -> None:
    result = fn(arg)
    if inspect.isawaitable(result):
        await result


class Consumer:
    """Asynchronous Kafka consumer; settings by Kafka names (dict) or as keyword arguments."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.config: ClientConfig = consumer_config(config, **kwargs)
        self._cluster = Cluster(self.config)
        self._fetcher = Fetcher(self._cluster, self.config)
        self._states: dict[TopicPartition, PartitionState] = {}
        self._buffer: dict[TopicPartition, PartitionRecords] = {}
        self._fetch_task: asyncio.Task[tuple[Fetched, set[TopicPartition]]] | None = None
        self._topics: list[str] = []
        self._pattern: re.Pattern[str] | None = None
        self._listener: ConsumerRebalanceListener | None = None
        self._manual = False
        self._group: GroupMember | ConsumerMembershipManager | None = None
        self._auto_commit: asyncio.Task[None] | None = None
        self._committed_positions: dict[TopicPartition, int] = {}
        # When the pattern was last matched against the cluster's topics; None: never (match on the next poll).
        # Not 0.0: time.monotonic() counts from boot, so on a machine up for less than metadata.max.age.ms a
        # 0.0 sentinel looked "checked recently" and the first match waited until the clock passed it.
        self._pattern_checked: float | None = None
        self._started = False
        self._closed = False

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        await self._cluster.start()
        if self.config.get("group.id") is not None:
            member = ConsumerMembershipManager if self.config["group.protocol"] == "consumer" else GroupMember
            self._group = member(self._cluster, self.config, lambda: list(self._topics), self._revoke)
            if self.config["enable.auto.commit"]:
                self._auto_commit = asyncio.get_running_loop().create_task(self._auto_commit_loop())
        self._started = True

    async def __aenter__(self) -> Consumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self, autocommit: bool = True) -> None:
        if self._closed:
            return
        self._closed = True
        await cancel_and_wait([t for t in (self._auto_commit, self._fetch_task) if t is not None])
        if self._group is not None:
            if autocommit and self.config["enable.auto.commit"]:
                await self._commit_positions(quiet=True)
            await self._group.leave()
        await self._cluster.close()

    # ------------------------------------------------------------------ subscription / assignment
    def subscribe(self, topics: Iterable[str] | None = None, pattern: str | None = None,
                  listener: ConsumerRebalanceListener | None = None) -> None:
        """Joins ``group.id`` for ``topics`` or every topic matching the regex ``pattern`` (on the next poll)."""
        if self.config.get("group.id") is None:
            raise ConfigError("group.id", "subscribe() needs a group.id (use assign() without a group)")
        if self._manual:
            raise ClientError("subscribe() after assign(): call unsubscribe() first")
        if (topics is None) == (pattern is None):
            raise ValueError("subscribe() takes topics or a pattern, not both")
        self._pattern = re.compile(pattern) if pattern is not None else None
        self._topics = sorted(set(topics)) if topics is not None else []
        self._pattern_checked = None
        self._listener = listener
        if topics is not None:
            self._cluster.add_topics(self._topics)

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Manual assignment: no group membership (commits still go to group.id if one is set)."""
        if self._topics or self._pattern is not None:
            raise ClientError("assign() after subscribe(): call unsubscribe() first")
        self._manual = True
        wanted = {TopicPartition(*tp) for tp in partitions}
        self._set_assignment(wanted)
        self._cluster.add_topics({tp.topic for tp in wanted})

    def unsubscribe(self) -> None:
        self._topics, self._pattern, self._manual = [], None, False
        self._set_assignment(set())

    def assignment(self) -> set[TopicPartition]:
        return set(self._states)

    def subscription(self) -> set[str]:
        return set(self._topics)

    def _set_assignment(self, wanted: set[TopicPartition]) -> None:
        for tp in set(self._states) - wanted:
            del self._states[tp]
            self._buffer.pop(tp, None)
        for tp in wanted - set(self._states):
            self._states[tp] = PartitionState()

    async def _revoke(self, revoked: set[TopicPartition], lost: bool) -> None:
        if not lost and self._group is not None and self.config["enable.auto.commit"] and revoked:
            await self._commit_positions(quiet=True)
        if self._listener is not None and revoked:
            fn = self._listener.on_partitions_lost if lost else self._listener.on_partitions_revoked
            await _call(fn, set(revoked))
        self._set_assignment(set(self._states) - revoked)

    async def _refresh_pattern(self) -> None:
        if self._pattern is None:
            return
        now = time.monotonic()
        checked = self._pattern_checked
        if checked is not None and now - checked < self.config["metadata.max.age.ms"] / 1000:
            return
        pattern = self._pattern
        # The cluster cache holds only the topics we use: ask for all of them here.
        try:
            conn = await self._cluster.any_connection()
            version = conn.version_for(METADATA, 12)
            response = await conn.send(METADATA, {"topics": [] if version == 0 else None,
                                                  "allow_auto_topic_creation": False}, version)
        except (KafkaConnectionError, RequestTimeoutError) as exc:  # as Kafka's poll(): retried, not raised
            log.info("matching pattern %s against the topics failed (%s); retrying on the next poll",
                     pattern.pattern, exc)
            return
        if pattern is not self._pattern:  # subscribe() changed it meanwhile: the next poll matches the new one
            return
        # Marked only once matched: a failed request (timeout under load, broker away) is retried on the next
        # poll, not metadata.max.age.ms later.
        self._pattern_checked = now
        skip_internal = self.config["exclude.internal.topics"]
        names = sorted(n for t in response["topics"] if (n := t["name"]) is not None  # None: asked by id
                       and pattern.fullmatch(n) and not (t.get("is_internal") and skip_internal))
        if names != self._topics:
            self._topics = names
            self._cluster.add_topics(names)

    async def _ensure_assignment(self) -> None:
        if self._group is None or self._manual:
            return
        if self._pattern is not None:
            await self._refresh_pattern()
        if not self._topics:
            return
        assigned = await self._group.ensure_active()
        if assigned is not None:
            self._set_assignment(assigned)  # partitions kept across a cooperative rebalance keep their position
            if self._listener is not None:
                await _call(self._listener.on_partitions_assigned, set(self._group.last_added))

    # ------------------------------------------------------------------ positions
    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._state(partition).seek(offset)
        self._buffer.pop(TopicPartition(*partition), None)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        for tp in partitions or tuple(self._states):
            self._state(tp).seek(None, EARLIEST)
            self._buffer.pop(TopicPartition(*tp), None)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        for tp in partitions or tuple(self._states):
            self._state(tp).seek(None, LATEST)
            self._buffer.pop(TopicPartition(*tp), None)

    async def position(self, partition: TopicPartition) -> int:
        st = self._state(partition)
        if st.position is None:
            await self._reset_positions()
        assert st.position is not None
        return st.position

    async def committed(self, partition: TopicPartition) -> int | None:
        om = await self.committed_offsets([partition])
        value = om.get(TopicPartition(*partition))
        return None if value is None else value.offset

    async def committed_offsets(self, partitions: Iterable[TopicPartition]
                                ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return await self._require_group().fetch_committed([TopicPartition(*tp) for tp in partitions])

    @property
    def _api_timeout_s(self) -> float:
        return float(self.config["default.api.timeout.ms"]) / 1000

    async def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        res = await self._fetcher.list_offsets([TopicPartition(*tp) for tp in partitions], EARLIEST,
                                               self._api_timeout_s)
        return {tp: off for tp, (off, _) in res.items()}

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        res = await self._fetcher.list_offsets([TopicPartition(*tp) for tp in partitions], LATEST,
                                               self._api_timeout_s)
        return {tp: off for tp, (off, _) in res.items()}

    async def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]
                                ) -> dict[TopicPartition, tuple[int, int] | None]:
        """(offset, timestamp) of the first record at or after each timestamp; None when there is none."""
        wanted = {TopicPartition(*tp): ts for tp, ts in timestamps.items()}
        res = await self._fetcher.list_offsets(list(wanted), wanted, self._api_timeout_s)
        return {tp: (off, ts) if off >= 0 else None for tp, (off, ts) in res.items()}

    def _state(self, partition: TopicPartition | tuple[str, int]) -> PartitionState:
        st = self._states.get(TopicPartition(*partition))
        if st is None:
            raise ClientError(f"partition {partition[0]}-{partition[1]} is not assigned to this consumer")
        return st

    async def _reset_positions(self) -> None:
        missing = [tp for tp, st in self._states.items() if st.position is None]
        if not missing:
            return
        explicit = {tp for tp in missing if self._states[tp].reset_to is not None}
        if self._group is not None and explicit != set(missing):
            committed = await self._group.fetch_committed([tp for tp in missing if tp not in explicit])
            for tp, om in committed.items():
                if om is not None and tp in self._states:
                    self._states[tp].seek(om.offset)
                    self._committed_positions[tp] = om.offset
        policy = {"earliest": EARLIEST, "latest": LATEST}.get(self.config["auto.offset.reset"])
        by_target: dict[int, list[TopicPartition]] = {}
        for tp in missing:
            st = self._states.get(tp)
            if st is None or st.position is not None:
                continue
            target = st.reset_to if st.reset_to is not None else policy
            if target is None:
                raise NoOffsetForPartitionError(f"no offset for {tp.topic}-{tp.partition} and auto.offset.reset=none")
            by_target.setdefault(target, []).append(tp)
        for target, tps in by_target.items():
            for tp, (offset, _) in (await self._fetcher.list_offsets(tps, target)).items():
                st = self._states.get(tp)
                if st is not None and st.position is None:
                    st.seek(offset)

    # ------------------------------------------------------------------ consuming
    def pause(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._state(tp).paused = True

    def resume(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._state(tp).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, st in self._states.items() if st.paused}

    def _start_fetch(self) -> bool:
        """Starts the next fetch if none is in flight and some partition wants one; True if it did."""
        if self._fetch_task is not None or self._closed:
            return False
        # Fetch ahead once a partition has less than one poll's worth buffered, so the next batch is on its way
        # while the application works through the last one (fetch_offset runs ahead of position).
        low = self.config["max.poll.records"]
        buffered = self._buffer
        fetchable: dict[TopicPartition, PartitionState] = {}
        for tp, st in self._states.items():  # one pass: it runs on every poll, over every assigned partition
            if st.paused or st.position is None:
                continue
            buf = buffered.get(tp)
            if buf is not None and len(buf) >= low:
                continue
            if st.fetch_offset is None:
                st.fetch_offset = st.position
            fetchable[tp] = st
        if not fetchable:
            return False
        self._fetch_task = asyncio.get_running_loop().create_task(self._fetcher.fetch(fetchable))
        return True

    def _absorb(self, fetched: Fetched, out_of_range: set[TopicPartition]) -> None:
        for tp, (epoch, batches) in fetched.items():
            st = self._states.get(tp)
            if st is None or st.epoch != epoch:
                continue
            self._buffer_of(tp).add(batches)
        for tp in out_of_range:
            st = self._states.get(tp)
            if st is not None:
                log.info("offset %s out of range for %s-%d: applying auto.offset.reset", st.position, *tp)
                st.seek(None)

    def _buffer_of(self, tp: TopicPartition) -> PartitionRecords:
        buf = self._buffer.get(tp)
        if buf is None:
            f = self._fetcher
            buf = self._buffer[tp] = PartitionRecords(tp.topic, tp.partition, f.key_deserializer,
                                                      f.value_deserializer, check_crcs=f.check_crcs)
        return buf

    def _drain(self, max_records: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        for tp in list(self._buffer):
            if max_records <= 0:
                break
            st = self._states.get(tp)
            buf = self._buffer[tp]
            if st is None or st.position is None:
                del self._buffer[tp]
                continue
            if st.paused:
                continue
            try:
                taken = buf.take(max_records, st.position)  # decodes only what it hands out
            except Exception:
                if out:  # what was taken goes out; this partition's error comes with the next call
                    break
                raise
            if taken:
                out[tp] = taken
                st.position = taken[-1].offset + 1
                max_records -= len(taken)
            if not len(buf):
                del self._buffer[tp]
                # Everything fetched has been handed out: the position passes what the answers held after the
                # last record (control batches, aborted or compacted-away records), as Kafka's consumer does.
                st.position = max(st.position, buf.end_offset)
                st.pass_skipped()  # control batches or aborted transactions fetched after what it just returned
        return out

    async def getmany(self, *partitions: TopicPartition, timeout_ms: int = 0,
                      max_records: int | None = None) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records per partition (at most ``max_records``, default max.poll.records), waiting up to timeout_ms."""
        if not self._started:
            raise ClientError("call start() first")
        limit = max_records or self.config["max.poll.records"]
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            await self._ensure_assignment()
            await self._reset_positions()
            self._take_fetch_result()
            if self._buffer and self._start_fetch():
                # The next fetch goes out before this call decodes the records it hands out, so the brokers read
                # while we decode (two loop turns take it to the sockets).
                await asyncio.sleep(0)
                await asyncio.sleep(0)
            out = self._drain(limit)
            if partitions:
                wanted = {TopicPartition(*tp) for tp in partitions}
                for tp in [tp for tp in out if tp not in wanted]:  # put back, in order
                    records, st = out.pop(tp), self._states[tp]
                    buf = self._buffer_of(tp)
                    buf.put_back(records)
                    if st.position is not None:  # where the drain had put it: past what followed the records
                        buf.end_offset = max(buf.end_offset, st.position)
                    st.position = records[0].offset
            self._start_fetch()  # prefetch while the caller processes `out`
            remaining = deadline - time.monotonic()
            if out or remaining <= 0:
                return out
            await self._wait_fetch(remaining)

    def _take_fetch_result(self) -> None:
        task = self._fetch_task
        if task is None or not task.done():
            return
        self._fetch_task = None
        fetched, oor = task.result()
        self._absorb(fetched, oor)

    async def _wait_fetch(self, timeout_s: float) -> None:
        task = self._fetch_task
        if task is None:
            # Nothing fetchable (no assignment yet, all paused): wait a little, then look again.
            await asyncio.sleep(min(timeout_s, self.config["retry.backoff.ms"] / 1000))
            return
        await asyncio.wait([task], timeout=timeout_s)

    async def getone(self) -> ConsumerRecord:
        while True:
            batch = await self.getmany(timeout_ms=1000, max_records=1)
            for records in batch.values():
                return records[0]

    def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[ConsumerRecord]:
        while not self._closed:
            batch = await self.getmany(timeout_ms=1000)
            for records in batch.values():
                for record in records:
                    yield record

    # ------------------------------------------------------------------ commits
    def _require_group(self) -> GroupMember | ConsumerMembershipManager:
        if self._group is None:
            raise ConfigError("group.id", "committing or reading committed offsets needs a group.id")
        return self._group

    async def commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata | tuple[int, str]] | None = None,
                     ) -> None:
        """Commits ``offsets`` (offset, (offset, metadata) or OffsetAndMetadata) or the current positions."""
        group = self._require_group()
        if offsets is None:
            prepared = {tp: OffsetAndMetadata(st.position) for tp, st in self._states.items()
                        if st.position is not None}
        else:
            prepared = {}
            for tp, value in offsets.items():
                if isinstance(value, OffsetAndMetadata):
                    prepared[TopicPartition(*tp)] = value
                elif isinstance(value, tuple):
                    prepared[TopicPartition(*tp)] = OffsetAndMetadata(value[0], value[1])
                else:
                    prepared[TopicPartition(*tp)] = OffsetAndMetadata(int(value))
        if not prepared:
            return
        await group.commit(prepared, generation=not self._manual)
        for tp, om in prepared.items():
            self._committed_positions[tp] = om.offset

    def commit_async(self, offsets: Mapping[TopicPartition, Any] | None = None) -> asyncio.Task[None]:
        """Starts a commit and returns its task (await it, or add a done callback, to see the outcome)."""
        return asyncio.get_running_loop().create_task(self.commit(offsets))

    async def _commit_positions(self, quiet: bool) -> None:
        changed = {tp: st.position for tp, st in self._states.items()
                   if st.position is not None and self._committed_positions.get(tp) != st.position}
        if not changed:
            return
        try:
            await self.commit(changed)
        except (KafkaError, ClientError, OSError) as exc:
            if not quiet:
                raise
            log.warning("auto-commit failed: %s", exc)

    async def _auto_commit_loop(self) -> None:
        interval = self.config["auto.commit.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            group = self._group
            if group is not None and not group.needs_join and (self._manual or group.generation >= 0):
                await self._commit_positions(quiet=True)

    # ------------------------------------------------------------------ misc
    def group_metadata(self) -> ConsumerGroupMetadata:
        """The group id, generation, member id and group instance id, for a transactional producer's
        ``send_offsets_to_transaction`` (KIP-447 fencing of zombie members)."""
        group = self._require_group()
        return ConsumerGroupMetadata(group.group_id, group.generation, group.member_id, group.instance_id)

    def highwater(self, partition: TopicPartition) -> int:
        return self._state(partition).high_watermark

    async def topics(self) -> set[str]:
        await self._cluster.refresh_metadata(None)
        return set(self._cluster.topics)

    async def partitions_for_topic(self, topic: str) -> set[int]:
        return set(await self._cluster.wait_for_topic(topic, self.config["request.timeout.ms"] / 1000))


def error_name(code: int) -> str:
    return ErrorCode.for_code(code).name
