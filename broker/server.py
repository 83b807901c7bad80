"""Builds the broker's components, starts them in order and stops them in reverse."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from moldau.broker.apis import ADVERTISED_VERSIONS, GROUP_ROUTES, ROUTES
from moldau.broker.apis.context import (
    AclDeps,
    BrokerContext,
    ClusterControl,
    ConfigDeps,
    ControlDeps,
    GroupDeps,
    PartitionAdminDeps,
    ReplicaDeps,
    StandaloneCluster,
    TopicDeps,
    TxnDeps,
)
from moldau.broker.apis.txn_markers import TxnMarkerDeps, write_markers_locally
from moldau.broker.config import BrokerConfig, ConfigError
from moldau.broker.coordinator.coordinator import GroupConfig, GroupCoordinator
from moldau.broker.coordinator.offsets import OffsetStore
from moldau.broker.coordinator.txn_coordinator import TransactionCoordinator, TxnConfig
from moldau.broker.coordinator.txn_log import TRANSACTION_STATE_TOPIC, TxnStateStore
from moldau.broker.coordinator.txn_markers import InterBrokerMarkerChannel
from moldau.broker.dynamic_config import DEFAULT_ENTITY, DynamicBrokerConfig
from moldau.broker.fetch_session import FetchSessionCache
from moldau.broker.gc_freeze import GcFreezer, raise_young_threshold
from moldau.broker.handler_pool import HandlerPool
from moldau.broker.malloc_tuning import keep_freed_buffers
from moldau.broker.metadata import BrokerEndpoint, MetadataStore, StandaloneMetadata, ensure_meta_properties
from moldau.broker.metrics import BrokerMetrics
from moldau.broker.network import ConnectionLimits, SocketServer
from moldau.broker.producer_ids import FileProducerIdManager, ZkProducerIdManager
from moldau.broker.purgatory import LoopTimer, Purgatory
from moldau.broker.quota_config import ZK_ENTITY_TYPES
from moldau.broker.quotas import BrokerQuotas
from moldau.broker.remote_log_manager import RemoteLogManager, build_remote_log_manager
from moldau.broker.replica_fetcher import FetcherSettings, ReplicaFetcherManager
from moldau.broker.replica_manager import ReplicaManager
from moldau.broker.replication_quota import ReplicationQuota
from moldau.broker.request_channel import RequestChannel
from moldau.broker.security.acl_store import ACLS_FILE, AclStore, FileAclStore, ZkAclStore
from moldau.broker.security.authorizer import Authorizer
from moldau.broker.security.credentials import (
    USERS_FILE,
    CredentialStore,
    FileCredentialStore,
    ZkCredentialStore,
)
from moldau.broker.security.inter_broker import inter_broker_security
from moldau.broker.security.listener_config import listener_security
from moldau.broker.zk_mode import ZkMode
from moldau.storage.config import SystemClock
from moldau.storage.log_manager import LogManager, ShutdownProgress
from moldau.tasks import cancel_and_wait

if TYPE_CHECKING:
    from moldau.broker.controller.controller import Controller
    from moldau.broker.coordinator.group import GroupMetadata
    from moldau.broker.log_cleaner import CleanerService
    from moldau.broker.partition import Partition
    from moldau.storage.log import TopicPartition

log = logging.getLogger("moldau.server")
ROLL_FLUSH_INTERVAL_S = 1.0  # how soon a segment finished by a roll is fsynced (Kafka: at once, in the background)

# Seconds the shutdown steps after controlled shutdown (fetchers, ISR writes, connections, handlers, ZooKeeper)
# may take together; each one that overruns is abandoned with a warning, so SIGTERM ends within
# controlled.shutdown.max.retries x controlled.shutdown.retry.backoff.ms + this, whatever ZooKeeper is doing.
# The log flush and the clean-shutdown marker come after and are never skipped.
SHUTDOWN_GRACE_S = 5.0
# Of that grace, what handing the controller role on may take (a ZooKeeper delete and closing the controller's
# broker connections); the ZooKeeper session's end removes /controller anyway.
CONTROLLER_RESIGN_S = 2.0
# How long a step cancelled at its deadline may take to end before it is left running, and the duration from
# which a step that ended in time is still logged (a step that eats most of the grace names itself).
STEP_CANCEL_WAIT_S = 0.25
SLOW_STEP_S = 0.5


async def _bounded(what: str, aw: Awaitable[Any], deadline: float) -> None:
    """Awaits one shutdown step until `deadline` (monotonic), then cancels it and goes on.

    Every outcome but a quick success is logged with the step's name and duration, so a slow shutdown names its
    culprit: a step that fails; one that ends in time but takes SLOW_STEP_S or more (info); one cancelled at the
    deadline, even if it then returns as if it had finished (it swallowed its cancellation); one that has not
    ended STEP_CANCEL_WAIT_S after its cancellation, which is left running. The caller's own cancellation goes
    through (asyncio.wait never swallows it; asyncio.wait_for on Python 3.11 would wait for the step to end)."""
    started = time.monotonic()
    step = asyncio.ensure_future(aw)
    try:
        await asyncio.wait({step}, timeout=max(deadline - started, 0.05))
    except asyncio.CancelledError:
        step.cancel()
        raise
    if step.done():
        took = time.monotonic() - started
        if not step.cancelled() and step.exception() is not None:
            log.error("shutdown: %s failed after %.2f s; going on", what, took, exc_info=step.exception())
        elif took >= SLOW_STEP_S:
            log.info("shutdown: %s took %.2f s", what, took)
        return
    ended = await cancel_and_wait([step], STEP_CANCEL_WAIT_S)
    took = time.monotonic() - started
    if not ended:
        log.warning("shutdown: %s did not finish in time and ignored its cancellation (%.2f s); going on without "
                    "it", what, took)
    elif step.cancelled():
        log.warning("shutdown: %s did not finish in time (%.2f s); cancelled it", what, took)
    elif step.exception() is not None:
        log.warning("shutdown: %s did not finish in time (%.2f s); cancelled, it ended with %r", what, took,
                    step.exception())
    else:
        log.warning("shutdown: %s did not finish in time (%.2f s) and swallowed its cancellation; going on", what,
                    took)


class BrokerServer:
    """One broker: starts and stops the components; handlers get typed slices of them (broker/apis/context.py)."""

    def __init__(self, config: BrokerConfig, *, owns_process: bool = False) -> None:
        """``owns_process``: the broker owns its process (``moldau-server``), so it may tune the process for
        itself: keep its partition state out of the garbage collector's full collections and collect its young
        generation less often (broker/gc_freeze.py), and keep freed large buffers mapped
        (broker/malloc_tuning.py); an in-process broker leaves the host process's collector and allocator
        alone."""
        self.config = config
        self.owns_process = owns_process
        self.broker_id = config.broker_id if config.broker_id >= 0 else 0
        self.clock = SystemClock()
        self.metrics = BrokerMetrics(num_io_threads=1, num_network_threads=1)
        self.log_dirs: list[Path] = list(config.log_dirs)
        self.log_manager: LogManager | None = None
        self.replica_manager: ReplicaManager | None = None
        self.metadata: MetadataStore | None = None
        self.fetch_purgatory: Purgatory | None = None
        self.fetch_sessions: FetchSessionCache | None = None
        self.gc_freezer: GcFreezer | None = None
        self.produce_purgatory: Purgatory | None = None
        self.delete_records_purgatory: Purgatory | None = None
        self.fetcher_manager: ReplicaFetcherManager | None = None
        self.producer_ids: FileProducerIdManager | ZkProducerIdManager | None = None
        self.zk_mode: ZkMode | None = None
        self.channel: RequestChannel | None = None
        self.socket_server: SocketServer | None = None
        self.scram_store: CredentialStore | None = None
        self.acl_store: AclStore | None = None  # when authorizer.class.name is set
        self.authorizer = Authorizer()
        self.handler_pool: HandlerPool | None = None
        self.group_coordinator: GroupCoordinator | None = None
        self.txn_coordinator: TransactionCoordinator | None = None
        self.txn_markers: InterBrokerMarkerChannel | None = None
        self.metrics_port: int | None = None
        self.dynamic = DynamicBrokerConfig(config, self.broker_id)  # replaced in start() once the id is known
        # Client quotas (docs/quotas.md): filled from ZooKeeper or the metadata file in start().
        self.quotas = BrokerQuotas(int(config.get("quota.window.num")), int(config.get("quota.window.size.seconds")),
                                   max_connection_creation_rate=int(config.get("max.connection.creation.rate")),
                                   controller_window_num=int(config.get("controller.quota.window.num")),
                                   controller_window_size_seconds=int(
                                       config.get("controller.quota.window.size.seconds")))
        self.cleaner_service: CleanerService | None = None
        self.remote_log_manager: RemoteLogManager | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.stopped = asyncio.Event()
        self.shutdown_progress = ShutdownProgress()  # the log close's, for the exit watchdog
        # Set when the broker must stop on its own (every log dir failed); __main__ exits with exit_code.
        self.stop_requested = asyncio.Event()
        self.exit_code = 0

    async def start(self) -> None:
        cfg = self.config
        t0 = time.monotonic()
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        zk_cluster_id: str | None = None
        if cfg.get("zookeeper.connect"):
            self.zk_mode = ZkMode(cfg, self.log_dirs, self.broker_id if cfg.broker_id >= 0 else -1)
            zk_cluster_id = await self.zk_mode.connect()
            self.broker_id = self.zk_mode.broker_id
        cluster_id = ensure_meta_properties(self.log_dirs, self.broker_id, zk_cluster_id)
        self.dynamic = dynamic = DynamicBrokerConfig(cfg, self.broker_id)
        if self.zk_mode is not None:
            await self.zk_mode.load_broker_configs(dynamic)
        self.log_manager = LogManager(self.log_dirs, dynamic.log_config(), self.clock,
                                      int(cfg.get("num.recovery.threads.per.data.dir")))
        self.log_manager.load()
        self.replica_manager = rm = ReplicaManager(
            self.broker_id, self.log_manager, dynamic.log_config, int(dynamic.get("min.insync.replicas")),
            clock=self.clock,
            replica_lag_time_max_ms=int(cfg.get("replica.lag.time.max.ms")),
            high_watermarks=self.log_manager.read_high_watermarks())
        window = int(cfg.get("replication.quota.window.num")), int(cfg.get("replication.quota.window.size.seconds"))
        rm.leader_throttle = ReplicationQuota(
            "leader.replication.throttled.replicas", self.broker_id,
            lambda: int(dynamic.get("leader.replication.throttled.rate")), rm.topic_overrides, *window)
        follower_throttle = ReplicationQuota(
            "follower.replication.throttled.replicas", self.broker_id,
            lambda: int(dynamic.get("follower.replication.throttled.rate")), rm.topic_overrides, *window)
        loop = asyncio.get_running_loop()
        self.fetch_purgatory = fetch_purgatory = Purgatory("Fetch", LoopTimer(loop), self.broker_id)
        self.produce_purgatory = produce_purgatory = Purgatory("Produce", LoopTimer(loop), self.broker_id)
        rm.append_listeners.append(fetch_purgatory.check_and_complete)
        rm.hw_listeners.append(fetch_purgatory.check_and_complete)
        rm.hw_batch_listeners.append(produce_purgatory.check_and_complete_many)
        # Incremental fetch sessions (KIP-227) keep the partitions that changed since their last answer.
        self.fetch_sessions = FetchSessionCache(int(cfg.get("max.incremental.fetch.session.cache.slots")))
        rm.append_listeners.append(self.fetch_sessions.appended)
        rm.hw_listeners.append(self.fetch_sessions.partition_changed)
        self.delete_records_purgatory = delete_records = Purgatory("DeleteRecords", LoopTimer(loop), self.broker_id)
        rm.low_watermark_listeners.append(delete_records.check_and_complete)
        if self.zk_mode is not None:
            rm.isr_writer = self.zk_mode.write_isr
            self.fetcher_manager = ReplicaFetcherManager(FetcherSettings(
                self.broker_id, max_wait_ms=int(cfg.get("replica.fetch.wait.max.ms")),
                min_bytes=int(cfg.get("replica.fetch.min.bytes")),
                max_bytes=int(cfg.get("replica.fetch.response.max.bytes")),
                partition_max_bytes=int(cfg.get("replica.fetch.max.bytes")),
                backoff_ms=int(cfg.get("replica.fetch.backoff.ms")),
                socket_timeout_ms=int(cfg.get("replica.socket.timeout.ms")),
                on_log_dir_failure=rm.log_dir_failed, security=self.zk_mode.inter_broker_security,
                throttle=follower_throttle),
                self._endpoint_of)
            rm.role_listeners.append(self.fetcher_manager.on_role_change)
        rm.log_dir_failure_listeners.append(self._on_log_dir_failure)
        if self.zk_mode is not None:
            self.producer_ids = await self.zk_mode.producer_ids()
        else:
            self.producer_ids = FileProducerIdManager(self.log_dirs[0])
        self.channel = RequestChannel(int(cfg.get("queued.max.requests")))
        listeners = [(e.name, e.host, e.port) for e in cfg.listeners]
        self.scram_store = self._credential_store()
        self.socket_server = SocketServer(listeners, self.channel, int(cfg.get("socket.request.max.bytes")),
                                          self.metrics, int(cfg.get("socket.send.buffer.bytes")),
                                          int(cfg.get("socket.receive.buffer.bytes")),
                                          limits=ConnectionLimits.from_config(cfg),
                                          security={e.name: listener_security(cfg, e) for e in cfg.listeners},
                                          credentials=self.scram_store, throttler=self.quotas)
        await self.socket_server.start()
        advertised = self.advertised_endpoints()
        by_listener = {name: BrokerEndpoint(self.broker_id, host, port, cfg.broker_rack)
                       for name, _, host, port in advertised}
        # The default endpoint (znode host/port, replica fetchers) is the inter-broker listener's.
        endpoint = by_listener.get(cfg.inter_broker_listener_name) or next(iter(by_listener.values()))
        metadata: MetadataStore
        # Registered before the standalone layers load, so the partitions loaded just before take them.
        dynamic.listeners.append(self._on_dynamic_config)
        if self.zk_mode is not None:
            metadata = await self.zk_mode.register(cluster_id, endpoint, advertised, by_listener)
        else:
            standalone = StandaloneMetadata(self.broker_id, cluster_id, endpoint, self.log_dirs[0], by_listener)
            standalone.listeners.append(self.replica_manager.on_topic_change)
            standalone.load()
            metadata = standalone
            dynamic.update(standalone.broker_configs.get(DEFAULT_ENTITY, {}),
                           standalone.broker_configs.get(str(self.broker_id), {}))
            self.quotas.load({t: {path[len(t) + 1:]: c for path, c in standalone.quota_configs.items()
                                  if path.startswith(t + "/")} for t in ZK_ENTITY_TYPES})
        self.metadata = metadata
        # --- group coordinator (consumer groups, __consumer_offsets) ---------------------------------------
        self.group_coordinator = GroupCoordinator(
            OffsetStore(self.replica_manager, self.clock, int(cfg.get("offsets.topic.num.partitions")),
                        load_buffer_size=int(cfg.get("offsets.load.buffer.size")),
                        max_metadata_size=int(cfg.get("offset.metadata.max.bytes")), broker_id=self.broker_id),
            LoopTimer(asyncio.get_running_loop()), self.clock, GroupConfig.from_broker_config(cfg), self.broker_id)
        self.group_coordinator.startup()
        self.group_coordinator.partition_counts = lambda: {n: len(t.partitions) for n, t in metadata.topics().items()}
        self.group_coordinator.topic_ids = lambda: {n: t.topic_id for n, t in metadata.topics().items()}
        metadata.listeners.append(self.group_coordinator.on_topic_change)
        self.replica_manager.txn_marker_listeners.append(self.group_coordinator)  # TxnOffsetCommit's offsets
        self.group_coordinator.on_topic_change("__consumer_offsets", metadata.topic("__consumer_offsets"))
        # --- end group coordinator -------------------------------------------------------------------------
        self._start_transaction_coordinator(metadata)
        if self.zk_mode is not None:  # before any LeaderAndIsr can read a topic's configs
            await self.zk_mode.start_config_watch(self.replica_manager, dynamic, self.quotas)
        await self._start_authorizer()
        self.remote_log_manager = self._remote_log_manager(advertised)
        self.handler_pool = HandlerPool(self.channel, ROUTES, self._handler_context(),
                                        int(cfg.get("num.io.threads")), self.metrics, GROUP_ROUTES,
                                        cpu_quota=self.quotas.request)
        self.handler_pool.start()
        if self.zk_mode is not None:
            self.zk_mode.start_controller()
        if self.remote_log_manager is not None:
            from moldau.broker.remote_log_metrics import RemoteLogCollector

            self.metrics.registry.register(RemoteLogCollector(self.remote_log_manager))
            self.remote_log_manager.start()
        self._wire_metrics()
        self._schedule("log-retention", int(cfg.get("log.retention.check.interval.ms")),
                       lambda: self._log_manager().cleanup(self.clock.time_ms()))
        self._schedule("log-flush", min(int(cfg.get("log.flush.scheduler.interval.ms")), 1 << 31),
                       lambda: self._log_manager().flush_due(self.clock.time_ms()))
        self._tasks.append(asyncio.create_task(self._flush_rolled_segments(), name="log-roll-flush"))
        self._schedule("recovery-point-checkpoint", int(cfg.get("log.flush.offset.checkpoint.interval.ms")),
                       lambda: self._log_manager().checkpoint())
        if cfg.get("log.cleaner.enable"):
            from moldau.broker.log_cleaner import CleanerService

            self.cleaner_service = CleanerService(self._log_manager, dynamic.current, self.metrics, self.clock)
            self._tasks += self.cleaner_service.start()
        self._schedule("isr-expiration", max(int(cfg.get("replica.lag.time.max.ms")) // 2, 1),
                       rm.maybe_shrink_isrs)
        self._schedule_async("highwatermark-checkpoint",
                             int(cfg.get("replica.high.watermark.checkpoint.interval.ms")),
                             rm.checkpoint_high_watermarks_in_background)
        # The partition state (loaded logs, then each burst of LeaderAndIsr or topic changes) leaves the garbage
        # collector's full collections once it settles (broker/gc_freeze.py).
        if self.owns_process:
            raise_young_threshold()
            keep_freed_buffers()  # the process's large buffers stay mapped between requests (broker/malloc_tuning.py)
            self.gc_freezer = freezer = GcFreezer(asyncio.get_running_loop())
            rm.role_listeners.append(lambda _partition, _leader: freezer.changed())
            if self.zk_mode is None:  # standalone: topic changes create the partitions
                metadata.listeners.append(lambda _name, _topic: freezer.changed())
            freezer.changed()
        log.info("Moldau broker %d started in %.2fs (cluster %s); advertised %s:%d", self.broker_id,
                 time.monotonic() - t0, cluster_id, endpoint.host, endpoint.port)

    def _start_transaction_coordinator(self, metadata: MetadataStore) -> None:
        """The transaction coordinator of the __transaction_state partitions this broker leads."""
        cfg, rm, producer_ids = self.config, self.replica_manager, self.producer_ids
        assert rm is not None and producer_ids is not None
        store = TxnStateStore(rm, self.clock, int(cfg.get("transaction.state.log.num.partitions")),
                              load_buffer_size=int(cfg.get("transaction.state.log.load.buffer.size")))
        if self.zk_mode is not None:
            self.txn_markers = InterBrokerMarkerChannel(
                metadata, self._endpoint_of, self.broker_id, security=self.zk_mode.inter_broker_security,
                request_timeout_ms=int(cfg.get("request.timeout.ms")))
        else:  # standalone: its own listener; the login is read when the first marker goes out
            self.txn_markers = InterBrokerMarkerChannel(
                metadata, self._endpoint_of, self.broker_id, security_from_config=lambda: inter_broker_security(cfg),
                request_timeout_ms=int(cfg.get("request.timeout.ms")))
        markers = TxnMarkerDeps(rm, timeout_ms=int(cfg.get("request.timeout.ms")))
        self.txn_markers.local = functools.partial(write_markers_locally, markers)
        self.txn_coordinator = coordinator = TransactionCoordinator(
            store, producer_ids.next_id, self.txn_markers, LoopTimer(asyncio.get_running_loop()), self.clock,
            TxnConfig.from_broker_config(cfg), self.broker_id)
        coordinator.startup()
        metadata.listeners.append(coordinator.on_topic_change)
        coordinator.on_topic_change(TRANSACTION_STATE_TOPIC, metadata.topic(TRANSACTION_STATE_TOPIC))

    def _handler_context(self) -> BrokerContext:
        """The typed dependencies of the request handlers, once every component has started."""
        rm, metadata, coordinator = self.replica_manager, self.metadata, self.group_coordinator
        fetch, produce, producer_ids = self.fetch_purgatory, self.produce_purgatory, self.producer_ids
        assert rm is not None and metadata is not None and coordinator is not None
        assert fetch is not None and produce is not None and producer_ids is not None
        assert self.delete_records_purgatory is not None and self.txn_coordinator is not None
        cluster: ClusterControl = StandaloneCluster(metadata if isinstance(metadata, StandaloneMetadata) else None,
                                                    self.dynamic, self.quotas.apply)
        if self.zk_mode is not None:
            assert self.zk_mode.cluster is not None
            cluster = self.zk_mode.cluster
        auth = self.authorizer
        topics = TopicDeps(self.broker_id, self.config, metadata, auth, self.quotas)
        return BrokerContext(
            replicas=ReplicaDeps(rm, produce_purgatory=produce, fetch_purgatory=fetch, auth=auth, quotas=self.quotas,
                                 remote=self.remote_log_manager, fetch_sessions=self.fetch_sessions),
            topics=topics,
            groups=GroupDeps(topics, coordinator, self.clock, self.txn_coordinator),
            control=ControlDeps(self.broker_id, rm, cluster, auth),
            producer_ids=producer_ids, api_versions=ADVERTISED_VERSIONS,
            configs=ConfigDeps(self.broker_id, self.dynamic, metadata, cluster, auth),
            partition_admin=PartitionAdminDeps(topics, cluster, rm, self.delete_records_purgatory),
            transactions=TxnDeps(self.txn_coordinator, metadata, coordinator, self.clock, auth,
                                 int(self.config.get("offsets.commit.timeout.ms"))),
            scram=self.scram_store, acls=AclDeps(auth, self.acl_store))

    def _remote_log_manager(self, advertised: list[tuple[str, str, str, int]]) -> RemoteLogManager | None:
        """Tiered storage (docs/tiered-storage.md); its metadata client connects to a PLAINTEXT listener here."""
        assert self.replica_manager is not None and self.metadata is not None
        plain = [f"{host}:{port}" for _, proto, host, port in advertised if proto == "PLAINTEXT"]
        if self.config.get("remote.log.storage.system.enable") and not plain:
            raise ConfigError("remote.log.storage.system.enable", "tiered storage needs a PLAINTEXT listener "
                              "(its metadata client does not authenticate yet)", True)
        return build_remote_log_manager(self.config, self.broker_id, self.replica_manager.partitions, self.clock,
                                        ",".join(plain[:1]), TopicDeps(self.broker_id, self.config, self.metadata))

    async def _start_authorizer(self) -> None:
        """authorizer.class.name set: load the ACLs (and, in ZooKeeper mode, follow their changes) before the
        first request is handled."""
        cfg = self.config
        if not cfg.get("authorizer.class.name"):
            return
        store: AclStore = (ZkAclStore(self.zk_mode.client) if self.zk_mode is not None
                           else FileAclStore(self.log_dirs[0] / ACLS_FILE))
        await store.start()
        self.acl_store = store
        self.authorizer = Authorizer(store.cache, cfg.get("super.users"),
                                     bool(cfg.get("allow.everyone.if.no.acl.found")))

    def _credential_store(self) -> CredentialStore:
        if self.zk_mode is not None:
            return ZkCredentialStore(self.zk_mode.client)
        return FileCredentialStore(self.log_dirs[0] / USERS_FILE)

    def _on_dynamic_config(self, current: BrokerConfig) -> None:
        """Dynamic broker configs changed: components that hold a copied value take the new one."""
        if self.log_manager is not None:
            self.log_manager.default_config = current.log_config()
        if self.replica_manager is not None:
            self.replica_manager.on_broker_config(current)
        if self.cleaner_service is not None:
            self.cleaner_service.reconfigure(current)

    @property
    def controller(self) -> Controller | None:
        return self.zk_mode.controller if self.zk_mode is not None else None

    def _endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        """Where a replica fetcher finds a leader: the cluster view of the last UpdateMetadata."""
        if self.metadata is None:
            return None
        for b in self.metadata.live_brokers():
            if b.broker_id == broker_id:
                return b.host, b.port
        return None

    def _log_manager(self) -> LogManager:
        assert self.log_manager is not None
        return self.log_manager

    def advertised_endpoints(self) -> list[tuple[str, str, str, int]]:
        """(listener, security protocol, host, port) of every advertised listener, with bound ports filled in."""
        assert self.socket_server is not None
        out = []
        for ep in self.config.advertised_listeners:
            host, port = ep.host, ep.port
            bound = self.socket_server.bound.get(ep.name)
            if bound is not None and port == 0:
                port = bound[1]
            if not host:
                host = "127.0.0.1" if bound is None or not bound[0] else bound[0]
            out.append((ep.name, ep.security_protocol, host, port))
        return out

    def _wire_metrics(self) -> None:
        m = self.metrics
        m.set_client_quota_callback(self.quotas.metric_rows)
        rm, channel, purgatory = self.replica_manager, self.channel, self.fetch_purgatory
        assert rm is not None and channel is not None and purgatory is not None
        m.set_request_queue_size_callback(lambda: float(channel.size()))
        m.track_purgatory("Fetch", lambda: float(purgatory.num_delayed))
        m.set_under_replicated_callback(lambda: float(rm.under_replicated_count()))
        m.set_offline_log_dirs_callback(lambda: float(len(rm.log_manager.offline_dirs)))
        m.set_under_min_isr_callback(lambda: float(rm.under_min_isr_count()))
        fetchers, controller = self.fetcher_manager, self.controller
        rm.isr_change_listeners.append(m.isr_changed)
        m.set_replication_callbacks(
            max_lag=lambda: float(fetchers.max_lag() if fetchers is not None else 0),
            offline=lambda: float(controller.offline_partition_count() if controller is not None else 0))
        # Standalone mode has no controller election: its single broker is the controller.
        m.set_active_controller_callback(lambda: float(controller.active if controller is not None else 1))
        metadata = self.metadata
        assert metadata is not None
        m.set_live_brokers_callback(lambda: float(metadata.live_broker_count()))
        sessions = self.fetch_sessions
        if sessions is not None:
            m.set_fetch_session_callbacks(lambda: float(len(sessions)), lambda: float(sessions.partitions_cached))
        produce = self.produce_purgatory
        assert produce is not None
        m.track_purgatory("Produce", lambda: float(produce.num_delayed))
        m.set_partition_callbacks(lambda: float(len(rm.partitions)), lambda: float(rm.leader_count()))
        # Both read in-memory state on the scrape thread (segment sizes the log tracks, no disk walk); list()
        # snapshots the dicts the loop may change meanwhile.
        m.set_log_size_callback(lambda: [(tp[0], tp[1], p.log.size) for tp, p in list(rm.partitions.items())])
        m.set_last_stable_offset_lag_callback(lambda: [(tp[0], tp[1], p.log.last_stable_offset_lag())
                                                       for tp, p in list(rm.partitions.items()) if p.is_leader])
        txn = self.txn_coordinator
        if txn is not None:
            m.set_transactional_ids_callback(txn.state_counts)
            txn.on_marker_failure = m.txn_marker_failures_total.inc
            txn.on_timed_out = m.txn_timed_out_total.inc
        coordinator = self.group_coordinator
        if coordinator is not None:
            m.set_consumer_lag_callback(lambda: consumer_group_lag(coordinator.store.groups, rm.partitions))
        port = int(self.config.get("metrics.port"))
        if port != -1:
            self.metrics_port = m.start_http_server(str(self.config.get("metrics.host")), port)
            log.info("metrics on http://%s:%d/metrics", self.config.get("metrics.host"), self.metrics_port)

    def _schedule_async(self, name: str, interval_ms: int, fn: Callable[[], Awaitable[None]]) -> None:
        """As :meth:`_schedule`, for a coroutine function (awaited before the next interval starts)."""
        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000)
                try:
                    await fn()
                except Exception:
                    log.exception("scheduled task %s failed", name)

        if 0 < interval_ms < (1 << 31):
            self._tasks.append(asyncio.create_task(loop(), name=name))

    def _schedule(self, name: str, interval_ms: int, fn: Callable[[], Any]) -> None:
        async def call() -> None:
            fn()

        self._schedule_async(name, interval_ms, call)

    async def _flush_rolled_segments(self) -> None:
        """Segments finished by a roll are fsynced within a second, on a worker thread (fsync lets go of the
        GIL), so the recovery point follows the rolls as in Kafka. Without it the recovery point stayed at 0
        under the default flush settings and every restart after a crash re-scanned every segment."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(ROLL_FLUSH_INTERVAL_S)
            logs = self._log_manager().take_rolled()
            if logs:
                try:
                    await loop.run_in_executor(None, LogManager.flush_logs, logs)
                except Exception:
                    log.exception("flushing rolled segments failed")

    def _on_log_dir_failure(self, log_dir: Path, no_dir_left: bool) -> None:
        """A log dir failed: tell the controller (it moves leadership off the partitions there), or stop the
        broker when no log dir is left, as Kafka does."""
        if no_dir_left:
            log.critical("every log dir has failed (the last: %s); shutting down", log_dir)
            self.exit_code = 1
            self.stop_requested.set()
            return
        if self.zk_mode is not None:
            task = asyncio.get_running_loop().create_task(self.zk_mode.report_log_dir_failure(),
                                                          name="log-dir-event")
            self._tasks.append(task)

    async def shutdown(self) -> None:
        log.info("Moldau broker %d shutting down", self.broker_id)
        began = time.monotonic()
        if self.zk_mode is not None and self.handler_pool is not None:
            cfg = self.config
            budget = (int(cfg.get("controlled.shutdown.max.retries"))
                      * int(cfg.get("controlled.shutdown.retry.backoff.ms")) / 1000)
            await _bounded("controlled shutdown", self.zk_mode.controlled_shutdown(), time.monotonic() + budget)
        deadline = time.monotonic() + SHUTDOWN_GRACE_S
        if self.zk_mode is not None:  # first, so clients are never sent to a controller that stopped serving
            await _bounded("controller resignation", self.zk_mode.resign_controller(),
                           min(deadline, time.monotonic() + CONTROLLER_RESIGN_S))
        if self.remote_log_manager is not None:
            await _bounded("remote log manager", self.remote_log_manager.close(), deadline)
        for task in self._tasks:
            task.cancel()
        if self.gc_freezer is not None:
            self.gc_freezer.close()
        if self.socket_server is not None:
            self.socket_server.stop_accepting()
        if self.fetch_purgatory is not None:
            self.fetch_purgatory.shutdown()
        if self.produce_purgatory is not None:
            self.produce_purgatory.shutdown()
        if self.delete_records_purgatory is not None:
            self.delete_records_purgatory.shutdown()
        if self.fetcher_manager is not None:
            await _bounded("replica fetchers", self.fetcher_manager.shutdown(), deadline)
        if self.replica_manager is not None:
            await _bounded("pending ISR writes", self.replica_manager.shutdown(), deadline)
        # --- group coordinator ---
        if self.group_coordinator is not None:
            self.group_coordinator.shutdown()
        # --- end group coordinator ---
        if self.txn_coordinator is not None:
            self.txn_coordinator.shutdown()
        if self.txn_markers is not None:
            await _bounded("transaction marker connections", self.txn_markers.close(), deadline)
        if self.socket_server is not None:
            await _bounded("client connections", self.socket_server.close_all(), deadline)
        if self.handler_pool is not None:
            await _bounded("request handlers", self.handler_pool.stop(), deadline)
        if self.acl_store is not None:
            await self.acl_store.stop()
        if self.zk_mode is not None:
            await _bounded("ZooKeeper session", self.zk_mode.close(), deadline)
        if self.log_manager is not None:
            if self.replica_manager is not None:
                self.replica_manager.checkpoint_high_watermarks()
            self.log_manager.shutdown(self.shutdown_progress)
        self.metrics.close()
        log.info("Moldau broker %d shut down cleanly in %.2f s", self.broker_id, time.monotonic() - began)
        self.stopped.set()


def consumer_group_lag(groups: dict[str, GroupMetadata], partitions: dict[TopicPartition, Partition]) \
        -> list[tuple[str, str, int, int]]:
    """(group, topic, partition, lag) for the groups loaded by this broker's coordinator and the partitions this
    broker leads: only there are both the committed offset and the high watermark at hand without a request."""
    rows = []
    for group_id, group in list(groups.items()):
        for tp, committed in list(group.offsets.items()):
            partition = partitions.get(tp)
            if partition is not None and partition.is_leader:
                rows.append((group_id, tp[0], tp[1], max(partition.high_watermark - committed.offset, 0)))
    return rows
