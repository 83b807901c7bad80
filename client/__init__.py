"""Moldau: a Kafka-protocol broker and its Python client.

``from moldau import Producer, Consumer, AdminClient`` gives the blocking clients (an event loop in a background
thread drives the async core); ``from moldau.aio import ...`` gives the asyncio ones.
"""

from moldau.admin import NewTopic
from moldau.admin_configs import AlterConfigOp, ConfigResource
from moldau.consumer import ConsumerRecord, OffsetAndMetadata, TopicPartition
from moldau.errors import ClientError, ConfigError, KafkaError
from moldau.producer import RecordMetadata
from moldau.sync import AdminClient, Consumer, Producer

__all__ = ["AdminClient", "AlterConfigOp", "ConfigResource", "ClientError", "ConfigError", "Consumer", "ConsumerRecord", "KafkaError", "NewTopic",
           "OffsetAndMetadata", "Producer", "RecordMetadata", "TopicPartition"]
