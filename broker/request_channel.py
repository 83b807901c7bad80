"""The bounded queue between network coroutines and IO workers, and the request/response objects on it."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from moldau.protocol.header import RequestHeader
from moldau.protocol.schema import Api


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
    received_at: float = field(default_factory=time.perf_counter)
    dequeued_at: float = 0.0
    # The response body (a dict for the API's response encoder), or None for "no response" (acks=0).
    response: dict[str, Any] | None = None
    close_connection: bool = False
    done: asyncio.Future[None] | None = None
    # Who sent it: "User:<name>" after SASL, "User:ANONYMOUS" on PLAINTEXT/SSL listeners (as Kafka's default).
    principal: str = "User:ANONYMOUS"

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def version(self) -> int:
        return self.header.api_version

    def respond(self, body: dict[str, Any] | None) -> None:
        """Hand the response back to the connection (body None: send nothing, just unmute)."""
        self.response = body
        if self.done is not None and not self.done.done():
            self.done.set_result(None)

    def fail(self) -> None:
        """Close the connection instead of answering (a request that cannot be answered in its own format)."""
        self.close_connection = True
        self.respond(None)


class RequestChannel:
    """Bounded request queue (``queued.max.requests``): when it is full, network coroutines stop reading."""

    def __init__(self, max_size: int) -> None:
        self.queue: asyncio.Queue[Request | None] = asyncio.Queue(max_size)

    async def send_request(self, request: Request) -> None:
        await self.queue.put(request)

    async def receive_request(self) -> Request | None:
        return await self.queue.get()

    def size(self) -> int:
        return self.queue.qsize()
