"""The broker's side of ZooKeeper mode: connect, broker id, registration, controller, controlled shutdown.

``BrokerServer`` calls these in order: ``connect()`` (before the logs load: the broker id -- ``broker_id`` after
it -- and cluster id come from ZooKeeper), ``producer_ids()``, ``register()`` (after the listeners are bound, as Kafka does), ``start_controller()``
(after the request handlers run, since the controller talks to its own broker over the network too),
``controlled_shutdown()`` on SIGTERM and ``close()`` last.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kazoo.exceptions import BadVersionError, NoNodeError

from moldau.broker.config import BrokerConfig
from moldau.broker.controller.controller import Controller, ControllerSettings
from moldau.broker.controller.zk import KafkaZk, ZkClient
from moldau.broker.controller.zk_configs import ConfigChangeWatcher, ZkConfigStore
from moldau.broker.controller.zk_data import BrokerInfo, LeaderIsr
from moldau.broker.dynamic_config import DEFAULT_ENTITY, DynamicBrokerConfig
from moldau.broker.metadata import BrokerEndpoint, TopicError, new_cluster_id, read_meta_broker_id
from moldau.broker.metadata_cache import MetadataCache
from moldau.broker.partition import Partition
from moldau.broker.producer_ids import BLOCK_SIZE, ZkProducerIdManager
from moldau.broker.quota_config import ZK_ENTITY_TYPES
from moldau.broker.quotas import BrokerQuotas
from moldau.broker.replica_manager import ReplicaManager
from moldau.broker.security.inter_broker import inter_broker_security
from moldau.connection import BrokerConnection, api_for
from moldau.protocol.api import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.types import TopicPartition

log = logging.getLogger("moldau.zk_mode")


def retag_logging(broker_id: int) -> None:
    """The log formatter's broker-id tag, once a generated id is known."""
    for handler in logging.getLogger().handlers:
        for f in handler.filters:
            if hasattr(f, "broker_id"):
                f.broker_id = broker_id


class ZkCluster:
    """``ClusterControl`` in ZooKeeper mode: fencing by controller and broker epoch, topic configs from ZooKeeper,
    UpdateMetadata into the metadata cache, controlled shutdown run by the active controller."""

    def __init__(self, zk: KafkaZk, cache: MetadataCache, controller: Controller,
                 broker_epoch: Callable[[], int]) -> None:
        self.zk = zk
        self.cache = cache
        self.controller = controller
        self._broker_epoch = broker_epoch

    @property
    def configs(self) -> ZkConfigStore:
        return ZkConfigStore(self.zk.client)

    def fence(self, controller_id: int, controller_epoch: int, broker_epoch: int) -> ErrorCode:
        cache = self.cache
        if controller_epoch < cache.controller_epoch:
            log.warning("refusing a request of controller %d with stale controller epoch %d (current %d)",
                        controller_id, controller_epoch, cache.controller_epoch)
            return ErrorCode.STALE_CONTROLLER_EPOCH
        current = self._broker_epoch()
        if broker_epoch != -1 and broker_epoch < current:
            log.warning("refusing a request of controller %d for broker epoch %d (current %d)", controller_id,
                        broker_epoch, current)
            return ErrorCode.STALE_BROKER_EPOCH
        cache.controller_epoch = controller_epoch
        return ErrorCode.NONE

    async def topic_configs(self, topic: str) -> dict[str, str]:
        return await self.zk.topic_config(topic)

    def apply_update_metadata(self, body: Mapping[str, Any]) -> None:
        self.cache.update(body)

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[ErrorCode, list[TopicPartition]]:
        if not self.controller.active:
            return ErrorCode.NOT_CONTROLLER, []
        return await self.controller.controlled_shutdown(broker_id, broker_epoch)

    async def entity_configs(self, entity_type: str, name: str) -> dict[str, str]:
        return await self.configs.read(entity_type, name)

    async def alter_entity_configs(self, entity_type: str, name: str, configs: dict[str, str]) -> None:
        # As Kafka's AdminZkClient: any broker writes the znode and the notification; every broker (this one
        # too) applies the change when its /config/changes watch fires.
        await self.configs.write(entity_type, name, configs)

    async def list_entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        return await self.configs.list(entity_type)

    # --- partition admin: CreatePartitions writes the topic znode (any broker may, as AdminZkClient does; the
    # handler only runs on the controller), ElectLeaders runs on the active controller's event queue.
    async def partition_assignment(self, topic: str) -> dict[int, list[int]] | None:
        found = await self.zk.assignment(topic)
        if found is None:
            return None
        # A partition being reassigned counts with its target replicas (without those being removed).
        return {p: [r for r in rs if r not in found.removing.get(p, [])] for p, rs in found.partitions.items()}

    async def create_partitions(self, topic: str, additions: dict[int, list[int]], timeout_ms: int | None) -> None:
        try:
            assignment = await self.zk.add_partitions(topic, additions)
        except NoNodeError:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{topic}' does not exist.") from None
        except BadVersionError:
            raise TopicError(ErrorCode.INVALID_REQUEST, f"The partitions of topic '{topic}' changed while they "
                                                        "were being added; retry") from None
        if timeout_ms is None:
            return
        count = len(assignment.partitions)
        if not await self.cache.wait_for(lambda: _has_leaders(self.cache, topic, count), timeout_ms):
            raise TopicError(ErrorCode.REQUEST_TIMED_OUT, f"The partitions of topic '{topic}' were added, but not "
                                                          f"all had leaders within {timeout_ms} ms")

    async def elect_leaders(self, election_type: int, partitions: list[TopicPartition] | None
                            ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        if not self.controller.active:
            wanted = partitions if partitions is not None else [
                (t.name, p) for t in self.cache.topics().values() for p in t.partitions]
            return {tp: (ErrorCode.NOT_CONTROLLER, None) for tp in wanted}
        return await self.controller.admin.elect_leaders(election_type, partitions)

    async def alter_reassignments(self, wanted: dict[TopicPartition, list[int] | None]
                                  ) -> dict[TopicPartition, tuple[ErrorCode, str | None]] | None:
        if not self.controller.active:
            return None
        return await self.controller.admin.reassign(wanted)

    async def list_reassignments(self, wanted: list[TopicPartition] | None
                                 ) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]] | None:
        if not self.controller.active:
            return None
        return await self.controller.admin.list_reassignments(wanted)


def _has_leaders(cache: MetadataCache, topic: str, count: int) -> bool:
    t = cache.topic(topic)
    return t is not None and len(t.partitions) >= count and all(s.leader >= 0 for s in t.partitions.values())


class ZkMode:
    def __init__(self, config: BrokerConfig, log_dirs: list[Path], broker_id: int) -> None:
        self.config = cfg = config
        self.log_dirs = log_dirs
        self.broker_id = broker_id
        self.client = ZkClient(str(cfg.get("zookeeper.connect")), int(cfg.get("zookeeper.session.timeout.ms")),
                               cfg.zookeeper_connection_timeout_ms)
        self.zk = KafkaZk(self.client)
        self.inter_broker_security = inter_broker_security(cfg)
        self.controller: Controller | None = None
        self.cache: MetadataCache | None = None
        self.broker_epoch = -1
        self.cluster: ZkCluster | None = None
        self._producer_ids: ZkProducerIdManager | None = None
        self._registration: BrokerInfo | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.config_watcher: ConfigChangeWatcher | None = None

    async def connect(self) -> str:
        """Connects, creates the persistent paths, settles the broker id; returns the cluster id."""
        cfg = self.config
        await self.client.start()
        log.info("connected to ZooKeeper at %s (session 0x%x)", self.client.connect_string, self.client.session_id)
        await self.zk.ensure_persistent_paths()
        if self.broker_id < 0 or cfg.broker_id < 0:
            recorded = read_meta_broker_id(self.log_dirs)
            if recorded is not None:
                broker_id = recorded
            elif cfg.get("broker.id.generation.enable"):
                broker_id = await self.zk.generate_broker_id(int(cfg.get("reserved.broker.max.id")))
                log.info("generated broker.id %d from /brokers/seqid", broker_id)
            else:
                raise RuntimeError("broker.id is not set and broker.id.generation.enable is false")
            self.broker_id = broker_id
            retag_logging(broker_id)
        return await self.zk.cluster_id(new_cluster_id())

    async def producer_ids(self) -> ZkProducerIdManager:
        broker_id = self.broker_id
        manager = ZkProducerIdManager(lambda: self.zk.allocate_producer_id_block(broker_id, BLOCK_SIZE))
        await manager.start()
        self._producer_ids = manager
        return manager

    async def register(self, cluster_id: str, endpoint: BrokerEndpoint, endpoints: list[tuple[str, str, str, int]],
                       by_listener: dict[str, BrokerEndpoint] | None = None) -> MetadataCache:
        """Registers /brokers/ids/<id> with the advertised (listener, protocol, host, port) endpoints."""
        cfg = self.config
        broker_id = self.broker_id
        self._registration = BrokerInfo(broker_id, endpoint.host, endpoint.port, cfg.broker_rack, endpoints)
        settings = ControllerSettings(
            unclean_leader_election=bool(cfg.get("unclean.leader.election.enable")),
            auto_leader_rebalance=bool(cfg.get("auto.leader.rebalance.enable")),
            imbalance_check_interval_s=float(cfg.get("leader.imbalance.check.interval.seconds")),
            imbalance_percentage=int(cfg.get("leader.imbalance.per.broker.percentage")),
            socket_timeout_ms=int(cfg.get("controller.socket.timeout.ms")),
            listener_name=cfg.inter_broker_listener_name, security=self.inter_broker_security)
        self.controller = Controller(broker_id, self.zk, settings, lambda: self.broker_epoch)
        controller = self.controller
        self.cache = MetadataCache(broker_id, cluster_id, endpoint, self.zk, lambda: controller.active,
                                   by_listener=by_listener, default_listener=cfg.inter_broker_listener_name)
        controller.controller_listeners.append(self.cache.on_controller_change)
        self.cluster = ZkCluster(self.zk, self.cache, controller, lambda: self.broker_epoch)
        await self._register()
        # Clients may ask this broker before the controller's first UpdateMetadata reaches it: list the brokers
        # registered now (the controller among them) rather than this one alone.
        registered = await self.zk.live_brokers()
        self.cache.seed_live({b: {name: BrokerEndpoint(b, host, port, info.rack) for name, _, host, port in info.endpoints}
                              for b, info in registered.items()})
        self.client.state_listeners.append(self._on_session_event)
        return self.cache

    async def _register(self) -> None:
        assert self._registration is not None
        protocols = {name: proto for name, proto, _, _ in self._registration.endpoints}
        self.broker_epoch = await self.zk.register_broker(self._registration, protocols)
        log.info("registered /brokers/ids/%d (broker epoch %d) with endpoints %s", self.broker_id,
                 self.broker_epoch, [f"{n}://{h}:{p}" for n, _, h, p in self._registration.endpoints])

    def start_controller(self) -> None:
        assert self.controller is not None
        self.controller.start()

    def _on_session_event(self, event: str) -> None:
        if event == "LOST":
            log.warning("ZooKeeper session expired; will register again when reconnected")
        elif event == "SUSPENDED":
            log.warning("ZooKeeper connection lost; reconnecting")
        elif event == "RECONNECTED_NEW_SESSION":
            task = asyncio.get_running_loop().create_task(self._reregister(), name="zk-reregister")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        if self.controller is not None:
            self.controller.on_session_event(event)

    async def _reregister(self) -> None:
        try:
            await self._register()
        except Exception:
            log.exception("registering again after the session expired failed")

    async def write_isr(self, partition: Partition, isr: list[int]) -> tuple[int, list[int]] | None:
        """The replica manager's ISR writer: a versioned write of the partition state znode."""
        state = LeaderIsr(partition.leader_id, partition.leader_epoch, isr, partition.controller_epoch,
                          partition.zk_version)
        return await self.zk.update_leader_and_isr(partition.topic, partition.index, state)

    async def report_log_dir_failure(self) -> None:
        try:
            await self.zk.report_log_dir_failure(self.broker_id)
        except Exception as exc:  # ZooKeeper unreachable: the controller learns at our next LeaderAndIsr answer
            log.error("cannot report the failed log dir to the controller: %r", exc)

    async def controlled_shutdown(self) -> bool:
        """Asks the controller to move this broker's leaderships away; retries as configured."""
        cfg = self.config
        if not cfg.get("controlled.shutdown.enable") or self.broker_epoch < 0:
            return False
        broker_id = self.broker_id
        timeout_s = int(cfg.get("controller.socket.timeout.ms")) / 1000
        backoff_s = int(cfg.get("controlled.shutdown.retry.backoff.ms")) / 1000
        retries = int(cfg.get("controlled.shutdown.max.retries"))
        for attempt in range(1, retries + 1):
            try:
                async with asyncio.timeout(timeout_s):  # not wait_for: see moldau.tasks
                    error, remaining = await self._ask_controller(broker_id)
                if error == ErrorCode.NONE and not remaining:
                    log.info("controlled shutdown succeeded: this broker leads no partitions any more")
                    return True
                log.warning("controlled shutdown attempt %d of %d: %s, still leading %d partitions", attempt,
                            retries, error.name, len(remaining))
            except Exception as exc:
                log.warning("controlled shutdown attempt %d of %d failed: %r", attempt, retries, exc)
            if attempt < retries:
                await asyncio.sleep(backoff_s)
        log.warning("controlled shutdown did not complete; shutting down anyway")
        return False

    async def resign_controller(self) -> None:
        """Shutdown: if this broker is the controller, another one takes over now (Controller.retire)."""
        if self.controller is not None:
            await self.controller.retire()

    async def _ask_controller(self, broker_id: int) -> tuple[ErrorCode, list[TopicPartition]]:
        controller_id = await self.zk.controller_id()
        if controller_id == -1:
            return ErrorCode.NOT_CONTROLLER, []
        if controller_id == broker_id and self.controller is not None and self.controller.active:
            return await self.controller.controlled_shutdown(broker_id, self.broker_epoch)
        info = (await self.zk.live_brokers()).get(controller_id)
        if info is None:
            return ErrorCode.NOT_CONTROLLER, []
        cfg = self.config
        async with BrokerConnection(info.host, info.port, client_id=f"broker-{broker_id}-controlled-shutdown",
                                    request_timeout_ms=int(cfg.get("controller.socket.timeout.ms")),
                                    security=self.inter_broker_security) as conn:
            response = await conn.send(api_for(ApiKey.CONTROLLED_SHUTDOWN),
                                       {"broker_id": broker_id, "broker_epoch": self.broker_epoch})
        remaining = [(p["topic_name"], p["partition_index"]) for p in response["remaining_partitions"]]
        return ErrorCode.for_code(int(response["error_code"])), remaining

    # ------------------------------------------------------------------ dynamic configs
    async def load_broker_configs(self, dynamic: DynamicBrokerConfig) -> None:
        """The dynamic broker configs (/config/brokers/<default> and /<id>) at start-up."""
        store = ZkConfigStore(self.client)
        dynamic.update(await store.read("brokers", DEFAULT_ENTITY), await store.read("brokers", str(self.broker_id)))

    async def start_config_watch(self, replica_manager: ReplicaManager, dynamic: DynamicBrokerConfig,
                                 quotas: BrokerQuotas | None = None) -> None:
        store = ZkConfigStore(self.client)
        broker_id = self.broker_id

        async def on_change(entity_type: str, name: str) -> None:
            if entity_type == "topics":
                configs = await store.read("topics", name)
                log.info("topic %s configs changed: %s", name, configs)
                replica_manager.update_topic_config(name, configs)
                controller = self.controller
                if controller is not None and controller.active and name in controller.ctx.topic_configs:
                    controller.ctx.topic_configs[name] = configs  # unclean.leader.election.enable
            elif entity_type in ZK_ENTITY_TYPES:
                if quotas is not None:  # client quotas (a user's SCRAM credentials change lands here too)
                    quotas.apply(entity_type, name, await store.read(entity_type, name))
            elif name in (DEFAULT_ENTITY, str(broker_id)):
                log.info("dynamic broker configs of %s changed", name)
                dynamic.update(await store.read("brokers", DEFAULT_ENTITY), await store.read("brokers", str(broker_id)))

        self.config_watcher = ConfigChangeWatcher(self.client, on_change)
        await self.config_watcher.start()
        # A broker config changed between the first read (before the logs loaded) and the watch is read now.
        await self.load_broker_configs(dynamic)
        if quotas is not None:  # every quota entity, read after the watch is set so no change is missed
            quotas.load({t: await store.list(t) for t in ZK_ENTITY_TYPES})

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self.config_watcher is not None:
            await self.config_watcher.stop()
        if self.controller is not None:
            await self.controller.stop()
        if self._producer_ids is not None:
            self._producer_ids.stop()
        await self.client.close()
