"""Request time-outs through the connection's one deadline timer, against a fake peer (test_connection_faults'):
each request fails with RequestTimeoutError at its own deadline, whichever order the deadlines come in, the late
answers are dropped and counted, and the connection goes on serving requests."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from moldau.errors import RequestTimeoutError
from moldau.protocol.api import REGISTRY, ApiKey
from tests.unit.client.test_connection_faults import Peer, client, metadata_request, metadata_response, serve

__all__ = ["serve"]  # the fixture, used by name

METADATA = REGISTRY[ApiKey.METADATA]


async def test_each_request_times_out_at_its_own_deadline(serve: Any) -> None:
    release = asyncio.Event()

    async def script(peer: Peer) -> None:
        await peer.handshake()
        held = [await peer.read_request() for _ in range(2)]  # answered only after both timed out
        await release.wait()
        for req in held:
            peer.respond(req, metadata_response("late"))
        req = await peer.read_request()
        peer.respond(req, metadata_response("on-time"))
        await peer.reader.read()

    conn = await client(await serve(script), request_timeout_ms=10000)
    try:
        loop = asyncio.get_running_loop()
        conn.request_timeout_ms = 600
        slow = asyncio.ensure_future(conn.send(METADATA, metadata_request("a")))
        await asyncio.sleep(0)
        conn.request_timeout_ms = 150  # a later request with an earlier deadline: the timer moves forward
        t0 = loop.time()
        fast = asyncio.ensure_future(conn.send(METADATA, metadata_request("b")))
        with pytest.raises(RequestTimeoutError, match="within 150 ms"):
            await fast
        fast_s = loop.time() - t0
        assert not slow.done()
        with pytest.raises(RequestTimeoutError, match="within 600 ms") as info:
            await slow
        assert isinstance(info.value, TimeoutError)
        slow_s = loop.time() - t0
        assert 0.14 <= fast_s < slow_s and slow_s >= 0.55
        release.set()
        conn.request_timeout_ms = 10000
        started = time.monotonic()
        answer = await conn.send(METADATA, metadata_request("c"))
        assert answer["topics"][0]["name"] == "on-time" and time.monotonic() - started < 5
        assert conn.late_responses == 2 and conn.in_flight == 0
    finally:
        await conn.close()
