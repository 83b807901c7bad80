"""The IO-worker pool: ``num.io.threads`` worker coroutines drain the request channel through the route table.

A handler is ``handler(ctx, request, body) -> dict | None | Awaitable[dict | None]``. A dict is the response
body, None means "send nothing" (acks=0), and an awaitable (a purgatory future, a coroutine that talks to
ZooKeeper) is answered when it completes, so a worker is never held by a waiting request. A purgatory's
``Reply`` is answered in the very call that sets its result, a coroutine by its own task as it returns: neither
waits a turn of the event loop for a done callback. Handlers turn
failures into Kafka error codes; an exception that escapes one is logged and closes only that connection.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Protocol

from moldau.broker.request_channel import Reply, Request, RequestChannel
from moldau.protocol.types import DecodeError
from moldau.tasks import cancel_and_wait

log = logging.getLogger("moldau.handlers")

Handler = Callable[[Any, Request, dict[str, Any]], "dict[str, Any] | None | Awaitable[dict[str, Any] | None]"]
# Several requests of one API from one connection at once, in order (pipelined Produce requests): one result per
# request, each what ``Handler`` would return for it.
GroupHandler = Callable[[Any, list[tuple[Request, dict[str, Any]]]], "Sequence[Any]"]


class HandlerMetrics(Protocol):
    def handler_busy(self, seconds: float) -> None: ...


class CpuQuota(Protocol):
    """Whether request_percentage quotas apply to anyone (broker/quotas.py ``BrokerQuotas.request``)."""

    @property
    def enabled(self) -> bool: ...


class HandlerPool:
    def __init__(self, channel: RequestChannel, routes: dict[int, Handler], ctx: Any, num_workers: int,
                 metrics: HandlerMetrics, group_routes: dict[int, GroupHandler] | None = None,
                 cpu_quota: CpuQuota | None = None) -> None:
        self.channel = channel
        # A request's CPU time (the thread's CPU clock: a system call each read, twice per request) is what
        # request_percentage quotas charge, and only they read it: measured while any is set (None: always).
        self.cpu_quota = cpu_quota
        self.routes = routes
        self.group_routes = group_routes or {}
        self.ctx = ctx
        self.num_workers = num_workers
        self.metrics = metrics
        self._workers: list[asyncio.Task[None]] = []
        self._pending: set[asyncio.Future[Any]] = set()

    def start(self) -> None:
        self._workers = [asyncio.create_task(self._run(i)) for i in range(self.num_workers)]
        self.channel.inline = self.handle_timed
        self.channel.inline_group = self.handle_group_timed

    async def stop(self) -> None:
        self.channel.inline = None
        self.channel.inline_group = None
        await cancel_and_wait(self._workers)
        for fut in list(self._pending):
            fut.cancel()

    async def _run(self, index: int) -> None:
        while True:
            request = await self.channel.receive_request()
            if request is None:
                return
            self.handle_timed(request)

    def handle_timed(self, request: Request) -> None:
        """``handle`` with the worker's measurements (dequeued time, CPU time, busy time): a worker's request, or
        one the request channel hands over at once (``RequestChannel.inline``)."""
        t0 = time.perf_counter()
        request.dequeued_at = t0
        quota = self.cpu_quota
        if quota is None or quota.enabled:
            c0 = time.thread_time()
            self.handle(request)
            request.cpu_seconds = time.thread_time() - c0
        else:
            self.handle(request)
        self.metrics.handler_busy(time.perf_counter() - t0)

    def handle_group_timed(self, requests: list[Request]) -> None:
        """``handle_timed`` for requests of one API and connection handed over together, in order
        (``RequestChannel.send_group``): handled by the API's group handler if it has one (pipelined Produce
        requests: one log append per partition for all of them), else one by one. The CPU time is shared out
        evenly."""
        t0 = time.perf_counter()
        quota = self.cpu_quota
        measure = quota is None or quota.enabled
        c0 = time.thread_time() if measure else 0.0
        for request in requests:
            request.dequeued_at = t0
        group = self.group_routes.get(requests[0].api_key)
        if group is None or len(requests) == 1:
            for request in requests:
                self.handle(request)
        else:
            self._handle_group(group, requests)
        if measure:
            cpu = (time.thread_time() - c0) / len(requests)
            for request in requests:
                request.cpu_seconds = cpu
        self.metrics.handler_busy(time.perf_counter() - t0)

    def _handle_group(self, group: GroupHandler, requests: list[Request]) -> None:
        """A malformed request closes the connection: it and the requests after it are not handled (their client
        never hears of them, and would send them again after reconnecting)."""
        items: list[tuple[Request, dict[str, Any]]] = []
        for i, request in enumerate(requests):
            body = self._decode(request)
            if body is None:
                for later in requests[i + 1:]:
                    later.fail()
                break
            items.append((request, body))
        if not items:
            return
        try:
            results = group(self.ctx, items)
        except Exception:
            log.exception("%s handler failed; closing the connection", items[0][0].api.name)
            for request, _ in items:
                request.fail()
            return
        for (request, _), result in zip(items, results):
            self._settle(request, result)

    def _decode(self, request: Request) -> dict[str, Any] | None:
        """The request's body; None (and the connection closes) if it is malformed."""
        try:
            body, _ = request.api.request_decoder(request.version)(memoryview(request.frame), request.body_pos)
        except DecodeError as exc:
            log.warning("malformed %s v%d request from %s: %s; closing the connection",
                        request.api.name, request.version, request.client_host, exc)
            request.fail()
            return None
        return body

    def handle(self, request: Request) -> None:
        handler = self.routes.get(request.api_key)
        if handler is None:
            log.warning("no handler for %s v%d", request.api.name, request.version)
            request.fail()
            return
        try:  # _decode's work, inline: every request passes here
            body, _ = request.api.request_decoder(request.version)(memoryview(request.frame), request.body_pos)
        except DecodeError as exc:
            log.warning("malformed %s v%d request from %s: %s; closing the connection",
                        request.api.name, request.version, request.client_host, exc)
            request.fail()
            return
        try:
            result = handler(self.ctx, request, body)
        except Exception:
            log.exception("%s handler failed; closing the connection", request.api.name)
            request.fail()
            return
        self._settle(request, result)

    def _settle(self, request: Request, result: Any) -> None:
        """Answer now, or when the awaitable the handler returned completes."""
        if isinstance(result, Reply):  # parked in a purgatory: answered in the call that completes it
            request.local_done_at = time.perf_counter()
            self._pending.add(result)
            result.on_done(functools.partial(self._finish, request))  # no Python frame in between
        elif inspect.iscoroutine(result):
            # Answered by the handler's own task when it returns, not by a done callback a turn later (EndTxn,
            # AddPartitionsToTxn, WriteTxnMarkers: each a step of a transaction's chain of round trips).
            request.local_done_at = time.perf_counter()
            task = asyncio.ensure_future(self._answer(result, request))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)
        elif inspect.isawaitable(result):
            request.local_done_at = time.perf_counter()  # from here on the request waits: remote time
            fut = asyncio.ensure_future(result)
            self._pending.add(fut)
            fut.add_done_callback(functools.partial(self._finish, request))
        else:
            request.respond(result)

    async def _answer(self, coro: Coroutine[Any, Any, Any], request: Request) -> None:
        try:
            result = await coro
        except asyncio.CancelledError:  # stop()
            request.fail()
            raise
        except Exception as exc:
            log.error("%s handler failed: %r; closing the connection", request.api.name, exc, exc_info=exc)
            request.fail()
            return
        request.respond(result)

    def _finish(self, request: Request, fut: asyncio.Future[Any]) -> None:
        self._pending.discard(fut)
        if fut.cancelled():
            request.fail()
            return
        exc = fut.exception()
        if exc is not None:
            log.error("%s handler failed: %r; closing the connection", request.api.name, exc, exc_info=exc)
            request.fail()
            return
        request.respond(fut.result())
