"""The transaction coordinator through its handlers, on a standalone broker's real components in-process (real
__transaction_state log, manual clock and timers); the partition leaders' side of WriteTxnMarkers is
handler_env's RecordingMarkers."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from moldau.broker.coordinator.txn_log import TRANSACTION_STATE_TOPIC
from moldau.broker.coordinator.txn_metadata import TxnState
from moldau.protocol.api import ApiKey
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.records import build_batch
from tests.unit.broker.apis.handler_env import Env, make_env

CONFIG = {"auto.create.topics.enable": "false", "offsets.topic.num.partitions": "1",
          "transaction.state.log.num.partitions": "2", "transaction.max.timeout.ms": "60000"}


async def until(condition: Any, what: str) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def ready(env: Env, tid: str = "tx") -> None:
    """FindCoordinator creates __transaction_state (this broker leads it); then wait for the load."""
    found = await env.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [tid]})
    assert found["coordinators"][0]["error_code"] == E.NONE and found["coordinators"][0]["node_id"] == 0
    topic = env.metadata.topic(TRANSACTION_STATE_TOPIC)
    assert topic is not None and len(topic.partitions) == 2
    await until(lambda: not env.txn.store.loading and len(env.txn.store.owned) == 2, "the load")


async def init(env: Env, tid: str = "tx", version: int = 4, timeout_ms: int = 10000) -> dict[str, Any]:
    return await env.call(ApiKey.INIT_PRODUCER_ID, version, {"transactional_id": tid,
                                                              "transaction_timeout_ms": timeout_ms,
                                                              "producer_id": -1, "producer_epoch": -1})


async def add(env: Env, pid: int, epoch: int, tps: dict[str, list[int]], version: int = 3,
              tid: str = "tx") -> dict[tuple[str, int], int]:
    answer = await env.call(ApiKey.ADD_PARTITIONS_TO_TXN, version, {
        "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in tps.items()]})
    return {(t["name"], p["partition_index"]): p["partition_error_code"]
            for t in answer["results_by_topic_v3_and_below"] for p in t["results_by_partition"]}


async def end(env: Env, pid: int, epoch: int, commit: bool, version: int = 3, tid: str = "tx") -> int:
    answer = await env.call(ApiKey.END_TXN, version, {"transactional_id": tid, "producer_id": pid,
                                                       "producer_epoch": epoch, "committed": commit})
    return int(answer["error_code"])


async def test_commit_writes_state_then_markers_then_complete(tmp_path: Path) -> None:
    env = make_env(tmp_path, CONFIG)
    await env.create_topic("a", 2)
    await env.create_topic("b", 1)
    await ready(env)
    group = await env.call(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})  # creates __consumer_offsets
    assert group["error_code"] == E.NONE
    first = await init(env)
    assert first["error_code"] == E.NONE and first["producer_epoch"] == 0
    pid = first["producer_id"]
    assert await add(env, pid, 0, {}) == {}  # nothing to add: no transaction starts
    assert env.txn.store.get("tx").state is TxnState.EMPTY  # type: ignore[union-attr]
    assert await add(env, pid, 0, {"a": [0, 1], "b": [0]}) == {("a", 0): 0, ("a", 1): 0, ("b", 0): 0}
    assert await add(env, pid, 0, {"a": [0], "nope": [0]}) == {("a", 0): E.OPERATION_NOT_ATTEMPTED,
                                                               ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    offsets = await env.call(ApiKey.ADD_OFFSETS_TO_TXN, 3, {"transactional_id": "tx", "producer_id": pid,
                                                             "producer_epoch": 0, "group_id": "g"})
    assert offsets["error_code"] == E.NONE
    described = await env.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["tx", "unknown"]})
    tx, unknown = described["transaction_states"]
    assert tx["transaction_state"] == "Ongoing" and tx["producer_id"] == pid
    assert {(t["topic"], tuple(t["partitions"])) for t in tx["topics"]} == {
        ("a", (0, 1)), ("b", (0,)), ("__consumer_offsets", (0,))}
    assert unknown["error_code"] in (E.TRANSACTIONAL_ID_NOT_FOUND, E.NOT_COORDINATOR)
    batch = build_batch([(None, b"v", [], 1000)], producer_id=pid, producer_epoch=0, base_sequence=0,
                        is_transactional=True)
    produced = await env.call(ApiKey.PRODUCE, 9, {"transactional_id": "tx", "acks": -1, "timeout_ms": 1000,
                                                  "topic_data": [{"name": "a", "partition_data": [
                                                      {"index": 0, "records": batch}]}]})
    assert produced["responses"][0]["partition_responses"][0]["error_code"] == E.NONE
    a0 = env.replica_manager.get_partition("a", 0)
    assert a0 is not None and a0.log.last_stable_offset == 0  # the open transaction holds the LSO
    assert await end(env, pid, 0, True) == E.NONE
    meta = env.txn.store.get("tx")
    assert meta is not None
    await until(lambda: meta.state is TxnState.COMPLETE_COMMIT, "CompleteCommit")
    assert a0.log.last_stable_offset == 2  # the record and the COMMIT marker, written by the real handler
    (call,) = env.markers.calls
    assert call[:3] == (pid, 0, True) and sorted(call[4]) == [("__consumer_offsets", 0), ("a", 0), ("a", 1),
                                                              ("b", 0)]
    assert call[3] == env.txn.store.epoch_of(env.txn.store.partition_for("tx"))
    assert await end(env, pid, 0, True) == E.NONE  # a retried EndTxn: already committed
    assert await end(env, pid, 0, False) == E.INVALID_TXN_STATE
    listed = await env.call(ApiKey.LIST_TRANSACTIONS, 1, {"state_filters": ["CompleteCommit", "Bogus"],
                                                          "producer_id_filters": [], "duration_filter": -1})
    assert [t["transactional_id"] for t in listed["transaction_states"]] == ["tx"]
    assert listed["unknown_state_filters"] == ["Bogus"]


async def test_new_producer_fences_the_old_and_aborts_its_transaction(tmp_path: Path) -> None:
    env = make_env(tmp_path, CONFIG)
    await env.create_topic("a", 1)
    await ready(env)
    old = await init(env)
    pid = old["producer_id"]
    assert await add(env, pid, 0, {"a": [0]}) == {("a", 0): 0}
    retry = await init(env)  # the open transaction is aborted first; the client retries
    assert retry["error_code"] == E.CONCURRENT_TRANSACTIONS
    meta = env.txn.store.get("tx")
    assert meta is not None
    await until(lambda: meta.state is TxnState.COMPLETE_ABORT, "the abort")
    assert env.markers.calls[0][:3] == (pid, 1, False)  # the abort marker carries the bumped epoch
    new = await init(env)
    assert (new["error_code"], new["producer_id"], new["producer_epoch"]) == (E.NONE, pid, 2)
    assert await add(env, pid, 0, {"a": [0]}) == {("a", 0): E.PRODUCER_FENCED}
    assert await add(env, pid, 0, {"a": [0]}, version=1) == {("a", 0): E.INVALID_PRODUCER_EPOCH}
    assert await end(env, pid, 0, True) == E.PRODUCER_FENCED
    assert await end(env, pid + 1, 2, True) == E.INVALID_PRODUCER_ID_MAPPING


async def test_timeout_and_limits(tmp_path: Path) -> None:
    env = make_env(tmp_path, CONFIG)
    await env.create_topic("a", 1)
    await ready(env)
    assert (await init(env, timeout_ms=60001))["error_code"] == E.INVALID_TRANSACTION_TIMEOUT
    assert (await init(env, tid=""))["error_code"] == E.INVALID_REQUEST
    first = await init(env, timeout_ms=1000)
    pid = first["producer_id"]
    assert await add(env, pid, 0, {"a": [0]}) == {("a", 0): 0}
    timed_out: list[int] = []
    env.txn.on_timed_out = lambda: timed_out.append(1)
    env.timer.advance(10000)  # transaction.abort.timed.out.transaction.cleanup.interval.ms: not yet timed out
    assert timed_out == [] and ("Ongoing", 1) in env.txn.state_counts()
    env.clock.advance(1001)
    env.timer.advance(10000)
    meta = env.txn.store.get("tx")
    assert meta is not None
    await until(lambda: meta.state is TxnState.COMPLETE_ABORT, "the time-out abort")
    assert meta.producer_epoch == 1 and timed_out == [1]
    assert ("CompleteAbort", 1) in env.txn.state_counts()
    assert await end(env, pid, 0, True) == E.PRODUCER_FENCED  # the producer was fenced by the time-out


async def test_a_new_coordinator_resumes_prepare_commit_from_the_log(tmp_path: Path) -> None:
    env = make_env(tmp_path, CONFIG)
    await env.create_topic("a", 1)
    await ready(env)
    pid = (await init(env))["producer_id"]
    assert await add(env, pid, 0, {"a": [0]}) == {("a", 0): 0}
    env.markers.answer = E.NOT_LEADER_OR_FOLLOWER  # markers keep failing: stuck in PrepareCommit
    assert await end(env, pid, 0, True) == E.NONE
    await until(lambda: len(env.markers.calls) >= 2, "marker retries")
    partition = env.txn.store.partition_for("tx")
    epoch = env.txn.store.epoch_of(partition)
    assert epoch is not None
    env.txn.on_resign(partition)  # another broker took over ...
    assert env.txn.store.get("tx") is None
    assert (await end(env, pid, 0, True)) == E.NOT_COORDINATOR
    env.markers.answer = E.NONE
    env.markers.calls.clear()
    env.txn.on_become_leader(partition, epoch + 1)  # ... and now this one again: load, resume the markers
    await until(lambda: (m := env.txn.store.get("tx")) is not None and m.state is TxnState.COMPLETE_COMMIT,
                "the resumed commit")
    assert env.markers.calls[-1][:4] == (pid, 0, True, epoch + 1)
    meta = env.txn.store.get("tx")
    assert meta is not None and meta.partitions == set() and meta.producer_epoch == 0


async def test_verify_only_for_partition_leaders(tmp_path: Path) -> None:
    env = make_env(tmp_path, CONFIG)
    await env.create_topic("a", 2)
    await ready(env)
    pid = (await init(env))["producer_id"]
    assert await add(env, pid, 0, {"a": [0]}) == {("a", 0): 0}

    async def verify(epoch: int) -> dict[tuple[str, int], int]:
        answer = await env.call(ApiKey.ADD_PARTITIONS_TO_TXN, 4, {"transactions": [{
            "transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch, "verify_only": True,
            "topics": [{"name": "a", "partitions": [0, 1]}]}]})
        (txn,) = answer["results_by_transaction"]
        return {(t["name"], p["partition_index"]): p["partition_error_code"]
                for t in txn["topic_results"] for p in t["results_by_partition"]}

    assert await verify(0) == {("a", 0): E.NONE, ("a", 1): E.INVALID_TXN_STATE}
    assert await verify(1) == {("a", 0): E.PRODUCER_FENCED, ("a", 1): E.PRODUCER_FENCED}
    meta = env.txn.store.get("tx")
    assert meta is not None and meta.partitions == {("a", 0)}  # verification adds nothing


async def test_acls_on_the_transactional_id(tmp_path: Path) -> None:
    from moldau.broker.security.acl import Operation as Op
    from moldau.broker.security.acl import PatternType, Permission, ResourceType
    from moldau.broker.security.acl_store import ACLS_FILE, FileAclStore

    store = FileAclStore(tmp_path / ACLS_FILE)
    await store.start()
    env = make_env(tmp_path, dict(CONFIG, **{"super.users": "User:admin"}), acls=store)
    await env.create_topic("a", 1)
    await env.create_topic("b", 1)

    def allow(rtype: ResourceType, name: str, op: Op) -> dict[str, Any]:
        return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": PatternType.LITERAL,
                "principal": "User:alice", "host": "*", "operation": op, "permission_type": Permission.ALLOW}

    created = await env.call(ApiKey.CREATE_ACLS, 3, {"creations": [
        allow(ResourceType.TRANSACTIONAL_ID, "tx", Op.WRITE), allow(ResourceType.TOPIC, "a", Op.WRITE)]},
        principal="User:admin")
    assert [r["error_code"] for r in created["results"]] == [E.NONE, E.NONE]
    found = await env.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["tx", "other"]},
                           principal="User:alice")  # Write implies Describe
    assert [c["error_code"] for c in found["coordinators"]] == [E.NONE, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]
    await until(lambda: not env.txn.store.loading and len(env.txn.store.owned) == 2, "the load")
    body = {"transactional_id": "other", "transaction_timeout_ms": 1000, "producer_id": -1, "producer_epoch": -1}
    refused = await env.call(ApiKey.INIT_PRODUCER_ID, 4, body, principal="User:alice")
    assert refused["error_code"] == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    answer = await env.call(ApiKey.INIT_PRODUCER_ID, 4, dict(body, transactional_id="tx"), principal="User:alice")
    assert answer["error_code"] == E.NONE
    added = await env.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": answer["producer_id"],
        "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": "a", "partitions": [0]}, {"name": "b", "partitions": [0]}]},
        principal="User:alice")
    errors = {t["name"]: t["results_by_partition"][0]["partition_error_code"]
              for t in added["results_by_topic_v3_and_below"]}
    assert errors == {"a": E.OPERATION_NOT_ATTEMPTED, "b": E.TOPIC_AUTHORIZATION_FAILED}
    offsets = await env.call(ApiKey.ADD_OFFSETS_TO_TXN, 3, {"transactional_id": "tx", "producer_id": 0,
                                                             "producer_epoch": 0, "group_id": "g"},
                             principal="User:alice")
    assert offsets["error_code"] == E.GROUP_AUTHORIZATION_FAILED
    verify = await env.call(ApiKey.ADD_PARTITIONS_TO_TXN, 4, {"transactions": []}, principal="User:alice")
    assert verify["error_code"] == E.CLUSTER_AUTHORIZATION_FAILED
    listed = await env.call(ApiKey.LIST_TRANSACTIONS, 0, {"state_filters": [], "producer_id_filters": []},
                            principal="User:bob")
    assert listed["transaction_states"] == []
    listed = await env.call(ApiKey.LIST_TRANSACTIONS, 0, {"state_filters": [], "producer_id_filters": []},
                            principal="User:alice")
    assert [t["transactional_id"] for t in listed["transaction_states"]] == ["tx"]
    await store.stop()


async def test_txn_offset_commit_pending_until_the_marker(tmp_path: Path) -> None:
    env = make_env(tmp_path, CONFIG)
    await env.create_topic("a", 1)
    await ready(env)
    assert (await env.call(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0}))["error_code"] == E.NONE
    await until(lambda: 0 in env.coordinator.store.owned, "the offsets partition")
    pid = (await init(env))["producer_id"]

    async def commit_offset(offset: int, member_id: str = "", generation: int = -1) -> int:
        added = await env.call(ApiKey.ADD_OFFSETS_TO_TXN, 3, {"transactional_id": "tx", "producer_id": pid,
                                                               "producer_epoch": 0, "group_id": "g"})
        assert added["error_code"] == E.NONE
        answer = await env.call(ApiKey.TXN_OFFSET_COMMIT, 3, {
            "transactional_id": "tx", "group_id": "g", "producer_id": pid, "producer_epoch": 0,
            "generation_id": generation, "member_id": member_id, "group_instance_id": None,
            "topics": [{"name": "a", "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                     "committed_leader_epoch": -1, "committed_metadata": "m"}]}]})
        return int(answer["topics"][0]["partitions"][0]["error_code"])

    async def fetched(require_stable: bool) -> tuple[int, int]:
        answer = await env.call(ApiKey.OFFSET_FETCH, 7, {"group_id": "g", "require_stable": require_stable,
                                                          "topics": [{"name": "a", "partition_indexes": [0]}]})
        p = answer["topics"][0]["partitions"][0]
        return int(p["error_code"]), int(p["committed_offset"])

    async def finish(commit: bool, state: TxnState) -> None:
        assert await end(env, pid, 0, commit) == E.NONE
        await until(lambda: (m := env.txn.store.get("tx")) is not None and m.state is state, state.display)

    assert await commit_offset(5, member_id="not-a-member") == E.UNKNOWN_MEMBER_ID  # KIP-447
    assert await commit_offset(5, generation=3) == E.ILLEGAL_GENERATION
    assert await commit_offset(5) == E.NONE
    assert await fetched(True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    assert await fetched(False) == (E.NONE, -1)  # not visible before the marker
    await finish(True, TxnState.COMPLETE_COMMIT)
    assert await fetched(True) == (E.NONE, 5)
    assert await commit_offset(9) == E.NONE
    await finish(False, TxnState.COMPLETE_ABORT)
    assert await fetched(True) == (E.NONE, 5)  # aborted: dropped
    assert await commit_offset(12) == E.NONE  # left open across a reload of the offsets partition
    env.coordinator.on_resign(0)
    env.coordinator.on_become_leader(0)
    await until(lambda: 0 in env.coordinator.store.owned, "the reload")
    group = env.coordinator.store.get_group("g")
    assert group is not None and group.offsets[("a", 0)].offset == 5
    assert {tp: o.offset for tp, o in group.pending_txn_offsets[pid].items()} == {("a", 0): 12}
    await finish(True, TxnState.COMPLETE_COMMIT)
    assert await fetched(True) == (E.NONE, 12)


async def test_a_new_coordinator_loads_beyond_its_high_watermark(tmp_path: Path) -> None:
    """A new leader's high watermark can lag behind what its predecessor acknowledged: a PrepareCommit in the
    log above the HW (appended here straight to the log, as a follower would have fetched it) is loaded too."""
    from moldau.broker.coordinator.txn_metadata import TransactionMetadata
    from moldau.protocol.transaction_log import transaction_key, transaction_value

    env = make_env(tmp_path, CONFIG)
    await env.create_topic("a", 1)
    await ready(env)
    partition = env.txn.store.partition_for("late")
    meta = TransactionMetadata("late", 77, producer_epoch=0, state=TxnState.ONGOING, partitions={("a", 0)},
                               txn_start_timestamp=0, txn_last_update_timestamp=0)
    transit = meta.prepare_abort_or_commit(TxnState.PREPARE_COMMIT, 10)
    p = env.replica_manager.get_partition(TRANSACTION_STATE_TOPIC, partition)
    assert p is not None
    p.log.append_as_follower(build_batch([(transaction_key("late"), transaction_value(transit.log_value()), [],
                                           10)], base_offset=p.log.log_end_offset))
    assert p.high_watermark < p.log.log_end_offset
    epoch = env.txn.store.epoch_of(partition)
    assert epoch is not None
    env.txn.on_resign(partition)
    env.txn.on_become_leader(partition, epoch + 1)
    await until(lambda: (m := env.txn.store.get("late")) is not None and m.state is TxnState.COMPLETE_COMMIT,
                "the loaded PrepareCommit completed")
    assert env.markers.calls[-1][:3] == (77, 0, True)


async def test_idle_transactional_ids_expire(tmp_path: Path) -> None:
    env = make_env(tmp_path, dict(CONFIG, **{"transactional.id.expiration.ms": "5000"}))
    await ready(env)
    assert (await init(env))["error_code"] == E.NONE
    assert (await init(env, tid="other"))["error_code"] == E.NONE
    env.clock.advance(4000)
    assert (await init(env, tid="other"))["error_code"] == E.NONE  # used again: not idle
    env.clock.advance(1000)
    env.timer.advance(3600000)  # transaction.remove.expired.transaction.cleanup.interval.ms
    await until(lambda: env.txn.store.get("tx") is None, "the expiry")
    assert env.txn.store.get("other") is not None
    partition = env.txn.store.partition_for("tx")
    epoch = env.txn.store.epoch_of(partition)
    assert epoch is not None
    env.txn.on_resign(partition)  # the tombstone is in the log: a reload does not bring it back
    env.txn.on_become_leader(partition, epoch + 1)
    await until(lambda: partition in env.txn.store.owned, "the reload")
    assert env.txn.store.get("tx") is None
    described = await env.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["tx"]})
    assert described["transaction_states"][0]["error_code"] == E.TRANSACTIONAL_ID_NOT_FOUND


async def test_the_offsets_load_reads_beyond_the_high_watermark(tmp_path: Path) -> None:
    """As for __transaction_state: a commit acknowledged by the previous leader may lie above a new leader's high
    watermark; loading __consumer_offsets to its log end keeps it."""
    from moldau.protocol import consumer_offsets as fmt

    env = make_env(tmp_path, CONFIG)
    await env.create_topic("a", 1)
    assert (await env.call(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0}))["error_code"] == E.NONE
    await until(lambda: 0 in env.coordinator.store.owned, "the offsets partition")
    p = env.replica_manager.get_partition("__consumer_offsets", 0)
    assert p is not None
    record = (fmt.offset_key("g", "a", 0), fmt.offset_value(42, -1, "", 10), [], 10)
    p.log.append_as_follower(build_batch([record], base_offset=p.log.log_end_offset))
    assert p.high_watermark < p.log.log_end_offset
    env.coordinator.on_resign(0)
    env.coordinator.on_become_leader(0)
    await until(lambda: 0 in env.coordinator.store.owned, "the reload")
    group = env.coordinator.store.get_group("g")
    assert group is not None and group.offsets[("a", 0)].offset == 42


async def commit_with_markers_held(tmp_path: Path, partitions: int = 1) -> tuple[Env, int]:
    """An env whose producer "tx" committed a transaction on a-0 (EndTxn answered) while its marker cannot land
    (NOT_LEADER_OR_FOLLOWER, retried by the round until a test sets ``env.markers.answer`` back): (env, pid)."""
    env = make_env(tmp_path, CONFIG)
    await env.create_topic("a", partitions)
    await ready(env)
    pid = (await init(env))["producer_id"]
    assert await add(env, pid, 0, {"a": [0]}) == {("a", 0): 0}
    env.markers.answer = E.NOT_LEADER_OR_FOLLOWER
    assert await end(env, pid, 0, True) == E.NONE
    await until(lambda: len(env.markers.calls) >= 1, "a marker attempt")
    return env, pid


async def test_the_next_transaction_waits_for_the_markers_of_the_previous(tmp_path: Path, monkeypatch: Any) -> None:
    """AddPartitionsToTxn of the next transaction, sent while the previous one's markers are on their way, is
    answered once they are written (not CONCURRENT_TRANSACTIONS at once), so an EndTxn(abort) right after it
    finds the transaction Ongoing; a round that outlasts the bound still answers CONCURRENT_TRANSACTIONS."""
    from moldau.broker.coordinator import txn_coordinator

    env, pid = await commit_with_markers_held(tmp_path)
    next_add = asyncio.ensure_future(add(env, pid, 0, {"a": [0]}))
    await asyncio.sleep(0.05)
    assert not next_add.done()  # waiting for the round
    env.markers.answer = E.NONE
    assert await next_add == {("a", 0): 0}
    meta = env.txn.store.get("tx")
    assert meta is not None and meta.state is TxnState.ONGOING
    assert await end(env, pid, 0, False) == E.NONE  # librdkafka's abort right after a commit

    monkeypatch.setattr(txn_coordinator, "MARKER_ROUND_WAIT_S", 0.1)
    await until(lambda: meta.state is TxnState.COMPLETE_ABORT, "CompleteAbort")
    assert await add(env, pid, 0, {"a": [0]}) == {("a", 0): 0}
    env.markers.answer = E.NOT_LEADER_OR_FOLLOWER
    assert await end(env, pid, 0, True) == E.NONE
    assert await add(env, pid, 0, {"a": [0]}) == {("a", 0): E.CONCURRENT_TRANSACTIONS}
    env.markers.answer = E.NONE
    await until(lambda: meta.state is TxnState.COMPLETE_COMMIT, "CompleteCommit")


def state_batches(env: Env, tid: str = "tx") -> list[list[TxnState | None]]:
    """The batches of the transactional id's __transaction_state partition, each as the states it holds."""
    from moldau.protocol import transaction_log as fmt
    from moldau.protocol.records import iter_headers, iter_records

    p = env.replica_manager.get_partition(TRANSACTION_STATE_TOPIC, env.txn.store.partition_for(tid))
    assert p is not None
    data = p.log.read(p.log.log_start_offset, 1 << 20, max_offset=p.log.log_end_offset, min_one=True)
    buf = b"".join(region.read() for region in data.regions)
    return [[None if r.value is None else TxnState(fmt.read_value(bytes(r.value)).state_id)
             for r in iter_records(memoryview(buf)[pos:pos + h.total_size], h)]
            for pos, h in iter_headers(buf)]


async def test_the_next_transaction_goes_in_one_batch_with_complete_commit(tmp_path: Path) -> None:
    """The first AddPartitionsToTxn of the next transaction, waiting for the previous one's markers, is written
    together with its CompleteCommit: one batch (one replication round trip), answered once it is replicated;
    a second request of the producer waiting meanwhile goes the usual way after it."""
    env, pid = await commit_with_markers_held(tmp_path, partitions=2)
    before = len(state_batches(env))
    first = asyncio.ensure_future(add(env, pid, 0, {"a": [1]}))
    offsets = asyncio.ensure_future(env.call(ApiKey.ADD_OFFSETS_TO_TXN, 3, {
        "transactional_id": "tx", "producer_id": pid, "producer_epoch": 0, "group_id": "g"}))
    await until(lambda: (r := env.txn._rounds.get("tx")) is not None and r.successor is not None, "the successor")
    assert not first.done() and not offsets.done()
    env.markers.answer = E.NONE
    assert await first == {("a", 1): 0}
    assert (await offsets)["error_code"] == E.NONE
    batches = state_batches(env)[before:]
    assert batches[0] == [TxnState.COMPLETE_COMMIT, TxnState.ONGOING]  # one batch, in this order
    assert batches[1:] == [[TxnState.ONGOING]]  # the group's offsets partition added by the second request
    meta = env.txn.store.get("tx")
    assert meta is not None and meta.state is TxnState.ONGOING and meta.pending_state is None
    assert meta.partitions == {("a", 1), ("__consumer_offsets", 0)}
    assert meta.txn_start_timestamp == env.clock.time_ms()
    # A reload reads the pair as the log says: the next transaction Ongoing, the previous one complete.
    partition = env.txn.store.partition_for("tx")
    epoch = env.txn.store.epoch_of(partition)
    assert epoch is not None
    env.txn.on_resign(partition)
    env.txn.on_become_leader(partition, epoch + 1)
    await until(lambda: (m := env.txn.store.get("tx")) is not None and m.state is TxnState.ONGOING, "the reload")
    assert env.txn.store.get("tx").partitions == {("a", 1), ("__consumer_offsets", 0)}  # type: ignore[union-attr]
    assert await end(env, pid, 0, True) == E.NONE
    await until(lambda: (m := env.txn.store.get("tx")) is not None and m.state is TxnState.COMPLETE_COMMIT,
                "the second commit")


async def test_a_failed_write_with_the_successor_retries_complete_commit_alone(tmp_path: Path,
                                                                              monkeypatch: Any) -> None:
    """The write of CompleteCommit with the next Ongoing fails (the partition cannot take it): the request
    waiting hears the coordinator error (retriable), the round writes CompleteCommit alone, and the client's
    retry then opens the transaction."""
    env, pid = await commit_with_markers_held(tmp_path)
    store, write = env.txn.store, env.txn.store.write
    failed: list[object] = []

    async def failing_once(tid: str, transit: Any, epoch: int) -> E:
        if not failed:
            failed.append(transit)
            return E.COORDINATOR_NOT_AVAILABLE  # as an append refused for too small an ISR is answered
        return await write(tid, transit, epoch)

    monkeypatch.setattr(store, "write", failing_once)
    before = len(state_batches(env))
    waiting = asyncio.ensure_future(add(env, pid, 0, {"a": [0]}))
    await until(lambda: (r := env.txn._rounds.get("tx")) is not None and r.successor is not None, "the successor")
    env.markers.answer = E.NONE
    assert await waiting == {("a", 0): E.COORDINATOR_NOT_AVAILABLE}
    assert isinstance(failed[0], tuple) and [t.state for t in failed[0]] == [TxnState.COMPLETE_COMMIT,
                                                                          TxnState.ONGOING]
    meta = env.txn.store.get("tx")
    assert meta is not None
    await until(lambda: meta.state is TxnState.COMPLETE_COMMIT, "CompleteCommit written alone")
    assert await add(env, pid, 0, {"a": [0]}) == {("a", 0): 0}
    assert state_batches(env)[before:] == [[TxnState.COMPLETE_COMMIT], [TxnState.ONGOING]]


async def test_a_successor_of_a_resigning_coordinator_hears_not_coordinator(tmp_path: Path) -> None:
    env, pid = await commit_with_markers_held(tmp_path)
    waiting = asyncio.ensure_future(add(env, pid, 0, {"a": [0]}))
    await until(lambda: (r := env.txn._rounds.get("tx")) is not None and r.successor is not None, "the successor")
    env.txn.on_resign(env.txn.store.partition_for("tx"))
    assert await waiting == {("a", 0): E.NOT_COORDINATOR}


def reopen_replica(env: Env, topic: str, partition: int, leader_epoch: int) -> None:
    """What a LeaderAndIsr does for a replica this broker has not opened yet (after a restart)."""
    from moldau.broker.metadata import PartitionState

    state = PartitionState(partition, leader=0, leader_epoch=leader_epoch, replicas=[0], isr=[0])
    assert env.replica_manager.become_leader_or_follower(topic, state, {}) == E.NONE


async def test_a_coordinator_named_before_its_replica_leads_waits_for_it(tmp_path: Path) -> None:
    """After a restart the metadata can name this broker leader of a __transaction_state partition before the
    LeaderAndIsr opens the local replica. The load waits for the replica instead of reading nothing: it used to
    forget every transactional id of the partition, so a PrepareCommit was never completed (its partitions' last
    stable offset stuck for good) and the producer got a new producer id (found by moldau-verify --workload txn
    with a kill -9)."""
    env, pid = await commit_with_markers_held(tmp_path)
    partition = env.txn.store.partition_for("tx")
    epoch = env.txn.store.epoch_of(partition)
    assert epoch is not None
    env.txn.on_resign(partition)
    del env.replica_manager.partitions[(TRANSACTION_STATE_TOPIC, partition)]  # restarted: not open yet
    env.markers.answer = E.NONE
    env.markers.calls.clear()
    env.txn.on_become_leader(partition, epoch + 1)  # the metadata says "leader" ...
    await asyncio.sleep(0.05)
    assert (await init(env))["error_code"] == E.COORDINATOR_LOAD_IN_PROGRESS
    assert env.txn.store.get("tx") is None and env.markers.calls == []
    reopen_replica(env, TRANSACTION_STATE_TOPIC, partition, epoch + 1)  # ... and then the LeaderAndIsr comes
    await until(lambda: (m := env.txn.store.get("tx")) is not None and m.state is TxnState.COMPLETE_COMMIT,
                "the resumed commit")
    assert env.markers.calls[-1][:3] == (pid, 0, True)
    again = await init(env)
    assert (again["error_code"], again["producer_id"], again["producer_epoch"]) == (E.NONE, pid, 1)


async def test_the_offsets_load_waits_for_its_replica_to_lead(tmp_path: Path) -> None:
    """The group coordinator's load has the same wait: read before the replica is open, a group's committed
    offsets were forgotten after a restart (its consumers started over from auto.offset.reset)."""
    from moldau.protocol import consumer_offsets as fmt

    env = make_env(tmp_path, CONFIG)
    await env.create_topic("a", 1)
    assert (await env.call(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0}))["error_code"] == E.NONE
    await until(lambda: 0 in env.coordinator.store.owned, "the offsets partition")
    p = env.replica_manager.get_partition("__consumer_offsets", 0)
    assert p is not None
    record = (fmt.offset_key("g", "a", 0), fmt.offset_value(42, -1, "", 10), [], 10)
    p.log.append_as_follower(build_batch([record], base_offset=p.log.log_end_offset))
    env.coordinator.on_resign(0)
    del env.replica_manager.partitions[("__consumer_offsets", 0)]
    env.coordinator.on_become_leader(0)
    await asyncio.sleep(0.05)
    assert 0 in env.coordinator.store.loading and env.coordinator.store.get_group("g") is None
    reopen_replica(env, "__consumer_offsets", 0, 1)
    await until(lambda: 0 in env.coordinator.store.owned, "the reload")
    group = env.coordinator.store.get_group("g")
    assert group is not None and group.offsets[("a", 0)].offset == 42
