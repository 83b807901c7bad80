"""Connection._sendall (broker/network.py): one ``send`` first, the loop's ``sock_sendall`` for what the socket
buffer did not take. Over a real socket pair with small buffers and a reader that starts late, every byte
arrives once and in order."""

from __future__ import annotations

import asyncio
import socket

from moldau.broker.metrics import BrokerMetrics
from moldau.broker.network import Connection
from moldau.broker.request_channel import RequestChannel


async def test_a_write_larger_than_the_socket_buffer_is_finished_by_the_loop() -> None:
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    ours.setblocking(False)
    theirs.setblocking(False)
    conn = Connection(ours, ("127.0.0.1", 1), "PLAINTEXT", RequestChannel(10), 1 << 20, BrokerMetrics(),
                      lambda c: None)
    data = bytes(range(256)) * 4096  # 1 MiB: far more than the buffers hold
    small = b"after"
    loop = asyncio.get_running_loop()
    try:
        writes = asyncio.ensure_future(_write_both(conn, data, small))
        await asyncio.sleep(0.05)
        assert not writes.done()  # the first send took part of it; the rest waits for the reader
        got = bytearray()
        while len(got) < len(data) + len(small):
            chunk = await asyncio.wait_for(loop.sock_recv(theirs, 65536), 5)
            assert chunk
            got += chunk
        await asyncio.wait_for(writes, 5)
        assert bytes(got) == data + small
    finally:
        ours.close()
        theirs.close()


async def _write_both(conn: Connection, first: bytes, second: bytes) -> None:
    await conn._sendall(first)
    await conn._sendall(memoryview(second))
