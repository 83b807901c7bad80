"""ZooKeeper mode's ``MetadataStore``: the cluster view every broker keeps, fed by the controller's UpdateMetadata.

Reads (Metadata, FindCoordinator, ...) come from this cache. Writes go to ZooKeeper the way Kafka's AdminZkClient
does it: any broker may write a new topic's znodes (the controller reacts to them); deletion marks the topic under
/admin/delete_topics. Waiting for the controller's answer is bounded by the caller's timeout.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from moldau.broker.controller import requests as R
from moldau.broker.controller.zk import KafkaZk, TopicExistsError
from moldau.broker.controller.zk_data import new_topic_id
from moldau.broker.metadata import BrokerEndpoint, MetadataStore, PartitionState, TopicError, TopicMetadata
from moldau.protocol.errors import ErrorCode

log = logging.getLogger("moldau.metadata_cache")

DELETE_TIMEOUT_MS = 30000


class MetadataCache(MetadataStore):
    def __init__(self, broker_id: int, cluster_id: str, endpoint: BrokerEndpoint, zk: KafkaZk,
                 is_active_controller: Callable[[], bool], *, by_listener: dict[str, BrokerEndpoint] | None = None,
                 default_listener: str | None = None) -> None:
        """`endpoint`: this broker's endpoint on `default_listener` (the inter-broker listener, used by replica
        fetchers); `by_listener`: all its advertised endpoints, answered before the first UpdateMetadata."""
        super().__init__()
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.endpoint = endpoint
        self.by_listener = dict(by_listener or {})
        self.default_listener = default_listener
        self.zk = zk
        self._is_active_controller = is_active_controller
        self._topics: dict[str, TopicMetadata] = {}
        # broker id -> listener name -> endpoint: every endpoint of every live broker (UpdateMetadata v1+).
        self._live: dict[int, dict[str, BrokerEndpoint]] = {}
        # Until the first UpdateMetadata: the brokers registered in ZooKeeper when this one registered (seed_live).
        self._seed: dict[int, dict[str, BrokerEndpoint]] = {}
        self._controller_id = -1
        self._watched_controller_id = -1
        # The highest controller epoch seen in a controller request (fencing of zombie controllers).
        self.controller_epoch = -1
        self._changed = asyncio.Event()

    # ------------------------------------------------------------------ reads
    @property
    def controller_id(self) -> int:
        if self._is_active_controller():
            return self.broker_id
        return self._watched_controller_id if self._watched_controller_id != -1 else self._controller_id

    def is_controller(self) -> bool:
        return self._is_active_controller()

    def on_controller_change(self, controller_id: int) -> None:
        self._watched_controller_id = controller_id

    def live_broker_count(self) -> int:
        return len(self._live) or 1  # one len(): safe on the metrics' scrape thread

    def seed_live(self, brokers: Mapping[int, Mapping[str, BrokerEndpoint]]) -> None:
        """The brokers registered in ZooKeeper, read at start-up: Metadata answers list them until the first
        UpdateMetadata arrives. Otherwise a restarted broker answers in that gap with itself alone while naming the
        controller (watched in ZooKeeper), and a client cannot reach the controller it was told of: librdkafka's
        admin requests then wait for their whole timeout."""
        self._seed = {b: dict(endpoints) for b, endpoints in brokers.items()}
        self.encoded_answers.clear()

    def live_brokers(self, listener: str | None = None) -> list[BrokerEndpoint]:
        live = self._live or self._seed
        if not live:  # before the first UpdateMetadata, without a seed: at least ourselves, so clients can bootstrap
            return [self.endpoint if listener is None else self.by_listener.get(listener, self.endpoint)]
        name = listener if listener is not None else self.default_listener
        out = []
        for broker_id in sorted(live):
            endpoints = live[broker_id]
            found = endpoints.get(name) if name is not None else None
            if found is None and listener is None:
                # Default view without a match (an UpdateMetadata v0 names no listener): the first endpoint.
                found = next(iter(endpoints.values()), None)
            if found is not None:  # a client's listener: brokers without it are left out, as Kafka does
                out.append(found)
        return out

    def topics(self) -> dict[str, TopicMetadata]:
        return self._topics

    def is_live(self, broker_id: int) -> bool:
        return broker_id in self._live

    # ------------------------------------------------------------------ UpdateMetadata
    def update(self, body: Mapping[str, Any]) -> None:
        """Applies an UpdateMetadata body (already checked for stale epochs)."""
        self.encoded_answers.clear()  # live brokers or the controller may change without any topic changing
        self._controller_id = int(body["controller_id"])
        if body.get("live_brokers") is not None:
            self._live = {b: {name: BrokerEndpoint(b, host, port, rack) for name, host, port in endpoints}
                          for b, rack, endpoints in R.live_broker_endpoints(body)}
        changed: dict[str, TopicMetadata | None] = {}
        for topic, topic_id, s in R.partition_states(body):
            current = self._topics.get(topic)
            if s["leader"] == R.LEADER_DURING_DELETE:
                if current is not None:
                    current.partitions.pop(s["partition_index"], None)
                    if not current.partitions:
                        del self._topics[topic]
                        changed[topic] = None
                    else:
                        changed[topic] = current
                continue
            if current is None or (topic_id is not None and current.topic_id != topic_id):
                current = TopicMetadata(topic, topic_id or bytes(16), {}, {}, is_internal=topic.startswith("__"))
                self._topics[topic] = current
            current.partitions[s["partition_index"]] = PartitionState(
                s["partition_index"], s["leader"], s["leader_epoch"], list(s["replicas"]), list(s["isr"]),
                list(s.get("offline_replicas") or []))
            changed[topic] = current
        for name, changed_topic in changed.items():
            self._notify(name, changed_topic)
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for(self, predicate: Callable[[], bool], timeout_ms: int) -> bool:
        deadline = time.monotonic() + timeout_ms / 1000
        while not predicate():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            try:
                async with asyncio.timeout(remaining):  # not wait_for: see moldau.tasks
                    await self._changed.wait()
            except TimeoutError:
                return predicate()
        return True

    def _has_leaders(self, name: str, count: int) -> bool:
        topic = self._topics.get(name)
        return topic is not None and len(topic.partitions) >= count and \
            all(p.leader >= 0 for p in topic.partitions.values())

    # ------------------------------------------------------------------ writes
    async def create_topic(self, name: str, assignment: dict[int, list[int]], configs: dict[str, str], *,
                           timeout_ms: int | None = None) -> TopicMetadata | None:
        try:
            await self.zk.create_topic(name, new_topic_id(), assignment, configs)
        except TopicExistsError:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.") from None
        log.info("wrote the znodes of topic %s (%d partitions)", name, len(assignment))
        if timeout_ms is None:
            return self._topics.get(name)
        if not await self.wait_for(lambda: self._has_leaders(name, len(assignment)), timeout_ms):
            raise TopicError(ErrorCode.REQUEST_TIMED_OUT,
                             f"Topic '{name}' was created, but its partitions had no leaders within {timeout_ms} ms")
        return self._topics.get(name)

    async def delete_topic(self, name: str, *, timeout_ms: int = DELETE_TIMEOUT_MS) -> None:
        if name not in self._topics and await self.zk.assignment(name) is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic.")
        await self.zk.mark_topic_for_deletion(name)
        if not await self.wait_for(lambda: name not in self._topics, timeout_ms):
            raise TopicError(ErrorCode.REQUEST_TIMED_OUT, f"Topic '{name}' is marked for deletion; the "
                                                          f"controller has not finished within {timeout_ms} ms")
