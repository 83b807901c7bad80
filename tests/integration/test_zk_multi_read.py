"""ZkClient.get_many against a real ZooKeeper: many znodes in a few multiReads, the same data and versions as single
reads, missing znodes as None, under a chroot, and the partition states the controller builds from them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from moldau.broker.controller import zk as zk_module
from moldau.broker.controller import zk_data as Z
from moldau.broker.controller.zk import KafkaZk, ZkClient

from .zookeeper import ZooKeeperProcess

pytestmark = pytest.mark.integration

# More than two multiReads' worth, so chunking and the order across chunks are exercised.
ZNODES = zk_module.MULTI_READ_CHUNK * 2 + 7


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    zk = ZooKeeperProcess(tmp_path_factory.mktemp("zk-multi-read")).start()
    try:
        yield zk
    finally:
        zk.stop()


async def _create_all(client: ZkClient, znodes: list[tuple[str, bytes]]) -> None:
    for i in range(0, len(znodes), 200):
        await client.multi([("create", path, data, False) for path, data in znodes[i:i + 200]])


async def _client(zk: ZooKeeperProcess, chroot: str) -> ZkClient:
    client = ZkClient(zk.connect + chroot, 6000, 15000)
    await client.start()
    return client


def test_get_many_answers_like_single_reads_in_a_few_requests(zookeeper: ZooKeeperProcess) -> None:
    async def run() -> None:
        client = await _client(zookeeper, "/multiread")
        try:
            await client.ensure_path("/n")
            paths = [f"/n/{i}" for i in range(ZNODES)]
            await _create_all(client, [(p, f"value-{i}".encode()) for i, p in enumerate(paths)])
            # some znodes have later versions
            await asyncio.gather(*(client.set(paths[i], f"changed-{i}".encode()) for i in range(0, ZNODES, 10)))
            await client.create("/n/empty", b"")
            asked = paths + ["/n/missing", "/n/empty", "/nowhere/at/all"]
            sent = []
            original = client._bridge

            def counting(result):  # type: ignore[no-untyped-def]
                sent.append(result)
                return original(result)

            client._bridge = counting  # type: ignore[method-assign]
            many = await client.get_many(asked)
            client._bridge = original  # type: ignore[method-assign]
            assert client.multi_read, "the server answered multiRead"
            assert len(sent) == -(-len(asked) // zk_module.MULTI_READ_CHUNK), "one request per chunk"
            singles = await asyncio.gather(*(client.get(p) for p in asked))
            assert len(many) == len(asked)
            for path, got, single in zip(asked, many, singles):
                if single is None:
                    assert got is None, path
                    continue
                assert got is not None, path
                assert got[0] == single[0], path
                assert got[1].version == single[1].version and got[1].mzxid == single[1].mzxid, path
            assert many[0] is not None and many[0][0] == b"changed-0" and many[0][1].version == 1
            assert many[1] is not None and many[1][0] == b"value-1" and many[1][1].version == 0
            assert many[-3] is None and many[-1] is None and many[-2] is not None and many[-2][0] == b""
        finally:
            await client.close()

    asyncio.run(run())


def test_partition_states_carry_each_znode_version(zookeeper: ZooKeeperProcess) -> None:
    async def run() -> None:
        client = await _client(zookeeper, "/states")
        try:
            kzk = KafkaZk(client)
            topic, count = "t", zk_module.MULTI_READ_CHUNK + 3
            await client.ensure_path(Z.partitions_path(topic))
            await _create_all(client, [(Z.partition_path(topic, p), b"") for p in range(count)])
            await _create_all(client, [(Z.state_path(topic, p), Z.partition_state(Z.LeaderIsr(p % 3, 0, [1, 2], 1)))
                                       for p in range(count)])
            await client.set(Z.state_path(topic, 4), Z.partition_state(Z.LeaderIsr(2, 1, [2], 1)))
            await client.set(Z.state_path(topic, 4), Z.partition_state(Z.LeaderIsr(2, 2, [2, 1], 1)))
            await client.set(Z.state_path(topic, 5), b"not json")
            states = await kzk.partition_states(topic, list(range(count)) + [count + 100])
            assert sorted(states) == [p for p in range(count) if p != 5]  # malformed and missing: left out
            assert states[4] == Z.LeaderIsr(2, 2, [2, 1], 1, 2)
            assert all(states[p] == Z.LeaderIsr(p % 3, 0, [1, 2], 1, 0) for p in states if p != 4)
        finally:
            await client.close()

    asyncio.run(run())


def test_a_path_that_kazoo_would_chroot_is_read_under_the_chroot(
        zookeeper: ZooKeeperProcess) -> None:
    async def run() -> None:
        inside = await _client(zookeeper, "/rooted")
        outside = await _client(zookeeper, "")
        try:
            await inside.create("/x", b"in")
            await outside.create("/x", b"out")
            assert [f[0] if f else None for f in await inside.get_many(["/x"])] == [b"in"]
            assert [f[0] if f else None for f in await outside.get_many(["/x", "/rooted/x"])] == [b"out", b"in"]
        finally:
            await inside.close()
            await outside.close()

    asyncio.run(run())


def test_state_writes_go_in_one_multi_all_or_nothing_under_the_chroot(zookeeper: ZooKeeperProcess) -> None:
    """The controller's multis of checks and conditional writes (zk_multi_write.py, not kazoo's transaction):
    every write lands with its new version; a stale version or controller epoch fails the whole multi with
    kazoo's exception and writes nothing; other multis (creates) still go through kazoo."""
    from kazoo.exceptions import BadVersionError

    async def run() -> None:
        client = await _client(zookeeper, "/writes")
        outside = await _client(zookeeper, "")
        try:
            kzk = KafkaZk(client)
            await client.create(Z.CONTROLLER_EPOCH, b"1")
            epoch_version = (await client.get(Z.CONTROLLER_EPOCH))[1].version  # type: ignore[index]
            paths = [Z.state_path("w", p) for p in range(5)]
            await client.ensure_path(Z.partitions_path("w"))
            await _create_all(client, [(Z.partition_path("w", p), b"") for p in range(5)])
            await _create_all(client, [(path, b"v0") for path in paths])
            stats = await kzk.controller_multi(epoch_version, [("set", path, b"v1", 0) for path in paths])
            assert [s.version for s in stats] == [1] * 5
            assert [f[0] for f in await client.get_many(paths)] == [b"v1"] * 5  # type: ignore[index]
            # under the chroot: the client outside sees them at /writes/...
            assert (await outside.get("/writes" + paths[0]))[0] == b"v1"  # type: ignore[index]
            # one stale version: nothing is written
            with pytest.raises(BadVersionError):
                await client.multi([("check", Z.CONTROLLER_EPOCH, epoch_version),
                                    *[("set", path, b"v2", 0 if i == 3 else 1) for i, path in enumerate(paths)]])
            assert [f[0] for f in await client.get_many(paths)] == [b"v1"] * 5  # type: ignore[index]
            # a moved controller epoch: the controller learns it moved, nothing is written
            await outside.set("/writes" + Z.CONTROLLER_EPOCH, b"2")
            with pytest.raises(zk_module.ControllerMovedError):
                await kzk.controller_multi(epoch_version, [("set", path, b"v3", 1) for path in paths])
            assert [f[1].version for f in await client.get_many(paths)] == [1] * 5  # type: ignore[index]
        finally:
            await client.close()
            await outside.close()

    asyncio.run(run())
