"""The bounded queue between network coroutines and IO workers, and the request/response objects on it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from moldau.protocol.header import RequestHeader
from moldau.protocol.schema import Api


class EncodedBody(dict[str, Any]):
    """A response body encoded in advance (a cached Metadata answer): the network layer copies ``data``. A
    throttle time put in the dict (quotas) is patched in at byte ``throttle_at`` of ``data``; versions without
    the field have no key, so nothing is patched."""

    def __init__(self, data: bytes, throttle_at: int | None) -> None:
        super().__init__()
        if throttle_at is not None:
            self["throttle_time_ms"] = 0
        self.data = data
        self.throttle_at = throttle_at


T = TypeVar("T")


class Reply(asyncio.Future[T]):
    """The answer of a request parked in a purgatory (an acks=all Produce, a long-poll Fetch), as a handler returns
    it. The worker pool hears of its result at once, in the call that sets it (``on_done``), where a future's done
    callbacks run one turn of the event loop later: on every replication round trip the fetch answers to the
    followers and the acks=all answer each went out a turn later. Awaited, it is an ordinary future."""

    __slots__ = ("_on_done",)

    def __init__(self, *, loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(loop=loop if loop is not None else asyncio.get_running_loop())
        self._on_done: Callable[[Reply[T]], None] | None = None

    def on_done(self, fn: Callable[[Reply[T]], None]) -> None:
        """Call ``fn(self)`` once, when the result is set (or the reply fails or is cancelled); now if it is."""
        if self.done():
            fn(self)
        else:
            self._on_done = fn

    def _fire(self) -> None:
        fn, self._on_done = self._on_done, None
        if fn is not None:
            fn(self)

    def set_result(self, result: T) -> None:
        super().set_result(result)
        self._fire()

    def set_exception(self, exception: type | BaseException) -> None:
        super().set_exception(exception)
        self._fire()

    def cancel(self, msg: Any | None = None) -> bool:
        cancelled = super().cancel(msg)
        if cancelled:
            self._fire()
        return cancelled


@dataclass(slots=True, eq=False)
class Request:
    """One decoded request header plus its undecoded body; the connection waits on ``done``."""

    header: RequestHeader
    api: Api
    frame: bytes | bytearray
    body_pos: int
    client_host: str
    # The listener the request arrived on: Metadata and FindCoordinator answer with that listener's endpoints.
    listener: str = ""
    # Timestamps (time.perf_counter) for Kafka's RequestMetrics split, observed once when the response is
    # written: queue = dequeued - received, local = local_done - dequeued, remote (purgatory or another awaited
    # step) = responded - local_done, response queue = until the connection resumes after `respond`.
    received_at: float = field(default_factory=time.perf_counter)
    dequeued_at: float = 0.0
    local_done_at: float = 0.0  # set when a handler returns an awaitable; else at respond (remote = 0)
    # CPU time of the worker's synchronous part (decode + handler call), for request_percentage (docs/quotas.md);
    # -1 until measured.
    cpu_seconds: float = -1.0
    responded_at: float = 0.0
    # The response body (a dict for the API's response encoder), or None for "no response" (acks=0).
    response: dict[str, Any] | None = None
    close_connection: bool = False
    done: asyncio.Future[None] | None = None
    # Who sent it: "User:<name>" after SASL, "User:ANONYMOUS" on PLAINTEXT/SSL listeners (as Kafka's default).
    principal: str = "User:ANONYMOUS"
    # Told in ``respond``'s own call, after ``done``: the connection of a pipelined request writes its answer
    # then, rather than a loop turn later from a task waiting on ``done``.
    on_answer: Callable[[Request], None] | None = None
    # The header's api_key and api_version, read a dozen times per request: plain attributes, not properties.
    api_key: int = field(init=False)
    version: int = field(init=False)

    def __post_init__(self) -> None:
        self.api_key = self.header.api_key
        self.version = self.header.api_version

    def split(self, resumed: float, end: float) -> tuple[float, float, float, float, float]:
        """Kafka's RequestMetrics split (queue, local, remote, response queue, send) of a request whose
        connection resumed at `resumed` and finished writing the response at `end`; the parts add up to
        end - received_at. Clamped at 0: a request failed before it was dequeued has no dequeued_at."""
        dequeued = self.dequeued_at or self.received_at
        local_done = max(self.local_done_at, dequeued)
        responded = max(self.responded_at, local_done)
        resumed = max(resumed, responded)
        return (dequeued - self.received_at, local_done - dequeued, responded - local_done, resumed - responded,
                end - resumed)

    def respond(self, body: dict[str, Any] | None) -> None:
        """Hand the response back to the connection (body None: send nothing, just unmute)."""
        self.response = body
        now = time.perf_counter()
        self.responded_at = now
        if self.local_done_at == 0.0:
            self.local_done_at = now
        if self.done is not None and not self.done.done():
            self.done.set_result(None)
        on_answer = self.on_answer
        if on_answer is not None:
            self.on_answer = None
            on_answer(self)

    def fail(self) -> None:
        """Close the connection instead of answering (a request that cannot be answered in its own format)."""
        self.close_connection = True
        self.respond(None)


class RequestChannel:
    """Bounded request queue (``queued.max.requests``): when it is full, network coroutines stop reading.

    With nothing queued, a request is handled at once by the worker pool's ``inline`` (set while the pool runs),
    in the network coroutine's own step: the hand-over through the queue to a worker coroutine and back cost
    every request ~12 us and two turns of the event loop (the worker's, then the connection's), four times on
    each replication round trip's way through a leader. Order is kept: a request is only handled inline when
    every earlier one has been taken, and workers run a handler's synchronous part to its end."""

    def __init__(self, max_size: int) -> None:
        self.queue: asyncio.Queue[Request | None] = asyncio.Queue(max_size)
        self.inline: Callable[[Request], None] | None = None
        self.inline_group: Callable[[list[Request]], None] | None = None

    def try_inline(self, request: Request) -> bool:
        """Handles ``request`` at once when ``send_request`` would (nothing queued), without a coroutine; False:
        the caller awaits ``send_request``."""
        inline = self.inline
        if inline is not None and not self.queue.qsize():
            inline(request)
            return True
        return False

    async def send_request(self, request: Request) -> None:
        inline = self.inline
        if inline is not None and not self.queue.qsize():
            inline(request)
            return
        await self.queue.put(request)

    async def send_group(self, requests: list[Request]) -> None:
        """Requests of one API and connection, in order, that a handler may take together (pipelined Produce
        requests): handled at once as a group when nothing is queued (``inline_group``), else queued one by
        one like any others."""
        inline = self.inline_group
        if inline is not None and not self.queue.qsize():
            inline(requests)
            return
        for request in requests:
            await self.queue.put(request)

    async def receive_request(self) -> Request | None:
        return await self.queue.get()

    def size(self) -> int:
        return self.queue.qsize()
