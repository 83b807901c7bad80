"""The ACL model's wire codes (Kafka's ResourceType, PatternType, AclOperation, AclPermissionType) and the names
Kafka writes for them in ZooKeeper and prints in kafka-acls; shared by the broker and the client library."""

from __future__ import annotations

from enum import IntEnum

CLUSTER_NAME = "kafka-cluster"  # the one cluster resource's name


class ResourceType(IntEnum):  # Kafka's wire codes
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5


class PatternType(IntEnum):
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class Permission(IntEnum):
    ANY = 1
    DENY = 2
    ALLOW = 3


RESOURCE_NAMES = {ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group", ResourceType.CLUSTER: "Cluster",
                  ResourceType.TRANSACTIONAL_ID: "TransactionalId"}
OPERATION_NAMES = {Operation.ALL: "All", Operation.READ: "Read", Operation.WRITE: "Write",
                   Operation.CREATE: "Create", Operation.DELETE: "Delete", Operation.ALTER: "Alter",
                   Operation.DESCRIBE: "Describe", Operation.CLUSTER_ACTION: "ClusterAction",
                   Operation.DESCRIBE_CONFIGS: "DescribeConfigs", Operation.ALTER_CONFIGS: "AlterConfigs",
                   Operation.IDEMPOTENT_WRITE: "IdempotentWrite"}
