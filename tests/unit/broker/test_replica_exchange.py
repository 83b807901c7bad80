"""The replication exchange over a real socket, in-process: a leader (socket server, worker pool, the Fetch and
Produce handlers over handler_env) and a real follower fetcher (broker 1) connected to it over loopback. The
fetcher's steady loop (nothing but the next fetch while no partition needs anything else) must still notice what
changes: a partition added while it is steady is truncated and fetched, a fenced epoch parks the partition until
its next LeaderAndIsr, and the steady path writes its fetches with ``BrokerConnection.send_now``. A steady fetch
looks only at the partitions the last answer changed, and at all of them every FULL_PASS_INTERVAL_MS."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from moldau.broker.apis import GROUP_ROUTES, ROUTES
from moldau.broker.handler_pool import HandlerPool
from moldau.broker.metadata import PartitionState
from moldau.broker.metrics import BrokerMetrics
from moldau.broker.network import SocketServer
from moldau.broker.partition import Partition
from moldau.broker.replica_fetcher import FULL_PASS_INTERVAL_MS, Fetcher, FetcherSettings, MonotonicClock
from moldau.broker.request_channel import RequestChannel
from moldau.connection import BrokerConnection
from moldau.protocol.api import REGISTRY, ApiKey
from moldau.protocol.fetch_session import PartitionPosition
from moldau.protocol.header import RequestHeader, encode_request_header, request_header_version
from moldau.protocol.records import build_batch
from moldau.protocol.types import INT32, TopicPartition
from moldau.storage.config import Clock, LogConfig
from moldau.storage.log import Log
from tests.unit.broker.apis.handler_env import Env, make_env

FOLLOWER = 1


@dataclass
class Exchange:
    env: Env
    server: SocketServer
    fetcher: Fetcher
    follower: dict[int, Partition]
    tmp: Path

    def follow(self, index: int, epoch: int = 1) -> Partition:
        """This broker (1) follows t-index at ``epoch`` (a LeaderAndIsr): the partition joins the fetcher."""
        p = self.follower.get(index)
        if p is None:
            p = self.follower[index] = Partition("t", index, FOLLOWER, Log(self.tmp / "follower" / f"t-{index}",
                                                                          LogConfig()))
        p.apply_state(PartitionState(index, 0, epoch, [0, FOLLOWER], [0, FOLLOWER]), 0)
        self.fetcher.add(p)
        return p


def _lead(env: Env, index: int, epoch: int = 1) -> None:
    env.replica_manager.become_leader_or_follower("t", PartitionState(index, 0, epoch, [0, FOLLOWER],
                                                                      [0, FOLLOWER]), {})


@asynccontextmanager
async def exchange(tmp_path: Path, partitions: int = 2, clock: Clock | None = None) -> AsyncIterator[Exchange]:
    env = make_env(tmp_path / "leader")
    await env.create_topic("t", partitions=partitions)
    for index in range(partitions):
        _lead(env, index)
    metrics = BrokerMetrics()
    channel = RequestChannel(500)
    pool = HandlerPool(channel, ROUTES, env.ctx, 1, metrics, GROUP_ROUTES)
    server = SocketServer([("PLAINTEXT", "127.0.0.1", 0)], channel, 1 << 20, metrics)
    await server.start()
    pool.start()
    fetcher = Fetcher(0, FetcherSettings(broker_id=FOLLOWER, max_wait_ms=200, clock=clock or MonotonicClock()),
                      lambda _broker: server.bound["PLAINTEXT"])
    try:
        yield Exchange(env, server, fetcher, {}, tmp_path)
    finally:
        await fetcher.stop()
        await server.close_all()
        await pool.stop()


async def _until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"not reached: {what}")


class Producer:
    """A client socket sending acks=all Produce v7 requests of one record, one at a time."""

    def __init__(self, server: SocketServer) -> None:
        self.sock = socket.create_connection(server.bound["PLAINTEXT"])
        self.sock.setblocking(False)
        self.cid = 0

    async def produce(self, index: int) -> int:
        """The base offset the leader answered (error code 0 checked)."""
        api = REGISTRY[ApiKey.PRODUCE]
        out = bytearray(4)
        encode_request_header(out, RequestHeader(ApiKey.PRODUCE, 7, self.cid, "exchange-test"),
                              request_header_version(ApiKey.PRODUCE, api.is_flexible(7), 7))
        api.request_encoder(7)(out, [], {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [
            {"name": "t", "partition_data": [{"index": index, "records": build_batch([(None, b"v", [], None)])}]}]})
        INT32.pack_into(out, 0, len(out) - 4)
        loop = asyncio.get_running_loop()
        await loop.sock_sendall(self.sock, out)
        buf = bytearray()
        while len(buf) < 4 or len(buf) - 4 < struct.unpack_from(">i", buf)[0]:
            buf += await asyncio.wait_for(loop.sock_recv(self.sock, 1 << 16), 5)
        body, _ = api.response_decoder(7)(memoryview(bytes(buf[4:])), 4)
        assert struct.unpack_from(">i", buf, 4)[0] == self.cid
        self.cid += 1
        p = body["responses"][0]["partition_responses"][0]
        assert p["error_code"] == 0, p
        return int(p["base_offset"])

    def close(self) -> None:
        self.sock.close()


async def test_a_steady_fetcher_replicates_each_acks_all_write_with_one_fetch(tmp_path: Path) -> None:
    async with exchange(tmp_path) as ex:
        follower = ex.follow(0)
        producer = Producer(ex.server)
        try:
            for i in range(3):
                assert await producer.produce(0) == i
            await _until(lambda: ex.fetcher._steady, "steady")
            sent: list[int] = []
            conn = ex.fetcher._conn
            assert conn is not None
            real = conn.send_now

            def counting(api: object, body: object, version: int) -> object:
                sent.append(version)
                return real(api, body, version)  # type: ignore[arg-type]

            conn.send_now = counting  # type: ignore[method-assign,assignment]
            for i in range(3, 13):
                assert await producer.produce(0) == i
            # Each acks=all write: the fetch that brings it, whose successor reports it (and parks).
            assert len(sent) == 10 and ex.fetcher._steady
            # The high watermark each answer carried: the one before its records (no answers of a high watermark
            # alone, and the leader's purgatory timer here never fires).
            assert follower.log.log_end_offset == 13 and follower.high_watermark == 12
        finally:
            producer.close()


async def test_a_partition_added_to_a_steady_fetcher_is_truncated_and_fetched(tmp_path: Path) -> None:
    async with exchange(tmp_path) as ex:
        ex.follow(0)
        producer = Producer(ex.server)
        try:
            await producer.produce(0)
            await producer.produce(0)
            await _until(lambda: ex.fetcher._steady, "steady")
            # The follower's copy of t-1 has a record of an epoch the leader never wrote: truncated away first.
            stale = Partition("t", 1, FOLLOWER, Log(tmp_path / "follower" / "t-1", LogConfig()))
            stale.apply_state(PartitionState(1, FOLLOWER, 0, [FOLLOWER], [FOLLOWER]), 0)
            stale.append_as_leader(build_batch([(None, b"stale", [], None)]))
            ex.follower[1] = stale
            follower1 = ex.follow(1)
            assert not ex.fetcher._steady
            ex.env.timer.advance(1000)  # the parked fetch (for t-0 only) answers at its max_wait_ms
            for i in range(3):
                assert await producer.produce(1) == i
            assert follower1.log.log_end_offset == 3
            assert await producer.produce(0) == 2
            await _until(lambda: ex.fetcher._steady, "steady again")
        finally:
            producer.close()


async def test_a_fenced_epoch_parks_the_partition_until_its_next_leader_and_isr(tmp_path: Path) -> None:
    async with exchange(tmp_path) as ex:
        follower = ex.follow(0)
        producer = Producer(ex.server)
        try:
            await producer.produce(0)
            await _until(lambda: ex.fetcher._steady, "steady")
            _lead(ex.env, 0, epoch=2)  # the leader's new epoch reaches it first: the follower's fetches are fenced
            write = asyncio.ensure_future(producer.produce(0))
            await _until(lambda: ex.fetcher.partitions[("t", 0)].parked, "parked")
            assert not ex.fetcher._steady and not write.done()
            ex.follow(0, epoch=2)  # and then the follower's
            assert await asyncio.wait_for(write, 5) == 1
            assert follower.log.log_end_offset == 2
            await _until(lambda: ex.fetcher._steady, "steady again")
        finally:
            producer.close()


async def test_send_now_waits_out_a_throttle_as_send_does(tmp_path: Path) -> None:
    """``send_now`` writes at once on a usable connection; one throttled by the broker (KIP-219) goes the way
    ``send`` goes, after the throttle time."""
    async with exchange(tmp_path) as ex:
        conn = BrokerConnection(*ex.server.bound["PLAINTEXT"])
        await conn.connect()
        try:
            api = REGISTRY[ApiKey.METADATA]
            loop = asyncio.get_running_loop()
            answer = conn.send_now(api, {"topics": [{"name": "t"}]}, 1)
            assert conn.in_flight == 1  # written in the call
            assert (await asyncio.wait_for(answer, 5))["topics"][0]["name"] == "t"
            conn.throttled_until = loop.time() + 0.3
            start = loop.time()
            held = conn.send_now(api, {"topics": [{"name": "t"}]}, 1)
            assert conn.in_flight == 0  # not written yet: it waits out the throttle
            assert (await asyncio.wait_for(held, 5))["topics"][0]["name"] == "t"
            assert loop.time() - start >= 0.29
        finally:
            await conn.close()


class ManualClock:
    def __init__(self) -> None:
        self.now_ms = 0

    def time_ms(self) -> int:
        return self.now_ms


def _spy_builds(fetcher: Fetcher) -> list[tuple[str, set[TopicPartition]]]:
    """Records, per fetch built from now on, whether it went over every partition ("full") or only the ones the
    last answer changed ("changed"), and the partitions whose positions it built."""
    seen: list[tuple[str, set[TopicPartition]]] = []
    session = fetcher.session
    full, changed = session.build, session.build_changed

    def build(wanted: dict[TopicPartition, PartitionPosition]) -> object:
        seen.append(("full", set(wanted)))
        return full(wanted)

    def build_changed(wanted: dict[TopicPartition, PartitionPosition]) -> object:
        seen.append(("changed", set(wanted)))
        return changed(wanted)

    session.build = build  # type: ignore[method-assign,assignment]
    session.build_changed = build_changed  # type: ignore[method-assign,assignment]
    return seen


async def test_a_steady_fetcher_looks_only_at_the_partitions_its_last_answer_changed(tmp_path: Path) -> None:
    clock = ManualClock()  # stands still: no full pass falls due
    async with exchange(tmp_path, partitions=6, clock=clock) as ex:
        followers = [ex.follow(i) for i in range(6)]
        producer = Producer(ex.server)
        try:
            for i in range(6):
                assert await producer.produce(i) == 0
            await _until(lambda: ex.fetcher._steady, "steady")
            seen = _spy_builds(ex.fetcher)
            for i in range(1, 6):
                assert await producer.produce(2) == i
            assert followers[2].log.log_end_offset == 6
            assert [p.log.log_end_offset for i, p in enumerate(followers) if i != 2] == [1] * 5
            # Each write: the fetch bringing it was built before it, the one after it saw t-2 appended (and the
            # answers of the high watermark alone touched nothing).
            assert seen and all(kind == "changed" for kind, _ in seen), seen
            assert all(tps <= {("t", 2)} for _, tps in seen), seen
            assert sum(1 for _, tps in seen if tps == {("t", 2)}) >= 5, seen
            assert ex.fetcher._steady
        finally:
            producer.close()


async def test_a_full_pass_reports_what_changed_outside_the_fetches(tmp_path: Path) -> None:
    """A follower's own retention moves its log start offset without a fetch: a steady fetcher tells the leader
    (whose DeleteRecords waits on it) at its next full pass, at most FULL_PASS_INTERVAL_MS later."""
    clock = ManualClock()
    async with exchange(tmp_path, partitions=2, clock=clock) as ex:
        ex.follow(0)
        follower1 = ex.follow(1)
        producer = Producer(ex.server)
        try:
            for i in range(3):
                assert await producer.produce(1) == i
            assert await producer.produce(0) == 0
            await _until(lambda: ex.fetcher._steady and follower1.high_watermark == 3, "steady, t-1 committed")
            leader1 = ex.env.replica_manager.get_partition("t", 1)
            assert leader1 is not None and leader1.followers[FOLLOWER].log_start_offset == 0
            assert follower1.log.maybe_increment_log_start_offset(2)  # as its retention would
            seen = _spy_builds(ex.fetcher)
            assert await producer.produce(0) == 1
            assert all(kind == "changed" and ("t", 1) not in tps for kind, tps in seen), seen
            assert leader1.followers[FOLLOWER].log_start_offset == 0  # not told yet
            clock.now_ms += FULL_PASS_INTERVAL_MS
            assert await producer.produce(0) == 2
            await _until(lambda: leader1.followers[FOLLOWER].log_start_offset == 2, "the leader told")
            assert any(kind == "full" and ("t", 1) in tps for kind, tps in seen), seen
        finally:
            producer.close()
