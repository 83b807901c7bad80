"""moldau.cluster.Cluster against a real broker: bootstrap fallback, metadata refresh, coordinator, backoff."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from moldau.cluster import BOOTSTRAP_NODE_BASE, Cluster
from moldau.config import ClientConfig
from moldau.errors import ConnectFailedError, NoBrokersAvailableError

from .harness import BrokerProcess, closed_port

pytestmark = pytest.mark.integration


def _run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_a_hanging_bootstrap_server_does_not_hold_up_the_next(broker: BrokerProcess) -> None:
    """The first bootstrap server accepts TCP (the kernel does) but never answers: the next one is tried after
    the stagger (1 s), not after socket.connection.setup.timeout.ms (60 s here, so the bound is unmistakable)."""
    with socket.socket() as hanging:
        hanging.bind(("127.0.0.1", 0))
        hanging.listen(8)  # never accept()ed, never answered
        silent = f"127.0.0.1:{hanging.getsockname()[1]}"

        async def go() -> float:
            cluster = Cluster(ClientConfig(bootstrap_servers=[silent, broker.bootstrap],
                                           socket_connection_setup_timeout_ms=60000))
            t0 = time.monotonic()
            try:
                await cluster.start()
                return time.monotonic() - t0
            finally:
                await cluster.close()
        elapsed = _run(go())
    assert elapsed < 30, elapsed


def test_bootstrap_falls_back_and_learns_the_cluster(broker: BrokerProcess, topic: str) -> None:
    async def go() -> None:
        dead = f"127.0.0.1:{closed_port()}"
        cluster = Cluster(ClientConfig(bootstrap_servers=[dead, broker.bootstrap], metadata_max_age_ms=200))
        await cluster.start()
        try:
            assert list(cluster.brokers) == [0] and cluster.controller_id == 0
            # auto-created by the broker, which answers LEADER_NOT_AVAILABLE the first time, as Kafka does
            assert await cluster.wait_for_topic(topic, 10) == [0] and cluster.leader_for(topic, 0) == 0
            version = cluster.metadata_version
            deadline = time.monotonic() + 10
            while cluster.metadata_version == version:  # metadata.max.age.ms refreshes in the background
                assert time.monotonic() < deadline, "no periodic metadata refresh"
                await asyncio.sleep(0.05)
            version = cluster.metadata_version
            cluster.request_update()
            while cluster.metadata_version == version:
                assert time.monotonic() < deadline, "request_update() did not refresh"
                await asyncio.sleep(0.01)
            assert await cluster.coordinator("some-group") == 0
            conn = await cluster.connection(0)
            assert conn is await cluster.connection(0)  # one connection per broker
        finally:
            await cluster.close()
    _run(go())


def test_no_reachable_bootstrap_and_reconnect_backoff() -> None:
    async def go() -> None:
        cluster = Cluster(ClientConfig(bootstrap_servers=f"127.0.0.1:{closed_port()}", reconnect_backoff_ms=300,
                                       reconnect_backoff_max_ms=300))
        with pytest.raises(NoBrokersAvailableError):
            await cluster.start()
        t0 = time.monotonic()
        with pytest.raises(ConnectFailedError):
            await cluster.connection(BOOTSTRAP_NODE_BASE)
        assert time.monotonic() - t0 >= 0.3 * 0.8 - 0.01  # waited out the backoff (20 % jitter) first
        await cluster.close()
    _run(go())
