"""The sync client's loop (client/loop_thread.py): uvloop's when it is installed, asyncio's when
MOLDAU_CLIENT_LOOP=asyncio says so; a misspelt choice is refused rather than ignored."""

from __future__ import annotations

import asyncio
import socket

import pytest
import uvloop

from moldau.loop_thread import LOOP_ENV, new_client_loop


def _kind(loop: asyncio.AbstractEventLoop) -> str:
    try:
        return "uvloop" if isinstance(loop, uvloop.Loop) else "asyncio"
    finally:
        loop.close()


def test_the_client_loop_is_uvloop_unless_asyncio_is_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LOOP_ENV, raising=False)
    assert _kind(new_client_loop()) == "uvloop"
    monkeypatch.setenv(LOOP_ENV, "asyncio")
    assert _kind(new_client_loop()) == "asyncio"
    monkeypatch.setenv(LOOP_ENV, " UVLoop ")
    assert _kind(new_client_loop()) == "uvloop"


def test_an_unknown_loop_choice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LOOP_ENV, "asycnio")
    with pytest.raises(ValueError, match="MOLDAU_CLIENT_LOOP='asycnio'"):
        new_client_loop()


def test_a_large_request_written_on_the_client_loop_arrives_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """uvloop's transport keeps a written bytearray (not a copy) until the socket has taken it: a request larger
    than the socket's buffer arrives byte for byte at the other end of a socket pair."""
    monkeypatch.delenv(LOOP_ENV, raising=False)
    loop = new_client_loop()
    request = bytearray(i % 251 for i in range(4 << 20))

    async def exchange() -> bytes:
        async with asyncio.timeout(10):
            return await transfer()

    async def transfer() -> bytes:
        a, b = socket.socketpair()
        transport, _ = await loop.create_connection(asyncio.Protocol, sock=a)
        transport.write(request)
        b.setblocking(False)
        got = bytearray()
        while len(got) < len(request):
            chunk = await loop.sock_recv(b, 1 << 20)
            assert chunk, "peer closed early"
            got += chunk
        transport.close()
        b.close()
        return bytes(got)

    try:
        assert isinstance(loop, uvloop.Loop)
        assert loop.run_until_complete(exchange()) == request
    finally:
        loop.close()
