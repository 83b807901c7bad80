"""The route table: API key -> small handler function, given the typed dependencies of its family.

Each entry is made by ``route(API, family, handler)``: the typed ``Api[Request, Response]`` declaration
(protocol/messages) supplies the key and binds the handler's body and answer types, so mypy rejects a handler
under the wrong API (tests/unit/broker/test_route_types.py proves it on a deliberately wrong table).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from moldau.broker.apis.acls import handle_create_acls, handle_delete_acls, handle_describe_acls
from moldau.broker.apis.api_versions import api_versions_table, handle_api_versions
from moldau.broker.apis.configs import (
    handle_alter_configs,
    handle_describe_configs,
    handle_incremental_alter_configs,
)
from moldau.broker.apis.consumer_group import handle_consumer_group_describe, handle_consumer_group_heartbeat
from moldau.broker.apis.context import (
    AclDeps,
    BrokerContext,
    ConfigDeps,
    ControlDeps,
    GroupDeps,
    PartitionAdminDeps,
    ProducerIdDeps,
    QuotaDeps,
    ReplicaDeps,
    ScramDeps,
    TopicDeps,
    TxnDeps,
)
from moldau.broker.apis.describe_producers import handle_describe_producers
from moldau.broker.apis.fetch import handle_fetch
from moldau.broker.apis.group import (
    handle_delete_groups,
    handle_describe_groups,
    handle_find_coordinator,
    handle_heartbeat,
    handle_join_group,
    handle_leave_group,
    handle_list_groups,
    handle_sync_group,
)
from moldau.broker.apis.init_producer_id import handle_init_producer_id
from moldau.broker.apis.inter_broker import (
    handle_controlled_shutdown,
    handle_leader_and_isr,
    handle_stop_replica,
    handle_update_metadata,
)
from moldau.broker.apis.leader_epoch import handle_offset_for_leader_epoch
from moldau.broker.apis.list_offsets import handle_list_offsets
from moldau.broker.apis.metadata import handle_metadata
from moldau.broker.apis.offsets import handle_offset_commit, handle_offset_delete, handle_offset_fetch
from moldau.broker.apis.partition_admin import (
    handle_alter_partition_reassignments,
    handle_create_partitions,
    handle_delete_records,
    handle_describe_log_dirs,
    handle_elect_leaders,
    handle_list_partition_reassignments,
)
from moldau.broker.apis.produce import handle_produce, handle_produce_many
from moldau.broker.apis.quotas import handle_alter_client_quotas, handle_describe_client_quotas
from moldau.broker.apis.sasl import (
    handle_alter_user_scram_credentials,
    handle_describe_user_scram_credentials,
    handle_sasl_authenticate,
    handle_sasl_handshake,
)
from moldau.broker.apis.topics import handle_create_topics, handle_delete_topics
from moldau.broker.apis.transactions import (
    handle_add_offsets_to_txn,
    handle_add_partitions_to_txn,
    handle_describe_transactions,
    handle_end_txn,
    handle_list_transactions,
    handle_txn_offset_commit,
)
from moldau.broker.apis.txn_markers import TxnMarkerDeps, handle_write_txn_markers
from moldau.broker.request_channel import Request
from moldau.protocol.messages.acls import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS
from moldau.protocol.messages.api_versions import API_VERSIONS
from moldau.protocol.messages.configs import ALTER_CONFIGS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS
from moldau.protocol.messages.consumer_group import CONSUMER_GROUP_DESCRIBE, CONSUMER_GROUP_HEARTBEAT
from moldau.protocol.messages.create_topics import CREATE_TOPICS
from moldau.protocol.messages.delete_topics import DELETE_TOPICS
from moldau.protocol.messages.fetch import FETCH
from moldau.protocol.messages.group import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    SYNC_GROUP,
)
from moldau.protocol.messages.init_producer_id import INIT_PRODUCER_ID
from moldau.protocol.messages.inter_broker import (
    CONTROLLED_SHUTDOWN,
    LEADER_AND_ISR,
    OFFSET_FOR_LEADER_EPOCH,
    STOP_REPLICA,
    UPDATE_METADATA,
)
from moldau.protocol.messages.list_offsets import LIST_OFFSETS
from moldau.protocol.messages.metadata import METADATA
from moldau.protocol.messages.offsets import OFFSET_COMMIT, OFFSET_DELETE, OFFSET_FETCH
from moldau.protocol.messages.partition_admin import (
    ALTER_PARTITION_REASSIGNMENTS,
    CREATE_PARTITIONS,
    DELETE_RECORDS,
    DESCRIBE_LOG_DIRS,
    ELECT_LEADERS,
    LIST_PARTITION_REASSIGNMENTS,
)
from moldau.protocol.messages.produce import PRODUCE
from moldau.protocol.messages.quotas import ALTER_CLIENT_QUOTAS, DESCRIBE_CLIENT_QUOTAS
from moldau.protocol.messages.sasl import (
    ALTER_USER_SCRAM_CREDENTIALS,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
)
from moldau.protocol.messages.transactions import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    DESCRIBE_PRODUCERS,
    DESCRIBE_TRANSACTIONS,
    END_TXN,
    LIST_TRANSACTIONS,
    TXN_OFFSET_COMMIT,
    WRITE_TXN_MARKERS,
)
from moldau.protocol.schema import Api, Req, Resp

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import ApiVersionsResponseApiKeys

D = TypeVar("D")
# What the handler pool calls: the decoded body in, the response (or an awaitable of it, or None) out. The types
# are bound where the route is made (``route``); the pool itself only moves dicts.
Route = Callable[[BrokerContext, Request, Any], Any]
GroupRoute = Callable[[BrokerContext, list[tuple[Request, Any]]], Sequence[Any]]


def route(api: Api[Req, Resp], family: Callable[[BrokerContext], D],
          handler: Callable[[D, Request, Req], Resp | Awaitable[Resp] | None]) -> tuple[int, Route]:
    """One entry of the route table: ``api``'s key and its handler, given only its family's dependencies.

    mypy checks the three against each other: the handler takes ``api``'s request TypedDict and returns its
    response (at once, as an awaitable, or None for no answer), and its first parameter is what ``family``
    gives. So a handler registered under another API (``route(PRODUCE, _replicas, handle_fetch)``) is a type
    error, and the key comes from the Api itself, never typed twice. The decoded body is a plain dict with every
    declared field, which is what the request TypedDict describes."""

    def run(ctx: BrokerContext, request: Request, body: Any) -> Any:
        return handler(family(ctx), request, body)

    run.__name__ = run.__qualname__ = handler.__name__
    return api.key, run


def route_group(api: Api[Req, Resp], family: Callable[[BrokerContext], D],
                handler: Callable[[D, list[tuple[Request, Req]]], Sequence[Resp | Awaitable[Resp] | None]]
                ) -> tuple[int, GroupRoute]:
    """An entry of the group route table: ``api``'s handler for several requests of one connection at once (in
    order, one result each), typed as ``route`` types a handler."""

    def run(ctx: BrokerContext, items: list[tuple[Request, Any]]) -> Sequence[Any]:
        return handler(family(ctx), items)

    run.__name__ = run.__qualname__ = handler.__name__
    return api.key, run


def routes(*entries: tuple[int, Route]) -> dict[int, Route]:
    """The route table from ``route`` entries; an API routed twice is a programming error."""
    table: dict[int, Route] = {}
    for key, run in entries:
        if key in table:
            raise ValueError(f"API key {key} routed twice")
        table[key] = run
    return table


def _replicas(c: BrokerContext) -> ReplicaDeps:
    return c.replicas


def _topics(c: BrokerContext) -> TopicDeps:
    return c.topics


def _groups(c: BrokerContext) -> GroupDeps:
    return c.groups


def _control(c: BrokerContext) -> ControlDeps:
    return c.control


def _producer_ids(c: BrokerContext) -> ProducerIdDeps:
    return ProducerIdDeps(c.producer_ids, c.replicas.auth, c.transactions.coordinator)


def _transactions(c: BrokerContext) -> TxnDeps:
    return c.transactions


def _scram(c: BrokerContext) -> ScramDeps:
    return ScramDeps(c.scram, c.acls.auth)


def _nothing(c: BrokerContext) -> object:
    return None


def _partition_admin(c: BrokerContext) -> PartitionAdminDeps:
    return c.partition_admin


def _acls(c: BrokerContext) -> AclDeps:
    return c.acls


def _configs(c: BrokerContext) -> ConfigDeps:
    return c.configs


def _txn_markers(c: BrokerContext) -> TxnMarkerDeps:
    return TxnMarkerDeps(c.replicas.replica_manager, c.replicas.auth, int(c.topics.config.get("request.timeout.ms")))


def _quotas(c: BrokerContext) -> QuotaDeps:
    return QuotaDeps(c.configs.cluster, c.configs.auth)


def _api_versions(c: BrokerContext) -> list[ApiVersionsResponseApiKeys]:
    return c.api_versions


ROUTES: dict[int, Route] = routes(
    route(PRODUCE, _replicas, handle_produce),
    route(FETCH, _replicas, handle_fetch),
    route(LIST_OFFSETS, _replicas, handle_list_offsets),
    route(METADATA, _topics, handle_metadata),
    route(API_VERSIONS, _api_versions, handle_api_versions),
    route(CREATE_TOPICS, _topics, handle_create_topics),
    route(DELETE_TOPICS, _topics, handle_delete_topics),
    route(INIT_PRODUCER_ID, _producer_ids, handle_init_producer_id),
    route(OFFSET_COMMIT, _groups, handle_offset_commit),
    route(OFFSET_FETCH, _groups, handle_offset_fetch),
    route(OFFSET_DELETE, _groups, handle_offset_delete),
    route(FIND_COORDINATOR, _groups, handle_find_coordinator),
    route(JOIN_GROUP, _groups, handle_join_group),
    route(SYNC_GROUP, _groups, handle_sync_group),
    route(HEARTBEAT, _groups, handle_heartbeat),
    route(LEAVE_GROUP, _groups, handle_leave_group),
    route(LIST_GROUPS, _groups, handle_list_groups),
    route(DESCRIBE_GROUPS, _groups, handle_describe_groups),
    route(DELETE_GROUPS, _groups, handle_delete_groups),
    route(LEADER_AND_ISR, _control, handle_leader_and_isr),
    route(STOP_REPLICA, _control, handle_stop_replica),
    route(UPDATE_METADATA, _control, handle_update_metadata),
    route(CONTROLLED_SHUTDOWN, _control, handle_controlled_shutdown),
    route(OFFSET_FOR_LEADER_EPOCH, _replicas, handle_offset_for_leader_epoch),
    route(SASL_HANDSHAKE, _nothing, handle_sasl_handshake),
    route(SASL_AUTHENTICATE, _nothing, handle_sasl_authenticate),
    route(DESCRIBE_USER_SCRAM_CREDENTIALS, _scram, handle_describe_user_scram_credentials),
    route(ALTER_USER_SCRAM_CREDENTIALS, _scram, handle_alter_user_scram_credentials),
)
# The partition and record admin APIs (broker/apis/partition_admin.py).
ROUTES.update(routes(
    route(CREATE_PARTITIONS, _partition_admin, handle_create_partitions),
    route(DELETE_RECORDS, _partition_admin, handle_delete_records),
    route(ELECT_LEADERS, _partition_admin, handle_elect_leaders),
    route(DESCRIBE_LOG_DIRS, _partition_admin, handle_describe_log_dirs),
    route(ALTER_PARTITION_REASSIGNMENTS, _partition_admin, handle_alter_partition_reassignments),
    route(LIST_PARTITION_REASSIGNMENTS, _partition_admin, handle_list_partition_reassignments),
))
# ACLs (broker/apis/acls.py).
ROUTES.update(routes(
    route(DESCRIBE_ACLS, _acls, handle_describe_acls),
    route(CREATE_ACLS, _acls, handle_create_acls),
    route(DELETE_ACLS, _acls, handle_delete_acls),
))
# Topic and broker configs (issue 10).
ROUTES.update(routes(
    route(DESCRIBE_CONFIGS, _configs, handle_describe_configs),
    route(ALTER_CONFIGS, _configs, handle_alter_configs),
    route(INCREMENTAL_ALTER_CONFIGS, _configs, handle_incremental_alter_configs),
))
# The transaction coordinator (issue 19; broker/apis/transactions.py).
ROUTES.update(routes(
    route(ADD_PARTITIONS_TO_TXN, _transactions, handle_add_partitions_to_txn),
    route(ADD_OFFSETS_TO_TXN, _transactions, handle_add_offsets_to_txn),
    route(END_TXN, _transactions, handle_end_txn),
    route(TXN_OFFSET_COMMIT, _transactions, handle_txn_offset_commit),
    route(DESCRIBE_TRANSACTIONS, _transactions, handle_describe_transactions),
    route(LIST_TRANSACTIONS, _transactions, handle_list_transactions),
))
# Transactions, the partition side (issue 19; broker/apis/txn_markers.py).
ROUTES.update(routes(
    route(WRITE_TXN_MARKERS, _txn_markers, handle_write_txn_markers),
    route(DESCRIBE_PRODUCERS, _replicas, handle_describe_producers),
))
# The consumer group protocol of KIP-848 (issue 22, broker/apis/consumer_group.py).
ROUTES.update(routes(
    route(CONSUMER_GROUP_HEARTBEAT, _groups, handle_consumer_group_heartbeat),
    route(CONSUMER_GROUP_DESCRIBE, _groups, handle_consumer_group_describe),
))
# Client quotas (issue 23, broker/apis/quotas.py).
ROUTES.update(routes(
    route(DESCRIBE_CLIENT_QUOTAS, _quotas, handle_describe_client_quotas),
    route(ALTER_CLIENT_QUOTAS, _quotas, handle_alter_client_quotas),
))

# Pipelined requests of one connection handled together (the network layer hands over Produce requests that
# arrived in one read; issue #21): one log append per partition for all of them.
GROUP_ROUTES: dict[int, GroupRoute] = dict([route_group(PRODUCE, _replicas, handle_produce_many)])

# Advertised = served: ApiVersions offers exactly the routed APIs. Kafka's ZooKeeper-mode brokers advertise the
# inter-broker ones (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown) too, so we do as well.
ADVERTISED: frozenset[int] = frozenset(ROUTES)
ADVERTISED_VERSIONS: list[ApiVersionsResponseApiKeys] = api_versions_table(ADVERTISED)
