"""The group coordinator's settings (Kafka's group.* and offsets.retention.* broker configs).

Its own module so that both ``coordinator`` and its ``membership`` mixin import it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from moldau.broker.coordinator.assignors import assignor_names


@dataclass(slots=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000
    # The consumer group protocol (KIP-848): Kafka 4.0's group.consumer.* settings and defaults.
    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    consumer_max_size: int = 2**31 - 1
    consumer_assignors: list[str] = field(default_factory=lambda: ["uniform", "range"])
    rebalance_protocols: frozenset[str] = frozenset({"classic", "consumer"})

    @classmethod
    def from_broker_config(cls, config: Any) -> GroupConfig:
        return cls(int(config.get("group.min.session.timeout.ms")), int(config.get("group.max.session.timeout.ms")),
                   int(config.get("group.initial.rebalance.delay.ms")), int(config.get("group.max.size")),
                   int(config.offsets_retention_ms), int(config.get("offsets.retention.check.interval.ms")),
                   int(config.get("group.consumer.session.timeout.ms")),
                   int(config.get("group.consumer.heartbeat.interval.ms")),
                   int(config.get("group.consumer.max.size")),
                   assignor_names(list(config.get("group.consumer.assignors"))),
                   frozenset(str(p).strip().lower() for p in config.get("group.coordinator.rebalance.protocols")))
