"""Cluster.connection shares one connect per broker among its callers; cancelling the caller that started it must
not hand the others a CancelledError (they get a connection error and retry, as after any failed connect).

Found in CI as test_moldau_consumer.py::test_consumer_survives_a_broker_restart failing with CancelledError out of
getmany(): the staggered bootstrap (`_first_connection`) cancelled its losing attempt at the restarted broker, and
the fetcher waiting on that same connect received the cancellation.
"""

from __future__ import annotations

import asyncio

import pytest

from moldau.cluster import BrokerInfo, Cluster
from moldau.config import consumer_config
from moldau.errors import KafkaConnectionError


async def test_cancelling_the_connecting_caller_gives_the_others_a_connection_error() -> None:
    accepted = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set()  # accepts, never answers ApiVersions: the connect stays in its handshake
        await reader.read()
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = int(server.sockets[0].getsockname()[1])
    cluster = Cluster(consumer_config(bootstrap_servers=f"127.0.0.1:{port}"))
    cluster.brokers[0] = BrokerInfo(0, "127.0.0.1", port)
    try:
        owner = asyncio.create_task(cluster.connection(0))
        async with asyncio.timeout(10):
            await accepted.wait()
        waiter = asyncio.create_task(cluster.connection(0))  # joins the connect the owner started
        await asyncio.sleep(0)
        owner.cancel()
        with pytest.raises(asyncio.CancelledError):
            await owner
        async with asyncio.timeout(10):
            with pytest.raises(KafkaConnectionError, match="abandoned"):
                await waiter
        assert not waiter.cancelled()
    finally:
        await cluster.close()
        server.close()
        await server.wait_closed()
