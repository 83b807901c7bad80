"""The route table: API key -> small handler function, given the typed dependencies of its family."""

from __future__ import annotations

from collections.abc import Callable
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
from moldau.broker.apis.produce import handle_produce
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
from moldau.protocol.api import ApiKey

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import ApiVersionsResponseApiKeys

D = TypeVar("D")
B = TypeVar("B")  # the request body's type: a TypedDict of moldau.protocol.typed, or dict[str, Any]
Route = Callable[[BrokerContext, Request, dict[str, Any]], Any]


def route(family: Callable[[BrokerContext], D], handler: Callable[[D, Request, B], Any]) -> Route:
    """A route hands its handler only its family's dependencies; mypy checks that the two match. The decoded
    body is a plain dict with every declared field, which is what the handler's body TypedDict describes."""

    def run(ctx: BrokerContext, request: Request, body: Any) -> Any:
        return handler(family(ctx), request, body)

    run.__name__ = run.__qualname__ = handler.__name__
    return run


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


ROUTES: dict[int, Route] = {
    ApiKey.PRODUCE: route(_replicas, handle_produce),
    ApiKey.FETCH: route(_replicas, handle_fetch),
    ApiKey.LIST_OFFSETS: route(_replicas, handle_list_offsets),
    ApiKey.METADATA: route(_topics, handle_metadata),
    ApiKey.API_VERSIONS: route(_api_versions, handle_api_versions),
    ApiKey.CREATE_TOPICS: route(_topics, handle_create_topics),
    ApiKey.DELETE_TOPICS: route(_topics, handle_delete_topics),
    ApiKey.INIT_PRODUCER_ID: route(_producer_ids, handle_init_producer_id),
    ApiKey.OFFSET_COMMIT: route(_groups, handle_offset_commit),
    ApiKey.OFFSET_FETCH: route(_groups, handle_offset_fetch),
    ApiKey.OFFSET_DELETE: route(_groups, handle_offset_delete),
    ApiKey.FIND_COORDINATOR: route(_groups, handle_find_coordinator),
    ApiKey.JOIN_GROUP: route(_groups, handle_join_group),
    ApiKey.SYNC_GROUP: route(_groups, handle_sync_group),
    ApiKey.HEARTBEAT: route(_groups, handle_heartbeat),
    ApiKey.LEAVE_GROUP: route(_groups, handle_leave_group),
    ApiKey.LIST_GROUPS: route(_groups, handle_list_groups),
    ApiKey.DESCRIBE_GROUPS: route(_groups, handle_describe_groups),
    ApiKey.DELETE_GROUPS: route(_groups, handle_delete_groups),
    ApiKey.LEADER_AND_ISR: route(_control, handle_leader_and_isr),
    ApiKey.STOP_REPLICA: route(_control, handle_stop_replica),
    ApiKey.UPDATE_METADATA: route(_control, handle_update_metadata),
    ApiKey.CONTROLLED_SHUTDOWN: route(_control, handle_controlled_shutdown),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: route(_replicas, handle_offset_for_leader_epoch),
    ApiKey.SASL_HANDSHAKE: route(_nothing, handle_sasl_handshake),
    ApiKey.SASL_AUTHENTICATE: route(_nothing, handle_sasl_authenticate),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: route(_scram, handle_describe_user_scram_credentials),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: route(_scram, handle_alter_user_scram_credentials),
}
# The partition and record admin APIs (broker/apis/partition_admin.py).
ROUTES.update({
    ApiKey.CREATE_PARTITIONS: route(_partition_admin, handle_create_partitions),
    ApiKey.DELETE_RECORDS: route(_partition_admin, handle_delete_records),
    ApiKey.ELECT_LEADERS: route(_partition_admin, handle_elect_leaders),
    ApiKey.DESCRIBE_LOG_DIRS: route(_partition_admin, handle_describe_log_dirs),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: route(_partition_admin, handle_alter_partition_reassignments),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: route(_partition_admin, handle_list_partition_reassignments),
})
# ACLs (broker/apis/acls.py).
ROUTES.update({
    ApiKey.DESCRIBE_ACLS: route(_acls, handle_describe_acls),
    ApiKey.CREATE_ACLS: route(_acls, handle_create_acls),
    ApiKey.DELETE_ACLS: route(_acls, handle_delete_acls),
})
# Topic and broker configs (issue 10).
ROUTES.update({
    ApiKey.DESCRIBE_CONFIGS: route(_configs, handle_describe_configs),
    ApiKey.ALTER_CONFIGS: route(_configs, handle_alter_configs),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: route(_configs, handle_incremental_alter_configs),
})
# The transaction coordinator (issue 19; broker/apis/transactions.py).
ROUTES.update({
    ApiKey.ADD_PARTITIONS_TO_TXN: route(_transactions, handle_add_partitions_to_txn),
    ApiKey.ADD_OFFSETS_TO_TXN: route(_transactions, handle_add_offsets_to_txn),
    ApiKey.END_TXN: route(_transactions, handle_end_txn),
    ApiKey.TXN_OFFSET_COMMIT: route(_transactions, handle_txn_offset_commit),
    ApiKey.DESCRIBE_TRANSACTIONS: route(_transactions, handle_describe_transactions),
    ApiKey.LIST_TRANSACTIONS: route(_transactions, handle_list_transactions),
})
# Transactions, the partition side (issue 19; broker/apis/txn_markers.py).
ROUTES.update({
    ApiKey.WRITE_TXN_MARKERS: route(_txn_markers, handle_write_txn_markers),
    ApiKey.DESCRIBE_PRODUCERS: route(_replicas, handle_describe_producers),
})
# The consumer group protocol of KIP-848 (issue 22, broker/apis/consumer_group.py).
ROUTES.update({
    ApiKey.CONSUMER_GROUP_HEARTBEAT: route(_groups, handle_consumer_group_heartbeat),
    ApiKey.CONSUMER_GROUP_DESCRIBE: route(_groups, handle_consumer_group_describe),
})
# Client quotas (issue 23, broker/apis/quotas.py).
ROUTES.update({
    ApiKey.DESCRIBE_CLIENT_QUOTAS: route(_quotas, handle_describe_client_quotas),
    ApiKey.ALTER_CLIENT_QUOTAS: route(_quotas, handle_alter_client_quotas),
})

# Advertised = served: ApiVersions offers exactly the routed APIs. Kafka's ZooKeeper-mode brokers advertise the
# inter-broker ones (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown) too, so we do as well.
ADVERTISED: frozenset[int] = frozenset(ROUTES)
ADVERTISED_VERSIONS: list[ApiVersionsResponseApiKeys] = api_versions_table(ADVERTISED)
