"""The blocking API: the same async core driven by an event loop in a background thread.

One daemon thread per process runs the loop (like librdkafka's background thread); every blocking call hands a
coroutine to it and waits for the result. Delivery callbacks and rebalance listeners run on that thread, so keep
them short, and make no blocking call there (``flush()``, ``poll()``, ``commit()``, admin requests): it would
wait for the thread it blocks, so it raises :class:`BlockingCallOnLoopError` instead of deadlocking.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from moldau import consumer as _consumer
from moldau import producer as _producer
from moldau.config import ClientConfig
from moldau.consumer import (
    ConsumerGroupMetadata,
    ConsumerRebalanceListener,
    ConsumerRecord,
    OffsetAndMetadata,
    TopicPartition,
)
from moldau.errors import BlockingCallOnLoopError, KafkaTimeoutError
from moldau.loop_thread import background_loop, call, on_loop_thread, run
from moldau.loop_thread import refuse_on_loop as _refuse_on_loop
from moldau.producer import Headers, RecordMetadata
from moldau.sync_admin import AdminClient

log = logging.getLogger("moldau.client.sync")
DeliveryCallback = Callable[[BaseException | None, RecordMetadata | None], None]

class Producer:
    """Blocking producer: ``send()`` returns a ``concurrent.futures.Future``; ``produce()`` takes a callback."""

    #: Records waiting for the loop to take them over before ``send()``/``produce()`` block (max.block.ms).
    max_handover = 100_000

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._loop = background_loop()
        self._aio = _producer.Producer(config, **kwargs)
        self._pending: list[tuple[tuple[Any, ...], dict[str, Any],
                                  concurrent.futures.Future[RecordMetadata] | None, DeliveryCallback | None]] = []
        self._pending_lock = threading.Lock()
        self._drain_scheduled = False
        self._drain_task: asyncio.Future[None] | None = None
        # One hand-over at a time: a drain can suspend in send() (topic metadata unknown), and flush()/close()
        # must wait for it, or they find the pending list empty and return before those records were appended.
        # It also keeps records in produce() order across the scheduled drain and flush's own.
        self._drain_lock = asyncio.Lock()
        self._room = threading.Event()
        run(self._aio.start(), what="Producer()")

    @property
    def aio(self) -> _producer.Producer:
        """The async producer underneath (use it only from the client loop)."""
        return self._aio

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, topic: str, value: Any = None, key: Any = None, *, partition: int | None = None,
             timestamp_ms: int | None = None, headers: Headers = None,
             on_delivery: DeliveryCallback | None = None) -> concurrent.futures.Future[RecordMetadata]:
        """Queues a record; the future (and ``on_delivery(error, metadata)``) completes when it is acknowledged.
        With ``max_handover`` records not yet taken over by the loop it blocks up to ``max.block.ms``, then
        raises :class:`KafkaTimeoutError`."""
        future: concurrent.futures.Future[RecordMetadata] = concurrent.futures.Future()
        self._enqueue(topic, value, key, partition, timestamp_ms, headers, future, on_delivery)
        return future

    def _enqueue(self, topic: str, value: Any, key: Any, partition: int | None, timestamp_ms: int | None,
                 headers: Headers, future: concurrent.futures.Future[RecordMetadata] | None,
                 on_delivery: DeliveryCallback | None) -> None:
        txn = self._aio._txn
        if txn is not None and not txn.in_transaction:
            txn.check_can_send()  # raise here, as Kafka's send() does, not later in the future
        kwargs = {"partition": partition, "timestamp_ms": timestamp_ms, "headers": headers}
        deadline: float | None = None
        while True:
            with self._pending_lock:
                if len(self._pending) < self.max_handover:
                    self._pending.append(((topic, value, key), kwargs, future, on_delivery))
                    schedule = not self._drain_scheduled
                    if schedule:
                        self._drain_scheduled = True
                        self._room.clear()  # set again (under this lock) when the drain has emptied the list
                    break
            # The loop is behind (buffer.memory full, brokers away): block like Kafka's send(), for at most
            # max.block.ms, then fail this record without queueing it.
            _refuse_on_loop("send()/produce() on a full buffer")
            max_block_s = self._aio.config["max.block.ms"] / 1000
            if deadline is None:
                deadline = time.monotonic() + max_block_s
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._room.wait(remaining):
                raise KafkaTimeoutError(f"no room for the record in the buffer within max.block.ms "
                                        f"({max_block_s * 1000:.0f} ms)")
        if schedule:  # one hand-over per burst of calls, not per record
            self._loop.call_soon_threadsafe(self._start_drain)

    def produce(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
                on_delivery: DeliveryCallback | None = None, timestamp: int | None = None,
                headers: Headers = None) -> None:
        """confluent-kafka style: queue and forget; ``on_delivery(error, metadata)`` reports the outcome (without
        a callback a failed delivery is only logged)."""
        self._enqueue(topic, value, key, partition, timestamp, headers, None, on_delivery)

    def send_many(self, topic: str, values: Iterable[Any], *, keys: Iterable[Any] | None = None,
                  partition: int | None = None) -> concurrent.futures.Future[int]:
        """Fast path: hands many records over in one call; the future gives the count once all are acked."""
        values = list(values)
        keys = None if keys is None else list(keys)

        async def go() -> int:
            await self._drain_pending()
            inner = await self._aio.send_many(topic, values, keys=keys, partition=partition)
            return await inner

        return asyncio.run_coroutine_threadsafe(go(), self._loop)

    def send_many_partitions(self, topic: str, values: Mapping[int, Iterable[Any]]) -> concurrent.futures.Future[int]:
        """``send_many`` for many partitions of one topic in one call (``{partition: values}``, no keys): one
        hand-over to the client's loop instead of one per partition; the future gives the total count once all
        are acked."""
        by_partition = {partition: list(records) for partition, records in values.items()}

        async def go() -> int:
            await self._drain_pending()
            inner = await self._aio.send_many_partitions(topic, by_partition)
            return await inner

        return asyncio.run_coroutine_threadsafe(go(), self._loop)

    # ------------------------------------------------------------------ transactions
    def init_transactions(self) -> None:
        """Registers ``transactional.id`` (fencing older producers with it); once, before the first transaction."""
        run(self._aio.init_transactions(), what="init_transactions")

    def begin_transaction(self) -> None:
        call(self._aio.begin_transaction)

    def send_offsets_to_transaction(self, offsets: Mapping[Any, int | OffsetAndMetadata],
                                    group_metadata: ConsumerGroupMetadata | str) -> None:
        """Adds the consumer's offsets to the transaction (committed with it); ``group_metadata`` from
        ``Consumer.group_metadata()``."""
        async def go() -> None:
            await self._drain_pending()
            await self._aio.send_offsets_to_transaction(offsets, group_metadata)
        run(go(), what="send_offsets_to_transaction")

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flushes and commits the transaction; raises :class:`TransactionError` (``fatal`` or
        ``txn_requires_abort``)."""
        async def go() -> None:
            await self._drain_pending()
            await self._aio.commit_transaction(timeout)
        run(go(), what="commit_transaction")

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Aborts the transaction (records not yet sent fail with ``TransactionAbortedError``)."""
        async def go() -> None:
            await self._drain_pending()
            await self._aio.abort_transaction(timeout)
        run(go(), what="abort_transaction")

    def _start_drain(self) -> None:
        self._drain_task = asyncio.ensure_future(self._drain_pending())

    async def _drain_pending(self) -> None:
        async with self._drain_lock:
            await self._drain_locked()

    async def _drain_locked(self) -> None:
        while True:
            with self._pending_lock:
                batch, self._pending = self._pending, []
                if not batch:
                    self._drain_scheduled = False
                    self._room.set()
                    return
            aio = self._aio
            for (topic, value, key), kwargs, future, callback in batch:
                fire_and_forget = future is None and callback is None
                try:
                    if fire_and_forget and aio.append_nowait(topic, value, key, **kwargs):
                        continue  # no per-record future; a failed batch is logged by the producer
                    inner = aio.send_nowait(topic, value, key, **kwargs)
                    if inner is None:
                        inner = await aio.send(topic, value, key, **kwargs)
                except Exception as exc:
                    if fire_and_forget:
                        log.warning("delivery failed: %s", exc)
                    _settle(future, callback, exc, None)
                    continue
                if fire_and_forget:
                    inner.add_done_callback(_log_failure)
                else:
                    inner.add_done_callback(functools.partial(_from_inner, future=future, callback=callback))

    def flush(self, timeout: float | None = None) -> None:
        """Blocks until every record sent so far is acknowledged or failed."""
        async def go() -> None:
            await self._drain_pending()
            await self._aio.flush(timeout)
        run(go(), None if timeout is None else timeout + 1, what="flush")

    def close(self, timeout: float | None = None) -> None:
        async def go() -> None:
            await self._drain_pending()
            await self._aio.close(timeout)
        run(go(), what="close")


def _log_failure(inner: asyncio.Future[RecordMetadata]) -> None:
    if not inner.cancelled() and inner.exception() is not None:
        log.warning("delivery failed: %s", inner.exception())


def _from_inner(inner: asyncio.Future[RecordMetadata], future: concurrent.futures.Future[RecordMetadata] | None,
                callback: DeliveryCallback | None) -> None:
    if inner.cancelled():
        _settle(future, callback, concurrent.futures.CancelledError(), None)
    elif inner.exception() is not None:
        _settle(future, callback, inner.exception(), None)
    else:
        _settle(future, callback, None, inner.result())


def _settle(future: concurrent.futures.Future[RecordMetadata] | None, callback: DeliveryCallback | None,
            error: BaseException | None, metadata: RecordMetadata | None) -> None:
    if future is None:
        pass
    elif error is not None:
        future.set_exception(error)
    else:
        future.set_result(metadata)  # type: ignore[arg-type]
    if callback is not None:
        try:
            callback(error, metadata)
        except Exception:  # a user callback must not kill the client loop
            log.exception("delivery callback raised")


class Consumer:
    """Blocking consumer over :class:`moldau.aio.Consumer`: ``poll()``, iteration and every other method run to
    completion on the client loop (so the async core is only ever touched from its own thread)."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        background_loop()
        self._aio = _consumer.Consumer(config, **kwargs)
        run(self._aio.start(), what="Consumer()")

    @property
    def aio(self) -> _consumer.Consumer:
        """The async consumer underneath (use it only from the client loop)."""
        return self._aio

    @property
    def config(self) -> ClientConfig:
        return self._aio.config

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self, autocommit: bool = True) -> None:
        """Commits the positions (enable.auto.commit), leaves the group, closes the connections."""
        run(self._aio.close(autocommit), what="close")

    # ------------------------------------------------------------------ consuming
    def poll(self, timeout_ms: int = 1000, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records from every assigned partition (up to max.poll.records), waiting up to ``timeout_ms``."""
        batch = run(self._aio.getmany(timeout_ms=timeout_ms, max_records=max_records), what="poll")
        return [r for records in batch.values() for r in records]

    def getmany(self, *partitions: TopicPartition, timeout_ms: int = 0,
                max_records: int | None = None) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records per partition (of ``partitions`` only, when given), waiting up to ``timeout_ms``."""
        return run(self._aio.getmany(*partitions, timeout_ms=timeout_ms, max_records=max_records), what="getmany")

    def __iter__(self) -> Iterator[ConsumerRecord]:
        while True:
            yield from self.poll()

    # ------------------------------------------------------------------ subscription / assignment
    def subscribe(self, topics: Iterable[str] | None = None, pattern: str | None = None,
                  listener: ConsumerRebalanceListener | None = None) -> None:
        """Joins ``group.id`` for ``topics`` or every topic matching the regex ``pattern`` (on the next poll);
        the listener runs on the client loop's thread, inside ``poll()``."""
        call(self._aio.subscribe, None if topics is None else list(topics), pattern, listener)

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Manual assignment: no group membership (commits still go to group.id if one is set)."""
        call(self._aio.assign, list(partitions))

    def unsubscribe(self) -> None:
        call(self._aio.unsubscribe)

    def assignment(self) -> set[TopicPartition]:
        return call(self._aio.assignment)

    def subscription(self) -> set[str]:
        return call(self._aio.subscription)

    # ------------------------------------------------------------------ positions
    def seek(self, partition: TopicPartition, offset: int) -> None:
        call(self._aio.seek, partition, offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        call(self._aio.seek_to_beginning, *partitions)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        call(self._aio.seek_to_end, *partitions)

    def position(self, partition: TopicPartition) -> int:
        """The offset of the next record ``poll()`` returns (looked up by auto.offset.reset if unknown)."""
        return run(self._aio.position(partition), what="position")

    def committed(self, partition: TopicPartition) -> int | None:
        return run(self._aio.committed(partition), what="committed")

    def committed_offsets(self, partitions: Iterable[TopicPartition]
                          ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return run(self._aio.committed_offsets(list(partitions)), what="committed_offsets")

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return run(self._aio.beginning_offsets(list(partitions)), what="beginning_offsets")

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return run(self._aio.end_offsets(list(partitions)), what="end_offsets")

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]
                          ) -> dict[TopicPartition, tuple[int, int] | None]:
        """(offset, timestamp) of the first record at or after each timestamp; None when there is none."""
        return run(self._aio.offsets_for_times(dict(timestamps)), what="offsets_for_times")

    def highwater(self, partition: TopicPartition) -> int:
        return call(self._aio.highwater, partition)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """Group id, generation, member id, group instance id: for ``Producer.send_offsets_to_transaction``."""
        return call(self._aio.group_metadata)

    # ------------------------------------------------------------------ flow control
    def pause(self, *partitions: TopicPartition) -> None:
        call(self._aio.pause, *partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        call(self._aio.resume, *partitions)

    def paused(self) -> set[TopicPartition]:
        return call(self._aio.paused)

    # ------------------------------------------------------------------ commits
    def commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata | tuple[int, str]] | None = None,
               ) -> None:
        """Commits ``offsets`` (offset, (offset, metadata) or OffsetAndMetadata) or the current positions."""
        run(self._aio.commit(None if offsets is None else dict(offsets)), what="commit")

    def commit_async(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata | tuple[int, str]] | None = None,
                     ) -> concurrent.futures.Future[None]:
        """Starts a commit; the future gives its outcome (safe to call from a listener: it does not block)."""
        coro = self._aio.commit(None if offsets is None else dict(offsets))
        return asyncio.run_coroutine_threadsafe(coro, background_loop())

    # ------------------------------------------------------------------ metadata
    def topics(self) -> set[str]:
        return run(self._aio.topics(), what="topics")

    def partitions_for_topic(self, topic: str) -> set[int]:
        return run(self._aio.partitions_for_topic(topic), what="partitions_for_topic")


__all__ = ["AdminClient", "BlockingCallOnLoopError", "Consumer", "KafkaTimeoutError", "Producer", "background_loop",
           "call", "on_loop_thread", "run"]
