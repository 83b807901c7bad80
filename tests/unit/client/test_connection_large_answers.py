"""Answers larger than protocol.frame.DIRECT_AT on a BrokerConnection: once an answer's size prefix is in, the
rest is read straight into its own buffer (client/connection.py ``_Protocol.get_buffer``). Under asyncio's loop and
uvloop (the broker's, and the sync client's), answers cut anywhere come out whole and in order with the small
answers around them, and a large answer cut short by the peer fails what is pending."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import uvloop

from moldau.connection import BrokerConnection
from moldau.errors import ConnectionLostError
from moldau.protocol.frame import DIRECT_AT
from tests.unit.client.test_connection_faults import METADATA, Peer, linger, metadata_request

LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


def _answer(name: str, topics: int) -> dict[str, Any]:
    """A Metadata answer naming ``name`` first, ``topics`` long-named topics after it (~260 bytes each)."""
    return {"brokers": [], "topics": [{"error_code": 3, "name": n, "partitions": []}
                                      for n in [name] + [f"{name}-{i:05d}-" + "x" * 240 for i in range(topics)]]}


def _on(kind: str, scenario: Callable[[int], Awaitable[None]], script: Callable[[Peer], Awaitable[None]]) -> None:
    async def main() -> None:
        errors: list[BaseException] = []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                await script(Peer(reader, writer))
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            except BaseException as exc:  # a failing assertion in the fake peer fails the test
                errors.append(exc)
            finally:
                writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        try:
            async with asyncio.timeout(20):
                await scenario(int(server.sockets[0].getsockname()[1]))
        finally:
            server.close()
            await server.wait_closed()
        assert not errors, errors

    loop = LOOPS[kind]()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


@pytest.mark.parametrize("kind", sorted(LOOPS))
def test_large_answers_cut_anywhere_come_out_whole_and_in_order(kind: str) -> None:
    sizes = [2000, 3, 1500, 0, 5000]  # topics per answer: ~500 KB, tiny, ~390 KB, tiny, ~1.3 MB

    async def script(peer: Peer) -> None:
        await peer.handshake()
        reqs = [await peer.read_request() for _ in sizes]
        data = b"".join(peer.response_bytes(r, _answer(r.body["topics"][0]["name"], n)) for r, n in zip(reqs, sizes))
        assert len(data) > 3 * DIRECT_AT
        rng = random.Random(kind)
        at = 0
        while at < len(data):  # uneven pieces: prefixes split, a large answer's tail with the next one's head
            n = rng.choice((1, 3, 4, 7, 1000, 65536, 300_000))
            peer.writer.write(data[at:at + n])
            await peer.writer.drain()
            at += n
        await linger(peer)

    async def scenario(port: int) -> None:
        conn = BrokerConnection("127.0.0.1", port)
        await conn.connect(timeout_s=5)
        try:
            answers = await asyncio.gather(*(conn.send(METADATA, metadata_request(f"t{i}"))
                                             for i in range(len(sizes))))
        finally:
            await conn.close()
        assert [len(a["topics"]) - 1 for a in answers] == sizes
        assert [a["topics"][0]["name"] for a in answers] == [f"t{i}" for i in range(len(sizes))]
        assert all(t["name"] == f"t{i}-{j:05d}-" + "x" * 240
                   for i, a in enumerate(answers) for j, t in enumerate(a["topics"][1:]))

    _on(kind, scenario, script)


@pytest.mark.parametrize("kind", sorted(LOOPS))
def test_a_large_answer_cut_short_fails_the_pending_requests(kind: str) -> None:
    async def script(peer: Peer) -> None:
        await peer.handshake()
        req = await peer.read_request()
        await peer.read_request()
        data = peer.response_bytes(req, _answer("a", 2000))
        peer.writer.write(data[:len(data) // 2])  # half of it, then the peer closes
        await peer.writer.drain()

    async def scenario(port: int) -> None:
        conn = BrokerConnection("127.0.0.1", port)
        await conn.connect(timeout_s=5)
        results = await asyncio.gather(conn.send(METADATA, metadata_request("a")),
                                       conn.send(METADATA, metadata_request("b")), return_exceptions=True)
        assert all(isinstance(r, ConnectionLostError) for r in results), results
        assert conn.closed

    _on(kind, scenario, script)
