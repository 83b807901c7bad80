"""Consumer-group administration for ``AdminClient`` (composed into it, see client/admin.py): list, describe and
delete groups; list, alter and delete their committed offsets. Kafka's Admin API names and shapes.

ListGroups goes to every broker (each lists the groups it coordinates); everything else to the group's
coordinator, found again (FindCoordinator) and retried when a broker answers NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from moldau.assignors import decode_assignment
from moldau.cluster import COORDINATOR_ERRORS, Cluster
from moldau.config import ClientConfig
from moldau.errors import KafkaConnectionError, KafkaError, RequestTimeoutError
from moldau.fetcher import TopicPartition
from moldau.group import OffsetAndMetadata
from moldau.protocol.messages.group import DELETE_GROUPS, DESCRIBE_GROUPS, LIST_GROUPS
from moldau.protocol.messages.offsets import OFFSET_COMMIT, OFFSET_DELETE, OFFSET_FETCH
from moldau.protocol.schema import Api

__all__ = ["ConsumerGroupDescription", "ConsumerGroupListing", "GroupAdmin", "MemberDescription"]

_RETRIES = 5
K = TypeVar("K")
# Kafka's group states (ConsumerGroupState), as ListGroups' states filter and DescribeGroups spell them.
GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")


@dataclass(slots=True, frozen=True)
class ConsumerGroupListing:
    group_id: str
    is_simple_consumer_group: bool  # no protocol type: only commits offsets (assign(), no membership)
    state: str | None  # None when the broker is older than ListGroups v4
    protocol_type: str = ""


@dataclass(slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: list[TopicPartition] = field(default_factory=list)  # sorted


@dataclass(slots=True)
class ConsumerGroupDescription:
    group_id: str
    is_simple_consumer_group: bool
    members: list[MemberDescription]
    partition_assignor: str  # the protocol the group chose ("range", "cooperative-sticky", ...), "" if none
    state: str
    coordinator: int  # node id
    protocol_type: str = "consumer"


def _by_topic(partitions: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in partitions:
        out.setdefault(topic, []).append(partition)
    return out


class GroupAdmin:
    """The group requests of one AdminClient, on its cluster core."""

    def __init__(self, cluster: Cluster, config: ClientConfig) -> None:
        self._cluster = cluster
        self._config = config

    async def _send(self, node: int, api: Api, body: dict[str, Any], max_version: int | None) -> dict[str, Any]:
        conn = await self._cluster.connection(node)
        return await self._cluster.send(node, api, body, conn.version_for(api, max_version))

    async def _to_coordinator(self, group_id: str, api: Api, body: dict[str, Any], max_version: int | None,
                              error_of: Callable[[dict[str, Any]], int]) -> tuple[int, dict[str, Any]]:
        """(coordinator, response), asking the coordinator again while it moves or loads."""
        backoff = self._config["retry.backoff.ms"] / 1000
        for attempt in range(_RETRIES + 1):
            node = await self._cluster.coordinator(group_id)
            try:
                response = await self._send(node, api, body, max_version)
            except (KafkaConnectionError, RequestTimeoutError):
                self._cluster.coordinator_dead(group_id)
                if attempt == _RETRIES:
                    raise
            else:
                if error_of(response) not in COORDINATOR_ERRORS or attempt == _RETRIES:
                    return node, response
                self._cluster.coordinator_dead(group_id)
            await asyncio.sleep(backoff * (attempt + 1))
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ groups
    async def list_consumer_groups(self, states: Iterable[str] | None = None) -> list[ConsumerGroupListing]:
        """Every group of every broker (``states``: only groups in these states), sorted by id."""
        wanted = sorted(set(states or ()))
        unknown = [s for s in wanted if s not in GROUP_STATES]
        if unknown:
            raise ValueError(f"unknown group state(s) {unknown}; known: {', '.join(GROUP_STATES)}")
        await self._cluster.refresh_metadata(None)
        found: dict[str, ConsumerGroupListing] = {}
        for node in sorted(self._cluster.brokers):
            response = await self._send(node, LIST_GROUPS, {"states_filter": wanted, "types_filter": []}, 4)
            if response["error_code"]:
                raise KafkaError(response["error_code"], f"ListGroups on broker {node}")
            for g in response["groups"]:
                state = g.get("group_state") or None
                if wanted and state is not None and state not in wanted:
                    continue
                found[g["group_id"]] = ConsumerGroupListing(g["group_id"], not g["protocol_type"], state,
                                                            g["protocol_type"])
        return [found[g] for g in sorted(found)]

    async def describe_consumer_groups(self, group_ids: Iterable[str], *, raise_errors: bool = True,
                                       ) -> dict[str, ConsumerGroupDescription | KafkaError]:
        """Members (with their assigned partitions), state, chosen assignor and coordinator of each group."""
        out: dict[str, ConsumerGroupDescription | KafkaError] = {}
        for group_id in group_ids:
            node, response = await self._to_coordinator(
                group_id, DESCRIBE_GROUPS, {"groups": [group_id], "include_authorized_operations": False}, 5,
                lambda r: int(r["groups"][0]["error_code"]))
            g = response["groups"][0]
            if g["error_code"]:
                error = KafkaError(g["error_code"], f"group {group_id}")
                if raise_errors:
                    raise error
                out[group_id] = error
                continue
            members = []
            for m in g["members"]:
                assigned: list[TopicPartition] = []
                if g["protocol_type"] == "consumer" and m["member_assignment"]:
                    assigned = sorted(TopicPartition(t, p) for t, ps in
                                      decode_assignment(bytes(m["member_assignment"])).items() for p in ps)
                members.append(MemberDescription(m["member_id"], m.get("group_instance_id"), m["client_id"],
                                                 m["client_host"], assigned))
            out[group_id] = ConsumerGroupDescription(group_id, not g["protocol_type"], members, g["protocol_data"],
                                                     g["group_state"], node, g["protocol_type"])
        return out

    async def delete_consumer_groups(self, group_ids: Iterable[str], *, raise_errors: bool = True,
                                     ) -> dict[str, KafkaError | None]:
        """Deletes empty groups and their offsets: group -> error (None: deleted). NON_EMPTY_GROUP if members."""
        out: dict[str, KafkaError | None] = {}
        for group_id in group_ids:
            _, response = await self._to_coordinator(
                group_id, DELETE_GROUPS, {"groups_names": [group_id]}, 2,
                lambda r: int(r["results"][0]["error_code"]) if r["results"] else 0)
            for r in response["results"]:
                out[r["group_id"]] = KafkaError(r["error_code"], f"group {r['group_id']}") if r["error_code"] else None
        return _raise_first(out, raise_errors)

    # ------------------------------------------------------------------ offsets
    async def list_consumer_group_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None,
                                          ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The committed offsets of ``group_id`` (all of them, or of ``partitions``; uncommitted ones left out)."""
        topics = None if partitions is None else [{"name": t, "partition_indexes": ps}
                                                  for t, ps in _by_topic(partitions).items()]
        _, response = await self._to_coordinator(
            group_id, OFFSET_FETCH, {"group_id": group_id, "topics": topics, "require_stable": False}, 7,
            lambda r: int(r.get("error_code", 0)))
        if response.get("error_code"):
            raise KafkaError(response["error_code"], f"offsets of group {group_id}")
        out: dict[TopicPartition, OffsetAndMetadata] = {}
        for t in response["topics"]:
            for p in t["partitions"]:
                if p["error_code"]:
                    raise KafkaError(p["error_code"], f"offset of {group_id} on {t['name']}-{p['partition_index']}")
                if p["committed_offset"] >= 0:
                    out[TopicPartition(t["name"], p["partition_index"])] = OffsetAndMetadata(
                        p["committed_offset"], p.get("metadata") or "")
        return dict(sorted(out.items()))

    async def alter_consumer_group_offsets(self, group_id: str,
                                           offsets: Mapping[tuple[str, int], int | OffsetAndMetadata], *,
                                           raise_errors: bool = True) -> dict[TopicPartition, KafkaError | None]:
        """Commits ``offsets`` for the group (it must have no active members: UNKNOWN_MEMBER_ID otherwise)."""
        parts: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), value in offsets.items():
            om = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(int(value))
            parts.setdefault(topic, []).append({"partition_index": partition, "committed_offset": om.offset,
                                                "committed_metadata": om.metadata})
        if not parts:
            return {}
        body = {"group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "",
                "group_instance_id": None, "topics": [{"name": t, "partitions": ps} for t, ps in parts.items()]}
        _, response = await self._to_coordinator(group_id, OFFSET_COMMIT, body, 8, _first_partition_error)
        return _raise_first(_partition_errors(response, f"commit for group {group_id}"), raise_errors)

    async def delete_consumer_group_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]], *,
                                            raise_errors: bool = True) -> dict[TopicPartition, KafkaError | None]:
        """Deletes the group's committed offsets of ``partitions`` (OffsetDelete); a partition the group is
        subscribed to gets GROUP_SUBSCRIBED_TO_TOPIC."""
        body = {"group_id": group_id, "topics": [{"name": t, "partitions": [{"partition_index": p} for p in ps]}
                                                 for t, ps in _by_topic(partitions).items()]}
        _, response = await self._to_coordinator(group_id, OFFSET_DELETE, body, 0, lambda r: int(r["error_code"]))
        if response["error_code"]:
            raise KafkaError(response["error_code"], f"offset delete for group {group_id}")
        return _raise_first(_partition_errors(response, f"offset delete for group {group_id}"), raise_errors)


def _first_partition_error(response: dict[str, Any]) -> int:
    return next((int(p["error_code"]) for t in response["topics"] for p in t["partitions"] if p["error_code"]), 0)


def _partition_errors(response: dict[str, Any], what: str) -> dict[TopicPartition, KafkaError | None]:
    return {TopicPartition(t["name"], p["partition_index"]):
            KafkaError(p["error_code"], f"{what} on {t['name']}-{p['partition_index']}") if p["error_code"] else None
            for t in response["topics"] for p in t["partitions"]}


def _raise_first(results: dict[K, KafkaError | None], raise_errors: bool) -> dict[K, KafkaError | None]:
    if raise_errors:
        for error in results.values():
            if error is not None:
                raise error
    return results
