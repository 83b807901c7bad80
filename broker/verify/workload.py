"""The verifiable workload, on Moldau's own asyncio client: the topic, a paced idempotent acks=all producer of
unique sequential values, a consumer group reading everything, and the final full read after the run.

Every outcome goes into a History; nothing here judges it (checker.py does).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from moldau.aio import AdminClient, Consumer, NewTopic, Producer, RecordMetadata, TopicPartition

from .history import FINAL_READ, History, make_value

log = logging.getLogger("moldau.verify")

RETRY_S = 0.5

# How every client of a run connects: bootstrap.servers plus the --command-config settings (security.protocol,
# sasl.*, ssl.*), in Kafka's names.
Connect = Mapping[str, Any]


@dataclass(slots=True)
class Counters:
    """What the progress line shows; the producer and consumers update it."""
    sent: int = 0
    acked: int = 0
    errors: int = 0
    consumer_errors: int = 0
    faults: dict[str, int] = field(default_factory=dict)


async def create_topic(connect: Connect, topic: str, partitions: int, replication_factor: int, min_isr: int,
                       timeout_s: float = 60.0, configs: dict[str, str] | None = None) -> None:
    """Creates the topic (refusing one that exists: its old records would spoil the history) with ``configs``
    and waits for a leader on every partition."""
    async with AdminClient({**connect, "client.id": "moldau-verify"}) as admin:
        if topic in await admin.list_topics():
            raise ValueError(f"--topic: {topic} already exists; the check needs a new topic")
        await admin.create_topics([NewTopic(topic, partitions, replication_factor,
                                            config={"min.insync.replicas": str(min_isr), **(configs or {})})])
        deadline = time.monotonic() + timeout_s
        while not await partitions_led(admin, topic, partitions):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: not every partition had a leader within {timeout_s:.0f}s")
            await asyncio.sleep(RETRY_S)


async def partitions_led(admin: AdminClient, topic: str, partitions: int, full_isr: bool = False) -> bool:
    """True when each of the topic's partitions has a leader (and, with full_isr, every replica in sync)."""
    try:
        described = (await admin.describe_topics([topic]))[0]
    except Exception as exc:  # noqa: BLE001 - a broker may be down or the metadata stale: ask again
        log.debug("describe %s: %s", topic, exc)
        return False
    parts = described.partitions
    return len(parts) == partitions and all(
        p.leader >= 0 and (not full_isr or set(p.isr) == set(p.replicas)) for p in parts)


class VerifiableProducer:
    """Sends ``<id>:0``, ``<id>:1``, ... at ``rate`` records/s, round-robin over the partitions, and records every
    attempt, acknowledgement and failure."""

    def __init__(self, connect: Connect, topic: str, partitions: int, rate: float, history: History,
                 counters: Counters, producer_id: str, config: dict[str, Any] | None = None) -> None:
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.history, self.counters, self.producer_id = history, counters, producer_id
        # Idempotent acks=all is the guarantee under test; a long delivery timeout rides out failovers.
        self.config: dict[str, Any] = {**connect, "client.id": "moldau-verify-producer",
                                       "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                                       "delivery.timeout.ms": 120000, "request.timeout.ms": 10000,
                                       "metadata.max.age.ms": 5000, **(config or {})}

    def _done(self, value: bytes, future: asyncio.Future[RecordMetadata]) -> None:
        if future.cancelled():
            self.history.fail(value, "cancelled")
            self.counters.errors += 1
        elif (exc := future.exception()) is not None:
            self.history.fail(value, f"{type(exc).__name__}: {exc}")
            self.counters.errors += 1
        else:
            meta = future.result()
            self.history.ack(value, meta.partition, meta.offset)
            self.counters.acked += 1

    async def run(self, stop: asyncio.Event, flush_timeout_s: float = 150.0) -> None:
        producer = Producer(self.config)
        await producer.start()
        loop = asyncio.get_running_loop()
        t0, n = loop.time(), 0
        try:
            while not stop.is_set():
                due = int((loop.time() - t0) * self.rate) + 1
                while n < due and not stop.is_set():
                    value = make_value(self.producer_id, n)
                    partition = n % self.partitions
                    self.history.attempt(value, partition)
                    future = await producer.send(self.topic, value, partition=partition)
                    future.add_done_callback(functools.partial(self._done, value))
                    n += 1
                    self.counters.sent = n
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), max(0.0, t0 + n / self.rate - loop.time()))
        finally:
            with contextlib.suppress(TimeoutError):
                await producer.close(timeout=flush_timeout_s)
        await asyncio.sleep(0)  # let the last done-callbacks run


class GroupReader:
    """One consumer of the group: reads everything assigned to it, recording (partition, offset, value)."""

    def __init__(self, name: str, connect: Connect, topic: str, group: str, history: History,
                 counters: Counters) -> None:
        self.name, self.topic, self.history, self.counters = name, topic, history, counters
        self.config = {**connect, "group.id": group, "client.id": name,
                       "auto.offset.reset": "earliest", "enable.auto.commit": True,
                       "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000, "metadata.max.age.ms": 5000}
        self.high: dict[int, int] = {}  # partition -> next offset after the highest one read

    async def run(self, stop: asyncio.Event) -> None:
        consumer = Consumer(self.config)
        try:
            await consumer.start()
            consumer.subscribe([self.topic])
            while not stop.is_set():
                try:
                    batches = await consumer.getmany(timeout_ms=500, max_records=5000)
                except Exception as exc:  # noqa: BLE001 - faults make reads fail for a while: keep reading
                    self.counters.consumer_errors += 1
                    log.debug("%s: %s", self.name, exc)
                    await asyncio.sleep(RETRY_S)
                    continue
                for records in batches.values():
                    self.history.read(self.name, [(r.partition, r.offset, r.value) for r in records])
                    if records:
                        last = records[-1]
                        self.high[last.partition] = max(self.high.get(last.partition, 0), last.offset + 1)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(consumer.close(), 15)


async def end_offsets(connect: Connect, topic: str, partitions: int) -> dict[int, int]:
    async with Consumer({**connect, "client.id": "moldau-verify-offsets"}) as consumer:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = await consumer.end_offsets(tps)
    return {tp.partition: offset for tp, offset in ends.items()}


async def final_read(connect: Connect, topic: str, partitions: int, history: History, timeout_s: float) -> bool:
    """Reads every partition from its beginning to its high watermark into history.reads[FINAL_READ]; False when
    that did not finish within ``timeout_s`` (what was read is kept: the checker counts the rest as lost)."""
    deadline = time.monotonic() + timeout_s
    async with Consumer({**connect, "client.id": "moldau-verify-final", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False}) as consumer:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = await consumer.end_offsets(tps)
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        history.reads.setdefault(FINAL_READ, [])
        remaining = {tp for tp in tps if ends[tp] > 0}
        while remaining:
            if time.monotonic() > deadline:
                log.warning("final read: partitions %s not read to their end within %.0fs",
                            sorted(tp.partition for tp in remaining), timeout_s)
                return False
            try:
                batches = await consumer.getmany(timeout_ms=500, max_records=10000)
            except Exception as exc:  # noqa: BLE001 - transient (a leader moving): retry until the deadline
                log.debug("final read: %s", exc)
                await asyncio.sleep(RETRY_S)
                continue
            for tp, records in batches.items():
                history.read(FINAL_READ, [(r.partition, r.offset, r.value) for r in records if r.offset < ends[tp]])
                if records and records[-1].offset >= ends[tp] - 1:
                    remaining.discard(tp)
    return True
