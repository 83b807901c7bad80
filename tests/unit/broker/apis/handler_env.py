"""A standalone broker's real components in-process (logs in tmp_path, manual clock and timers), and `call()`.

`call()` takes a request the way the wire does: the body is encoded with the API's real (strict) request encoder
and decoded again, the routed handler runs on it, and its response goes through the strict response encoder of
that version and back through the decoder. So a handler that misspells a response field, or answers a field in
the wrong shape, fails here in the unit tier -- not only in a slow integration test.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moldau.broker.apis import ADVERTISED_VERSIONS, ROUTES
from moldau.broker.apis.context import (
    AclDeps,
    BrokerContext,
    ConfigDeps,
    ControlDeps,
    GroupDeps,
    PartitionAdminDeps,
    ReplicaDeps,
    StandaloneCluster,
    TopicDeps,
    TxnDeps,
)
from moldau.broker.config import BrokerConfig
from moldau.broker.coordinator.coordinator import GroupConfig, GroupCoordinator
from moldau.broker.coordinator.offsets import OffsetStore
from moldau.broker.coordinator.txn_coordinator import TransactionCoordinator, TxnConfig
from moldau.broker.coordinator.txn_log import TxnStateStore
from moldau.broker.dynamic_config import DynamicBrokerConfig
from moldau.broker.fetch_session import FetchSessionCache
from moldau.broker.metadata import BrokerEndpoint, StandaloneMetadata
from moldau.broker.producer_ids import FileProducerIdManager
from moldau.broker.purgatory import ManualTimer, Purgatory
from moldau.broker.replica_manager import ReplicaManager
from moldau.broker.request_channel import EncodedBody, Request
from moldau.broker.security.acl_store import AclStore
from moldau.broker.security.authorizer import Authorizer
from moldau.protocol.api import REGISTRY
from moldau.protocol.errors import ErrorCode
from moldau.protocol.header import RequestHeader, encode_request_header, request_header_version
from moldau.protocol.types import INT32, TopicPartition
from moldau.storage.config import LogConfig, ManualClock
from moldau.storage.log_manager import LogManager


class RecordingMarkers:
    """The coordinator's way to partition leaders, in-process: every call is recorded and goes through the real
    WriteTxnMarkers handler of this broker (``env.call``), unless a test sets ``answer`` to an error, which every
    partition then hears instead (a leader that cannot write)."""

    def __init__(self, metadata: StandaloneMetadata) -> None:
        self.metadata = metadata
        self.calls: list[tuple[int, int, bool, int, list[TopicPartition]]] = []
        self.answer = ErrorCode.NONE
        self.env: Env | None = None

    def leader_of(self, tp: TopicPartition) -> int | None:
        topic = self.metadata.topic(tp[0])
        state = None if topic is None else topic.partitions.get(tp[1])
        return None if state is None else state.leader

    def topic_exists(self, topic: str) -> bool:
        return self.metadata.topic(topic) is not None

    async def write_markers(self, leader_id: int, producer_id: int, producer_epoch: int, commit: bool,
                            coordinator_epoch: int, partitions: list[TopicPartition]
                            ) -> dict[TopicPartition, ErrorCode]:
        self.calls.append((producer_id, producer_epoch, commit, coordinator_epoch, list(partitions)))
        if self.answer != ErrorCode.NONE or self.env is None:
            return {tp: self.answer for tp in partitions}
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        answer = await self.env.call(27, 1, {"markers": [{
            "producer_id": producer_id, "producer_epoch": producer_epoch, "transaction_result": commit,
            "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]}]})
        return {(t["name"], p["partition_index"]): ErrorCode(p["error_code"])
                for m in answer["markers"] for t in m["topics"] for p in t["partitions"]}


@dataclass
class Env:
    ctx: BrokerContext
    clock: ManualClock
    timer: ManualTimer
    metadata: StandaloneMetadata
    replica_manager: ReplicaManager
    coordinator: GroupCoordinator
    log_manager: LogManager
    txn: TransactionCoordinator
    markers: RecordingMarkers

    async def create_topic(self, name: str, partitions: int = 1) -> None:
        await self.metadata.create_topic(name, {p: [0] for p in range(partitions)}, {})

    def record_appends(self, topic: str, index: int) -> list[int]:
        """The sizes of the partition log's appends from now on (one per write of the segment), in order: the
        log's own append, observed."""
        log = self.replica_manager.partitions[(topic, index)].log
        sizes: list[int] = []
        real_append = log._append

        def recording(data: Any, *args: Any, **kwargs: Any) -> Any:
            sizes.append(len(data))
            return real_append(data, *args, **kwargs)
        log._append = recording  # type: ignore[method-assign]
        return sizes

    async def call(self, api_key: int, version: int, body: dict[str, Any],
                   principal: str = "User:ANONYMOUS") -> dict[str, Any]:
        api = REGISTRY[api_key]
        wire = api.encode_request(version, body)
        decoded, _ = api.request_decoder(version)(wire, 0)
        request = Request(RequestHeader(api_key, version, 1, "unit-test"), api, wire, 0, "127.0.0.1",
                          principal=principal)
        result = ROUTES[api_key](self.ctx, request, decoded)
        if inspect.isawaitable(result):
            result = await asyncio.wait_for(result, 10)
        assert isinstance(result, dict), f"{api.name} v{version} answered {result!r}"
        # A pre-encoded body (a cached Metadata answer) goes out as it is, as the network layer sends it.
        encoded = result.data if isinstance(result, EncodedBody) else api.encode_response(version, result)
        answer, pos = api.response_decoder(version)(encoded, 0)
        assert pos == len(encoded)
        return answer


def make_env(tmp_path: Path, config: dict[str, str] | None = None, acls: AclStore | None = None) -> Env:
    """``acls``: an authorizer over that (started) store, with the config's super.users and
    allow.everyone.if.no.acl.found, as the server builds it when authorizer.class.name is set."""
    clock = ManualClock()
    timer = ManualTimer()
    cfg = BrokerConfig({"broker.id": "0", "log.dirs": str(tmp_path / "logs"), **(config or {})})
    lm = LogManager([tmp_path / "logs"], LogConfig(), clock)
    lm.load()
    dynamic = DynamicBrokerConfig(cfg, 0)
    rm = ReplicaManager(0, lm, dynamic.log_config, clock=clock)
    dynamic.listeners.append(rm.on_broker_config)
    metadata = StandaloneMetadata(0, "unit-cluster", BrokerEndpoint(0, "127.0.0.1", 9092), tmp_path / "logs")
    metadata.listeners.append(rm.on_topic_change)
    metadata.load()
    fetch, produce = Purgatory("Fetch", timer), Purgatory("Produce", timer)
    delete_records = Purgatory("DeleteRecords", timer)
    rm.low_watermark_listeners.append(delete_records.check_and_complete)
    rm.append_listeners.append(fetch.check_and_complete)
    rm.hw_listeners.append(fetch.check_and_complete)
    rm.hw_batch_listeners.append(produce.check_and_complete_many)
    sessions = FetchSessionCache(1000)
    rm.append_listeners.append(sessions.appended)
    rm.hw_listeners.append(sessions.partition_changed)
    coordinator = GroupCoordinator(OffsetStore(rm, clock, 1, broker_id=0), timer, clock, GroupConfig(), 0)
    coordinator.startup()
    metadata.listeners.append(coordinator.on_topic_change)
    rm.txn_marker_listeners.append(coordinator)
    auth = Authorizer() if acls is None else Authorizer(acls.cache, cfg.get("super.users"),
                                                         bool(cfg.get("allow.everyone.if.no.acl.found")))
    topics = TopicDeps(0, cfg, metadata, auth)
    cluster = StandaloneCluster(metadata, dynamic)
    producer_ids = FileProducerIdManager(tmp_path / "logs")
    markers = RecordingMarkers(metadata)
    txn = TransactionCoordinator(TxnStateStore(rm, clock, int(cfg.get("transaction.state.log.num.partitions"))),
                                 producer_ids.next_id, markers, timer, clock, TxnConfig.from_broker_config(cfg), 0)
    txn.startup()
    metadata.listeners.append(txn.on_topic_change)
    ctx = BrokerContext(
        replicas=ReplicaDeps(rm, produce_purgatory=produce, fetch_purgatory=fetch, auth=auth,
                             fetch_sessions=sessions), topics=topics,
        groups=GroupDeps(topics, coordinator, clock, txn), control=ControlDeps(0, rm, cluster, auth),
        producer_ids=producer_ids, api_versions=ADVERTISED_VERSIONS,
        transactions=TxnDeps(txn, metadata, coordinator, clock, auth),
        configs=ConfigDeps(0, dynamic, metadata, cluster, auth),
        partition_admin=PartitionAdminDeps(topics, cluster, rm, delete_records), acls=AclDeps(auth, acls))
    env = Env(ctx, clock, timer, metadata, rm, coordinator, lm, txn, markers)
    markers.env = env
    return env


def request_frame(api_key: int, version: int, correlation_id: int, body: dict[str, Any],
                  client_id: str = "test") -> bytes:
    """A request as a client writes it on the wire: size prefix, header, body."""
    api = REGISTRY[api_key]
    out = bytearray(4)
    encode_request_header(out, RequestHeader(api_key, version, correlation_id, client_id),
                          request_header_version(api_key, api.is_flexible(version), version))
    api.request_encoder(version)(out, [], body)
    INT32.pack_into(out, 0, len(out) - 4)
    return bytes(out)
