"""WriteTxnMarkers, read_committed Fetch and ListOffsets on a standalone broker's real components (handler_env):
transactional produce, markers, the LSO and the aborted transactions through the strict codecs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from moldau.broker.apis import ROUTES
from moldau.broker.request_channel import Request
from moldau.broker.security.acl_store import ACLS_FILE, FileAclStore
from moldau.protocol.api import REGISTRY, ApiKey
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.header import RequestHeader
from moldau.protocol.records import build_batch, iter_headers
from tests.unit.broker.apis.handler_env import Env, make_env

CONFIG = {"auto.create.topics.enable": "false", "offsets.topic.num.partitions": "1"}
P1, P2 = 7001, 7002


def _produce(topic: str, pid: int, seq: int, n: int, epoch: int = 0, partition: int = 0) -> dict[str, Any]:
    records = build_batch([(b"k", b"v%d" % i, None, 1000) for i in range(n)], producer_id=pid,
                          producer_epoch=epoch, base_sequence=seq, is_transactional=True)
    return {"transactional_id": f"tx-{pid}", "acks": -1, "timeout_ms": 1000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}


def _markers(*markers: tuple[int, int, bool, dict[str, list[int]]], coordinator_epoch: int = 0) -> dict[str, Any]:
    return {"markers": [{"producer_id": pid, "producer_epoch": epoch, "transaction_result": committed,
                         "coordinator_epoch": coordinator_epoch,
                         "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}
                        for pid, epoch, committed, topics in markers]}


def _codes(answer: dict[str, Any]) -> list[tuple[int, str, int, int]]:
    return [(m["producer_id"], t["name"], p["partition_index"], p["error_code"])
            for m in answer["markers"] for t in m["topics"] for p in t["partitions"]]


async def _fetch(env: Env, isolation: int, version: int = 12, offset: int = 0) -> dict[str, Any]:
    """The routed Fetch handler, its answer (records read from their file regions) through the strict codecs."""
    api = REGISTRY[ApiKey.FETCH]
    wire = api.encode_request(version, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": isolation,
        "topics": [{"topic": "t", "partitions": [
            {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}]})
    body, _ = api.request_decoder(version)(wire, 0)
    request = Request(RequestHeader(ApiKey.FETCH, version, 1, "unit-test"), api, wire, 0, "127.0.0.1")
    answer = ROUTES[ApiKey.FETCH](env.ctx, request, body)
    for t in answer["responses"]:
        for p in t["partitions"]:
            records = p["records"]
            p["records"] = records if isinstance(records, bytes) else b"".join(r.read() for r in records.regions)
    decoded, _ = api.response_decoder(version)(api.encode_response(version, answer), 0)
    part: dict[str, Any] = decoded["responses"][0]["partitions"][0]
    return part


async def _latest(env: Env, isolation: int) -> int:
    answer = await env.call(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": isolation, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    offset: int = answer["topics"][0]["partitions"][0]["offset"]
    return offset


def _batches(records: Any) -> list[tuple[int, int, bool]]:
    return [(h.base_offset, h.last_offset, h.is_control) for _, h in iter_headers(bytes(records))]


async def test_commit_and_abort_through_markers(tmp_path: Path) -> None:
    env = make_env(tmp_path, CONFIG)
    await env.create_topic("t")
    heard: list[tuple[str, int, int, bool]] = []

    class Listener:
        def on_transaction_marker(self, topic: str, partition: int, producer_id: int, committed: bool) -> None:
            heard.append((topic, partition, producer_id, committed))

    env.replica_manager.txn_marker_listeners.append(Listener())
    for body in (_produce("t", P1, 0, 2), _produce("t", P2, 0, 3)):  # P1: 0-1, P2: 2-4
        answer = await env.call(ApiKey.PRODUCE, 9, body)
        assert answer["responses"][0]["partition_responses"][0]["error_code"] == E.NONE
    # Both open: read_committed sees nothing, its latest offset is the LSO; read_uncommitted sees all.
    committed_view = await _fetch(env, 1)
    assert committed_view["last_stable_offset"] == 0 and committed_view["high_watermark"] == 5
    assert len(committed_view["records"]) == 0 and committed_view["aborted_transactions"] == []
    assert (await _fetch(env, 0))["aborted_transactions"] is None
    assert _batches((await _fetch(env, 0))["records"]) == [(0, 1, False), (2, 4, False)]
    assert await _latest(env, 1) == 0 and await _latest(env, 0) == 5

    answer = await env.call(ApiKey.WRITE_TXN_MARKERS, 1, _markers((P1, 0, False, {"t": [0]}),
                                                                   (P2, 0, True, {"t": [0]})))
    assert _codes(answer) == [(P1, "t", 0, E.NONE), (P2, "t", 0, E.NONE)]
    assert heard == [("t", 0, P1, False), ("t", 0, P2, True)]
    view = await _fetch(env, 1)
    assert view["last_stable_offset"] == 7 == view["high_watermark"]
    assert _batches(view["records"]) == [(0, 1, False), (2, 4, False), (5, 5, True), (6, 6, True)]
    assert view["aborted_transactions"] == [{"producer_id": P1, "first_offset": 0}]
    assert (await _fetch(env, 1, offset=6))["aborted_transactions"] == []  # P1's abort ended at 5
    assert (await _fetch(env, 1, version=4))["aborted_transactions"] == [{"producer_id": P1, "first_offset": 0}]
    assert await _latest(env, 1) == 7


async def test_marker_errors_per_partition(tmp_path: Path) -> None:
    env = make_env(tmp_path, CONFIG)
    await env.create_topic("t", partitions=2)
    await env.call(ApiKey.PRODUCE, 9, _produce("t", P1, 0, 1, epoch=3))
    await env.call(ApiKey.WRITE_TXN_MARKERS, 0, _markers((P1, 3, True, {"t": [0]}), coordinator_epoch=5))
    answer = await env.call(ApiKey.WRITE_TXN_MARKERS, 0, _markers(
        (P1, 2, False, {"t": [0], "nope": [0]}),  # an older producer epoch; an unknown topic
        (P1, 3, False, {"t": [0, 1, 9]}),  # partition 0: coordinator epoch 4 < 5; 1 fine; 9 unknown
        coordinator_epoch=4))
    assert _codes(answer) == [(P1, "t", 0, E.INVALID_PRODUCER_EPOCH), (P1, "nope", 0, E.UNKNOWN_TOPIC_OR_PARTITION),
                              (P1, "t", 0, E.TRANSACTION_COORDINATOR_FENCED), (P1, "t", 1, E.NONE),
                              (P1, "t", 9, E.UNKNOWN_TOPIC_OR_PARTITION)]
    partition = env.replica_manager.get_partition("t", 1)
    assert partition is not None
    partition.leader_id = 1  # another broker leads it now
    answer = await env.call(ApiKey.WRITE_TXN_MARKERS, 1, _markers((P2, 0, True, {"t": [1]})))
    assert _codes(answer) == [(P2, "t", 1, E.NOT_LEADER_OR_FOLLOWER)]


async def test_transactional_produce_checks(tmp_path: Path) -> None:
    env = make_env(tmp_path, CONFIG)
    await env.create_topic("t")
    await env.call(ApiKey.PRODUCE, 9, _produce("t", P1, 0, 1))
    plain = build_batch([(b"k", b"v", None, 1000)], producer_id=P1, producer_epoch=0, base_sequence=1)
    answer = await env.call(ApiKey.PRODUCE, 9, {"acks": -1, "timeout_ms": 1000, "transactional_id": None,
                                                "topic_data": [{"name": "t", "partition_data": [
                                                    {"index": 0, "records": plain}]}]})
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == E.INVALID_TXN_STATE
    anonymous = _produce("t", P2, 0, 1)
    anonymous["transactional_id"] = None  # transactional records need a transactional id (Kafka)
    answer = await env.call(ApiKey.PRODUCE, 9, anonymous)
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


async def test_cluster_action_is_required(tmp_path: Path) -> None:
    store = FileAclStore(tmp_path / ACLS_FILE)
    await store.start()
    env = make_env(tmp_path, {**CONFIG, "super.users": "User:broker"}, acls=store)
    await env.create_topic("t")
    answer = await env.call(ApiKey.WRITE_TXN_MARKERS, 1, _markers((P1, 0, True, {"t": [0]})), principal="User:bob")
    assert _codes(answer) == [(P1, "t", 0, E.CLUSTER_AUTHORIZATION_FAILED)]
    answer = await env.call(ApiKey.PRODUCE, 9, _produce("t", P1, 0, 1), principal="User:bob")  # no Write on tx-
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert env.replica_manager.get_partition("t", 0).log.log_end_offset == 0  # type: ignore[union-attr]
    answer = await env.call(ApiKey.WRITE_TXN_MARKERS, 1, _markers((P1, 0, True, {"t": [0]})),
                            principal="User:broker")
    assert _codes(answer) == [(P1, "t", 0, E.NONE)]


async def test_describe_producers(tmp_path: Path) -> None:
    env = make_env(tmp_path, CONFIG)
    await env.create_topic("t")
    await env.call(ApiKey.PRODUCE, 9, _produce("t", P1, 0, 2, epoch=2))
    await env.call(ApiKey.PRODUCE, 9, _produce("t", P2, 0, 1))
    await env.call(ApiKey.WRITE_TXN_MARKERS, 1, _markers((P2, 0, True, {"t": [0]}), coordinator_epoch=6))
    answer = await env.call(ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [
        {"name": "t", "partition_indexes": [0, 3]}, {"name": "nope", "partition_indexes": [0]}]})
    t, nope = answer["topics"]
    part, missing = t["partitions"]
    assert part["error_code"] == E.NONE and missing["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert nope["partitions"][0]["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    producers = {p["producer_id"]: p for p in part["active_producers"]}
    assert producers[P1]["producer_epoch"] == 2 and producers[P1]["last_sequence"] == 1
    assert producers[P1]["current_txn_start_offset"] == 0  # open: it holds the LSO at 0
    assert producers[P2]["current_txn_start_offset"] == -1 and producers[P2]["coordinator_epoch"] == 6
    assert producers[P2]["last_timestamp"] == 1000


async def test_waiting_read_committed_fetch_completes_when_the_lso_moves(tmp_path: Path) -> None:
    env = make_env(tmp_path, CONFIG)
    await env.create_topic("t")
    await env.call(ApiKey.PRODUCE, 9, _produce("t", P1, 0, 2))
    api = REGISTRY[ApiKey.FETCH]
    body, _ = api.request_decoder(12)(api.encode_request(12, {
        "replica_id": -1, "max_wait_ms": 60000, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 1,
        "topics": [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                  "partition_max_bytes": 1 << 20}]}]}), 0)
    request = Request(RequestHeader(ApiKey.FETCH, 12, 1, "unit-test"), api, b"", 0, "127.0.0.1")
    waiting = ROUTES[ApiKey.FETCH](env.ctx, request, body)
    assert isinstance(waiting, asyncio.Future) and not waiting.done()  # data exists, but none below the LSO
    await env.call(ApiKey.PRODUCE, 9, _produce("t", P2, 0, 1))  # more open data does not complete it
    assert not waiting.done()
    await env.call(ApiKey.WRITE_TXN_MARKERS, 1, _markers((P1, 0, True, {"t": [0]})))
    answer = await asyncio.wait_for(waiting, 5)  # the manual timer never fires: the LSO move completed it
    part = answer["responses"][0]["partitions"][0]
    assert part["last_stable_offset"] == 2 and part["aborted_transactions"] == []
    assert part["records"].size > 0


async def test_the_coordinators_own_partitions_get_their_markers_without_a_request(tmp_path: Path) -> None:
    """InterBrokerMarkerChannel with the server's local writer: markers for partitions this broker leads are
    written in-process (same writes and errors as the handler's), other leaders still get a request."""
    import functools

    from moldau.broker.apis.txn_markers import TxnMarkerDeps, write_markers_locally
    from moldau.broker.coordinator.txn_markers import InterBrokerMarkerChannel

    env = make_env(tmp_path, CONFIG)
    await env.create_topic("t", partitions=2)
    await env.call(ApiKey.PRODUCE, 9, _produce("t", P1, 0, 2, epoch=1))
    dialled: list[int] = []

    def endpoint_of(broker_id: int) -> tuple[str, int] | None:
        dialled.append(broker_id)
        return None  # no address: a request would fail (and be retried by the coordinator's round)

    channel = InterBrokerMarkerChannel(env.metadata, endpoint_of, 0,  # type: ignore[arg-type]
                                       local=functools.partial(write_markers_locally,
                                                               TxnMarkerDeps(env.replica_manager, timeout_ms=1000)))
    written = await channel.write_markers(0, P1, 1, True, 2, [("t", 0), ("t", 1), ("nope", 0)])
    assert written == {("t", 0): E.NONE, ("t", 1): E.NONE, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert dialled == []
    t0 = env.replica_manager.get_partition("t", 0)
    assert t0 is not None and t0.log.last_stable_offset == t0.log.log_end_offset == 3  # records + COMMIT
    again = await channel.write_markers(0, P1, 0, False, 2, [("t", 0)])  # an older producer epoch
    assert again == {("t", 0): E.INVALID_PRODUCER_EPOCH}
    try:
        await channel.write_markers(1, P1, 1, True, 2, [("t", 0)])
    except ConnectionError:
        pass
    else:
        raise AssertionError("another leader's markers must go over the network")
    assert dialled == [1]


async def test_marker_rounds_that_come_while_a_request_is_out_share_the_next_request(tmp_path: Path) -> None:
    """One WriteTxnMarkers request per leader at a time: the rounds that come while it is out go in the next
    request together, and each round gets its own partitions' answers. A leader answers one request of a
    connection at a time, so one request per round made every round wait for the replication of those ahead."""
    import functools
    import time

    from moldau.broker.coordinator.txn_markers import InterBrokerMarkerChannel
    from tests.unit.client.test_connection_faults import Peer

    env = make_env(tmp_path, CONFIG)
    await env.create_topic("t", partitions=2)
    P3 = 7003
    for pid, partition in ((P1, 0), (P2, 0), (P3, 1)):
        await env.call(ApiKey.PRODUCE, 9, _produce("t", pid, 0, 2, epoch=1, partition=partition))
    requests: list[list[int]] = []  # the producer ids of each request's markers, in order
    first_in, release_first = asyncio.Event(), asyncio.Event()

    async def leader(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = Peer(reader, writer)
        try:
            await peer.handshake()
            while True:
                req = await peer.read_request()
                requests.append([m["producer_id"] for m in req.body["markers"]])
                if len(requests) == 1:
                    first_in.set()
                    await release_first.wait()
                peer.respond(req, await env.call(ApiKey.WRITE_TXN_MARKERS, req.version, req.body))
                await writer.drain()
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(leader, "127.0.0.1", 0)
    port = int(server.sockets[0].getsockname()[1])
    channel = InterBrokerMarkerChannel(env.metadata, lambda _: ("127.0.0.1", port), 0)  # type: ignore[arg-type]
    try:
        write = functools.partial(channel.write_markers, 1)
        first = asyncio.ensure_future(write(P1, 1, True, 2, [("t", 0)]))
        async with asyncio.timeout(10):
            await first_in.wait()
        # While the first request waits at the leader, two more rounds come: one commits, one aborts.
        second = asyncio.ensure_future(write(P2, 1, True, 2, [("t", 0), ("t", 1)]))
        third = asyncio.ensure_future(write(P3, 0, False, 2, [("t", 1)]))  # an older epoch than its records'
        deadline = time.monotonic() + 10
        while len(channel._queued.get(1, [])) < 2:  # both queued behind the request in flight
            assert time.monotonic() < deadline and not second.done() and not third.done()
            await asyncio.sleep(0.01)
        release_first.set()
        async with asyncio.timeout(10):
            answers = await asyncio.gather(first, second, third)
    finally:
        await channel.close()
        server.close()
        await server.wait_closed()
    assert requests == [[P1], [P2, P3]]
    assert answers == [{("t", 0): E.NONE}, {("t", 0): E.NONE, ("t", 1): E.NONE},
                       {("t", 1): E.INVALID_PRODUCER_EPOCH}]
    t0, t1 = env.replica_manager.get_partition("t", 0), env.replica_manager.get_partition("t", 1)
    assert t0 is not None and t1 is not None
    assert t0.log.last_stable_offset == t0.log.log_end_offset  # every transaction on t-0 ended
    assert t1.log.last_stable_offset < t1.log.log_end_offset  # P3's records on t-1 (wrong epoch) still open
