"""The transaction coordinator's way to partition leaders: WriteTxnMarkers over the inter-broker listener.

Kafka's coordinator sends markers to every leader, itself included, through the network. We send them to the
other brokers (one connection per broker, kept open, replaced after a failure) and write those of the partitions
this broker leads itself, through ``local`` (the WriteTxnMarkers handler's writes, wired by the server): the same
appends and high-watermark waits, without a request to our own listener on the transaction's critical path. A
failed request raises; the coordinator's marker round retries it (broker/coordinator/txn_coordinator.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from moldau.broker.metadata import MetadataStore
from moldau.connection import BrokerConnection, api_for
from moldau.protocol.api import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.types import TopicPartition
from moldau.security import ClientSecurity

log = logging.getLogger("moldau.coordinator.txn_markers")

# (producer id, producer epoch, commit, coordinator epoch, partitions) -> error per partition.
LocalMarkerWriter = Callable[[int, int, bool, int, list[TopicPartition]], Awaitable[dict[TopicPartition, int]]]


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

    async def write_markers(self, leader_id: int, producer_id: int, producer_epoch: int, commit: bool,
                            coordinator_epoch: int, partitions: list[TopicPartition]
                            ) -> dict[TopicPartition, ErrorCode]:
        if leader_id == self.broker_id and self.local is not None:
            written = await self.local(producer_id, producer_epoch, commit, coordinator_epoch, partitions)
            return {tp: ErrorCode.for_code(int(code)) for tp, code in written.items()}
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        body = {"markers": [{"producer_id": producer_id, "producer_epoch": producer_epoch,
                             "transaction_result": commit, "coordinator_epoch": coordinator_epoch,
                             "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]}]}
        try:
            conn = await self._connection(leader_id)
            response = await conn.send(api_for(ApiKey.WRITE_TXN_MARKERS), body)
        except Exception:
            conn_ = self._conns.pop(leader_id, None)
            if conn_ is not None:
                await conn_.close()
            raise
        result: dict[TopicPartition, ErrorCode] = {}
        for marker in response["markers"]:
            for topic in marker["topics"]:
                for p in topic["partitions"]:
                    result[(topic["name"], p["partition_index"])] = ErrorCode(p["error_code"])
        for tp in partitions:
            result.setdefault(tp, ErrorCode.UNKNOWN_SERVER_ERROR)  # not answered: retried
        return result

    async def close(self) -> None:
        conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            await conn.close()
