"""Broker side of the controller protocol: the metadata cache and the fencing of controller requests."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from moldau.broker.apis.context import ControlDeps, StandaloneCluster
from moldau.broker.apis.inter_broker import handle_leader_and_isr, handle_stop_replica, handle_update_metadata
from moldau.broker.controller import requests as R
from moldau.broker.controller import zk_data as Z
from moldau.broker.controller.controller import Controller, ControllerSettings
from moldau.broker.metadata import BrokerEndpoint, PartitionState
from moldau.broker.metadata_cache import MetadataCache
from moldau.broker.replica_manager import ReplicaManager
from moldau.broker.zk_mode import ZkCluster
from moldau.protocol.errors import ErrorCode
from moldau.storage.config import LogConfig
from moldau.storage.log_manager import LogManager

LIVE = [Z.BrokerInfo(1, "h1", 9092, "ra", [("PLAINTEXT", "PLAINTEXT", "h1", 9092)]),
        Z.BrokerInfo(2, "h2", 9093, "rb", [("PLAINTEXT", "PLAINTEXT", "h2", 9093)])]


def _info(partition: int, leader: int, epoch: int = 0) -> R.PartitionInfo:
    return R.PartitionInfo("t", b"\x05" * 16, partition, Z.LeaderIsr(leader, epoch, [1, 2], 3, 0), [1, 2, 3])


async def _cache() -> MetadataCache:
    return MetadataCache(2, "cluster", BrokerEndpoint(2, "h2", 9093), zk=None, is_active_controller=lambda: False)  # type: ignore[arg-type]


async def test_update_metadata_fills_the_cache_and_notifies() -> None:
    cache = await _cache()
    assert [b.broker_id for b in cache.live_brokers()] == [2]  # before any update: itself
    seen: list[tuple[str, Any]] = []
    cache.listeners.append(lambda name, topic: seen.append((name, topic)))
    cache.update(R.update_metadata(1, 3, 10, [_info(0, 1), _info(1, 2)], LIVE))
    assert [(b.broker_id, b.host, b.port, b.rack) for b in cache.live_brokers()] == \
        [(1, "h1", 9092, "ra"), (2, "h2", 9093, "rb")]
    topic = cache.topic("t")
    assert topic is not None and topic.topic_id == b"\x05" * 16
    assert topic.partitions[1].leader == 2 and topic.partitions[0].offline_replicas == [3]
    assert seen and seen[-1][0] == "t"
    assert cache.controller_id == 1
    # Leader -2: the partitions are being deleted.
    cache.update(R.update_metadata(1, 3, 10, [_info(0, R.LEADER_DURING_DELETE), _info(1, R.LEADER_DURING_DELETE)],
                                   LIVE))
    assert cache.topic("t") is None and seen[-1] == ("t", None)


def _replica_manager(path: Path) -> ReplicaManager:
    lm = LogManager([path], LogConfig())
    lm.load()
    rm = ReplicaManager(2, lm, lambda _: LogConfig())
    rm.become_leader_or_follower("t", PartitionState(0, 2, 0, [2], [2], zk_version=0), {})
    return rm


async def test_requests_from_old_controllers_or_for_old_registrations_are_refused(tmp_path: Path) -> None:
    cache = await _cache()
    rm = _replica_manager(tmp_path)
    controller = Controller(2, None, ControllerSettings(), lambda: 50)  # type: ignore[arg-type]  # never started
    ctx = ControlDeps(2, rm, ZkCluster(None, cache, controller, lambda: 50))  # type: ignore[arg-type]
    assert handle_update_metadata(ctx, None, R.update_metadata(1, 5, 50, [_info(0, 1)], LIVE))["error_code"] == 0
    assert cache.controller_epoch == 5
    stale = R.update_metadata(1, 4, 50, [_info(0, 2)], LIVE)
    assert handle_update_metadata(ctx, None, stale)["error_code"] == ErrorCode.STALE_CONTROLLER_EPOCH
    assert cache.topic("t").partitions[0].leader == 1  # type: ignore[union-attr]
    old_me = R.update_metadata(1, 5, 49, [_info(0, 2)], LIVE)
    assert handle_update_metadata(ctx, None, old_me)["error_code"] == ErrorCode.STALE_BROKER_EPOCH
    refused = handle_stop_replica(ctx, None, R.stop_replica(1, 4, 50, [("t", 0)], True))
    assert refused["error_code"] == ErrorCode.STALE_CONTROLLER_EPOCH and rm.get_partition("t", 0) is not None
    answer = handle_stop_replica(ctx, None, R.stop_replica(2, 6, 50, [("t", 0)], True))
    assert answer["error_code"] == 0 and rm.get_partition("t", 0) is None and cache.controller_epoch == 6
    assert answer["partition_errors"] == [{"topic_name": "t", "partition_index": 0, "error_code": 0}]


def test_standalone_brokers_refuse_controller_requests(tmp_path: Path) -> None:
    ctx = ControlDeps(0, _replica_manager(tmp_path), StandaloneCluster())
    assert handle_update_metadata(ctx, None, R.update_metadata(1, 1, -1, [], LIVE))["error_code"] == \
        ErrorCode.NOT_CONTROLLER


async def test_the_cache_answers_each_listener_with_its_endpoints() -> None:
    own = {"INTERNAL": BrokerEndpoint(2, "i2", 19093), "EXTERNAL": BrokerEndpoint(2, "e2", 9093)}
    cache = MetadataCache(2, "cluster", own["INTERNAL"], zk=None, is_active_controller=lambda: False,  # type: ignore[arg-type]
                          by_listener=own, default_listener="INTERNAL")
    # Before the first UpdateMetadata: itself, on the listener asked.
    assert [(b.host, b.port) for b in cache.live_brokers("EXTERNAL")] == [("e2", 9093)]
    assert [(b.host, b.port) for b in cache.live_brokers()] == [("i2", 19093)]
    live = [Z.BrokerInfo(1, "i1", 19092, None, [("INTERNAL", "PLAINTEXT", "i1", 19092),
                                                 ("EXTERNAL", "PLAINTEXT", "e1", 9092)]),
            Z.BrokerInfo(2, "i2", 19093, None, [("INTERNAL", "PLAINTEXT", "i2", 19093),
                                                 ("EXTERNAL", "PLAINTEXT", "e2", 9093)]),
            Z.BrokerInfo(3, "i3", 19094, None, [("INTERNAL", "PLAINTEXT", "i3", 19094)])]
    cache.update(R.update_metadata(1, 3, 10, [], live))
    assert [(b.broker_id, b.host, b.port) for b in cache.live_brokers("EXTERNAL")] == \
        [(1, "e1", 9092), (2, "e2", 9093)]  # broker 3 has no EXTERNAL listener: left out
    assert [(b.broker_id, b.host) for b in cache.live_brokers("INTERNAL")] == [(1, "i1"), (2, "i2"), (3, "i3")]
    assert [b.host for b in cache.live_brokers()] == ["i1", "i2", "i3"]  # replica fetchers: inter-broker
    assert cache.live_brokers("NONE") == []


async def test_metadata_handler_answers_on_the_request_listener(tmp_path: Path) -> None:
    from moldau.broker.apis.context import TopicDeps
    from moldau.broker.apis.metadata import handle_metadata
    from moldau.broker.config import BrokerConfig
    from moldau.broker.request_channel import EncodedBody, Request
    from moldau.protocol.api import REGISTRY
    from moldau.protocol.header import RequestHeader

    cache = MetadataCache(1, "cluster", BrokerEndpoint(1, "i1", 19092), zk=None,  # type: ignore[arg-type]
                          is_active_controller=lambda: False, default_listener="INTERNAL")
    live = [Z.BrokerInfo(1, "i1", 19092, None, [("INTERNAL", "PLAINTEXT", "i1", 19092),
                                                 ("EXTERNAL", "PLAINTEXT", "e1", 9092)]),
            Z.BrokerInfo(2, "i2", 19093, None, [("INTERNAL", "PLAINTEXT", "i2", 19093)])]
    cache.update(R.update_metadata(1, 3, 10, [_info(0, 1), _info(1, 2)], live))
    ctx = TopicDeps(1, BrokerConfig({"broker.id": "1", "log.dirs": str(tmp_path)}), cache)
    body = {"topics": [{"name": "t", "topic_id": bytes(16)}], "allow_auto_topic_creation": False}

    async def ask(listener: str) -> dict[str, Any]:
        request = Request(RequestHeader(3, 9, 1, "unit"), REGISTRY[3], b"", 0, "127.0.0.1", listener=listener)
        answer: dict[str, Any] = await handle_metadata(ctx, request, body)  # type: ignore[assignment]
        if isinstance(answer, EncodedBody):  # kept encoded (an answer without errors)
            answer = REGISTRY[3].response_decoder(9)(answer.data, 0)[0]
        return answer

    external = await ask("EXTERNAL")
    assert [(b["node_id"], b["host"], b["port"]) for b in external["brokers"]] == [(1, "e1", 9092)]
    errors = {p["partition_index"]: p["error_code"] for p in external["topics"][0]["partitions"]}
    assert errors == {0: ErrorCode.NONE, 1: ErrorCode.LISTENER_NOT_FOUND}  # broker 2 has no EXTERNAL
    internal = await ask("INTERNAL")
    assert [(b["node_id"], b["host"]) for b in internal["brokers"]] == [(1, "i1"), (2, "i2")]
    assert all(p["error_code"] == ErrorCode.NONE for p in internal["topics"][0]["partitions"])


class GatedConfigs(ZkCluster):
    """Topic configs as ZooKeeper would give them, each answer held until every topic has been asked for."""

    def __init__(self, cache: MetadataCache, controller: Controller, topics: int) -> None:
        super().__init__(None, cache, controller, lambda: 50)  # type: ignore[arg-type]  # no ZooKeeper needed
        self.asked: list[str] = []
        self.topics = topics
        self.all_asked = asyncio.Event()

    async def topic_configs(self, topic: str) -> dict[str, str]:
        self.asked.append(topic)
        if len(self.asked) == self.topics:
            self.all_asked.set()
        await asyncio.wait_for(self.all_asked.wait(), 5)  # one read after the other never gets here in time
        return {"min.insync.replicas": "2"} if topic == "a" else {}


async def test_a_leader_and_isr_reads_its_topics_configs_side_by_side_then_applies_every_state(
        tmp_path: Path) -> None:
    cache = await _cache()
    rm = _replica_manager(tmp_path)
    controller = Controller(2, None, ControllerSettings(), lambda: 50)  # type: ignore[arg-type]  # never started
    cluster = GatedConfigs(cache, controller, topics=3)
    ctx = ControlDeps(2, rm, cluster)
    infos = [R.PartitionInfo(t, bytes([i + 1]) * 16, p, Z.LeaderIsr(2, 1, [2, 1], 3, 0), [2, 1])
             for i, t in enumerate("abc") for p in range(4)]
    answer = await handle_leader_and_isr(ctx, None, R.leader_and_isr(1, 3, 50, infos, LIVE))  # type: ignore[arg-type]
    assert answer["error_code"] == 0 and sorted(cluster.asked) == ["a", "b", "c"]
    assert all(e["error_code"] == 0 for e in answer["partition_errors"]) and len(answer["partition_errors"]) == 12
    for t in "abc":
        for p in range(4):
            partition = rm.get_partition(t, p)
            assert partition is not None and partition.is_leader and partition.leader_epoch == 1
            assert partition.min_insync_replicas == (2 if t == "a" else 1)
