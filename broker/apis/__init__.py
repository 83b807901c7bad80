"""The route table: API key -> small handler function."""

from __future__ import annotations

from moldau.broker.apis.api_versions import handle_api_versions
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
from moldau.broker.apis.produce import handle_produce
from moldau.broker.apis.topics import handle_create_topics, handle_delete_topics
from moldau.broker.handler_pool import Handler
from moldau.protocol.api import ApiKey

ROUTES: dict[int, Handler] = {
    ApiKey.PRODUCE: handle_produce,
    ApiKey.FETCH: handle_fetch,
    ApiKey.LIST_OFFSETS: handle_list_offsets,
    ApiKey.METADATA: handle_metadata,
    ApiKey.API_VERSIONS: handle_api_versions,
    ApiKey.CREATE_TOPICS: handle_create_topics,
    ApiKey.DELETE_TOPICS: handle_delete_topics,
    ApiKey.INIT_PRODUCER_ID: handle_init_producer_id,
    ApiKey.OFFSET_COMMIT: handle_offset_commit,
    ApiKey.OFFSET_FETCH: handle_offset_fetch,
    ApiKey.OFFSET_DELETE: handle_offset_delete,
    ApiKey.FIND_COORDINATOR: handle_find_coordinator,
    ApiKey.JOIN_GROUP: handle_join_group,
    ApiKey.SYNC_GROUP: handle_sync_group,
    ApiKey.HEARTBEAT: handle_heartbeat,
    ApiKey.LEAVE_GROUP: handle_leave_group,
    ApiKey.LIST_GROUPS: handle_list_groups,
    ApiKey.DESCRIBE_GROUPS: handle_describe_groups,
    ApiKey.DELETE_GROUPS: handle_delete_groups,
    ApiKey.LEADER_AND_ISR: handle_leader_and_isr,
    ApiKey.STOP_REPLICA: handle_stop_replica,
    ApiKey.UPDATE_METADATA: handle_update_metadata,
    ApiKey.CONTROLLED_SHUTDOWN: handle_controlled_shutdown,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: handle_offset_for_leader_epoch,
}
