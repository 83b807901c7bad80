"""ReadableWatch on a real socket pair, with asyncio's loop and uvloop (the broker's default): every wait ends when
data arrives, whether it came before or during the wait, while the connection was busy or not (no lost wake-up);
the socket stays registered between waits, is unregistered when data comes while nobody waits, and on close."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop

from moldau.broker.socket_wait import ReadableWatch

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


def _run(kind: str, test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    loop = LOOPS[kind]()
    try:
        loop.run_until_complete(asyncio.wait_for(test(), 10))
    finally:
        loop.close()


@pytest.mark.parametrize("kind", list(LOOPS))
def test_each_wait_ends_when_data_arrives(kind: str) -> None:
    async def body() -> None:
        a, b = socket.socketpair()
        a.setblocking(False)
        watch = ReadableWatch(asyncio.get_running_loop(), a)
        kept: list[bool] = []

        async def connection() -> list[bytes]:
            """As a connection does: read; nothing there (or a stale readiness of asyncio's loop): wait."""
            got = []
            while len(got) < 5:
                try:
                    got.append(a.recv(16))
                except BlockingIOError:
                    await watch.wait()
                    continue
                kept.append(watch._registered)
            return got

        try:
            reading = asyncio.ensure_future(connection())
            for i in range(5):
                await asyncio.sleep(0)
                await asyncio.sleep(0)
                b.send(b"x%d" % i)
                while len(kept) <= i:
                    await asyncio.sleep(0)
            assert await reading == [b"x%d" % i for i in range(5)]
            if kind == "uvloop":  # its loop runs the woken task before polling again: never unregistered
                assert kept == [True] * 5
        finally:
            watch.close()
            a.close()
            b.close()

    _run(kind, body)


@pytest.mark.parametrize("kind", list(LOOPS))
def test_data_arriving_while_nobody_waits_is_not_lost(kind: str) -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        a, b = socket.socketpair()
        a.setblocking(False)
        watch = ReadableWatch(loop, a)
        try:
            b.send(b"1")
            await watch.wait()  # ready at once
            # Busy with that request: the next one arrives meanwhile and nobody waits; the loop's readiness
            # call unregisters the socket instead of firing again and again.
            b.send(b"2")
            for _ in range(3):
                await asyncio.sleep(0)
            assert not watch._registered
            # The data is still there: a wait registers again and ends at once.
            await watch.wait()
            assert a.recv(16) == b"12"
        finally:
            watch.close()
            a.close()
            b.close()

    _run(kind, body)


@pytest.mark.parametrize("kind", list(LOOPS))
def test_close_unregisters_the_socket(kind: str) -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        a, b = socket.socketpair()
        a.setblocking(False)
        watch = ReadableWatch(loop, a)
        waiting = asyncio.ensure_future(watch.wait())
        await asyncio.sleep(0)
        assert watch._registered
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        watch.close()
        watch.close()  # twice is harmless
        assert not watch._registered and not loop.remove_reader(a.fileno())
        a.close()
        b.close()

    _run(kind, body)
