"""Moldau: a Kafka-protocol broker and its Python client.

``from moldau import Producer, Consumer, AdminClient`` gives the blocking clients (an event loop in a background
thread drives the async core); ``from moldau.aio import ...`` gives the asyncio ones.

The names below are loaded on first use (PEP 562), so importing a subpackage (``moldau.broker``,
``moldau.protocol``, ``moldau.storage``) does not import the client library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ imports on first access
    from moldau.admin import NewTopic
    from moldau.admin_configs import AlterConfigOp, ConfigResource
    from moldau.consumer import ConsumerGroupMetadata, ConsumerRecord, OffsetAndMetadata, TopicPartition
    from moldau.errors import ClientError, ConfigError, KafkaError, TransactionError
    from moldau.producer import RecordMetadata
    from moldau.sync import AdminClient, Consumer, Producer

_LAZY = {
    "AdminClient": "moldau.sync", "Consumer": "moldau.sync", "Producer": "moldau.sync",
    "AlterConfigOp": "moldau.admin_configs", "ConfigResource": "moldau.admin_configs",
    "ClientError": "moldau.errors", "ConfigError": "moldau.errors", "KafkaError": "moldau.errors",
    "TransactionError": "moldau.errors", "ConsumerGroupMetadata": "moldau.consumer",
    "ConsumerRecord": "moldau.consumer", "OffsetAndMetadata": "moldau.consumer",
    "TopicPartition": "moldau.consumer", "NewTopic": "moldau.admin", "RecordMetadata": "moldau.producer",
}

__all__ = ["AdminClient", "AlterConfigOp", "ConfigResource", "ClientError", "ConfigError", "Consumer",
           "ConsumerGroupMetadata", "ConsumerRecord", "KafkaError", "NewTopic", "OffsetAndMetadata", "Producer",
           "RecordMetadata", "TopicPartition", "TransactionError"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'moldau' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
