"""Kafka protocol error codes.

Names and numbers follow Apache Kafka's protocol (``Errors`` in the Java client; the table at
https://kafka.apache.org/protocol.html#protocol_error_codes). ``retriable`` mirrors Kafka's classification: an
error is retriable when the Java client maps it to a ``RetriableException``. Messages are short descriptions of
our own.
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    STREAMS_TOPOLOGY_FENCED = 132
    SHARE_SESSION_LIMIT_REACHED = 133

    @property
    def retriable(self) -> bool:
        """True when Kafka clients may retry the request unchanged (Kafka's RetriableException set)."""
        return self in _RETRIABLE

    @property
    def message(self) -> str:
        """A short human-readable description of the error."""
        return _MESSAGES.get(self, self.name.replace("_", " ").lower())

    @classmethod
    def for_code(cls, code: int) -> ErrorCode:
        """The member for ``code``; codes we do not know map to UNKNOWN_SERVER_ERROR (as Kafka clients do)."""
        return _BY_CODE.get(code, cls.UNKNOWN_SERVER_ERROR)


_BY_CODE: dict[int, ErrorCode] = {member.value: member for member in ErrorCode}

_RETRIABLE: frozenset[ErrorCode] = frozenset(
    {
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.NOT_CONTROLLER,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        ErrorCode.LISTENER_NOT_FOUND,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
        ErrorCode.ELECTION_NOT_NEEDED,
        ErrorCode.UNSTABLE_OFFSET_COMMIT,
        ErrorCode.THROTTLING_QUOTA_EXCEEDED,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.INCONSISTENT_TOPIC_ID,
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
        ErrorCode.SHARE_SESSION_NOT_FOUND,
        ErrorCode.INVALID_SHARE_SESSION_EPOCH,
        ErrorCode.SHARE_SESSION_LIMIT_REACHED,
    }
)

_E = ErrorCode
_MESSAGES: dict[ErrorCode, str] = {
    _E.UNKNOWN_SERVER_ERROR: "The server hit an unexpected error while handling the request.",
    _E.NONE: "No error.",
    _E.OFFSET_OUT_OF_RANGE: "The offset is outside the range the server holds for this partition.",
    _E.CORRUPT_MESSAGE: "A record batch failed its CRC check, has an invalid size, or is otherwise corrupt.",
    _E.UNKNOWN_TOPIC_OR_PARTITION: "This broker does not host the topic-partition.",
    _E.INVALID_FETCH_SIZE: "The fetch size is invalid.",
    _E.LEADER_NOT_AVAILABLE: "The partition has no leader right now (an election is in progress).",
    _E.NOT_LEADER_OR_FOLLOWER: "This broker is not the leader (or not a replica) of the partition.",
    _E.REQUEST_TIMED_OUT: "The request timed out.",
    _E.BROKER_NOT_AVAILABLE: "The broker is not available.",
    _E.REPLICA_NOT_AVAILABLE: "The replica is not available for the partition.",
    _E.MESSAGE_TOO_LARGE: "A record batch is larger than the largest the server accepts.",
    _E.STALE_CONTROLLER_EPOCH: "The request came from a controller with an old epoch.",
    _E.OFFSET_METADATA_TOO_LARGE: "The committed offset metadata is too large.",
    _E.NETWORK_EXCEPTION: "The connection closed before a response was received.",
    _E.COORDINATOR_LOAD_IN_PROGRESS: "The coordinator is still loading its state.",
    _E.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    _E.NOT_COORDINATOR: "This broker is not the coordinator for the key.",
    _E.INVALID_TOPIC_EXCEPTION: "The topic name is invalid or the operation is not allowed on it.",
    _E.RECORD_LIST_TOO_LARGE: "The record set is larger than the segment size.",
    _E.NOT_ENOUGH_REPLICAS: "Fewer in-sync replicas than min.insync.replicas; records rejected.",
    _E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: "Records were written but to fewer in-sync replicas than required.",
    _E.INVALID_REQUIRED_ACKS: "The acks value in the produce request is invalid.",
    _E.ILLEGAL_GENERATION: "The group generation id is not valid.",
    _E.INCONSISTENT_GROUP_PROTOCOL: "The member's protocols are incompatible with the group.",
    _E.INVALID_GROUP_ID: "The group id is invalid.",
    _E.UNKNOWN_MEMBER_ID: "The coordinator does not know this member.",
    _E.INVALID_SESSION_TIMEOUT: "The session timeout is outside the range the broker allows.",
    _E.REBALANCE_IN_PROGRESS: "The group is rebalancing; the member must rejoin.",
    _E.INVALID_COMMIT_OFFSET_SIZE: "The offset commit data size is invalid.",
    _E.TOPIC_AUTHORIZATION_FAILED: "Not authorized to access the topic.",
    _E.GROUP_AUTHORIZATION_FAILED: "Not authorized to access the group.",
    _E.CLUSTER_AUTHORIZATION_FAILED: "Not authorized for this cluster operation.",
    _E.INVALID_TIMESTAMP: "A record timestamp is outside the accepted range.",
    _E.UNSUPPORTED_SASL_MECHANISM: "The SASL mechanism is not supported.",
    _E.ILLEGAL_SASL_STATE: "The request is not valid in the current SASL state.",
    _E.UNSUPPORTED_VERSION: "The API version is not supported.",
    _E.TOPIC_ALREADY_EXISTS: "A topic with this name already exists.",
    _E.INVALID_PARTITIONS: "The number of partitions is invalid.",
    _E.INVALID_REPLICATION_FACTOR: "The replication factor is invalid or exceeds the number of brokers.",
    _E.INVALID_REPLICA_ASSIGNMENT: "The replica assignment is invalid.",
    _E.INVALID_CONFIG: "The configuration is invalid.",
    _E.NOT_CONTROLLER: "This broker is not the controller.",
    _E.INVALID_REQUEST: "The request is malformed or not valid for this broker.",
    _E.UNSUPPORTED_FOR_MESSAGE_FORMAT: "The message format does not support this request.",
    _E.POLICY_VIOLATION: "The request violates the configured policy.",
    _E.OUT_OF_ORDER_SEQUENCE_NUMBER: "The producer sequence number is out of order.",
    _E.DUPLICATE_SEQUENCE_NUMBER: "The producer sequence number is a duplicate.",
    _E.INVALID_PRODUCER_EPOCH: "The producer epoch is older than the current one.",
    _E.INVALID_TXN_STATE: "The transactional operation is invalid in the current state.",
    _E.INVALID_PRODUCER_ID_MAPPING: "The producer id is not assigned to this transactional id.",
    _E.INVALID_TRANSACTION_TIMEOUT: "The transaction timeout exceeds the broker maximum.",
    _E.CONCURRENT_TRANSACTIONS: "Another operation on this transaction is in progress.",
    _E.TRANSACTION_COORDINATOR_FENCED: "The transaction coordinator has been fenced.",
    _E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Not authorized for the transactional id.",
    _E.SECURITY_DISABLED: "Security features are disabled.",
    _E.OPERATION_NOT_ATTEMPTED: "The broker did not attempt this operation.",
    _E.KAFKA_STORAGE_ERROR: "A disk error occurred while accessing the log.",
    _E.LOG_DIR_NOT_FOUND: "The log directory is not configured on the broker.",
    _E.SASL_AUTHENTICATION_FAILED: "SASL authentication failed.",
    _E.UNKNOWN_PRODUCER_ID: "The broker has no state for this producer id.",
    _E.REASSIGNMENT_IN_PROGRESS: "A partition reassignment is in progress.",
    _E.DELEGATION_TOKEN_AUTH_DISABLED: "Delegation tokens are disabled.",
    _E.DELEGATION_TOKEN_NOT_FOUND: "The delegation token was not found.",
    _E.DELEGATION_TOKEN_OWNER_MISMATCH: "The principal is not the token owner or renewer.",
    _E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: "Delegation token requests are not allowed on this channel.",
    _E.DELEGATION_TOKEN_AUTHORIZATION_FAILED: "Delegation token authorization failed.",
    _E.DELEGATION_TOKEN_EXPIRED: "The delegation token has expired.",
    _E.INVALID_PRINCIPAL_TYPE: "The principal type is not supported.",
    _E.NON_EMPTY_GROUP: "The group is not empty.",
    _E.GROUP_ID_NOT_FOUND: "The group id does not exist.",
    _E.FETCH_SESSION_ID_NOT_FOUND: "The fetch session id was not found.",
    _E.INVALID_FETCH_SESSION_EPOCH: "The fetch session epoch is invalid.",
    _E.LISTENER_NOT_FOUND: "The leader has no listener matching the request's listener.",
    _E.TOPIC_DELETION_DISABLED: "Topic deletion is disabled.",
    _E.FENCED_LEADER_EPOCH: "The request's leader epoch is older than the broker's.",
    _E.UNKNOWN_LEADER_EPOCH: "The request's leader epoch is newer than the broker's.",
    _E.UNSUPPORTED_COMPRESSION_TYPE: "The client does not support the partition's compression type.",
    _E.STALE_BROKER_EPOCH: "The broker epoch has changed.",
    _E.OFFSET_NOT_AVAILABLE: "The new leader's high watermark has not caught up yet.",
    _E.MEMBER_ID_REQUIRED: "The member must rejoin with the member id it was given.",
    _E.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred leader is not available.",
    _E.GROUP_MAX_SIZE_REACHED: "The group has reached its maximum size.",
    _E.FENCED_INSTANCE_ID: "Another member registered with the same group.instance.id.",
    _E.ELIGIBLE_LEADERS_NOT_AVAILABLE: "No eligible leaders are available for the partition.",
    _E.ELECTION_NOT_NEEDED: "Leader election is not needed for the partition.",
    _E.NO_REASSIGNMENT_IN_PROGRESS: "No partition reassignment is in progress.",
    _E.GROUP_SUBSCRIBED_TO_TOPIC: "The group is subscribed to the topic; its offsets cannot be deleted.",
    _E.INVALID_RECORD: "A record failed broker validation.",
    _E.UNSTABLE_OFFSET_COMMIT: "There are pending transactional offsets for the partition.",
    _E.THROTTLING_QUOTA_EXCEEDED: "The throttling quota has been exceeded.",
    _E.PRODUCER_FENCED: "A newer producer with the same transactional id has fenced this one.",
    _E.RESOURCE_NOT_FOUND: "The referenced resource does not exist.",
    _E.DUPLICATE_RESOURCE: "The same resource was referenced twice.",
    _E.UNACCEPTABLE_CREDENTIAL: "The credential does not meet the acceptance criteria.",
    _E.INCONSISTENT_VOTER_SET: "The sender or receiver is not one of the expected voters.",
    _E.INVALID_UPDATE_VERSION: "The update version is invalid.",
    _E.FEATURE_UPDATE_FAILED: "The finalized features could not be updated.",
    _E.PRINCIPAL_DESERIALIZATION_FAILURE: "The forwarded principal could not be deserialized.",
    _E.SNAPSHOT_NOT_FOUND: "The snapshot was not found.",
    _E.POSITION_OUT_OF_RANGE: "The snapshot position is out of range.",
    _E.UNKNOWN_TOPIC_ID: "This broker does not host the topic id.",
    _E.DUPLICATE_BROKER_REGISTRATION: "The broker id is already in use.",
    _E.BROKER_ID_NOT_REGISTERED: "The broker id is not registered.",
    _E.INCONSISTENT_TOPIC_ID: "The log's topic id does not match the request.",
    _E.INCONSISTENT_CLUSTER_ID: "The cluster id does not match the server's.",
    _E.TRANSACTIONAL_ID_NOT_FOUND: "The transactional id was not found.",
    _E.FETCH_SESSION_TOPIC_ID_ERROR: "The fetch session used topic ids inconsistently.",
    _E.INELIGIBLE_REPLICA: "The new ISR contains an ineligible replica.",
    _E.NEW_LEADER_ELECTED: "The partition state was updated but the leader changed.",
    _E.OFFSET_MOVED_TO_TIERED_STORAGE: "The offset has moved to tiered storage.",
    _E.FENCED_MEMBER_EPOCH: "The member epoch is fenced; the member must rejoin.",
    _E.UNRELEASED_INSTANCE_ID: "The instance id is still held by another member.",
    _E.UNSUPPORTED_ASSIGNOR: "The assignor is not supported by the group.",
    _E.STALE_MEMBER_EPOCH: "The member epoch is stale.",
    _E.MISMATCHED_ENDPOINT_TYPE: "The request was sent to the wrong type of endpoint.",
    _E.UNSUPPORTED_ENDPOINT_TYPE: "The endpoint type is not supported.",
    _E.UNKNOWN_CONTROLLER_ID: "The controller id is unknown.",
    _E.UNKNOWN_SUBSCRIPTION_ID: "The telemetry subscription id is unknown or outdated.",
    _E.TELEMETRY_TOO_LARGE: "The telemetry payload is too large.",
    _E.INVALID_REGISTRATION: "The broker registration is invalid.",
    _E.TRANSACTION_ABORTABLE: "The transaction hit an error; abort it to continue.",
    _E.INVALID_RECORD_STATE: "The record state is invalid for acknowledgement.",
    _E.SHARE_SESSION_NOT_FOUND: "The share session was not found.",
    _E.INVALID_SHARE_SESSION_EPOCH: "The share session epoch is invalid.",
    _E.FENCED_STATE_EPOCH: "The share-group state epoch does not match.",
    _E.INVALID_VOTER_KEY: "The voter key does not match the replica's key.",
    _E.DUPLICATE_VOTER: "The voter is already in the voter set.",
    _E.VOTER_NOT_FOUND: "The voter is not in the voter set.",
    _E.INVALID_REGULAR_EXPRESSION: "The regular expression is invalid.",
    _E.REBOOTSTRAP_REQUIRED: "Client metadata is stale; the client should rebootstrap.",
    _E.STREAMS_INVALID_TOPOLOGY: "The streams topology is invalid.",
    _E.STREAMS_INVALID_TOPOLOGY_EPOCH: "The streams topology epoch is invalid.",
    _E.STREAMS_TOPOLOGY_FENCED: "The streams topology epoch is outdated.",
    _E.SHARE_SESSION_LIMIT_REACHED: "The share session limit has been reached.",
}
del _E
