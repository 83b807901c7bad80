"""Replication throttles (KIP-73): the throttled replica lists, the rate, and the leader's side of Fetch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from moldau.broker.apis.fetch import _read_all
from moldau.broker.config import BrokerConfig, ConfigError
from moldau.broker.replication_quota import ALL, ReplicationQuota, throttled_partitions
from moldau.protocol.api import ApiKey
from moldau.protocol.records import build_batch
from tests.unit.broker.apis.handler_env import make_env

KEY = "leader.replication.throttled.replicas"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_throttled_replica_lists_are_kafkas() -> None:
    assert throttled_partitions("", 1) == frozenset()
    assert throttled_partitions("*", 1) == {ALL}
    assert throttled_partitions("0:1,0:2, 1:2,2:1", 1) == {0, 2}
    BrokerConfig({}).topic_config({KEY: "0:1,1:2"})
    for bad in ("0", "a:1", "0:1,*x"):
        with pytest.raises(ConfigError, match=KEY):
            BrokerConfig({}).topic_config({KEY: bad})


def test_quota_is_exceeded_above_its_bound_only_for_listed_replicas() -> None:
    clock = Clock()
    bound = [1000]
    overrides: dict[str, dict[str, str]] = {"t": {KEY: "0:7"}}
    quota = ReplicationQuota(KEY, 7, lambda: bound[0], overrides, 11, 1, clock)
    assert quota.is_throttled("t", 0) and not quota.is_throttled("t", 1) and not quota.is_throttled("u", 0)
    quota.record(9_000)  # 9000 B over the 10 s minimum window: 900 B/s
    assert not quota.exceeded()
    quota.record(2_000)
    assert quota.exceeded()
    bound[0] = 2**63 - 1  # the broker setting removed (dynamic): never exceeded
    assert not quota.exceeded()
    overrides["t"] = {KEY: "*"}  # the topic's list changed (config change): read again
    assert quota.is_throttled("t", 5)


async def test_the_leader_holds_back_throttled_out_of_sync_followers(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    await env.create_topic("t")
    answer = await env.call(ApiKey.PRODUCE, 8, {"acks": 1, "timeout_ms": 1000, "transactional_id": None,
                                                "topic_data": [{"name": "t", "partition_data": [
                                                    {"index": 0, "records": build_batch(
                                                        [(None, b"x" * 5000, [], 1000)])}]}]})
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0
    rm = env.replica_manager
    clock = Clock()
    rm.leader_throttle = quota = ReplicationQuota(KEY, 0, lambda: 100, rm.topic_overrides, 11, 1, clock)

    def follower_fetch(replica_id: int = 5) -> Any:
        body: Any = {"replica_id": replica_id, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                     "isolation_level": 0, "topics": [{"topic": "t", "partitions": [
                         {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                          "partition_max_bytes": 1 << 20}]}]}
        responses, total, _, throttled = _read_all(env.ctx.replicas, body, 12)
        return total, throttled

    size, throttled = follower_fetch()
    assert size > 5000 and throttled == 0  # the topic lists no throttled replica
    rm.topic_overrides["t"] = {KEY: "0:0"}
    assert follower_fetch() == (size, size)  # throttled replica, rate still under its bound: served, counted
    quota.record(size)
    assert quota.exceeded()
    assert follower_fetch() == (0, 0)  # above the bound: no data for it
    assert follower_fetch(replica_id=0)[0] == size  # an in-sync replica (the ISR is [0]) is never held back
