"""The asyncio API: ``from moldau.aio import Producer, Consumer, AdminClient``."""

from moldau.admin import AdminClient, ClusterDescription, NewTopic, OffsetResult, TopicDescription
from moldau.admin_configs import AlterConfigOp, ConfigEntry, ConfigResource
from moldau.admin_groups import ConsumerGroupDescription, ConsumerGroupListing, MemberDescription
from moldau.consumer import (
           Consumer,
           ConsumerGroupMetadata,
           ConsumerRebalanceListener,
           ConsumerRecord,
           OffsetAndMetadata,
           TopicPartition,
)
from moldau.errors import TransactionError
from moldau.producer import Producer, RecordMetadata

__all__ = ["AdminClient", "AlterConfigOp", "ConfigEntry", "ConfigResource", "ClusterDescription", "Consumer",
           "ConsumerGroupDescription", "ConsumerGroupListing", "ConsumerGroupMetadata", "ConsumerRebalanceListener", "ConsumerRecord",
           "MemberDescription", "NewTopic", "OffsetAndMetadata", "OffsetResult", "Producer", "RecordMetadata", "TopicDescription",
           "TopicPartition", "TransactionError"]
