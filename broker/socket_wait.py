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
