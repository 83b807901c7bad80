"""The cluster core every client shares: bootstrap, metadata cache, one connection per broker, coordinators.

* ``start()`` tries the bootstrap servers in turn, staggered (the next after a failure or 1 s without an answer,
  the earlier attempts still running), until one answers Metadata.
* The metadata cache is refreshed every ``metadata.max.age.ms`` and whenever a caller reports a stale leader
  (``request_update()``, e.g. on NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE).
  Concurrent refreshes are coalesced into one Metadata request.
* ``connection(node_id)`` keeps one :class:`BrokerConnection` per broker; a failed connect is retried after an
  exponential backoff from ``reconnect.backoff.ms`` up to ``reconnect.backoff.max.ms``.
* ``send()`` returns the response dict; error codes inside it stay the caller's to check (see
  :func:`check_error` / :data:`STALE_METADATA_ERRORS`).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from moldau.config import ClientConfig
from moldau.connection import BrokerConnection
from moldau.errors import (
    ConnectFailedError,
    KafkaConnectionError,
    KafkaError,
    NoBrokersAvailableError,
    NotConnectedError,
)
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.group import FIND_COORDINATOR
from moldau.protocol.messages.metadata import METADATA
from moldau.protocol.schema import Api, P, Resp, Sendable
from moldau.tasks import cancel_and_wait

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import MetadataRequest, MetadataResponse

log = logging.getLogger("moldau.client.cluster")

# Errors that mean our idea of who leads a partition is out of date: refresh metadata, then retry.
STALE_METADATA_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.BROKER_NOT_AVAILABLE, ErrorCode.REPLICA_NOT_AVAILABLE,
})
COORDINATOR_ERRORS = frozenset({
    ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
})
METADATA_MAX_VERSION = 12
BOOTSTRAP_NODE_BASE = -1000  # pseudo node ids for bootstrap servers (Kafka uses negative ids too)
CONNECT_STAGGER_S = 1.0  # any_connection(): start the next candidate when none has answered for this long


@dataclass(slots=True)
class PartitionInfo:
    partition: int
    leader: int  # -1 when there is none
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]
    error_code: int


@dataclass(slots=True)
class TopicInfo:
    name: str
    error_code: int
    is_internal: bool
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    topic_id: bytes | None = None


@dataclass(slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(slots=True)
class _NodeState:
    """Reconnect bookkeeping of one broker."""
    failures: int = 0
    next_attempt: float = 0.0
    connecting: asyncio.Future[BrokerConnection] | None = None


def check_error(code: int, message: str | None = None) -> None:
    """Raises :class:`KafkaError` (with ``.retriable``) for a non-zero code."""
    if code:
        raise KafkaError(code, message)


class Cluster:
    """Shared connection and metadata state of one client instance. ``await start()`` before use."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.client_id: str = config["client.id"]
        self.request_timeout_ms: int = config["request.timeout.ms"]
        self._max_age_s = config["metadata.max.age.ms"] / 1000
        self._backoff_s = config["reconnect.backoff.ms"] / 1000
        self._backoff_max_s = config["reconnect.backoff.max.ms"] / 1000
        self._connect_timeout_s = config.get("socket.connection.setup.timeout.ms", 10000) / 1000
        self._bootstrap = list(config.bootstrap_servers)
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.cluster_id: str | None = None
        self.controller_id: int = -1
        self.metadata_version = 0
        self._wanted_topics: set[str] = set()  # topics whose metadata we keep (None list => all topics)
        self._all_topics = False
        self._conns: dict[int, BrokerConnection] = {}
        self._nodes: dict[int, _NodeState] = {}
        self._last_refresh = 0.0
        self._refreshing: asyncio.Future[None] | None = None
        self._need_update = False
        self._updated = asyncio.Event()
        self._coordinators: dict[str, int] = {}
        self._closed = False
        self._refresher: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Bootstraps: Metadata from the first bootstrap server that answers; starts the periodic refresh."""
        await self.refresh_metadata()
        if self._refresher is None:
            self._refresher = asyncio.get_running_loop().create_task(self._refresh_loop())

    async def close(self) -> None:
        self._closed = True
        if self._refresher is not None:
            await cancel_and_wait([self._refresher])
            self._refresher = None
        conns, self._conns = list(self._conns.values()), {}
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)

    async def _refresh_loop(self) -> None:
        while not self._closed:
            due = self._last_refresh + self._max_age_s - time.monotonic()
            if self._need_update:
                due = min(due, self._last_refresh + self.config["retry.backoff.ms"] / 1000 - time.monotonic())
            try:
                async with asyncio.timeout(max(due, 0.0)):
                    await self._updated.wait()  # request_update() wakes us early
            except TimeoutError:
                pass
            self._updated.clear()
            if self._closed:
                return
            backoff_left = self._last_refresh + self.config["retry.backoff.ms"] / 1000 - time.monotonic()
            if self._need_update and backoff_left > 0:
                await asyncio.sleep(backoff_left)  # at most one requested refresh per retry.backoff.ms
            if self._need_update or time.monotonic() - self._last_refresh >= self._max_age_s:
                try:
                    await self.refresh_metadata()
                except Exception as exc:  # keep refreshing; callers see errors on their own requests
                    log.warning("metadata refresh failed: %s", exc)
                    await asyncio.sleep(self._backoff_s)

    # ------------------------------------------------------------------ metadata
    def add_topics(self, topics: list[str] | set[str]) -> None:
        """Topics whose metadata later refreshes keep (the producer/consumer add what they use)."""
        self._wanted_topics.update(topics)

    def request_update(self) -> None:
        """Marks the metadata stale; the background loop refreshes it soon (after retry.backoff.ms)."""
        self._need_update = True
        self._updated.set()

    async def refresh_metadata(self, topics: list[str] | None = None, *,
                               allow_auto_create: bool | None = None) -> None:
        """Fetches metadata for ``topics`` (plus the wanted ones); None asks for every topic."""
        if topics is not None:
            self._wanted_topics.update(topics)
        if self._refreshing is not None and not self._refreshing.done() and topics is None:
            await asyncio.shield(self._refreshing)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._refreshing = fut
        try:
            await self._do_refresh(topics, allow_auto_create)
            fut.set_result(None)
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # mark retrieved: waiters re-raise it, nobody else must
            raise

    async def _do_refresh(self, topics: list[str] | None, allow_auto_create: bool | None) -> None:
        names = sorted(self._wanted_topics) if topics is not None or self._wanted_topics else None
        body: MetadataRequest = {
            "topics": None if names is None else [{"name": n} for n in names],
            "allow_auto_topic_creation": (self.config.get("allow.auto.create.topics", True)
                                          if allow_auto_create is None else allow_auto_create),
        }
        conn = await self.any_connection()
        version = conn.version_for(METADATA, METADATA_MAX_VERSION)
        if names is None and version == 0:
            body["topics"] = []
        response = await conn.send(METADATA, body, version)
        self._apply_metadata(response, full=names is None)

    def _apply_metadata(self, response: MetadataResponse, full: bool) -> None:
        self.brokers = {b["node_id"]: BrokerInfo(b["node_id"], b["host"], b["port"], b.get("rack"))
                        for b in response["brokers"]}
        self.cluster_id = response.get("cluster_id")
        self.controller_id = response.get("controller_id", -1)
        topics = {} if full else dict(self.topics)
        for t in response["topics"]:
            if t["name"] is None:  # a topic asked for by id (v12+); we always ask by name
                continue
            info = TopicInfo(t["name"], t["error_code"], t.get("is_internal", False), topic_id=t.get("topic_id"))
            for p in t["partitions"]:
                info.partitions[p["partition_index"]] = PartitionInfo(
                    p["partition_index"], p["leader_id"], p.get("leader_epoch", -1), list(p["replica_nodes"]),
                    list(p["isr_nodes"]), list(p.get("offline_replicas") or []), p["error_code"])
            if t["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                topics.pop(t["name"], None)
            else:
                topics[t["name"]] = info
        self.topics = topics
        self.metadata_version += 1  # lets callers cache what they derive from the metadata
        self._last_refresh = time.monotonic()
        self._need_update = False
        # Drop connections to brokers that left the cluster.
        for node_id in [n for n in self._conns if n >= 0 and n not in self.brokers]:
            conn = self._conns.pop(node_id)
            asyncio.get_running_loop().create_task(conn.close())

    def leader_for(self, topic: str, partition: int) -> int | None:
        """The partition's leader as last seen, None when unknown or leaderless."""
        info = self.topics.get(topic)
        p = info.partitions.get(partition) if info else None
        if p is None or p.leader < 0:
            return None
        return p.leader

    def partitions_for(self, topic: str) -> list[int] | None:
        """Sorted partition ids of ``topic``, None when the topic is unknown."""
        info = self.topics.get(topic)
        if info is None or info.error_code not in (0, ErrorCode.LEADER_NOT_AVAILABLE) or not info.partitions:
            return None
        return sorted(info.partitions)

    def available_partitions_for(self, topic: str) -> list[int]:
        """Partitions that have a leader right now."""
        info = self.topics.get(topic)
        if info is None:
            return []
        return sorted(p for p, pi in info.partitions.items() if pi.leader >= 0)

    def topic_error(self, topic: str) -> int | None:
        info = self.topics.get(topic)
        return None if info is None else info.error_code

    async def wait_for_topic(self, topic: str, timeout_s: float) -> list[int]:
        """Partitions of ``topic``, refreshing metadata (with backoff) until known; KafkaError on timeout."""
        deadline = time.monotonic() + timeout_s
        delay = self.config["retry.backoff.ms"] / 1000
        while True:
            parts = self.partitions_for(topic)
            if parts:
                return parts
            await self.refresh_metadata([topic])
            parts = self.partitions_for(topic)
            if parts:
                return parts
            if time.monotonic() >= deadline:
                code = self.topic_error(topic)
                raise KafkaError(code or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"topic {topic!r} not available after {timeout_s:.1f}s")
            await asyncio.sleep(min(delay, max(deadline - time.monotonic(), 0)))
            delay = min(delay * 2, 1.0)

    # ------------------------------------------------------------------ connections
    def _address(self, node_id: int) -> tuple[str, int]:
        if node_id <= BOOTSTRAP_NODE_BASE:
            return self._bootstrap[BOOTSTRAP_NODE_BASE - node_id]
        broker = self.brokers.get(node_id)
        if broker is None:
            raise NotConnectedError(f"broker {node_id} is not in the cluster metadata")
        return broker.host, broker.port

    async def connection(self, node_id: int) -> BrokerConnection:
        """The (single) connection to broker ``node_id``, connecting (after any reconnect backoff) if needed."""
        conn = self._conns.get(node_id)
        if conn is not None and conn.connected:
            return conn
        state = self._nodes.setdefault(node_id, _NodeState())
        if state.connecting is not None and not state.connecting.done():
            return await asyncio.shield(state.connecting)
        fut: asyncio.Future[BrokerConnection] = asyncio.get_running_loop().create_future()
        state.connecting = fut
        try:
            conn = await self._connect(node_id, state)
        except asyncio.CancelledError:
            # Only this caller was cancelled (e.g. a staggered bootstrap attempt another one beat): the others
            # waiting on the same connect get a connection error they retry, never a CancelledError of their own.
            fut.set_exception(NotConnectedError(f"connect to broker {node_id} was abandoned; retry"))
            fut.exception()
            raise
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()
            raise
        fut.set_result(conn)
        return conn

    async def _connect(self, node_id: int, state: _NodeState) -> BrokerConnection:
        wait = state.next_attempt - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        if self._closed:
            raise NotConnectedError("client is closed")
        host, port = self._address(node_id)
        conn = BrokerConnection(host, port, client_id=self.client_id, request_timeout_ms=self.request_timeout_ms,
                                security=getattr(self.config, "security", None))
        try:
            await conn.connect(self._connect_timeout_s)
        except ConnectFailedError:
            state.failures += 1
            backoff = min(self._backoff_s * 2 ** (state.failures - 1), self._backoff_max_s)
            state.next_attempt = time.monotonic() + backoff * random.uniform(0.8, 1.2)  # Kafka's 20 % jitter
            raise
        state.failures = 0
        state.next_attempt = 0.0
        old = self._conns.get(node_id)
        if old is not None and old is not conn:
            await old.close()
        self._conns[node_id] = conn
        return conn

    async def any_connection(self) -> BrokerConnection:
        """A connection to some broker: an open one if any, else known brokers, else the bootstrap servers."""
        for conn in self._conns.values():
            if conn.connected:
                return conn
        known = list(self.brokers)
        random.shuffle(known)  # spread bootstrap load like Kafka's least-loaded choice
        candidates = known + [BOOTSTRAP_NODE_BASE - i for i in range(len(self._bootstrap))]
        return await self._first_connection(candidates)

    async def _first_connection(self, candidates: list[int]) -> BrokerConnection:
        """Connects to the candidates in order, staggered as librdkafka and "happy eyeballs" do: the next one is
        tried as soon as one fails or after CONNECT_STAGGER_S without an answer, with the earlier attempts still
        running, so a broker that hangs costs ~1 s, not socket.connection.setup.timeout.ms. The first connection
        wins; the attempts still running are cancelled."""
        loop = asyncio.get_running_loop()
        queue = iter(candidates)
        pending: dict[asyncio.Task[BrokerConnection], int] = {}
        errors: dict[int, str] = {}

        def launch() -> bool:
            node_id = next(queue, None)
            if node_id is None:
                return False
            pending[loop.create_task(self.connection(node_id))] = node_id
            return True

        try:
            while pending or launch():
                done, _ = await asyncio.wait(pending, timeout=CONNECT_STAGGER_S, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    node_id = pending.pop(task)
                    exc = task.exception()
                    if exc is None:
                        return task.result()
                    if not isinstance(exc, (KafkaConnectionError, OSError)):
                        raise exc
                    errors[node_id] = str(exc)
                launch()  # one failed, or none answered within the stagger: start the next as well
        finally:
            await cancel_and_wait(pending)
        ordered = [errors[n] for n in candidates if n in errors]
        raise NoBrokersAvailableError("no broker reachable: " + "; ".join(ordered))

    def send(self, node_id: int, api: Sendable[P, Resp], *args: P.args, **kwargs: P.kwargs) -> Awaitable[Resp]:
        """``send(node_id, api, body, version=None)``: one request to broker ``node_id``; a connection failure
        drops the connection (next call reconnects). Typed by ``api`` as :meth:`BrokerConnection.send` is."""
        return cast("Awaitable[Resp]", self._send(node_id, cast("Api[Any, Any]", api), *args, **kwargs))

    async def _send(self, node_id: int, api: Api[Any, Any], body: Any, version: Any = None) -> dict[str, Any]:
        conn = await self.connection(node_id)
        try:
            return await conn.send(api, body, version)
        except KafkaConnectionError:
            if self._conns.get(node_id) is conn:
                del self._conns[node_id]
            self.request_update()
            raise

    async def send_any(self, api: Sendable[P, Resp], *args: P.args, **kwargs: P.kwargs) -> Resp:
        """``send_any(api, body, version=None)``: one request to whichever broker is reachable (for cluster-wide
        requests such as ListGroups)."""
        conn = await self.any_connection()
        return await conn.send(api, *args, **kwargs)

    def least_loaded_node(self) -> int | None:
        """The known broker with the fewest in-flight requests (connected ones first)."""
        best: tuple[int, int] | None = None
        for node_id in self.brokers:
            conn = self._conns.get(node_id)
            load = conn.in_flight if conn is not None and conn.connected else 1 << 20
            if best is None or load < best[0]:
                best = (load, node_id)
        return None if best is None else best[1]

    # ------------------------------------------------------------------ coordinators
    async def coordinator(self, group_id: str, *, key_type: int = 0, refresh: bool = False) -> int:
        """The node id of ``group_id``'s coordinator (FindCoordinator), cached until ``refresh``."""
        cache_key = f"{key_type}:{group_id}"
        if not refresh and cache_key in self._coordinators:
            node = self._coordinators[cache_key]
            if node in self.brokers:
                return node
        conn = await self.any_connection()
        version = conn.version_for(FIND_COORDINATOR)
        if version >= 4:
            response = await conn.send(FIND_COORDINATOR, {"key_type": key_type, "coordinator_keys": [group_id]},
                                       version)
            c = response["coordinators"][0]
            error_code, error_message, node_id, host, port = (c["error_code"], c["error_message"], c["node_id"],
                                                              c["host"], c["port"])
        else:  # v0-v3 answer at the top level (the fields exist there in those versions)
            response = await conn.send(FIND_COORDINATOR, {"key": group_id, "key_type": key_type}, version)
            error_code, error_message = response["error_code"], response.get("error_message")
            node_id, host, port = response["node_id"], response["host"], response["port"]
        check_error(error_code, error_message)
        if node_id not in self.brokers:
            self.brokers[node_id] = BrokerInfo(node_id, host, port)
        self._coordinators[cache_key] = node_id
        return node_id

    def coordinator_dead(self, group_id: str, key_type: int = 0) -> None:
        """Forgets the cached coordinator (after NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / a lost link)."""
        self._coordinators.pop(f"{key_type}:{group_id}", None)
