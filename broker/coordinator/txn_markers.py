"""The transaction coordinator's way to partition leaders: WriteTxnMarkers over the inter-broker listener.

Kafka's coordinator sends markers to every leader, itself included, through the network. We send them to the
other brokers (one connection per broker, kept open, replaced after a failure) and write those of the partitions
this broker leads itself, through ``local`` (the WriteTxnMarkers handler's writes, wired by the server): the same
appends and high-watermark waits, without a request to our own listener on the transaction's critical path. A
failed request raises; the coordinator's marker round retries it (broker/coordinator/txn_coordinator.py).

One WriteTxnMarkers request per broker is in flight at a time, and the marker rounds that come while it is
carry their markers in the next one together (the request's ``markers`` array, as Kafka's marker channel
manager drains its queue per broker). A leader answers one request of a connection at a time, each after an
acks=all wait, so requests sent one per round queued up behind each other: with several transactional
producers committing at once every round waited for the replication of the rounds ahead of it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from moldau.broker.metadata import MetadataStore
from moldau.connection import BrokerConnection, api_for
from moldau.protocol.api import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.types import TopicPartition
from moldau.security import ClientSecurity
from moldau.tasks import cancel_and_wait

log = logging.getLogger("moldau.coordinator.txn_markers")

# (producer id, producer epoch, commit, coordinator epoch, partitions) -> error per partition.
LocalMarkerWriter = Callable[[int, int, bool, int, list[TopicPartition]], Awaitable[dict[TopicPartition, int]]]


@dataclass(slots=True)
class _Queued:
    """One marker round's markers for one leader, waiting for the next request to that leader."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: list[TopicPartition]
    answer: asyncio.Future[dict[TopicPartition, ErrorCode]]


async def _as_codes(written: Awaitable[dict[TopicPartition, int]]) -> dict[TopicPartition, ErrorCode]:
    return {tp: ErrorCode.for_code(int(code)) for tp, code in (await written).items()}


class InterBrokerMarkerChannel:
    def __init__(self, metadata: MetadataStore, endpoint_of: Callable[[int], tuple[str, int] | None],
                 broker_id: int, *, security: ClientSecurity | None = None, request_timeout_ms: int = 30000,
                 security_from_config: Callable[[], ClientSecurity | None] | None = None,
                 local: LocalMarkerWriter | None = None) -> None:
        self.metadata = metadata
        self.local = local
        self.endpoint_of = endpoint_of
        self.broker_id = broker_id
        self.security = security
        # A standalone broker reads its inter-broker login only when a marker is first sent: a SASL-only broker
        # that never sees a transaction starts without one, as before transactions existed (a bad or missing
        # login then fails each marker attempt, logged, retried by the coordinator).
        self._security_from_config = security_from_config
        self.request_timeout_ms = request_timeout_ms
        self._conns: dict[int, BrokerConnection] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self._queued: dict[int, list[_Queued]] = {}  # per leader: what the next request carries
        self._senders: dict[int, asyncio.Task[None]] = {}  # per leader: the task with a request in flight

    def leader_of(self, tp: TopicPartition) -> int | None:
        topic = self.metadata.topic(tp[0])
        state = None if topic is None else topic.partitions.get(tp[1])
        return None if state is None else state.leader

    def topic_exists(self, topic: str) -> bool:
        return self.metadata.topic(topic) is not None

    async def _connection(self, broker_id: int) -> BrokerConnection:
        async with self._locks.setdefault(broker_id, asyncio.Lock()):
            conn = self._conns.get(broker_id)
            if conn is not None and conn.connected:
                return conn
            endpoint = self.endpoint_of(broker_id)
            if endpoint is None:
                raise ConnectionError(f"no address known for broker {broker_id}")
            if self._security_from_config is not None:
                self.security = self._security_from_config()
                self._security_from_config = None
            conn = BrokerConnection(endpoint[0], endpoint[1], client_id=f"broker-{self.broker_id}-txn-markers",
                                    request_timeout_ms=self.request_timeout_ms, security=self.security)
            await conn.connect()
            self._conns[broker_id] = conn
            return conn

    def write_markers(self, leader_id: int, producer_id: int, producer_epoch: int, commit: bool,
                      coordinator_epoch: int, partitions: list[TopicPartition]
                      ) -> Awaitable[dict[TopicPartition, ErrorCode]]:
        """Starts the writes now (this broker's partitions appended, the others' queued for their leader's next
        request); the awaitable gives each partition's error. A cancelled round's markers are left out of a
        request not yet sent."""
        if leader_id == self.broker_id and self.local is not None:
            return _as_codes(self.local(producer_id, producer_epoch, commit, coordinator_epoch, partitions))
        answer: asyncio.Future[dict[TopicPartition, ErrorCode]] = asyncio.get_running_loop().create_future()
        self._queued.setdefault(leader_id, []).append(
            _Queued(producer_id, producer_epoch, commit, coordinator_epoch, partitions, answer))
        if leader_id not in self._senders:
            self._senders[leader_id] = asyncio.get_running_loop().create_task(
                self._send_queued(leader_id), name=f"txn-markers-to-{leader_id}")
        return answer

    async def _send_queued(self, leader_id: int) -> None:
        """Sends what is queued for the leader, one request at a time, until nothing is left."""
        batch: list[_Queued] = []
        try:
            while True:
                batch = [q for q in self._queued.pop(leader_id, ()) if not q.answer.done()]
                if not batch:
                    return
                try:
                    results = await self._send(leader_id, batch)
                except Exception as exc:  # every round of the request retries (a new connection next time)
                    for q in batch:
                        if not q.answer.done():
                            q.answer.set_exception(exc)
                    continue
                for q, result in zip(batch, results, strict=True):
                    if not q.answer.done():
                        q.answer.set_result(result)
        except asyncio.CancelledError:  # close(): the rounds waiting on this request fail (and would retry)
            for q in batch:
                if not q.answer.done():
                    q.answer.set_exception(ConnectionError("the marker channel is closed"))
            raise
        finally:
            if self._senders.get(leader_id) is asyncio.current_task():
                del self._senders[leader_id]

    async def _send(self, leader_id: int, batch: list[_Queued]) -> list[dict[TopicPartition, ErrorCode]]:
        markers = []
        for q in batch:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in q.partitions:
                by_topic.setdefault(topic, []).append(partition)
            markers.append({"producer_id": q.producer_id, "producer_epoch": q.producer_epoch,
                            "transaction_result": q.commit, "coordinator_epoch": q.coordinator_epoch,
                            "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]})
        try:
            conn = await self._connection(leader_id)
            response = await conn.send(api_for(ApiKey.WRITE_TXN_MARKERS), {"markers": markers})
        except Exception:
            conn_ = self._conns.pop(leader_id, None)
            if conn_ is not None:
                await conn_.close()
            raise
        # The answer lists the markers in the request's order (Kafka's and ours); matched by producer id too, so
        # an answer in another order cannot hand one round another's errors.
        answered = list(response["markers"])
        results: list[dict[TopicPartition, ErrorCode]] = []
        for i, q in enumerate(batch):
            marker = answered[i] if i < len(answered) and answered[i]["producer_id"] == q.producer_id else next(
                (m for m in answered if m["producer_id"] == q.producer_id), None)
            result: dict[TopicPartition, ErrorCode] = {}
            if marker is not None:
                answered.remove(marker)
                for topic in marker["topics"]:
                    for p in topic["partitions"]:
                        result[(topic["name"], p["partition_index"])] = ErrorCode(p["error_code"])
            for tp in q.partitions:
                result.setdefault(tp, ErrorCode.UNKNOWN_SERVER_ERROR)  # not answered: retried
            results.append(result)
        return results

    async def close(self) -> None:
        senders, self._senders = list(self._senders.values()), {}
        await cancel_and_wait(senders, 1.0)
        queued, self._queued = [q for qs in self._queued.values() for q in qs], {}
        for q in queued:
            if not q.answer.done():
                q.answer.set_exception(ConnectionError("the marker channel is closed"))
        conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            await conn.close()
