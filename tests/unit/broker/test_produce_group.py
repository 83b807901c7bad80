"""handle_produce_many (issue #21): pipelined Produce requests handled together, each partition's records from all
of them written with one log append, give every request exactly the answer it would have had alone (offsets,
errors, duplicates, sequence gaps, acks=0 failures) and leave the same log. Real logs, replica manager and
handler over tmp_path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from moldau.broker import replica_manager
from moldau.broker.apis.produce import handle_produce, handle_produce_many
from moldau.broker.request_channel import Request
from moldau.protocol.api import REGISTRY, ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.header import RequestHeader
from moldau.protocol.records import build_batch
from tests.unit.broker.apis.handler_env import Env, make_env


def _batch(n: int = 1, pid: int = -1, seq: int = -1, txn: bool = False) -> bytes:
    return build_batch([(None, b"v%d" % i, [], 1_000 + i) for i in range(n)], producer_id=pid,
                       producer_epoch=0 if pid >= 0 else -1, base_sequence=seq, is_transactional=txn)


def _corrupt() -> bytes:
    data = bytearray(_batch())
    data[-1] ^= 0xFF
    return bytes(data)


def _bodies(pid: int) -> list[dict[str, Any]]:
    def produce(acks: int, *parts: tuple[int, bytes | None], txn: str | None = None) -> dict[str, Any]:
        return {"transactional_id": txn, "acks": acks, "timeout_ms": 30000, "topic_data": [
            {"name": "t", "partition_data": [{"index": i, "records": r} for i, r in parts]}]}
    return [
        produce(1, (0, _batch(pid=pid, seq=0)), (1, _batch(2))),
        produce(-1, (0, _batch(2, pid=pid, seq=1))),
        produce(2, (0, _batch())),  # invalid acks
        produce(1, (1, _batch()), (5, _batch())),  # partition 5 does not exist
        produce(1, (0, _batch(pid=pid, seq=0))),  # a retried duplicate: the original's offset
        produce(0, (1, _corrupt())),  # acks=0 and a bad batch: the connection closes
        produce(1, (0, _batch(pid=pid, seq=9))),  # a sequence gap
        produce(1, (0, None)),  # no records
        produce(-1, (0, _batch(3, pid=pid, seq=3)), (1, _batch(), )),
        produce(1, (1, _batch()), (0, _batch(pid=pid, seq=6))),
        produce(1, (1, _batch(2, pid=pid, seq=0, txn=True)), txn="tx"),  # opens a transaction on t-1
        produce(1, (1, _batch(pid=pid, seq=2))),  # not transactional while it is open: refused
        produce(1, (1, _batch(pid=pid, seq=2, txn=True)), txn="tx"),
    ]


async def _env(tmp_path: Path) -> tuple[Env, int]:
    env = make_env(tmp_path)
    await env.create_topic("t", 2)
    init = await env.call(ApiKey.INIT_PRODUCER_ID, 2, {"transactional_id": None, "transaction_timeout_ms": 60000})
    return env, int(init["producer_id"])


def _requests(bodies: list[dict[str, Any]]) -> list[Request]:
    api = REGISTRY[ApiKey.PRODUCE]
    return [Request(RequestHeader(ApiKey.PRODUCE, 7, cid, "group-test"), api, b"", 0, "127.0.0.1")
            for cid in range(len(bodies))]


def _log(env: Env, index: int) -> bytes:
    log = env.replica_manager.partitions[("t", index)].log
    return log.read(0, 1 << 30).read()


async def test_requests_handled_together_answer_as_one_by_one(tmp_path: Path) -> None:
    alone, pid = await _env(tmp_path / "alone")
    together, pid2 = await _env(tmp_path / "together")
    assert pid == pid2
    bodies = _bodies(pid)
    requests = _requests(bodies)
    expected = [handle_produce(alone.ctx.replicas, r, b) for r, b in zip(requests, bodies)]
    grouped = _requests(bodies)
    got = handle_produce_many(together.ctx.replicas, list(zip(grouped, _bodies(pid))))
    assert got == expected
    assert [r.close_connection for r in grouped] == [r.close_connection for r in requests] == [
        False] * 5 + [True] + [False] * 7
    for index in (0, 1):
        assert _log(together, index) == _log(alone, index)
    # What the answers say, so equality above is not equality of two wrong answers.
    answers = [None if a is None else [(p["index"], p["error_code"], p["base_offset"])
                                       for t in a["responses"] for p in t["partition_responses"]]
               for a in got]  # type: ignore[index]
    assert answers == [
        [(0, 0, 0), (1, 0, 0)],
        [(0, 0, 1)],
        [(0, ErrorCode.INVALID_REQUIRED_ACKS, -1)],
        [(1, 0, 2), (5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)],
        [(0, 0, 0)],
        None,
        [(0, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)],
        [(0, ErrorCode.CORRUPT_MESSAGE, -1)],
        [(0, 0, 3), (1, 0, 3)],
        [(1, 0, 4), (0, 0, 6)],
        [(1, 0, 5)],
        [(1, ErrorCode.INVALID_TXN_STATE, -1)],
        [(1, 0, 7)],
    ]


async def test_each_partition_of_a_group_is_written_with_one_append(tmp_path: Path) -> None:
    env, pid = await _env(tmp_path)
    appends = {i: env.record_appends("t", i) for i in (0, 1)}
    bodies = [{"transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": _batch(pid=pid, seq=seq)},
                                         {"index": 1, "records": _batch(2)}]}]} for seq in range(5)]
    answers = handle_produce_many(env.ctx.replicas, list(zip(_requests(bodies), bodies)))
    assert {i: len(sizes) for i, sizes in appends.items()} == {0: 1, 1: 1}
    assert [[p["base_offset"] for p in a["responses"][0]["partition_responses"]]  # type: ignore[index]
            for a in answers] == [[i, 2 * i] for i in range(5)]


async def test_the_copy_of_a_group_is_bounded(tmp_path: Path, monkeypatch: Any) -> None:
    """Records appended together are copied into one buffer: at most APPEND_MANY_MAX_BYTES at a time, so a
    group of large requests is written in several appends (one alone: from its own frame, uncopied)."""
    env, _ = await _env(tmp_path)
    sizes = env.record_appends("t", 0)
    one = len(_batch())
    monkeypatch.setattr(replica_manager, "APPEND_MANY_MAX_BYTES", 3 * one)
    bodies = [{"transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": _batch()}]}]} for _ in range(7)]
    answers = handle_produce_many(env.ctx.replicas, list(zip(_requests(bodies), bodies)))
    assert sizes == [3 * one, 3 * one, one]
    assert [a["responses"][0]["partition_responses"][0]["base_offset"]  # type: ignore[index]
            for a in answers] == list(range(7))


async def test_a_group_never_makes_a_segment_larger_than_segment_bytes(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    one = len(_batch())
    await env.metadata.create_topic("s", {0: [0]}, {"segment.bytes": str(3 * one)})
    sizes = env.record_appends("s", 0)
    bodies = [{"transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [
        {"name": "s", "partition_data": [{"index": 0, "records": _batch()}]}]} for _ in range(7)]
    answers = handle_produce_many(env.ctx.replicas, list(zip(_requests(bodies), bodies)))
    assert [a["responses"][0]["partition_responses"][0]["base_offset"]  # type: ignore[index]
            for a in answers] == list(range(7))
    assert sizes == [3 * one, 3 * one, one]
    log = env.replica_manager.partitions[("s", 0)].log
    assert [s.size for s in log.segments] == [3 * one, 3 * one, one]
