"""ZooKeeper from the event loop: kazoo's asynchronous calls bridged into asyncio, and Kafka's znode operations.

kazoo runs its own threads. Every call here uses kazoo's ``*_async`` variant and turns its IAsyncResult into an
asyncio future with ``loop.call_soon_threadsafe``, so the loop never blocks on ZooKeeper; watch callbacks and
session-state changes are handed to the loop the same way. Connection-level failures are retried with backoff for
a bounded time. ``KafkaZk`` knows the znode layout (``zk_data``) and the conditional writes the controller uses.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    SessionExpiredError,
    UnimplementedError,
)
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from moldau.broker.controller import zk_data as Z
from moldau.broker.controller import zk_multi_read as MR
from moldau.broker.controller import zk_multi_write as MW
from moldau.protocol.types import TopicPartition

log = logging.getLogger("moldau.zk")

RETRIABLE = (ConnectionLoss, OperationTimeoutError, SessionExpiredError)
# getData operations per multiRead: ~200 bytes of answer each, so a chunk stays far below jute.maxbuffer (1 MiB).
MULTI_READ_CHUNK = 500


class ZkError(Exception):
    pass


class ZkUnavailable(ZkError):
    """ZooKeeper could not be reached within zookeeper.connection.timeout.ms."""


class DuplicateBrokerError(ZkError):
    pass


class ControllerMovedError(ZkError):
    """A controller write failed its epoch check: another controller has been elected since."""


class TopicExistsError(ZkError):
    pass


def split_chroot(connect: str) -> tuple[str, str]:
    """'h1:2181,h2:2181/moldau' -> ('h1:2181,h2:2181', '/moldau'); no chroot -> ''."""
    hosts, sep, chroot = connect.partition("/")
    return hosts, ("/" + chroot.rstrip("/")) if sep and chroot.strip("/") else ""


# An operation of a multi (transaction): ("create", path, data, ephemeral) | ("set", path, data, version)
# | ("delete", path, version) | ("check", path, version)
Op = tuple[Any, ...]


class ZkClient:
    """One ZooKeeper session (kazoo), usable from coroutines."""

    def __init__(self, connect: str, session_timeout_ms: int, connection_timeout_ms: int) -> None:
        self.connect_string = connect
        self.hosts, self.chroot = split_chroot(connect)
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms
        self.kazoo: KazooClient | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        # Called in the loop with "CONNECTED", "SUSPENDED", "LOST" (session expired) or "RECONNECTED_NEW_SESSION".
        self.state_listeners: list[Callable[[str], None]] = []
        self._lost = False
        self._closing = False
        self._watches: list[Any] = []
        self.multi_read = True  # until a server answers multiRead with UNIMPLEMENTED (ZooKeeper before 3.6)

    # ------------------------------------------------------------------ session
    async def start(self) -> None:
        """Connects (creating the chroot if missing); retries with backoff until the connection timeout."""
        self.loop = asyncio.get_running_loop()
        deadline = time.monotonic() + self.connection_timeout_ms / 1000
        if self.chroot:
            bootstrap = await self._connect(self.hosts, deadline)
            try:
                await self._bridge(bootstrap.ensure_path_async(self.chroot))
            finally:
                await self.loop.run_in_executor(None, _stop_and_close, bootstrap)
        self.kazoo = await self._connect(self.hosts + self.chroot, deadline)
        self.kazoo.add_listener(self._on_state)

    async def _connect(self, hosts: str, deadline: float) -> KazooClient:
        assert self.loop is not None
        backoff, attempt = 0.2, 0
        while True:
            attempt += 1
            client = KazooClient(hosts=hosts, timeout=self.session_timeout_ms / 1000)
            remaining = deadline - time.monotonic()
            try:
                attempt_timeout = max(0.5, min(remaining, 2.0 ** (attempt - 1), 5.0))
                await self.loop.run_in_executor(None, client.start, attempt_timeout)
                return client
            except Exception as exc:  # kazoo raises its handler's timeout exception
                await self.loop.run_in_executor(None, _stop_and_close, client)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ZkUnavailable(
                        f"could not connect to ZooKeeper at {self.connect_string} within "
                        f"zookeeper.connection.timeout.ms={self.connection_timeout_ms} ({attempt} attempts; "
                        f"last error: {exc or type(exc).__name__})") from None
                log.warning("ZooKeeper at %s is unreachable (attempt %d: %s); retrying in %.1fs, giving up in %.0fs",
                            self.connect_string, attempt, exc or type(exc).__name__, backoff, remaining)
                await asyncio.sleep(min(backoff, remaining))
                backoff = min(backoff * 2, 5.0)

    def _on_state(self, state: str) -> None:
        # kazoo's thread: just hand it to the loop.
        if state == KazooState.LOST:
            self._lost = True
            event = "LOST"
        elif state == KazooState.SUSPENDED:
            event = "SUSPENDED"
        else:
            event = "RECONNECTED_NEW_SESSION" if self._lost else "CONNECTED"
            self._lost = False
        if self.loop is not None and not self._closing:
            self.loop.call_soon_threadsafe(self._dispatch_state, event)

    def _dispatch_state(self, event: str) -> None:
        for listener in list(self.state_listeners):
            try:
                listener(event)
            except Exception:
                log.exception("ZooKeeper state listener failed")

    @property
    def session_id(self) -> int:
        return int(self.kazoo.client_id[0]) if self.kazoo is not None and self.kazoo.client_id else -1

    @property
    def connected(self) -> bool:
        return self.kazoo is not None and self.kazoo.connected

    async def close(self) -> None:
        self._closing = True
        if self.kazoo is not None and self.loop is not None:
            await self.loop.run_in_executor(None, _stop_and_close, self.kazoo)
            self.kazoo = None

    # ------------------------------------------------------------------ calls
    def _bridge(self, async_result: Any) -> asyncio.Future[Any]:
        loop = self.loop
        assert loop is not None
        fut: asyncio.Future[Any] = loop.create_future()

        def done(result: Any) -> None:
            try:
                value, error = result.get(block=False), None
            except Exception as exc:  # delivered to the awaiting coroutine
                value, error = None, exc
            loop.call_soon_threadsafe(_settle, fut, value, error)

        async_result.rawlink(done)
        return fut

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Runs kazoo's ``<name>_async`` and retries connection-level failures for up to the session timeout."""
        return await self._retrying(lambda kazoo: getattr(kazoo, name + "_async")(*args, **kwargs),
                                    f"{name} {args[0] if args else ''}")

    async def _retrying(self, start: Callable[[KazooClient], Any], what: str) -> Any:
        deadline = time.monotonic() + max(self.session_timeout_ms / 1000 * 2, 5.0)
        backoff = 0.05
        while True:
            if self.kazoo is None:
                raise ZkError("ZooKeeper client is closed")
            try:
                return await self._bridge(start(self.kazoo))
            except RETRIABLE as exc:
                if self._closing or time.monotonic() + backoff > deadline:
                    raise ZkError(f"ZooKeeper {what} failed: {exc!r}") from exc
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)

    async def get(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        try:
            data, stat = await self._call("get", path)
        except NoNodeError:
            return None
        return data, stat

    async def get_many(self, paths: list[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        """The data and stat of many znodes (None: no such znode), in the order of ``paths``.

        ``MULTI_READ_CHUNK`` paths per multiRead (``zk_multi_read``), the chunks in flight together: one request
        and one wake-up of the loop per chunk instead of per znode. A server without multiRead (ZooKeeper before
        3.6 answers UNIMPLEMENTED) gets concurrent single reads from then on."""
        if self.multi_read:
            chunks = [paths[i:i + MULTI_READ_CHUNK] for i in range(0, len(paths), MULTI_READ_CHUNK)]
            try:
                answers = await asyncio.gather(*(self._multi_read(chunk) for chunk in chunks))
            except UnimplementedError:
                log.info("ZooKeeper has no multiRead (before 3.6); reading znodes one request each")
                self.multi_read = False
            else:
                return [found for answer in answers for found in answer]
        return list(await asyncio.gather(*(self.get(path) for path in paths)))

    async def _multi_read(self, paths: list[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        def start(kazoo: KazooClient) -> Any:
            result = kazoo.handler.async_result()
            # kazoo has no public call for a request type it does not know; _call queues any request object.
            kazoo._call(MR.MultiRead([(kazoo.chroot or "") + p for p in paths]), result)
            return result

        results = await self._retrying(start, f"multiRead of {len(paths)} znodes")
        if len(results) != len(paths):
            raise ZkError(f"multiRead of {len(paths)} znodes answered {len(results)} results")
        out: list[tuple[bytes, ZnodeStat] | None] = []
        for path, result in zip(paths, results):
            if isinstance(result, int):
                if result == NoNodeError.code:
                    out.append(None)
                    continue
                raise ZkError(f"ZooKeeper read of {path} failed: {MR.error_for(result)!r}")
            out.append(result)
        return out

    async def exists(self, path: str) -> ZnodeStat | None:
        stat: ZnodeStat | None = await self._call("exists", path)
        return stat

    async def get_children(self, path: str) -> list[str]:
        try:
            children: list[str] = await self._call("get_children", path)
        except NoNodeError:
            return []
        return children

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequence: bool = False,
                     makepath: bool = True) -> tuple[str, ZnodeStat]:
        created, stat = await self._call("create", path, data, ephemeral=ephemeral, sequence=sequence,
                                         makepath=makepath, include_data=True)
        return created, stat

    async def ensure_path(self, path: str) -> None:
        try:
            await self.create(path, b"", makepath=True)
        except NodeExistsError:
            pass

    async def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        stat: ZnodeStat = await self._call("set", path, data, version)
        return stat

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        if recursive:
            for child in await self.get_children(path):
                await self.delete(f"{path}/{child}", recursive=True)
        try:
            await self._call("delete", path, version)
        except NoNodeError:
            pass
        except NotEmptyError:
            if recursive:  # a child appeared meanwhile
                await self.delete(path, version, recursive=True)
            else:
                raise

    async def multi(self, ops: list[Op]) -> list[Any]:
        """All or nothing. Raises the first failing operation's exception."""
        assert self.kazoo is not None
        deadline = time.monotonic() + max(self.session_timeout_ms / 1000 * 2, 5.0)
        kazoo = self.kazoo
        while True:
            if MW.supports(ops):
                # Checks and conditional writes (the controller's state writes) serialized in one go, not an
                # object per operation (zk_multi_write.py): the same request and answer as kazoo's transaction.
                pending: Any = kazoo.handler.async_result()
                kazoo._call(MW.MultiWrite(ops, kazoo.chroot or ""), pending)
            else:
                txn = kazoo.transaction()
                for op in ops:
                    kind = op[0]
                    if kind == "create":
                        txn.create(op[1], op[2], ephemeral=op[3])
                    elif kind == "set":
                        txn.set_data(op[1], op[2], op[3])
                    elif kind == "delete":
                        txn.delete(op[1], op[2])
                    elif kind == "check":
                        txn.check(op[1], op[2])
                    else:
                        raise ValueError(f"unknown multi op {kind}")
                pending = txn.commit_async()
            try:
                results: list[Any] = await self._bridge(pending)
            except RETRIABLE as exc:
                if self._closing or time.monotonic() > deadline:
                    raise ZkError(f"ZooKeeper multi failed: {exc!r}") from exc
                await asyncio.sleep(0.1)
                continue
            _raise_first_failure(results)
            return results

    # ------------------------------------------------------------------ watches
    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> None:
        """kazoo's ChildrenWatch (re-armed after every event and after a reconnect), delivered in the loop."""
        assert self.kazoo is not None and self.loop is not None
        loop = self.loop

        def on_children(children: list[str]) -> bool:
            if self._closing:
                return False
            loop.call_soon_threadsafe(callback, list(children))
            return True

        self._watches.append(ChildrenWatch(self.kazoo, path, on_children))

    def watch_data(self, path: str, callback: Callable[[bytes | None, ZnodeStat | None], None]) -> None:
        assert self.kazoo is not None and self.loop is not None
        loop = self.loop

        def on_data(data: bytes | None, stat: ZnodeStat | None) -> bool:
            if self._closing:
                return False
            loop.call_soon_threadsafe(callback, data, stat)
            return True

        self._watches.append(DataWatch(self.kazoo, path, on_data))


def _raise_first_failure(results: list[Any]) -> None:
    """A failed multi answers the failing operation's error and RolledBackError (or RuntimeInconsistency) for
    the others: raises the operation's own error, so callers see e.g. BadVersionError."""
    for result in results:
        if isinstance(result, Exception) and not isinstance(result, RolledBackError):
            raise result
    for result in results:
        if isinstance(result, Exception):
            raise result


def _settle(fut: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(value)


def _stop_and_close(client: KazooClient) -> None:
    try:
        client.stop()
        client.close()
    except Exception:  # closing a client that never connected
        pass


@dataclass(slots=True)
class ControllerRegistration:
    epoch: int
    epoch_zk_version: int


class KafkaZk:
    """Kafka's znode operations (KafkaZkClient's role) over one ZkClient."""

    def __init__(self, client: ZkClient) -> None:
        self.client = client

    async def ensure_persistent_paths(self) -> None:
        for path in Z.PERSISTENT_PATHS:
            await self.client.ensure_path(path)

    async def cluster_id(self, proposed: str) -> str:
        found = await self.client.get(Z.CLUSTER_ID)
        if found is None:
            try:
                await self.client.create(Z.CLUSTER_ID, Z.cluster_id_data(proposed))
                return proposed
            except NodeExistsError:
                found = await self.client.get(Z.CLUSTER_ID)
        assert found is not None
        return Z.parse_cluster_id(found[0])

    async def generate_broker_id(self, reserved_max_id: int) -> int:
        """Kafka's scheme: bump the version of /brokers/seqid; the id is reserved.broker.max.id + version."""
        await self.client.ensure_path(Z.BROKER_SEQID)
        stat = await self.client.set(Z.BROKER_SEQID, b"", -1)
        return reserved_max_id + int(stat.version)

    # ------------------------------------------------------------------ brokers
    async def register_broker(self, info: Z.BrokerInfo, protocol_map: dict[str, str]) -> int:
        """Creates the ephemeral /brokers/ids/<id>; returns its czxid (the broker epoch).

        A znode left by a previous run of this broker (killed less than a session timeout ago) disappears when
        its session expires, so an existing znode is waited on for up to the session timeout; one that stays is
        another live broker with the same id."""
        path = Z.broker_path(info.broker_id)
        data = Z.broker_registration(info, protocol_map)
        deadline = time.monotonic() + self.client.session_timeout_ms / 1000 + 2
        waiting_logged = False
        while True:
            try:
                _, stat = await self.client.create(path, data, ephemeral=True)
                return int(stat.czxid)
            except NodeExistsError:
                existing = await self.client.get(path)
            if existing is None:
                continue
            if existing[1].ephemeralOwner == self.client.session_id:
                return int(existing[1].czxid)  # our own registration, created before a connection loss
            if time.monotonic() >= deadline:
                raise DuplicateBrokerError(
                    f"broker.id {info.broker_id} is already registered in ZooKeeper "
                    f"({self.client.connect_string}{path}) by another live broker (session "
                    f"0x{existing[1].ephemeralOwner:x}); every broker needs its own broker.id")
            if not waiting_logged:
                log.warning("%s exists (session 0x%x): waiting up to %.0fs for it to expire, in case it is left "
                            "from this broker's previous run", path, existing[1].ephemeralOwner,
                            deadline - time.monotonic())
                waiting_logged = True
            await asyncio.sleep(0.25)

    async def live_brokers(self) -> dict[int, Z.BrokerInfo]:
        brokers: dict[int, Z.BrokerInfo] = {}
        ids: list[str] = []
        for child in await self.client.get_children(Z.BROKER_IDS):
            if not child.isdigit():
                log.warning("ignoring znode %s/%s: not a broker id", Z.BROKER_IDS, child)
                continue
            ids.append(child)
        # read side by side: a broker death is handled once these are read
        for child, found in zip(ids, await asyncio.gather(*(self.client.get(Z.broker_path(int(c))) for c in ids))):
            if found is None:
                continue
            try:
                brokers[int(child)] = Z.parse_broker_registration(Z.broker_path(int(child)), int(child), found[0],
                                                                  int(found[1].czxid))
            except Z.MalformedZnode as exc:
                log.error("%s; skipping this broker", exc)
        return brokers

    # ------------------------------------------------------------------ controller
    async def controller_id(self) -> int:
        found = await self.client.get(Z.CONTROLLER)
        if found is None:
            return -1
        try:
            return Z.parse_controller(found[0])
        except Z.MalformedZnode as exc:
            log.error("%s", exc)
            return -1

    async def controller_epoch(self) -> tuple[int, int] | None:
        found = await self.client.get(Z.CONTROLLER_EPOCH)
        if found is None:
            return None
        return Z.parse_controller_epoch(found[0]), int(found[1].version)

    async def try_become_controller(self, broker_id: int) -> ControllerRegistration | None:
        """Creates /controller and bumps /controller_epoch in one multi, conditional on the epoch's version.
        None when another broker is the controller."""
        while True:
            current = await self.controller_epoch()
            if current is None:
                try:
                    await self.client.create(Z.CONTROLLER_EPOCH, b"0")
                except NodeExistsError:
                    pass
                continue
            epoch, version = current
            try:
                results = await self.client.multi([
                    ("create", Z.CONTROLLER, Z.controller_data(broker_id), True),
                    ("set", Z.CONTROLLER_EPOCH, str(epoch + 1).encode(), version)])
            except NodeExistsError:
                return None
            except BadVersionError:
                continue  # another candidate bumped the epoch: re-read and race again
            return ControllerRegistration(epoch + 1, int(results[1].version))

    async def resign_controller(self, broker_id: int) -> None:
        found = await self.client.get(Z.CONTROLLER)
        if found is not None and found[1].ephemeralOwner == self.client.session_id:
            try:
                await self.client.delete(Z.CONTROLLER, found[1].version)
            except (BadVersionError, NoNodeError):
                pass

    async def controller_multi(self, epoch_zk_version: int, ops: list[Op]) -> list[Any]:
        """A controller write: all ops, only if /controller_epoch still has the version our election left."""
        try:
            results = await self.client.multi([("check", Z.CONTROLLER_EPOCH, epoch_zk_version), *ops])
        except BadVersionError as exc:
            # Could be the check or a conditional op; the check is what matters for fencing.
            current = await self.controller_epoch()
            if current is None or current[1] != epoch_zk_version:
                raise ControllerMovedError("the controller epoch moved on; this broker is no longer the "
                                           "controller") from exc
            raise
        return results[1:]

    # ------------------------------------------------------------------ topics
    async def topics(self) -> list[str]:
        return await self.client.get_children(Z.BROKER_TOPICS)

    async def assignment(self, topic: str) -> Z.TopicAssignment | None:
        found = await self.client.get(Z.topic_path(topic))
        if found is None:
            return None
        try:
            return Z.parse_topic_assignment(topic, found[0])
        except Z.MalformedZnode as exc:
            log.error("%s; skipping this topic", exc)
            return None

    async def partition_state(self, topic: str, partition: int) -> Z.LeaderIsr | None:
        found = await self.client.get(Z.state_path(topic, partition))
        if found is None:
            return None
        try:
            return Z.parse_partition_state(topic, partition, found[0], int(found[1].version))
        except Z.MalformedZnode as exc:
            log.error("%s; treating the partition as having no state", exc)
            return None

    async def partition_states(self, topic: str, partitions: Iterable[int]) -> dict[int, Z.LeaderIsr]:
        """The states of many partitions of one topic (partitions without a readable state are left out)."""
        found = await self.partition_states_of([(topic, p) for p in partitions])
        return {p: s for (_, p), s in found.items()}

    async def partition_states_of(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, Z.LeaderIsr]:
        """The states of many partitions in a few multiReads (``ZkClient.get_many``), each with its znode version
        for the conditional writes that follow; partitions without a readable state are left out."""
        wanted = list(tps)
        out: dict[TopicPartition, Z.LeaderIsr] = {}
        for tp, found in zip(wanted, await self.client.get_many([Z.state_path(*tp) for tp in wanted])):
            if found is None:
                continue
            try:
                out[tp] = Z.parse_partition_state(tp[0], tp[1], found[0], int(found[1].version))
            except Z.MalformedZnode as exc:
                log.error("%s; treating the partition as having no state", exc)
        return out

    async def topic_config(self, topic: str) -> dict[str, str]:
        found = await self.client.get(Z.topic_config_path(topic))
        if found is None:
            return {}
        try:
            return Z.parse_topic_config(topic, found[0])
        except Z.MalformedZnode as exc:
            log.error("%s; using the broker defaults", exc)
            return {}

    async def create_topic(self, topic: str, topic_id: bytes, assignment: dict[int, list[int]],
                           configs: dict[str, str]) -> None:
        """The AdminZkClient way: any broker may write the config and the assignment; the controller reacts."""
        try:
            existing_config = await self.client.exists(Z.topic_config_path(topic))
            ops: list[Op] = [("create", Z.topic_path(topic), Z.topic_assignment(topic_id, assignment), False)]
            if existing_config is None:
                ops.insert(0, ("create", Z.topic_config_path(topic), Z.topic_config(configs), False))
            else:
                ops.insert(0, ("set", Z.topic_config_path(topic), Z.topic_config(configs), -1))
            await self.client.multi(ops)
        except NodeExistsError:
            raise TopicExistsError(f"Topic '{topic}' already exists.") from None

    async def add_partitions(self, topic: str, additions: dict[int, list[int]]) -> Z.TopicAssignment:
        """CreatePartitions, the AdminZkClient way: rewrite /brokers/topics/<t> with the existing partitions plus
        ``additions``, conditional on the version read (a concurrent change fails with BadVersionError); the
        controller's watch on the znode picks the new partitions up."""
        found = await self.client.get(Z.topic_path(topic))
        if found is None:
            raise NoNodeError(Z.topic_path(topic))
        current = Z.parse_topic_assignment(topic, found[0])
        partitions = {**current.partitions, **additions}
        # A reassignment in progress keeps its adding/removing replicas (a new controller resumes from them).
        await self.client.set(Z.topic_path(topic), Z.topic_assignment(current.topic_id, partitions, current.adding,
                                                                      current.removing), int(found[1].version))
        return Z.TopicAssignment(topic, current.topic_id, partitions, current.adding, current.removing)

    async def mark_topic_for_deletion(self, topic: str) -> None:
        try:
            await self.client.create(Z.delete_topic_path(topic))
        except NodeExistsError:
            pass

    async def topics_to_delete(self) -> list[str]:
        return await self.client.get_children(Z.DELETE_TOPICS)

    # ------------------------------------------------------------------ ISR change notifications
    async def update_leader_and_isr(self, topic: str, partition: int,
                                    state: Z.LeaderIsr) -> tuple[int, list[int]] | None:
        """A leader's ISR change: written only if the state znode still has the version the leader last saw
        (``state.zk_version``), then announced under /isr_change_notification. Returns (new version, ISR).

        On a version conflict, a state with the same leader and leader epoch is still this leader's to change
        (an earlier write of ours landed after a LeaderAndIsr reset our view): its version and ISR are returned
        to build on. Otherwise None: the controller moved on, and its LeaderAndIsr will tell."""
        path = Z.state_path(topic, partition)
        try:
            stat = await self.client.set(path, Z.partition_state(state), state.zk_version)
        except BadVersionError:
            current = await self.partition_state(topic, partition)
            if current is not None and current.leader == state.leader and current.leader_epoch == state.leader_epoch:
                return current.zk_version, list(current.isr)
            return None
        except NoNodeError:
            return None
        await self.client.create(f"{Z.ISR_CHANGE}/{Z.ISR_CHANGE_PREFIX}", Z.isr_change([(topic, partition)]),
                                 sequence=True)
        return int(stat.version), list(state.isr)

    async def report_log_dir_failure(self, broker_id: int) -> None:
        """Tells the controller that a log dir of this broker failed (Kafka's /log_dir_event_notification)."""
        await self.client.create(f"{Z.LOG_DIR_EVENT}/{Z.LOG_DIR_EVENT_PREFIX}", Z.log_dir_event(broker_id),
                                 sequence=True)

    async def log_dir_events(self) -> list[tuple[str, int | None]]:
        """(path, reporting broker) of each pending log dir event; None for a malformed one."""
        out: list[tuple[str, int | None]] = []
        for child in await self.client.get_children(Z.LOG_DIR_EVENT):
            path = f"{Z.LOG_DIR_EVENT}/{child}"
            found = await self.client.get(path)
            if found is None:
                continue
            try:
                out.append((path, Z.parse_log_dir_event(path, found[0])))
            except Z.MalformedZnode as exc:
                log.error("%s; deleting it", exc)
                out.append((path, None))
        return out

    async def isr_changes(self) -> list[tuple[str, list[TopicPartition]]]:
        out = []
        for child in await self.client.get_children(Z.ISR_CHANGE):
            path = f"{Z.ISR_CHANGE}/{child}"
            found = await self.client.get(path)
            if found is None:
                continue
            try:
                out.append((path, Z.parse_isr_change(path, found[0])))
            except Z.MalformedZnode as exc:
                log.error("%s; deleting it", exc)
                out.append((path, []))
        return out

    # ------------------------------------------------------------------ producer ids
    async def allocate_producer_id_block(self, broker_id: int, block_size: int) -> tuple[int, int]:
        """The next block [start, end] of producer ids for this broker (versioned, conditional write)."""
        while True:
            found = await self.client.get(Z.PRODUCER_ID_BLOCK)
            if found is None:
                start = 0
                try:
                    await self.client.create(Z.PRODUCER_ID_BLOCK,
                                             Z.producer_id_block(broker_id, start, start + block_size - 1))
                    return start, start + block_size - 1
                except NodeExistsError:
                    continue
            try:
                start = Z.parse_producer_id_block(found[0]) + 1
            except Z.MalformedZnode as exc:
                raise ZkError(f"{exc}; refusing to hand out producer ids that could repeat") from None
            try:
                await self.client.set(Z.PRODUCER_ID_BLOCK, Z.producer_id_block(broker_id, start,
                                                                               start + block_size - 1),
                                      int(found[1].version))
                return start, start + block_size - 1
            except BadVersionError:
                continue  # another broker took a block: read again


__all__ = ["ControllerMovedError", "DuplicateBrokerError", "KafkaZk", "KazooException", "TopicExistsError",
           "ZkClient", "ZkError", "ZkUnavailable", "split_chroot"]
