"""ApiKey enum and the registry of the APIs Moldau speaks, with the version ranges it advertises."""

from __future__ import annotations

from enum import IntEnum
from typing import Any

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
from moldau.protocol.schema import Api


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69


REGISTRY: dict[int, Api[Any, Any]] = {
    api.key: api
    for api in (PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, CREATE_TOPICS, DELETE_TOPICS,
                INIT_PRODUCER_ID, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP,
                SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE,
                LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN, OFFSET_FOR_LEADER_EPOCH,
                SASL_HANDSHAKE, SASL_AUTHENTICATE, DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS)
}
# The partition and record admin APIs (protocol/messages/partition_admin.py).
REGISTRY.update({api.key: api for api in (CREATE_PARTITIONS, DELETE_RECORDS, ELECT_LEADERS, DESCRIBE_LOG_DIRS,
                                          ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS)})
# ACLs (protocol/messages/acls.py).
REGISTRY.update({api.key: api for api in (DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS)})
# Topic and broker configs (issue 10).
REGISTRY.update({api.key: api for api in (DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS)})
# Transactions (issue 19; protocol/messages/transactions.py). Declared for both halves of the work at once; each is
# advertised only once broker/apis routes it (TRANSACTION_APIS may be declared ahead of their handlers).
TRANSACTION_APIS: frozenset[int] = frozenset(
    api.key for api in (ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, WRITE_TXN_MARKERS, TXN_OFFSET_COMMIT,
                        DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS))
REGISTRY.update({api.key: api for api in (ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, WRITE_TXN_MARKERS,
                                          TXN_OFFSET_COMMIT, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS,
                                          LIST_TRANSACTIONS)})
# The consumer group protocol of KIP-848 (issue 22; protocol/messages/consumer_group.py).
REGISTRY.update({api.key: api for api in (CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE)})
# Client quotas (issue 23).
REGISTRY.update({api.key: api for api in (DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS)})

# What the broker advertises in ApiVersions is derived from its route table (moldau.broker.apis.ADVERTISED),
# not kept here: a registered API without a handler is never offered.


_API_NAMES = {int(k): k.name.lower() for k in ApiKey}


def api_name(key: int) -> str:
    """``produce``, ``fetch``, ...: the metrics' label of an API key (looked up on every request the broker
    answers; ``ApiKey(key).name.lower()`` took ~0.5 us)."""
    name = _API_NAMES.get(key)
    return name if name is not None else f"unknown_{key}"
