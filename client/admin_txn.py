"""Transaction administration for ``AdminClient`` (Kafka's Admin API names, KIP-664): ``list_transactions``
(ListTransactions to every broker), ``describe_transactions`` (DescribeTransactions to each id's transaction
coordinator) and ``describe_producers`` (DescribeProducers to each partition's leader). What
``moldau-transactions`` (kafka-transactions.sh) prints.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from moldau.cluster import Cluster
from moldau.errors import KafkaError
from moldau.fetcher import TopicPartition
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.transactions import DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import ListTransactionsRequest

__all__ = ["ProducerState", "TransactionDescription", "TransactionListing", "TransactionsAdmin"]

TXN_COORDINATOR = 1  # FindCoordinator key type of a transactional id


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str  # Kafka's names: Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, ...
    coordinator_id: int


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int  # -1 without an open transaction
    topic_partitions: list[TopicPartition]


@dataclass(frozen=True, slots=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_transaction_start_offset: int  # -1 without an open transaction


class TransactionsAdmin:
    """Mixed into ``AdminClient`` (client/admin.py), which provides ``_cluster``."""

    _cluster: Cluster

    async def list_transactions(self, states: Iterable[str] | None = None,
                                producer_ids: Iterable[int] | None = None,
                                duration_filter_ms: int = -1) -> list[TransactionListing]:
        """The transactional ids of every broker's coordinator (only those in ``states`` / of ``producer_ids`` /
        open longer than ``duration_filter_ms`` when given)."""
        await self._cluster.refresh_metadata(None, allow_auto_create=False)
        body: ListTransactionsRequest = {"state_filters": list(states or ()), "producer_id_filters": list(producer_ids or ()),
                "duration_filter": duration_filter_ms}
        nodes = sorted(self._cluster.brokers)

        async def one(node: int) -> list[TransactionListing]:
            conn = await self._cluster.connection(node)
            version = conn.version_for(LIST_TRANSACTIONS)
            if duration_filter_ms >= 0 and version < 1:
                raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"broker {node} cannot filter transactions by duration (ListTransactions v1)")
            response = await self._cluster.send(node, LIST_TRANSACTIONS, body, version)
            if response["error_code"]:
                raise KafkaError(response["error_code"], f"ListTransactions on broker {node}")
            return [TransactionListing(t["transactional_id"], t["producer_id"], t["transaction_state"], node)
                    for t in response["transaction_states"]]

        lists = await asyncio.gather(*(one(n) for n in nodes))
        return sorted((t for per_node in lists for t in per_node), key=lambda t: t.transactional_id)

    async def describe_transactions(self, transactional_ids: Iterable[str], *, raise_errors: bool = True,
                                    ) -> dict[str, TransactionDescription | KafkaError]:
        """State, producer id and epoch, time-out, start time and partitions of each transactional id."""
        out: dict[str, TransactionDescription | KafkaError] = {}
        for tid in transactional_ids:
            try:
                node = await self._cluster.coordinator(tid, key_type=TXN_COORDINATOR)
                response = await self._cluster.send(node, DESCRIBE_TRANSACTIONS, {"transactional_ids": [tid]})
                st = response["transaction_states"][0]
                if st["error_code"]:
                    raise KafkaError(st["error_code"], f"transactional id {tid}")
            except KafkaError as exc:
                if raise_errors:
                    raise
                out[tid] = exc
                continue
            out[tid] = TransactionDescription(
                node, st["transaction_state"], st["producer_id"], st["producer_epoch"], st["transaction_timeout_ms"],
                st["transaction_start_time_ms"],
                [TopicPartition(t["topic"], p) for t in st["topics"] for p in t["partitions"]])
        return out

    async def describe_producers(self, partitions: Iterable[tuple[str, int]], *, broker_id: int | None = None,
                                 raise_errors: bool = True) -> dict[TopicPartition, list[ProducerState] | KafkaError]:
        """The active producers of each partition as its leader (or ``broker_id``) knows them."""
        wanted = [TopicPartition(*tp) for tp in partitions]
        await self._cluster.refresh_metadata(sorted({tp.topic for tp in wanted}), allow_auto_create=False)
        by_node: dict[int, list[TopicPartition]] = {}
        out: dict[TopicPartition, list[ProducerState] | KafkaError] = {}
        for tp in wanted:
            node = broker_id if broker_id is not None else self._cluster.leader_for(tp.topic, tp.partition)
            if node is None:
                known = self._cluster.partitions_for(tp.topic)
                if known is None or tp.partition not in known:  # Kafka's admin: UnknownTopicOrPartitionException
                    what = f"topic '{tp.topic}' does not exist" if known is None else \
                        f"partition {tp.partition} of topic '{tp.topic}' does not exist"
                    out[tp] = KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, what)
                else:
                    out[tp] = KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"{tp.topic}-{tp.partition}")
                continue
            by_node.setdefault(node, []).append(tp)
        for node, tps in by_node.items():
            topics: dict[str, list[int]] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(tp.partition)
            response = await self._cluster.send(node, DESCRIBE_PRODUCERS, {
                "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]})
            for t in response["topics"]:
                for p in t["partitions"]:
                    tp = TopicPartition(t["name"], p["partition_index"])
                    if p["error_code"]:
                        out[tp] = KafkaError(p["error_code"], p.get("error_message") or f"{tp.topic}-{tp.partition}")
                        continue
                    out[tp] = [ProducerState(a["producer_id"], a["producer_epoch"], a["last_sequence"],
                                             a["last_timestamp"], a["coordinator_epoch"],
                                             a["current_txn_start_offset"]) for a in p["active_producers"]]
        if raise_errors:
            for value in out.values():
                if isinstance(value, KafkaError):
                    raise value
        return out
