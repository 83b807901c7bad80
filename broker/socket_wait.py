"""Waiting for a non-blocking socket to become readable on the event loop (shared by the plaintext and TLS
connection paths, which read with recv_into themselves instead of through asyncio streams)."""

from __future__ import annotations

import asyncio
import socket


async def wait_readable(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
    fut: asyncio.Future[None] = loop.create_future()
    fd = sock.fileno()

    def ready() -> None:
        if not fut.done():
            fut.set_result(None)

    loop.add_reader(fd, ready)
    try:
        await fut
    finally:
        loop.remove_reader(fd)


class ReadableWatch:
    """Waits for one socket to become readable, again and again, keeping the descriptor registered with the loop
    between waits: a connection that reads one request, answers it and waits for the next (a follower's fetches,
    a producer's requests) would otherwise register and unregister its socket once per request (two epoll_ctl
    calls and the loop's bookkeeping, on every request of every replication round trip).

    The loop watches level-triggered: readiness while nobody waits (data arriving while the connection is busy
    with the previous request) unregisters the socket, so a busy connection costs nothing; the next ``wait``
    registers it again. ``close`` unregisters it before the socket is closed."""

    __slots__ = ("_loop", "_fd", "_waiter", "_registered")

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        self._loop = loop
        self._fd = sock.fileno()
        self._waiter: asyncio.Future[None] | None = None
        self._registered = False

    def _ready(self) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            self._unregister()
            return
        self._waiter = None
        waiter.set_result(None)

    def _unregister(self) -> None:
        if self._registered:
            self._registered = False
            self._loop.remove_reader(self._fd)

    def wait(self) -> asyncio.Future[None]:
        """A future done once the socket is readable (awaited by the connection: a plain future, no coroutine of
        its own on each wait). A cancelled wait leaves the next readiness to unregister the socket."""
        waiter = self._waiter = self._loop.create_future()
        if not self._registered:
            self._loop.add_reader(self._fd, self._ready)
            self._registered = True
        return waiter

    def close(self) -> None:
        self._unregister()
