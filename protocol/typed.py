"""Typed shapes of every Kafka message Moldau declares. GENERATED: python -m moldau.protocol.gen_typed

Do not edit: change the declaration in protocol/messages and regenerate (tests/unit/protocol/test_typed.py
fails when this file is stale). These TypedDicts describe the plain dicts the compiled codec (protocol/schema.py)
decodes and encodes; the codec never reads them, so they cost nothing at run time. The module is checked in,
not built at import time, because mypy and IDEs read it statically; the broker imports it only under
TYPE_CHECKING. Nested structs are named after their path (``MetadataResponseTopicsPartitions`` is one entry of
``MetadataResponse["topics"][i]["partitions"]``). ``Required`` fields exist in every version of their struct and
have no declared default; the others may be left out and the encoder sends their default (see gen_typed).
Nested classes come before their users and there is no ``from __future__ import annotations``: evaluated
annotations let ``__required_keys__`` see ``NotRequired`` at run time (Python 3.11 cannot in strings).
"""

from collections.abc import Sized
from typing import NotRequired, TypeAlias, TypedDict

# A records field decodes to a zero-copy memoryview; on encode it may also be bytes or a file region (anything
# with a length) that the network layer sends with sendfile.
Records: TypeAlias = bytes | bytearray | memoryview | Sized


class ProduceRequestTopicDataPartitionData(TypedDict):
    """One ``partition_data`` entry."""

    index: int
    records: Records | None


class ProduceRequestTopicData(TypedDict):
    """One ``topic_data`` entry."""

    name: str
    partition_data: list[ProduceRequestTopicDataPartitionData]


class ProduceRequest(TypedDict):
    """Produce request (key 0), v0-v9."""

    transactional_id: NotRequired[str | None]
    acks: int
    timeout_ms: int
    topic_data: list[ProduceRequestTopicData]


class ProduceResponseResponsesPartitionResponsesRecordErrors(TypedDict):
    """One ``record_errors`` entry."""

    batch_index: int
    batch_index_error_message: NotRequired[str | None]


class ProduceResponseResponsesPartitionResponses(TypedDict):
    """One ``partition_responses`` entry."""

    index: int
    error_code: int
    base_offset: int
    log_append_time_ms: NotRequired[int]
    log_start_offset: NotRequired[int]
    record_errors: NotRequired[list[ProduceResponseResponsesPartitionResponsesRecordErrors]]
    error_message: NotRequired[str | None]


class ProduceResponseResponses(TypedDict):
    """One ``responses`` entry."""

    name: str
    partition_responses: list[ProduceResponseResponsesPartitionResponses]


class ProduceResponse(TypedDict):
    """Produce response (key 0), v0-v9."""

    responses: list[ProduceResponseResponses]
    throttle_time_ms: NotRequired[int]


class FetchRequestTopicsPartitions(TypedDict):
    """One ``partitions`` entry."""

    partition: int
    current_leader_epoch: NotRequired[int]
    fetch_offset: int
    last_fetched_epoch: NotRequired[int]
    log_start_offset: NotRequired[int]
    partition_max_bytes: int


class FetchRequestTopics(TypedDict):
    """One ``topics`` entry."""

    topic: str
    partitions: list[FetchRequestTopicsPartitions]


class FetchRequestForgottenTopicsData(TypedDict):
    """One ``forgotten_topics_data`` entry."""

    topic: str
    partitions: list[int]


class FetchRequest(TypedDict):
    """Fetch request (key 1), v4-v12."""

    cluster_id: NotRequired[str | None]
    replica_id: NotRequired[int]
    max_wait_ms: int
    min_bytes: int
    max_bytes: NotRequired[int]
    isolation_level: int
    session_id: NotRequired[int]
    session_epoch: NotRequired[int]
    topics: list[FetchRequestTopics]
    forgotten_topics_data: NotRequired[list[FetchRequestForgottenTopicsData]]
    rack_id: NotRequired[str]


class FetchResponseResponsesPartitionsDivergingEpoch(TypedDict):
    """The ``diverging_epoch`` struct."""

    epoch: NotRequired[int]
    end_offset: NotRequired[int]


class FetchResponseResponsesPartitionsCurrentLeader(TypedDict):
    """The ``current_leader`` struct."""

    leader_id: NotRequired[int]
    leader_epoch: NotRequired[int]


class FetchResponseResponsesPartitionsSnapshotId(TypedDict):
    """The ``snapshot_id`` struct."""

    end_offset: NotRequired[int]
    epoch: NotRequired[int]


class FetchResponseResponsesPartitionsAbortedTransactions(TypedDict):
    """One ``aborted_transactions`` entry."""

    producer_id: int
    first_offset: int


class FetchResponseResponsesPartitions(TypedDict):
    """One ``partitions`` entry."""

    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: NotRequired[int]
    log_start_offset: NotRequired[int]
    diverging_epoch: NotRequired[FetchResponseResponsesPartitionsDivergingEpoch]
    current_leader: NotRequired[FetchResponseResponsesPartitionsCurrentLeader]
    snapshot_id: NotRequired[FetchResponseResponsesPartitionsSnapshotId]
    aborted_transactions: list[FetchResponseResponsesPartitionsAbortedTransactions] | None
    preferred_read_replica: NotRequired[int]
    records: Records | None


class FetchResponseResponses(TypedDict):
    """One ``responses`` entry."""

    topic: str
    partitions: list[FetchResponseResponsesPartitions]


class FetchResponse(TypedDict):
    """Fetch response (key 1), v4-v12."""

    throttle_time_ms: int
    error_code: NotRequired[int]
    session_id: NotRequired[int]
    responses: list[FetchResponseResponses]


class ListOffsetsRequestTopicsPartitions(TypedDict):
    """One ``partitions`` entry."""

    partition_index: int
    current_leader_epoch: NotRequired[int]
    timestamp: int
    max_num_offsets: NotRequired[int]


class ListOffsetsRequestTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    partitions: list[ListOffsetsRequestTopicsPartitions]


class ListOffsetsRequest(TypedDict):
    """ListOffsets request (key 2), v0-v8."""

    replica_id: int
    isolation_level: NotRequired[int]
    topics: list[ListOffsetsRequestTopics]


class ListOffsetsResponseTopicsPartitions(TypedDict):
    """One ``partitions`` entry."""

    partition_index: int
    error_code: int
    old_style_offsets: NotRequired[list[int]]
    timestamp: NotRequired[int]
    offset: NotRequired[int]
    leader_epoch: NotRequired[int]


class ListOffsetsResponseTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    partitions: list[ListOffsetsResponseTopicsPartitions]


class ListOffsetsResponse(TypedDict):
    """ListOffsets response (key 2), v0-v8."""

    throttle_time_ms: NotRequired[int]
    topics: list[ListOffsetsResponseTopics]


class MetadataRequestTopics(TypedDict):
    """One ``topics`` entry."""

    topic_id: NotRequired[bytes]
    name: str | None


class MetadataRequest(TypedDict):
    """Metadata request (key 3), v0-v12."""

    topics: list[MetadataRequestTopics] | None
    allow_auto_topic_creation: NotRequired[bool]
    include_cluster_authorized_operations: NotRequired[bool]
    include_topic_authorized_operations: NotRequired[bool]


class MetadataResponseBrokers(TypedDict):
    """One ``brokers`` entry."""

    node_id: int
    host: str
    port: int
    rack: NotRequired[str | None]


class MetadataResponseTopicsPartitions(TypedDict):
    """One ``partitions`` entry."""

    error_code: int
    partition_index: int
    leader_id: int
    leader_epoch: NotRequired[int]
    replica_nodes: list[int]
    isr_nodes: list[int]
    offline_replicas: NotRequired[list[int]]


class MetadataResponseTopics(TypedDict):
    """One ``topics`` entry."""

    error_code: int
    name: str | None
    topic_id: NotRequired[bytes]
    is_internal: NotRequired[bool]
    partitions: list[MetadataResponseTopicsPartitions]
    topic_authorized_operations: NotRequired[int]


class MetadataResponse(TypedDict):
    """Metadata response (key 3), v0-v12."""

    throttle_time_ms: NotRequired[int]
    brokers: list[MetadataResponseBrokers]
    cluster_id: NotRequired[str | None]
    controller_id: NotRequired[int]
    topics: list[MetadataResponseTopics]
    cluster_authorized_operations: NotRequired[int]


class LeaderAndIsrRequestUngroupedPartitionStates(TypedDict):
    """One ``ungrouped_partition_states`` entry."""

    topic_name: str
    partition_index: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int
    replicas: list[int]
    adding_replicas: NotRequired[list[int]]
    removing_replicas: NotRequired[list[int]]
    is_new: NotRequired[bool]
    leader_recovery_state: NotRequired[int]


class LeaderAndIsrRequestTopicStatesPartitionStates(TypedDict):
    """One ``partition_states`` entry."""

    topic_name: NotRequired[str]
    partition_index: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int
    replicas: list[int]
    adding_replicas: NotRequired[list[int]]
    removing_replicas: NotRequired[list[int]]
    is_new: bool
    leader_recovery_state: NotRequired[int]


class LeaderAndIsrRequestTopicStates(TypedDict):
    """One ``topic_states`` entry."""

    topic_name: str
    topic_id: NotRequired[bytes]
    partition_states: list[LeaderAndIsrRequestTopicStatesPartitionStates]


class LeaderAndIsrRequestLiveLeaders(TypedDict):
    """One ``live_leaders`` entry."""

    broker_id: int
    host_name: str
    port: int


class LeaderAndIsrRequest(TypedDict):
    """LeaderAndIsr request (key 4), v0-v7."""

    controller_id: int
    is_kraft_controller: NotRequired[bool]
    controller_epoch: int
    broker_epoch: NotRequired[int]
    type: NotRequired[int]
    ungrouped_partition_states: NotRequired[list[LeaderAndIsrRequestUngroupedPartitionStates]]
    topic_states: NotRequired[list[LeaderAndIsrRequestTopicStates]]
    live_leaders: list[LeaderAndIsrRequestLiveLeaders]


class LeaderAndIsrResponsePartitionErrors(TypedDict):
    """One ``partition_errors`` entry."""

    topic_name: str
    partition_index: int
    error_code: int


class LeaderAndIsrResponseTopicsPartitionErrors(TypedDict):
    """One ``partition_errors`` entry."""

    topic_name: NotRequired[str]
    partition_index: int
    error_code: int


class LeaderAndIsrResponseTopics(TypedDict):
    """One ``topics`` entry."""

    topic_id: bytes
    partition_errors: list[LeaderAndIsrResponseTopicsPartitionErrors]


class LeaderAndIsrResponse(TypedDict):
    """LeaderAndIsr response (key 4), v0-v7."""

    error_code: int
    partition_errors: NotRequired[list[LeaderAndIsrResponsePartitionErrors]]
    topics: NotRequired[list[LeaderAndIsrResponseTopics]]


class StopReplicaRequestUngroupedPartitions(TypedDict):
    """One ``ungrouped_partitions`` entry."""

    topic_name: str
    partition_index: int


class StopReplicaRequestTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    partition_indexes: list[int]


class StopReplicaRequestTopicStatesPartitionStates(TypedDict):
    """One ``partition_states`` entry."""

    partition_index: int
    leader_epoch: NotRequired[int]
    delete_partition: bool


class StopReplicaRequestTopicStates(TypedDict):
    """One ``topic_states`` entry."""

    topic_name: str
    partition_states: list[StopReplicaRequestTopicStatesPartitionStates]


class StopReplicaRequest(TypedDict):
    """StopReplica request (key 5), v0-v4."""

    controller_id: int
    is_kraft_controller: NotRequired[bool]
    controller_epoch: int
    broker_epoch: NotRequired[int]
    delete_partitions: NotRequired[bool]
    ungrouped_partitions: NotRequired[list[StopReplicaRequestUngroupedPartitions]]
    topics: NotRequired[list[StopReplicaRequestTopics]]
    topic_states: NotRequired[list[StopReplicaRequestTopicStates]]


class StopReplicaResponsePartitionErrors(TypedDict):
    """One ``partition_errors`` entry."""

    topic_name: str
    partition_index: int
    error_code: int


class StopReplicaResponse(TypedDict):
    """StopReplica response (key 5), v0-v4."""

    error_code: int
    partition_errors: list[StopReplicaResponsePartitionErrors]


class UpdateMetadataRequestUngroupedPartitionStates(TypedDict):
    """One ``ungrouped_partition_states`` entry."""

    topic_name: str
    partition_index: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: list[int]
    zk_version: int
    replicas: list[int]
    offline_replicas: NotRequired[list[int]]


class UpdateMetadataRequestTopicStatesPartitionStates(TypedDict):
    """One ``partition_states`` entry."""

    topic_name: NotRequired[str]
    partition_index: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: list[int]
    zk_version: int
    replicas: list[int]
    offline_replicas: list[int]


class UpdateMetadataRequestTopicStates(TypedDict):
    """One ``topic_states`` entry."""

    topic_name: str
    topic_id: NotRequired[bytes]
    partition_states: list[UpdateMetadataRequestTopicStatesPartitionStates]


class UpdateMetadataRequestLiveBrokersEndpoints(TypedDict):
    """One ``endpoints`` entry."""

    port: int
    host: str
    listener: NotRequired[str]
    security_protocol: int


class UpdateMetadataRequestLiveBrokers(TypedDict):
    """One ``live_brokers`` entry."""

    id: int
    v0_host: NotRequired[str]
    v0_port: NotRequired[int]
    endpoints: NotRequired[list[UpdateMetadataRequestLiveBrokersEndpoints]]
    rack: NotRequired[str | None]


class UpdateMetadataRequest(TypedDict):
    """UpdateMetadata request (key 6), v0-v8."""

    controller_id: int
    is_kraft_controller: NotRequired[bool]
    type: NotRequired[int]
    controller_epoch: int
    broker_epoch: NotRequired[int]
    ungrouped_partition_states: NotRequired[list[UpdateMetadataRequestUngroupedPartitionStates]]
    topic_states: NotRequired[list[UpdateMetadataRequestTopicStates]]
    live_brokers: list[UpdateMetadataRequestLiveBrokers]


class UpdateMetadataResponse(TypedDict):
    """UpdateMetadata response (key 6), v0-v8."""

    error_code: int


class ControlledShutdownRequest(TypedDict):
    """ControlledShutdown request (key 7), v0-v3."""

    broker_id: int
    broker_epoch: NotRequired[int]


class ControlledShutdownResponseRemainingPartitions(TypedDict):
    """One ``remaining_partitions`` entry."""

    topic_name: str
    partition_index: int


class ControlledShutdownResponse(TypedDict):
    """ControlledShutdown response (key 7), v0-v3."""

    error_code: int
    remaining_partitions: list[ControlledShutdownResponseRemainingPartitions]


class OffsetCommitRequestTopicsPartitions(TypedDict):
    """One ``partitions`` entry."""

    partition_index: int
    committed_offset: int
    committed_leader_epoch: NotRequired[int]
    committed_metadata: str | None


class OffsetCommitRequestTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    partitions: list[OffsetCommitRequestTopicsPartitions]


class OffsetCommitRequest(TypedDict):
    """OffsetCommit request (key 8), v2-v9."""

    group_id: str
    generation_id_or_member_epoch: NotRequired[int]
    member_id: str
    group_instance_id: NotRequired[str | None]
    retention_time_ms: NotRequired[int]
    topics: list[OffsetCommitRequestTopics]


class OffsetCommitResponseTopicsPartitions(TypedDict):
    """One ``partitions`` entry."""

    partition_index: int
    error_code: int


class OffsetCommitResponseTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    partitions: list[OffsetCommitResponseTopicsPartitions]


class OffsetCommitResponse(TypedDict):
    """OffsetCommit response (key 8), v2-v9."""

    throttle_time_ms: NotRequired[int]
    topics: list[OffsetCommitResponseTopics]


class OffsetFetchRequestTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    partition_indexes: list[int]


class OffsetFetchRequestGroupsTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    partition_indexes: list[int]


class OffsetFetchRequestGroups(TypedDict):
    """One ``groups`` entry."""

    group_id: str
    member_id: NotRequired[str | None]
    member_epoch: NotRequired[int]
    topics: list[OffsetFetchRequestGroupsTopics] | None


class OffsetFetchRequest(TypedDict):
    """OffsetFetch request (key 9), v1-v9."""

    group_id: NotRequired[str]
    topics: NotRequired[list[OffsetFetchRequestTopics] | None]
    groups: NotRequired[list[OffsetFetchRequestGroups]]
    require_stable: NotRequired[bool]


class OffsetFetchResponseTopicsPartitions(TypedDict):
    """One ``partitions`` entry."""

    partition_index: int
    committed_offset: int
    committed_leader_epoch: NotRequired[int]
    metadata: str | None
    error_code: int


class OffsetFetchResponseTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    partitions: list[OffsetFetchResponseTopicsPartitions]


class OffsetFetchResponseGroupsTopicsPartitions(TypedDict):
    """One ``partitions`` entry."""

    partition_index: int
    committed_offset: int
    committed_leader_epoch: NotRequired[int]
    metadata: str | None
    error_code: int


class OffsetFetchResponseGroupsTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    partitions: list[OffsetFetchResponseGroupsTopicsPartitions]


class OffsetFetchResponseGroups(TypedDict):
    """One ``groups`` entry."""

    group_id: str
    topics: list[OffsetFetchResponseGroupsTopics]
    error_code: NotRequired[int]


class OffsetFetchResponse(TypedDict):
    """OffsetFetch response (key 9), v1-v9."""

    throttle_time_ms: NotRequired[int]
    topics: NotRequired[list[OffsetFetchResponseTopics]]
    error_code: NotRequired[int]
    groups: NotRequired[list[OffsetFetchResponseGroups]]


class FindCoordinatorRequest(TypedDict):
    """FindCoordinator request (key 10), v0-v4."""

    key: NotRequired[str]
    key_type: NotRequired[int]
    coordinator_keys: NotRequired[list[str]]


class FindCoordinatorResponseCoordinators(TypedDict):
    """One ``coordinators`` entry."""

    key: str
    node_id: int
    host: str
    port: int
    error_code: int
    error_message: str | None


class FindCoordinatorResponse(TypedDict):
    """FindCoordinator response (key 10), v0-v4."""

    throttle_time_ms: NotRequired[int]
    error_code: NotRequired[int]
    error_message: NotRequired[str | None]
    node_id: NotRequired[int]
    host: NotRequired[str]
    port: NotRequired[int]
    coordinators: NotRequired[list[FindCoordinatorResponseCoordinators]]


class JoinGroupRequestProtocols(TypedDict):
    """One ``protocols`` entry."""

    name: str
    metadata: bytes


class JoinGroupRequest(TypedDict):
    """JoinGroup request (key 11), v0-v9."""

    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: NotRequired[int]
    member_id: str
    group_instance_id: NotRequired[str | None]
    protocol_type: str
    protocols: list[JoinGroupRequestProtocols]
    reason: NotRequired[str | None]


class JoinGroupResponseMembers(TypedDict):
    """One ``members`` entry."""

    member_id: str
    group_instance_id: NotRequired[str | None]
    metadata: bytes


class JoinGroupResponse(TypedDict):
    """JoinGroup response (key 11), v0-v9."""

    throttle_time_ms: NotRequired[int]
    error_code: int
    generation_id: NotRequired[int]
    protocol_type: NotRequired[str | None]
    protocol_name: str | None
    leader: str
    skip_assignment: NotRequired[bool]
    member_id: str
    members: list[JoinGroupResponseMembers]


class HeartbeatRequest(TypedDict):
    """Heartbeat request (key 12), v0-v4."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: NotRequired[str | None]


class HeartbeatResponse(TypedDict):
    """Heartbeat response (key 12), v0-v4."""

    throttle_time_ms: NotRequired[int]
    error_code: int


class LeaveGroupRequestMembers(TypedDict):
    """One ``members`` entry."""

    member_id: str
    group_instance_id: NotRequired[str | None]
    reason: NotRequired[str | None]


class LeaveGroupRequest(TypedDict):
    """LeaveGroup request (key 13), v0-v5."""

    group_id: str
    member_id: NotRequired[str]
    members: NotRequired[list[LeaveGroupRequestMembers]]


class LeaveGroupResponseMembers(TypedDict):
    """One ``members`` entry."""

    member_id: str
    group_instance_id: str | None
    error_code: int


class LeaveGroupResponse(TypedDict):
    """LeaveGroup response (key 13), v0-v5."""

    throttle_time_ms: NotRequired[int]
    error_code: int
    members: NotRequired[list[LeaveGroupResponseMembers]]


class SyncGroupRequestAssignments(TypedDict):
    """One ``assignments`` entry."""

    member_id: str
    assignment: bytes


class SyncGroupRequest(TypedDict):
    """SyncGroup request (key 14), v0-v5."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: NotRequired[str | None]
    protocol_type: NotRequired[str | None]
    protocol_name: NotRequired[str | None]
    assignments: list[SyncGroupRequestAssignments]


class SyncGroupResponse(TypedDict):
    """SyncGroup response (key 14), v0-v5."""

    throttle_time_ms: NotRequired[int]
    error_code: int
    protocol_type: NotRequired[str | None]
    protocol_name: NotRequired[str | None]
    assignment: bytes


class DescribeGroupsRequest(TypedDict):
    """DescribeGroups request (key 15), v0-v5."""

    groups: list[str]
    include_authorized_operations: NotRequired[bool]


class DescribeGroupsResponseGroupsMembers(TypedDict):
    """One ``members`` entry."""

    member_id: str
    group_instance_id: NotRequired[str | None]
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


class DescribeGroupsResponseGroups(TypedDict):
    """One ``groups`` entry."""

    error_code: int
    group_id: str
    group_state: str
    protocol_type: str
    protocol_data: str
    members: list[DescribeGroupsResponseGroupsMembers]
    authorized_operations: NotRequired[int]


class DescribeGroupsResponse(TypedDict):
    """DescribeGroups response (key 15), v0-v5."""

    throttle_time_ms: NotRequired[int]
    groups: list[DescribeGroupsResponseGroups]


class ListGroupsRequest(TypedDict):
    """ListGroups request (key 16), v0-v5."""

    states_filter: NotRequired[list[str]]
    types_filter: NotRequired[list[str]]


class ListGroupsResponseGroups(TypedDict):
    """One ``groups`` entry."""

    group_id: str
    protocol_type: str
    group_state: NotRequired[str]
    group_type: NotRequired[str]


class ListGroupsResponse(TypedDict):
    """ListGroups response (key 16), v0-v5."""

    throttle_time_ms: NotRequired[int]
    error_code: int
    groups: list[ListGroupsResponseGroups]


class SaslHandshakeRequest(TypedDict):
    """SaslHandshake request (key 17), v0-v1."""

    mechanism: str


class SaslHandshakeResponse(TypedDict):
    """SaslHandshake response (key 17), v0-v1."""

    error_code: int
    mechanisms: list[str]


class ApiVersionsRequest(TypedDict):
    """ApiVersions request (key 18), v0-v3."""

    client_software_name: NotRequired[str]
    client_software_version: NotRequired[str]


class ApiVersionsResponseApiKeys(TypedDict):
    """One ``api_keys`` entry."""

    api_key: int
    min_version: int
    max_version: int


class ApiVersionsResponseSupportedFeatures(TypedDict):
    """One ``supported_features`` entry."""

    name: str
    min_version: int
    max_version: int


class ApiVersionsResponseFinalizedFeatures(TypedDict):
    """One ``finalized_features`` entry."""

    name: str
    max_version_level: int
    min_version_level: int


class ApiVersionsResponse(TypedDict):
    """ApiVersions response (key 18), v0-v3."""

    error_code: int
    api_keys: list[ApiVersionsResponseApiKeys]
    throttle_time_ms: NotRequired[int]
    supported_features: NotRequired[list[ApiVersionsResponseSupportedFeatures]]
    finalized_features_epoch: NotRequired[int]
    finalized_features: NotRequired[list[ApiVersionsResponseFinalizedFeatures]]
    zk_migration_ready: NotRequired[bool]


class CreateTopicsRequestTopicsAssignments(TypedDict):
    """One ``assignments`` entry."""

    partition_index: int
    broker_ids: list[int]


class CreateTopicsRequestTopicsConfigs(TypedDict):
    """One ``configs`` entry."""

    name: str
    value: str | None


class CreateTopicsRequestTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    num_partitions: int
    replication_factor: int
    assignments: list[CreateTopicsRequestTopicsAssignments]
    configs: list[CreateTopicsRequestTopicsConfigs]


class CreateTopicsRequest(TypedDict):
    """CreateTopics request (key 19), v0-v7."""

    topics: list[CreateTopicsRequestTopics]
    timeout_ms: NotRequired[int]
    validate_only: NotRequired[bool]


class CreateTopicsResponseTopicsConfigs(TypedDict):
    """One ``configs`` entry."""

    name: str
    value: str | None
    read_only: bool
    config_source: NotRequired[int]
    is_sensitive: bool


class CreateTopicsResponseTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    topic_id: NotRequired[bytes]
    error_code: int
    error_message: NotRequired[str | None]
    topic_config_error_code: NotRequired[int]
    num_partitions: NotRequired[int]
    replication_factor: NotRequired[int]
    configs: NotRequired[list[CreateTopicsResponseTopicsConfigs] | None]


class CreateTopicsResponse(TypedDict):
    """CreateTopics response (key 19), v0-v7."""

    throttle_time_ms: NotRequired[int]
    topics: list[CreateTopicsResponseTopics]


class DeleteTopicsRequestTopics(TypedDict):
    """One ``topics`` entry."""

    name: NotRequired[str | None]
    topic_id: bytes


class DeleteTopicsRequest(TypedDict):
    """DeleteTopics request (key 20), v0-v6."""

    topics: NotRequired[list[DeleteTopicsRequestTopics]]
    topic_names: NotRequired[list[str]]
    timeout_ms: int


class DeleteTopicsResponseResponses(TypedDict):
    """One ``responses`` entry."""

    name: str | None
    topic_id: NotRequired[bytes]
    error_code: int
    error_message: NotRequired[str | None]


class DeleteTopicsResponse(TypedDict):
    """DeleteTopics response (key 20), v0-v6."""

    throttle_time_ms: NotRequired[int]
    responses: list[DeleteTopicsResponseResponses]


class DeleteRecordsRequestTopicsPartitions(TypedDict):
    """One ``partitions`` entry."""

    partition_index: int
    offset: int


class DeleteRecordsRequestTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    partitions: list[DeleteRecordsRequestTopicsPartitions]


class DeleteRecordsRequest(TypedDict):
    """DeleteRecords request (key 21), v0-v2."""

    topics: list[DeleteRecordsRequestTopics]
    timeout_ms: int


class DeleteRecordsResponseTopicsPartitions(TypedDict):
    """One ``partitions`` entry."""

    partition_index: int
    low_watermark: int
    error_code: int


class DeleteRecordsResponseTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    partitions: list[DeleteRecordsResponseTopicsPartitions]


class DeleteRecordsResponse(TypedDict):
    """DeleteRecords response (key 21), v0-v2."""

    throttle_time_ms: int
    topics: list[DeleteRecordsResponseTopics]


class InitProducerIdRequest(TypedDict):
    """InitProducerId request (key 22), v0-v4."""

    transactional_id: str | None
    transaction_timeout_ms: int
    producer_id: NotRequired[int]
    producer_epoch: NotRequired[int]


class InitProducerIdResponse(TypedDict):
    """InitProducerId response (key 22), v0-v4."""

    throttle_time_ms: int
    error_code: int
    producer_id: NotRequired[int]
    producer_epoch: int


class OffsetForLeaderEpochRequestTopicsPartitions(TypedDict):
    """One ``partitions`` entry."""

    partition: int
    current_leader_epoch: NotRequired[int]
    leader_epoch: int


class OffsetForLeaderEpochRequestTopics(TypedDict):
    """One ``topics`` entry."""

    topic: str
    partitions: list[OffsetForLeaderEpochRequestTopicsPartitions]


class OffsetForLeaderEpochRequest(TypedDict):
    """OffsetForLeaderEpoch request (key 23), v0-v4."""

    replica_id: NotRequired[int]
    topics: list[OffsetForLeaderEpochRequestTopics]


class OffsetForLeaderEpochResponseTopicsPartitions(TypedDict):
    """One ``partitions`` entry."""

    error_code: int
    partition: int
    leader_epoch: NotRequired[int]
    end_offset: NotRequired[int]


class OffsetForLeaderEpochResponseTopics(TypedDict):
    """One ``topics`` entry."""

    topic: str
    partitions: list[OffsetForLeaderEpochResponseTopicsPartitions]


class OffsetForLeaderEpochResponse(TypedDict):
    """OffsetForLeaderEpoch response (key 23), v0-v4."""

    throttle_time_ms: NotRequired[int]
    topics: list[OffsetForLeaderEpochResponseTopics]


class AddPartitionsToTxnRequestTransactionsTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    partitions: list[int]


class AddPartitionsToTxnRequestTransactions(TypedDict):
    """One ``transactions`` entry."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    verify_only: NotRequired[bool]
    topics: list[AddPartitionsToTxnRequestTransactionsTopics]


class AddPartitionsToTxnRequestV3AndBelowTopics(TypedDict):
    """One ``v3_and_below_topics`` entry."""

    name: str
    partitions: list[int]


class AddPartitionsToTxnRequest(TypedDict):
    """AddPartitionsToTxn request (key 24), v0-v5."""

    transactions: NotRequired[list[AddPartitionsToTxnRequestTransactions]]
    v3_and_below_transactional_id: NotRequired[str]
    v3_and_below_producer_id: NotRequired[int]
    v3_and_below_producer_epoch: NotRequired[int]
    v3_and_below_topics: NotRequired[list[AddPartitionsToTxnRequestV3AndBelowTopics]]


class AddPartitionsToTxnResponseResultsByTransactionTopicResultsResultsByPartition(TypedDict):
    """One ``results_by_partition`` entry."""

    partition_index: int
    partition_error_code: int


class AddPartitionsToTxnResponseResultsByTransactionTopicResults(TypedDict):
    """One ``topic_results`` entry."""

    name: str
    results_by_partition: list[AddPartitionsToTxnResponseResultsByTransactionTopicResultsResultsByPartition]


class AddPartitionsToTxnResponseResultsByTransaction(TypedDict):
    """One ``results_by_transaction`` entry."""

    transactional_id: str
    topic_results: list[AddPartitionsToTxnResponseResultsByTransactionTopicResults]


class AddPartitionsToTxnResponseResultsByTopicV3AndBelowResultsByPartition(TypedDict):
    """One ``results_by_partition`` entry."""

    partition_index: int
    partition_error_code: int


class AddPartitionsToTxnResponseResultsByTopicV3AndBelow(TypedDict):
    """One ``results_by_topic_v3_and_below`` entry."""

    name: str
    results_by_partition: list[AddPartitionsToTxnResponseResultsByTopicV3AndBelowResultsByPartition]


class AddPartitionsToTxnResponse(TypedDict):
    """AddPartitionsToTxn response (key 24), v0-v5."""

    throttle_time_ms: int
    error_code: NotRequired[int]
    results_by_transaction: NotRequired[list[AddPartitionsToTxnResponseResultsByTransaction]]
    results_by_topic_v3_and_below: NotRequired[list[AddPartitionsToTxnResponseResultsByTopicV3AndBelow]]


class AddOffsetsToTxnRequest(TypedDict):
    """AddOffsetsToTxn request (key 25), v0-v4."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str


class AddOffsetsToTxnResponse(TypedDict):
    """AddOffsetsToTxn response (key 25), v0-v4."""

    throttle_time_ms: int
    error_code: int


class EndTxnRequest(TypedDict):
    """EndTxn request (key 26), v0-v4."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool


class EndTxnResponse(TypedDict):
    """EndTxn response (key 26), v0-v4."""

    throttle_time_ms: int
    error_code: int


class WriteTxnMarkersRequestMarkersTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    partition_indexes: list[int]


class WriteTxnMarkersRequestMarkers(TypedDict):
    """One ``markers`` entry."""

    producer_id: int
    producer_epoch: int
    transaction_result: bool
    topics: list[WriteTxnMarkersRequestMarkersTopics]
    coordinator_epoch: int


class WriteTxnMarkersRequest(TypedDict):
    """WriteTxnMarkers request (key 27), v0-v1."""

    markers: list[WriteTxnMarkersRequestMarkers]


class WriteTxnMarkersResponseMarkersTopicsPartitions(TypedDict):
    """One ``partitions`` entry."""

    partition_index: int
    error_code: int


class WriteTxnMarkersResponseMarkersTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    partitions: list[WriteTxnMarkersResponseMarkersTopicsPartitions]


class WriteTxnMarkersResponseMarkers(TypedDict):
    """One ``markers`` entry."""

    producer_id: int
    topics: list[WriteTxnMarkersResponseMarkersTopics]


class WriteTxnMarkersResponse(TypedDict):
    """WriteTxnMarkers response (key 27), v0-v1."""

    markers: list[WriteTxnMarkersResponseMarkers]


class TxnOffsetCommitRequestTopicsPartitions(TypedDict):
    """One ``partitions`` entry."""

    partition_index: int
    committed_offset: int
    committed_leader_epoch: NotRequired[int]
    committed_metadata: str | None


class TxnOffsetCommitRequestTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    partitions: list[TxnOffsetCommitRequestTopicsPartitions]


class TxnOffsetCommitRequest(TypedDict):
    """TxnOffsetCommit request (key 28), v0-v4."""

    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: NotRequired[int]
    member_id: NotRequired[str]
    group_instance_id: NotRequired[str | None]
    topics: list[TxnOffsetCommitRequestTopics]


class TxnOffsetCommitResponseTopicsPartitions(TypedDict):
    """One ``partitions`` entry."""

    partition_index: int
    error_code: int


class TxnOffsetCommitResponseTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    partitions: list[TxnOffsetCommitResponseTopicsPartitions]


class TxnOffsetCommitResponse(TypedDict):
    """TxnOffsetCommit response (key 28), v0-v4."""

    throttle_time_ms: int
    topics: list[TxnOffsetCommitResponseTopics]


class DescribeAclsRequest(TypedDict):
    """DescribeAcls request (key 29), v0-v3."""

    resource_type_filter: int
    resource_name_filter: str | None
    pattern_type_filter: NotRequired[int]
    principal_filter: str | None
    host_filter: str | None
    operation: int
    permission_type: int


class DescribeAclsResponseResourcesAcls(TypedDict):
    """One ``acls`` entry."""

    principal: str
    host: str
    operation: int
    permission_type: int


class DescribeAclsResponseResources(TypedDict):
    """One ``resources`` entry."""

    resource_type: int
    resource_name: str
    pattern_type: NotRequired[int]
    acls: list[DescribeAclsResponseResourcesAcls]


class DescribeAclsResponse(TypedDict):
    """DescribeAcls response (key 29), v0-v3."""

    throttle_time_ms: int
    error_code: int
    error_message: str | None
    resources: list[DescribeAclsResponseResources]


class CreateAclsRequestCreations(TypedDict):
    """One ``creations`` entry."""

    resource_type: int
    resource_name: str
    resource_pattern_type: NotRequired[int]
    principal: str
    host: str
    operation: int
    permission_type: int


class CreateAclsRequest(TypedDict):
    """CreateAcls request (key 30), v0-v3."""

    creations: list[CreateAclsRequestCreations]


class CreateAclsResponseResults(TypedDict):
    """One ``results`` entry."""

    error_code: int
    error_message: str | None


class CreateAclsResponse(TypedDict):
    """CreateAcls response (key 30), v0-v3."""

    throttle_time_ms: int
    results: list[CreateAclsResponseResults]


class DeleteAclsRequestFilters(TypedDict):
    """One ``filters`` entry."""

    resource_type_filter: int
    resource_name_filter: str | None
    pattern_type_filter: NotRequired[int]
    principal_filter: str | None
    host_filter: str | None
    operation: int
    permission_type: int


class DeleteAclsRequest(TypedDict):
    """DeleteAcls request (key 31), v0-v3."""

    filters: list[DeleteAclsRequestFilters]


class DeleteAclsResponseFilterResultsMatchingAcls(TypedDict):
    """One ``matching_acls`` entry."""

    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str
    pattern_type: NotRequired[int]
    principal: str
    host: str
    operation: int
    permission_type: int


class DeleteAclsResponseFilterResults(TypedDict):
    """One ``filter_results`` entry."""

    error_code: int
    error_message: str | None
    matching_acls: list[DeleteAclsResponseFilterResultsMatchingAcls]


class DeleteAclsResponse(TypedDict):
    """DeleteAcls response (key 31), v0-v3."""

    throttle_time_ms: int
    filter_results: list[DeleteAclsResponseFilterResults]


class DescribeConfigsRequestResources(TypedDict):
    """One ``resources`` entry."""

    resource_type: int
    resource_name: str
    configuration_keys: list[str] | None


class DescribeConfigsRequest(TypedDict):
    """DescribeConfigs request (key 32), v0-v4."""

    resources: list[DescribeConfigsRequestResources]
    include_synonyms: NotRequired[bool]
    include_documentation: NotRequired[bool]


class DescribeConfigsResponseResultsConfigsSynonyms(TypedDict):
    """One ``synonyms`` entry."""

    name: str
    value: str | None
    source: int


class DescribeConfigsResponseResultsConfigs(TypedDict):
    """One ``configs`` entry."""

    name: str
    value: str | None
    read_only: bool
    is_default: NotRequired[bool]
    config_source: NotRequired[int]
    is_sensitive: bool
    synonyms: NotRequired[list[DescribeConfigsResponseResultsConfigsSynonyms]]
    config_type: NotRequired[int]
    documentation: NotRequired[str | None]


class DescribeConfigsResponseResults(TypedDict):
    """One ``results`` entry."""

    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str
    configs: list[DescribeConfigsResponseResultsConfigs]


class DescribeConfigsResponse(TypedDict):
    """DescribeConfigs response (key 32), v0-v4."""

    throttle_time_ms: int
    results: list[DescribeConfigsResponseResults]


class AlterConfigsRequestResourcesConfigs(TypedDict):
    """One ``configs`` entry."""

    name: str
    value: str | None


class AlterConfigsRequestResources(TypedDict):
    """One ``resources`` entry."""

    resource_type: int
    resource_name: str
    configs: list[AlterConfigsRequestResourcesConfigs]


class AlterConfigsRequest(TypedDict):
    """AlterConfigs request (key 33), v0-v2."""

    resources: list[AlterConfigsRequestResources]
    validate_only: bool


class AlterConfigsResponseResponses(TypedDict):
    """One ``responses`` entry."""

    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str


class AlterConfigsResponse(TypedDict):
    """AlterConfigs response (key 33), v0-v2."""

    throttle_time_ms: int
    responses: list[AlterConfigsResponseResponses]


class DescribeLogDirsRequestTopics(TypedDict):
    """One ``topics`` entry."""

    topic: str
    partitions: list[int]


class DescribeLogDirsRequest(TypedDict):
    """DescribeLogDirs request (key 35), v0-v4."""

    topics: list[DescribeLogDirsRequestTopics] | None


class DescribeLogDirsResponseResultsTopicsPartitions(TypedDict):
    """One ``partitions`` entry."""

    partition_index: int
    partition_size: int
    offset_lag: int
    is_future_key: bool


class DescribeLogDirsResponseResultsTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    partitions: list[DescribeLogDirsResponseResultsTopicsPartitions]


class DescribeLogDirsResponseResults(TypedDict):
    """One ``results`` entry."""

    error_code: int
    log_dir: str
    topics: list[DescribeLogDirsResponseResultsTopics]
    total_bytes: NotRequired[int]
    usable_bytes: NotRequired[int]


class DescribeLogDirsResponse(TypedDict):
    """DescribeLogDirs response (key 35), v0-v4."""

    throttle_time_ms: int
    error_code: NotRequired[int]
    results: list[DescribeLogDirsResponseResults]


class SaslAuthenticateRequest(TypedDict):
    """SaslAuthenticate request (key 36), v0-v2."""

    auth_bytes: bytes


class SaslAuthenticateResponse(TypedDict):
    """SaslAuthenticate response (key 36), v0-v2."""

    error_code: int
    error_message: str | None
    auth_bytes: bytes
    session_lifetime_ms: NotRequired[int]


class CreatePartitionsRequestTopicsAssignments(TypedDict):
    """One ``assignments`` entry."""

    broker_ids: list[int]


class CreatePartitionsRequestTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    count: int
    assignments: list[CreatePartitionsRequestTopicsAssignments] | None


class CreatePartitionsRequest(TypedDict):
    """CreatePartitions request (key 37), v0-v3."""

    topics: list[CreatePartitionsRequestTopics]
    timeout_ms: int
    validate_only: bool


class CreatePartitionsResponseResults(TypedDict):
    """One ``results`` entry."""

    name: str
    error_code: int
    error_message: str | None


class CreatePartitionsResponse(TypedDict):
    """CreatePartitions response (key 37), v0-v3."""

    throttle_time_ms: int
    results: list[CreatePartitionsResponseResults]


class DeleteGroupsRequest(TypedDict):
    """DeleteGroups request (key 42), v0-v2."""

    groups_names: list[str]


class DeleteGroupsResponseResults(TypedDict):
    """One ``results`` entry."""

    group_id: str
    error_code: int


class DeleteGroupsResponse(TypedDict):
    """DeleteGroups response (key 42), v0-v2."""

    throttle_time_ms: int
    results: list[DeleteGroupsResponseResults]


class ElectLeadersRequestTopicPartitions(TypedDict):
    """One ``topic_partitions`` entry."""

    topic: str
    partitions: list[int]


class ElectLeadersRequest(TypedDict):
    """ElectLeaders request (key 43), v0-v2."""

    election_type: NotRequired[int]
    topic_partitions: list[ElectLeadersRequestTopicPartitions] | None
    timeout_ms: NotRequired[int]


class ElectLeadersResponseReplicaElectionResultsPartitionResult(TypedDict):
    """One ``partition_result`` entry."""

    partition_id: int
    error_code: int
    error_message: str | None


class ElectLeadersResponseReplicaElectionResults(TypedDict):
    """One ``replica_election_results`` entry."""

    topic: str
    partition_result: list[ElectLeadersResponseReplicaElectionResultsPartitionResult]


class ElectLeadersResponse(TypedDict):
    """ElectLeaders response (key 43), v0-v2."""

    throttle_time_ms: int
    error_code: NotRequired[int]
    replica_election_results: list[ElectLeadersResponseReplicaElectionResults]


class IncrementalAlterConfigsRequestResourcesConfigs(TypedDict):
    """One ``configs`` entry."""

    name: str
    config_operation: int
    value: str | None


class IncrementalAlterConfigsRequestResources(TypedDict):
    """One ``resources`` entry."""

    resource_type: int
    resource_name: str
    configs: list[IncrementalAlterConfigsRequestResourcesConfigs]


class IncrementalAlterConfigsRequest(TypedDict):
    """IncrementalAlterConfigs request (key 44), v0-v1."""

    resources: list[IncrementalAlterConfigsRequestResources]
    validate_only: bool


class IncrementalAlterConfigsResponseResponses(TypedDict):
    """One ``responses`` entry."""

    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str


class IncrementalAlterConfigsResponse(TypedDict):
    """IncrementalAlterConfigs response (key 44), v0-v1."""

    throttle_time_ms: int
    responses: list[IncrementalAlterConfigsResponseResponses]


class AlterPartitionReassignmentsRequestTopicsPartitions(TypedDict):
    """One ``partitions`` entry."""

    partition_index: int
    replicas: list[int] | None


class AlterPartitionReassignmentsRequestTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    partitions: list[AlterPartitionReassignmentsRequestTopicsPartitions]


class AlterPartitionReassignmentsRequest(TypedDict):
    """AlterPartitionReassignments request (key 45), v0-v0."""

    timeout_ms: NotRequired[int]
    topics: list[AlterPartitionReassignmentsRequestTopics]


class AlterPartitionReassignmentsResponseResponsesPartitions(TypedDict):
    """One ``partitions`` entry."""

    partition_index: int
    error_code: int
    error_message: str | None


class AlterPartitionReassignmentsResponseResponses(TypedDict):
    """One ``responses`` entry."""

    name: str
    partitions: list[AlterPartitionReassignmentsResponseResponsesPartitions]


class AlterPartitionReassignmentsResponse(TypedDict):
    """AlterPartitionReassignments response (key 45), v0-v0."""

    throttle_time_ms: int
    error_code: int
    error_message: str | None
    responses: list[AlterPartitionReassignmentsResponseResponses]


class ListPartitionReassignmentsRequestTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    partition_indexes: list[int]


class ListPartitionReassignmentsRequest(TypedDict):
    """ListPartitionReassignments request (key 46), v0-v0."""

    timeout_ms: NotRequired[int]
    topics: list[ListPartitionReassignmentsRequestTopics] | None


class ListPartitionReassignmentsResponseTopicsPartitions(TypedDict):
    """One ``partitions`` entry."""

    partition_index: int
    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


class ListPartitionReassignmentsResponseTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    partitions: list[ListPartitionReassignmentsResponseTopicsPartitions]


class ListPartitionReassignmentsResponse(TypedDict):
    """ListPartitionReassignments response (key 46), v0-v0."""

    throttle_time_ms: int
    error_code: int
    error_message: str | None
    topics: list[ListPartitionReassignmentsResponseTopics]


class OffsetDeleteRequestTopicsPartitions(TypedDict):
    """One ``partitions`` entry."""

    partition_index: int


class OffsetDeleteRequestTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    partitions: list[OffsetDeleteRequestTopicsPartitions]


class OffsetDeleteRequest(TypedDict):
    """OffsetDelete request (key 47), v0-v0."""

    group_id: str
    topics: list[OffsetDeleteRequestTopics]


class OffsetDeleteResponseTopicsPartitions(TypedDict):
    """One ``partitions`` entry."""

    partition_index: int
    error_code: int


class OffsetDeleteResponseTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    partitions: list[OffsetDeleteResponseTopicsPartitions]


class OffsetDeleteResponse(TypedDict):
    """OffsetDelete response (key 47), v0-v0."""

    error_code: int
    throttle_time_ms: int
    topics: list[OffsetDeleteResponseTopics]


class DescribeClientQuotasRequestComponents(TypedDict):
    """One ``components`` entry."""

    entity_type: str
    match_type: int
    match: str | None


class DescribeClientQuotasRequest(TypedDict):
    """DescribeClientQuotas request (key 48), v0-v1."""

    components: list[DescribeClientQuotasRequestComponents]
    strict: bool


class DescribeClientQuotasResponseEntriesEntity(TypedDict):
    """One ``entity`` entry."""

    entity_type: str
    entity_name: str | None


class DescribeClientQuotasResponseEntriesValues(TypedDict):
    """One ``values`` entry."""

    key: str
    value: float


class DescribeClientQuotasResponseEntries(TypedDict):
    """One ``entries`` entry."""

    entity: list[DescribeClientQuotasResponseEntriesEntity]
    values: list[DescribeClientQuotasResponseEntriesValues]


class DescribeClientQuotasResponse(TypedDict):
    """DescribeClientQuotas response (key 48), v0-v1."""

    throttle_time_ms: int
    error_code: int
    error_message: str | None
    entries: list[DescribeClientQuotasResponseEntries] | None


class AlterClientQuotasRequestEntriesEntity(TypedDict):
    """One ``entity`` entry."""

    entity_type: str
    entity_name: str | None


class AlterClientQuotasRequestEntriesOps(TypedDict):
    """One ``ops`` entry."""

    key: str
    value: float
    remove: bool


class AlterClientQuotasRequestEntries(TypedDict):
    """One ``entries`` entry."""

    entity: list[AlterClientQuotasRequestEntriesEntity]
    ops: list[AlterClientQuotasRequestEntriesOps]


class AlterClientQuotasRequest(TypedDict):
    """AlterClientQuotas request (key 49), v0-v1."""

    entries: list[AlterClientQuotasRequestEntries]
    validate_only: bool


class AlterClientQuotasResponseEntriesEntity(TypedDict):
    """One ``entity`` entry."""

    entity_type: str
    entity_name: str | None


class AlterClientQuotasResponseEntries(TypedDict):
    """One ``entries`` entry."""

    error_code: int
    error_message: str | None
    entity: list[AlterClientQuotasResponseEntriesEntity]


class AlterClientQuotasResponse(TypedDict):
    """AlterClientQuotas response (key 49), v0-v1."""

    throttle_time_ms: int
    entries: list[AlterClientQuotasResponseEntries]


class DescribeUserScramCredentialsRequestUsers(TypedDict):
    """One ``users`` entry."""

    name: str


class DescribeUserScramCredentialsRequest(TypedDict):
    """DescribeUserScramCredentials request (key 50), v0-v0."""

    users: list[DescribeUserScramCredentialsRequestUsers] | None


class DescribeUserScramCredentialsResponseResultsCredentialInfos(TypedDict):
    """One ``credential_infos`` entry."""

    mechanism: int
    iterations: int


class DescribeUserScramCredentialsResponseResults(TypedDict):
    """One ``results`` entry."""

    user: str
    error_code: int
    error_message: str | None
    credential_infos: list[DescribeUserScramCredentialsResponseResultsCredentialInfos]


class DescribeUserScramCredentialsResponse(TypedDict):
    """DescribeUserScramCredentials response (key 50), v0-v0."""

    throttle_time_ms: int
    error_code: int
    error_message: str | None
    results: list[DescribeUserScramCredentialsResponseResults]


class AlterUserScramCredentialsRequestDeletions(TypedDict):
    """One ``deletions`` entry."""

    name: str
    mechanism: int


class AlterUserScramCredentialsRequestUpsertions(TypedDict):
    """One ``upsertions`` entry."""

    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


class AlterUserScramCredentialsRequest(TypedDict):
    """AlterUserScramCredentials request (key 51), v0-v0."""

    deletions: list[AlterUserScramCredentialsRequestDeletions]
    upsertions: list[AlterUserScramCredentialsRequestUpsertions]


class AlterUserScramCredentialsResponseResults(TypedDict):
    """One ``results`` entry."""

    user: str
    error_code: int
    error_message: str | None


class AlterUserScramCredentialsResponse(TypedDict):
    """AlterUserScramCredentials response (key 51), v0-v0."""

    throttle_time_ms: int
    results: list[AlterUserScramCredentialsResponseResults]


class DescribeProducersRequestTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    partition_indexes: list[int]


class DescribeProducersRequest(TypedDict):
    """DescribeProducers request (key 61), v0-v0."""

    topics: list[DescribeProducersRequestTopics]


class DescribeProducersResponseTopicsPartitionsActiveProducers(TypedDict):
    """One ``active_producers`` entry."""

    producer_id: int
    producer_epoch: int
    last_sequence: NotRequired[int]
    last_timestamp: NotRequired[int]
    coordinator_epoch: int
    current_txn_start_offset: NotRequired[int]


class DescribeProducersResponseTopicsPartitions(TypedDict):
    """One ``partitions`` entry."""

    partition_index: int
    error_code: int
    error_message: NotRequired[str | None]
    active_producers: list[DescribeProducersResponseTopicsPartitionsActiveProducers]


class DescribeProducersResponseTopics(TypedDict):
    """One ``topics`` entry."""

    name: str
    partitions: list[DescribeProducersResponseTopicsPartitions]


class DescribeProducersResponse(TypedDict):
    """DescribeProducers response (key 61), v0-v0."""

    throttle_time_ms: int
    topics: list[DescribeProducersResponseTopics]


class DescribeTransactionsRequest(TypedDict):
    """DescribeTransactions request (key 65), v0-v0."""

    transactional_ids: list[str]


class DescribeTransactionsResponseTransactionStatesTopics(TypedDict):
    """One ``topics`` entry."""

    topic: str
    partitions: list[int]


class DescribeTransactionsResponseTransactionStates(TypedDict):
    """One ``transaction_states`` entry."""

    error_code: int
    transactional_id: str
    transaction_state: str
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    producer_id: int
    producer_epoch: int
    topics: list[DescribeTransactionsResponseTransactionStatesTopics]


class DescribeTransactionsResponse(TypedDict):
    """DescribeTransactions response (key 65), v0-v0."""

    throttle_time_ms: int
    transaction_states: list[DescribeTransactionsResponseTransactionStates]


class ListTransactionsRequest(TypedDict):
    """ListTransactions request (key 66), v0-v1."""

    state_filters: list[str]
    producer_id_filters: list[int]
    duration_filter: NotRequired[int]


class ListTransactionsResponseTransactionStates(TypedDict):
    """One ``transaction_states`` entry."""

    transactional_id: str
    producer_id: int
    transaction_state: str


class ListTransactionsResponse(TypedDict):
    """ListTransactions response (key 66), v0-v1."""

    throttle_time_ms: int
    error_code: int
    unknown_state_filters: list[str]
    transaction_states: list[ListTransactionsResponseTransactionStates]


class ConsumerGroupHeartbeatRequestTopicPartitions(TypedDict):
    """One ``topic_partitions`` entry."""

    topic_id: bytes
    partitions: list[int]


class ConsumerGroupHeartbeatRequest(TypedDict):
    """ConsumerGroupHeartbeat request (key 68), v0-v1."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: NotRequired[str | None]
    rack_id: NotRequired[str | None]
    rebalance_timeout_ms: NotRequired[int]
    subscribed_topic_names: NotRequired[list[str] | None]
    subscribed_topic_regex: NotRequired[str | None]
    server_assignor: NotRequired[str | None]
    topic_partitions: NotRequired[list[ConsumerGroupHeartbeatRequestTopicPartitions] | None]


class ConsumerGroupHeartbeatResponseAssignmentTopicPartitions(TypedDict):
    """One ``topic_partitions`` entry."""

    topic_id: bytes
    partitions: list[int]


class ConsumerGroupHeartbeatResponseAssignment(TypedDict):
    """The ``assignment`` struct."""

    topic_partitions: list[ConsumerGroupHeartbeatResponseAssignmentTopicPartitions]


class ConsumerGroupHeartbeatResponse(TypedDict):
    """ConsumerGroupHeartbeat response (key 68), v0-v1."""

    throttle_time_ms: int
    error_code: int
    error_message: NotRequired[str | None]
    member_id: NotRequired[str | None]
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: NotRequired[ConsumerGroupHeartbeatResponseAssignment | None]


class ConsumerGroupDescribeRequest(TypedDict):
    """ConsumerGroupDescribe request (key 69), v0-v0."""

    group_ids: list[str]
    include_authorized_operations: bool


class ConsumerGroupDescribeResponseGroupsMembersAssignmentTopicPartitions(TypedDict):
    """One ``topic_partitions`` entry."""

    topic_id: bytes
    topic_name: str
    partitions: list[int]


class ConsumerGroupDescribeResponseGroupsMembersAssignment(TypedDict):
    """The ``assignment`` struct."""

    topic_partitions: list[ConsumerGroupDescribeResponseGroupsMembersAssignmentTopicPartitions]


class ConsumerGroupDescribeResponseGroupsMembersTargetAssignmentTopicPartitions(TypedDict):
    """One ``topic_partitions`` entry."""

    topic_id: bytes
    topic_name: str
    partitions: list[int]


class ConsumerGroupDescribeResponseGroupsMembersTargetAssignment(TypedDict):
    """The ``target_assignment`` struct."""

    topic_partitions: list[ConsumerGroupDescribeResponseGroupsMembersTargetAssignmentTopicPartitions]


class ConsumerGroupDescribeResponseGroupsMembers(TypedDict):
    """One ``members`` entry."""

    member_id: str
    instance_id: NotRequired[str | None]
    rack_id: NotRequired[str | None]
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: NotRequired[str | None]
    assignment: ConsumerGroupDescribeResponseGroupsMembersAssignment
    target_assignment: ConsumerGroupDescribeResponseGroupsMembersTargetAssignment


class ConsumerGroupDescribeResponseGroups(TypedDict):
    """One ``groups`` entry."""

    error_code: int
    error_message: NotRequired[str | None]
    group_id: str
    group_state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: list[ConsumerGroupDescribeResponseGroupsMembers]
    authorized_operations: NotRequired[int]


class ConsumerGroupDescribeResponse(TypedDict):
    """ConsumerGroupDescribe response (key 69), v0-v0."""

    throttle_time_ms: int
    groups: list[ConsumerGroupDescribeResponseGroups]
