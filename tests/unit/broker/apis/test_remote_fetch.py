"""Fetch and ListOffsets over a tiered partition on in-process components: reads below the local log start come
from remote storage, a slow remote read answers after remote.fetch.max.wait.ms without holding other requests."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from pathlib import Path
from typing import Any

from moldau.broker.apis import ROUTES
from moldau.broker.remote_log_manager import RemoteLogManager
from moldau.broker.remote_log_metadata import InMemoryRemoteLogMetadataManager
from moldau.broker.request_channel import Request
from moldau.protocol.api import REGISTRY, ApiKey
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.header import RequestHeader
from moldau.protocol.records import build_batch, iter_headers
from moldau.storage.remote.api import RemoteLogSegmentMetadata
from moldau.storage.remote.filesystem import FileSystemRemoteStorageManager
from tests.unit.broker.apis.handler_env import Env, make_env

TIERED = {"remote.storage.enable": "true", "segment.bytes": "1024", "local.retention.bytes": "0",
          "file.delete.delay.ms": "0"}


class GatedStorage(FileSystemRemoteStorageManager):
    """The filesystem backend whose segment reads wait until ``gate`` is set (a slow object store)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.gate = threading.Event()
        self.gate.set()

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> bytes:
        self.gate.wait(10)
        return super().fetch_log_segment(metadata, start_position, end_position)


async def fetch(env: Env, body: dict[str, object]) -> dict[str, Any]:
    """The handler's answer for partition 0 of the one topic, records as bytes (local data is file regions, which
    only the network layer sends, so the answer is not run through the encoder here)."""
    api = REGISTRY[ApiKey.FETCH]
    wire = api.encode_request(12, body)
    decoded, _ = api.request_decoder(12)(wire, 0)
    request = Request(RequestHeader(ApiKey.FETCH, 12, 1, "unit-test"), api, wire, 0, "127.0.0.1")
    result = ROUTES[ApiKey.FETCH](env.ctx, request, decoded)
    if inspect.isawaitable(result):
        result = await asyncio.wait_for(result, 10)
    part = dict(result["responses"][0]["partitions"][0])
    records = part["records"]
    part["records"] = (b"".join(r.read() for r in records.regions) if hasattr(records, "regions")
                       else bytes(records))
    return part


def fetch_body(topic: str, offset: int, max_wait_ms: int = 0) -> dict[str, object]:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}]}


async def tiered_env(tmp_path: Path) -> tuple[Env, RemoteLogManager, GatedStorage]:
    env = make_env(tmp_path, {"auto.create.topics.enable": "false", "offsets.topic.num.partitions": "1",
                              "remote.log.storage.system.enable": "true",
                              "remote.log.storage.manager.class.name": "filesystem"})
    await env.metadata.create_topic("t", {0: [0]}, TIERED)
    await env.create_topic("local")
    rm = env.replica_manager
    now = env.clock.time_ms()  # within retention.ms (7 days): nothing is deleted remotely
    for i in range(40):  # batch i: offsets 3i..3i+2 with timestamps now + 10i + j
        batch = build_batch([(None, b"r%02d" % i + b"x" * 60, [], now + 10 * i + j) for j in range(3)])
        assert rm.append("t", 0, bytearray(batch)).error == 0
    assert rm.append("local", 0, bytearray(build_batch([(None, b"here", [], 1000)]))).error == 0
    rsm = GatedStorage(tmp_path / "remote")
    rsm.configure({})
    rlm = RemoteLogManager(0, rsm, InMemoryRemoteLogMetadataManager(), rm.partitions, env.clock,
                           task_interval_ms=60_000, reader_threads=2, copy_bytes_per_second=1 << 40,
                           fetch_bytes_per_second=1 << 40, fetch_max_wait_ms=300)
    env.ctx.replicas.remote = rlm
    partition = rm.get_partition("t", 0)
    assert partition is not None
    await rlm.run_partition(("t", 0), partition)
    assert partition.log.local_log_start_offset > 0 and partition.log.log_start_offset == 0
    return env, rlm, rsm


async def test_consumers_read_remote_data_through_fetch(tmp_path: Path) -> None:
    env, rlm, _ = await tiered_env(tmp_path)
    try:
        offset, seen = 0, []
        while offset < 120:
            part = await fetch(env, fetch_body("t", offset))
            assert part["error_code"] == E.NONE and part["log_start_offset"] == 0, part
            headers = [h for _, h in iter_headers(bytes(part["records"]))]
            assert headers and headers[0].base_offset == offset
            seen += [h.base_offset for h in headers]
            offset = headers[-1].last_offset + 1
        assert seen == list(range(0, 120, 3))
    finally:
        await rlm.close()


async def test_a_slow_remote_read_answers_empty_after_the_wait_and_blocks_nothing(tmp_path: Path) -> None:
    env, rlm, rsm = await tiered_env(tmp_path)
    try:
        rsm.gate.clear()
        started = time.monotonic()
        slow = asyncio.ensure_future(fetch(env, fetch_body("t", 0)))
        await asyncio.sleep(0.05)
        local = await fetch(env, fetch_body("local", 0))  # served while the remote read waits
        assert not slow.done()
        assert local["error_code"] == E.NONE and len(local["records"]) > 0
        part = await slow
        assert time.monotonic() - started >= 0.3
        assert part["error_code"] == E.NONE and len(part["records"]) == 0  # the client simply fetches again
        rsm.gate.set()
        part = await fetch(env, fetch_body("t", 0))
        assert part["error_code"] == E.NONE and len(part["records"]) > 0
    finally:
        rsm.gate.set()
        await rlm.close()


async def test_remote_storage_failure_is_a_retriable_error(tmp_path: Path) -> None:
    env, rlm, rsm = await tiered_env(tmp_path)
    try:
        for path in (tmp_path / "remote").rglob("*.log"):
            path.unlink()  # the store lost the data (or is unreachable): KAFKA_STORAGE_ERROR, not a hang
        part = await fetch(env, fetch_body("t", 0))
        assert part["error_code"] == E.KAFKA_STORAGE_ERROR
    finally:
        await rlm.close()


async def test_list_offsets_earliest_and_earliest_local(tmp_path: Path) -> None:
    env, rlm, _ = await tiered_env(tmp_path)
    try:
        def body(ts: int) -> dict[str, object]:
            return {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": "t", "partitions": [{"partition_index": 0, "timestamp": ts, "max_num_offsets": 1}]}]}

        local_start = env.replica_manager.get_partition("t", 0).log.local_log_start_offset  # type: ignore[union-attr]
        assert (await env.call(ApiKey.LIST_OFFSETS, 8, body(-2)))["topics"][0]["partitions"][0]["offset"] == 0
        part = (await env.call(ApiKey.LIST_OFFSETS, 8, body(-4)))["topics"][0]["partitions"][0]
        assert part["error_code"] == E.NONE and part["offset"] == local_start
        part = (await env.call(ApiKey.LIST_OFFSETS, 7, body(-4)))["topics"][0]["partitions"][0]
        assert part["error_code"] == E.UNSUPPORTED_VERSION
    finally:
        await rlm.close()


async def test_offsets_for_times_across_the_boundary(tmp_path: Path) -> None:
    env, rlm, _ = await tiered_env(tmp_path)
    try:
        now = env.clock.time_ms()
        local_start = env.replica_manager.get_partition("t", 0).log.local_log_start_offset  # type: ignore[union-attr]

        async def lookup(ts: int, version: int = 8) -> tuple[int, int, int]:
            answer = await env.call(ApiKey.LIST_OFFSETS, version, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": "t", "partitions": [{"partition_index": 0, "timestamp": ts, "max_num_offsets": 1}]}]})
            part = answer["topics"][0]["partitions"][0]
            return part["error_code"], part["offset"], part["timestamp"]

        assert await lookup(0) == (E.NONE, 0, now)  # before everything: the first remote record
        assert await lookup(now + 10 * 5 + 1) == (E.NONE, 16, now + 51)  # inside a remote batch
        last_remote_batch = (local_start - 1) // 3
        assert await lookup(now + 10 * last_remote_batch + 3) == (E.NONE, 3 * (last_remote_batch + 1),
                                                                  now + 10 * (last_remote_batch + 1))  # local
        assert await lookup(now + 10 * 39 + 2) == (E.NONE, 119, now + 392)
        assert (await lookup(now + 10_000))[1] == -1
        assert (await lookup(now + 51, version=1))[:2] == (E.NONE, 16)
    finally:
        await rlm.close()


async def test_read_committed_lists_aborted_transactions_of_remote_data(tmp_path: Path) -> None:
    env, rlm, _ = await tiered_env(tmp_path)
    try:
        rm = env.replica_manager
        await env.metadata.create_topic("tx", {0: [0]}, TIERED)
        now = env.clock.time_ms()
        for i in range(10):  # producer 7's transaction: offsets 0-29, aborted by the marker at 30
            batch = build_batch([(None, b"t%02d" % i + b"x" * 60, [], now)] * 3, producer_id=7, producer_epoch=0,
                                base_sequence=3 * i, is_transactional=True)
            assert rm.append("tx", 0, bytearray(batch)).error == 0
        assert rm.append_marker("tx", 0, 7, 0, False, 0).error == 0
        for _ in range(30):
            assert rm.append("tx", 0, bytearray(build_batch([(None, b"y" * 60, [], now)] * 3))).error == 0
        partition = rm.get_partition("tx", 0)
        assert partition is not None
        await rlm.run_partition(("tx", 0), partition)
        assert partition.log.local_log_start_offset > 31  # the transaction and its marker are remote only
        body = fetch_body("tx", 0)
        body["isolation_level"] = 1
        part = await fetch(env, body)
        assert part["error_code"] == E.NONE and len(part["records"]) > 0
        assert [(a["producer_id"], a["first_offset"]) for a in part["aborted_transactions"]] == [(7, 0)]
        part = await fetch(env, fetch_body("tx", 0))  # read_uncommitted: nothing to list
        assert not part["aborted_transactions"]
    finally:
        await rlm.close()
