"""The blocking API: the same async core driven by an event loop in a background thread.

One daemon thread per process runs the loop (like librdkafka's background thread); every blocking call hands a
coroutine to it and waits for the result. Delivery callbacks run on that thread, so keep them short.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, TypeVar

from moldau import admin as _admin
from moldau import consumer as _consumer
from moldau import producer as _producer
from moldau.consumer import ConsumerRecord
from moldau.producer import Headers, RecordMetadata

T = TypeVar("T")
log = logging.getLogger("moldau.client.sync")
DeliveryCallback = Callable[[BaseException | None, RecordMetadata | None], None]

_MAX_HANDOVER = 100_000  # records queued for the loop before send() blocks
_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def background_loop() -> asyncio.AbstractEventLoop:
    """The process-wide client loop, started on first use."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="moldau-client-loop", daemon=True)
            thread.start()
            _loop = loop
        return _loop


def run(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Runs ``coro`` on the client loop and blocks for its result (cancels it on timeout)."""
    future = asyncio.run_coroutine_threadsafe(coro, background_loop())
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise TimeoutError(f"no result within {timeout}s") from None


class Producer:
    """Blocking producer: ``send()`` returns a ``concurrent.futures.Future``; ``produce()`` takes a callback."""

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
        run(self._aio.start())

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
        """Queues a record; the future (and ``on_delivery(error, metadata)``) completes when it is acknowledged."""
        future: concurrent.futures.Future[RecordMetadata] = concurrent.futures.Future()
        self._enqueue(topic, value, key, partition, timestamp_ms, headers, future, on_delivery)
        return future

    def _enqueue(self, topic: str, value: Any, key: Any, partition: int | None, timestamp_ms: int | None,
                 headers: Headers, future: concurrent.futures.Future[RecordMetadata] | None,
                 on_delivery: DeliveryCallback | None) -> None:
        kwargs = {"partition": partition, "timestamp_ms": timestamp_ms, "headers": headers}
        with self._pending_lock:
            self._pending.append(((topic, value, key), kwargs, future, on_delivery))
            schedule = not self._drain_scheduled
            self._drain_scheduled = True
            backlog = len(self._pending)
        if schedule:  # one hand-over per burst of calls, not per record
            self._room.clear()
            self._loop.call_soon_threadsafe(self._start_drain)
        if backlog >= _MAX_HANDOVER:  # the loop is behind (buffer.memory full): block like Kafka's send()
            self._room.wait(self._aio.config["max.block.ms"] / 1000)

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
        run(go(), None if timeout is None else timeout + 1)

    def close(self, timeout: float | None = None) -> None:
        async def go() -> None:
            await self._drain_pending()
            await self._aio.close(timeout)
        run(go())


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


class AdminClient:
    """Blocking AdminClient: every method of :class:`moldau.aio.AdminClient`, run to completion."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        background_loop()
        self._aio = _admin.AdminClient(config, **kwargs)
        run(self._aio.start())

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        run(self._aio.close())

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._aio, name)
        if not asyncio.iscoroutinefunction(method):
            return method

        def call(*args: Any, **kwargs: Any) -> Any:
            return run(method(*args, **kwargs))
        call.__doc__ = method.__doc__
        return call


class Consumer:
    """Blocking consumer over :class:`moldau.aio.Consumer`: ``poll()``, iteration, and every other method run to
    completion on the client loop (so the async core is only ever touched from its own thread)."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        background_loop()
        self._aio = _consumer.Consumer(config, **kwargs)
        run(self._aio.start())

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self, autocommit: bool = True) -> None:
        run(self._aio.close(autocommit))

    def poll(self, timeout_ms: int = 1000, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records from every assigned partition (up to max.poll.records), waiting up to ``timeout_ms``."""
        batch = run(self._aio.getmany(timeout_ms=timeout_ms, max_records=max_records))
        return [r for records in batch.values() for r in records]

    def __iter__(self) -> Any:
        while True:
            yield from self.poll()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._aio, name)
        if not callable(method):
            return method
        is_coro = asyncio.iscoroutinefunction(method)

        def call(*args: Any, **kwargs: Any) -> Any:
            async def on_loop() -> Any:
                result = method(*args, **kwargs)
                return await result if is_coro else result
            return run(on_loop())
        call.__doc__ = method.__doc__
        return call
