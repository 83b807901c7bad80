"""The topic-based remote log metadata manager (Kafka's TopicBasedRemoteLogMetadataManager): every broker's view
of what is in remote storage, kept in ``__remote_log_metadata``.

Like Kafka's, it is a client of the cluster: a producer (acks=all, idempotent) publishes each segment event to
the metadata partition of its data partition, and a consumer assigned every metadata partition replays all of
them into a :class:`RemoteLogMetadataCache`, on every broker. A published event is applied at once after its
acknowledgement; the replay applies it again, which the cache ignores (states only move forward, a deleted
segment id stays deleted). A new leader calls :meth:`wait_caught_up` before it acts on a partition, so it carries
on from the last event its predecessor wrote: no segment copied twice unnoticed, no copy left half done.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from moldau.storage.remote.metadata import (
    METADATA_TOPIC,
    MetadataEvent,
    RemoteLogMetadataCache,
    decode_event,
    encode_event,
    metadata_partition,
    record_key,
)
from moldau.tasks import cancel_and_wait

if TYPE_CHECKING:  # the client library loads when the manager starts: the broker imports only its connection layer
    from moldau.aio import Consumer, Producer

log = logging.getLogger(__name__)

POLL_TIMEOUT_MS = 200


class RemoteLogMetadataManager(Protocol):
    """What the remote log manager needs of its metadata (Kafka's RemoteLogMetadataManager)."""

    cache: RemoteLogMetadataCache

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def publish(self, event: MetadataEvent) -> None: ...

    async def wait_caught_up(self, topic: str, partition: int, timeout_s: float = 30.0) -> bool: ...


class InMemoryRemoteLogMetadataManager:
    """Metadata kept in this process only: for one broker whose remote storage outlives nothing (tests, tools)."""

    def __init__(self, cache: RemoteLogMetadataCache | None = None) -> None:
        self.cache = cache if cache is not None else RemoteLogMetadataCache()
        self.events: list[MetadataEvent] = []

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def publish(self, event: MetadataEvent) -> None:
        self.events.append(event)
        self.cache.apply(event)

    async def wait_caught_up(self, topic: str, partition: int, timeout_s: float = 30.0) -> bool:
        return True


class TopicBasedRemoteLogMetadataManager:
    def __init__(self, bootstrap: str, num_partitions: int, ensure_topic: Callable[[], Awaitable[None]],
                 client_configs: dict[str, object] | None = None) -> None:
        self.bootstrap = bootstrap
        self.num_partitions = num_partitions
        self.cache = RemoteLogMetadataCache()
        self._ensure_topic = ensure_topic
        self._client_configs = dict(client_configs or {})
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._task: asyncio.Task[None] | None = None
        self._positions: dict[int, int] = {}
        self._progress = asyncio.Event()
        self.started = asyncio.Event()

    async def start(self) -> None:
        from moldau.aio import Consumer, Producer, TopicPartition

        await self._ensure_topic()
        common = {"bootstrap.servers": self.bootstrap, "client.id": "remote-log-metadata", **self._client_configs}
        self._producer = Producer({**common, "acks": "all", "enable.idempotence": True, "linger.ms": 0})
        await self._producer.start()
        self._consumer = Consumer({**common, "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        await self._consumer.start()
        self._consumer.assign([TopicPartition(METADATA_TOPIC, p) for p in range(self.num_partitions)])
        self._task = asyncio.get_running_loop().create_task(self._consume())
        self.started.set()

    async def close(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
        if self._consumer is not None:
            with contextlib.suppress(Exception):
                await self._consumer.close(autocommit=False)
        if self._producer is not None:
            with contextlib.suppress(Exception):
                await self._producer.close(timeout=5)

    async def _consume(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        while True:
            try:
                batches = await consumer.getmany(timeout_ms=POLL_TIMEOUT_MS)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the cluster is restarting, a leader moved: the consumer retries
                log.warning("reading %s: %r", METADATA_TOPIC, exc)
                await asyncio.sleep(1)
                continue
            for tp, records in batches.items():
                for record in records:
                    if record.value is None:
                        continue
                    try:
                        self.cache.apply(decode_event(bytes(record.value)))
                    except ValueError as exc:
                        log.warning("skipping %s-%d@%d: %s", tp.topic, tp.partition, record.offset, exc)
                    self._positions[tp.partition] = record.offset + 1
            self._progress.set()
            self._progress = asyncio.Event()

    async def publish(self, event: MetadataEvent) -> None:
        """Writes the event (acks=all) and applies it; raises on failure (the caller retries its step)."""
        assert self._producer is not None
        sid = event.segment_id
        partition = metadata_partition(sid.topic, sid.partition, self.num_partitions)
        future = await self._producer.send(METADATA_TOPIC, value=encode_event(event), key=record_key(sid),
                                           partition=partition)
        metadata = await future
        self.cache.apply(event)
        log.debug("published %s at %s-%d@%d", event, METADATA_TOPIC, partition, metadata.offset)

    async def wait_caught_up(self, topic: str, partition: int, timeout_s: float = 30.0) -> bool:
        """True once the replay reached the end of the data partition's metadata partition as it is now."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            async with asyncio.timeout(timeout_s):  # not wait_for: see moldau.tasks
                await self.started.wait()
        except TimeoutError:
            return False
        assert self._consumer is not None
        from moldau.aio import TopicPartition

        mp = metadata_partition(topic, partition, self.num_partitions)
        tp = TopicPartition(METADATA_TOPIC, mp)
        end = (await self._consumer.end_offsets([tp]))[tp]
        while self._positions.get(mp, 0) < end:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._progress.wait()
        return True
