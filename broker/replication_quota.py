"""Replication throttles (KIP-73): bound the bytes a reassignment copies, on the leader and on the follower.

``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate`` (dynamic broker settings, bytes/s)
bound the replication traffic of the *throttled replicas*: those a topic lists in
``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas`` as ``partition:broker``
pairs (or ``*`` for all), where the broker is this one. As in Kafka, a replica that is in sync is never throttled:
only catching-up replicas (a reassignment's new ones) are. Rates are Kafka's sampled rate over
``replication.quota.window.num`` x ``replication.quota.window.size.seconds``; while a rate is above its bound,
the leader answers throttled partitions without data and the follower leaves them out of its fetches.
Per fetch request and partition, never per record.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from moldau.broker.quotas import Rate

LONG_MAX = 2**63 - 1
ALL = -1  # "*": every partition of the topic


def throttled_partitions(spec: str, broker_id: int) -> frozenset[int]:
    """The partitions of a topic whose replica on ``broker_id`` the list names (``ALL`` in the set for "*")."""
    text = spec.strip()
    if not text:
        return frozenset()
    if text == "*":
        return frozenset({ALL})
    out = set()
    for item in text.split(","):
        partition, _, broker = item.strip().partition(":")
        if broker.strip() == str(broker_id):
            out.add(int(partition))
    return frozenset(out)


class ReplicationQuota:
    """One direction (leader or follower) of one broker: its rate, its bound and the throttled replicas."""

    def __init__(self, config_key: str, broker_id: int, bound: Callable[[], int],
                 topic_overrides: Mapping[str, Mapping[str, str]], window_num: int = 11, window_size_seconds: int = 1,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config_key = config_key  # the topic setting naming the throttled replicas
        self.broker_id = broker_id
        self.bound = bound
        self.topic_overrides = topic_overrides  # the replica manager's, kept current by config changes
        self.clock = clock
        self.rate = Rate(window_num, window_size_seconds * 1000, clock() * 1000)
        self._parsed: dict[str, tuple[str, frozenset[int]]] = {}

    def throttles_topic(self, topic: str) -> bool:
        """Whether any replica of ``topic`` may be throttled (its throttled-replicas setting is not empty): when
        not, ``is_throttled`` is False for each of its partitions, and a fetch need not ask it per partition."""
        overrides = self.topic_overrides.get(topic)
        return bool(overrides and overrides.get(self.config_key))

    def is_throttled(self, topic: str, partition: int) -> bool:
        overrides = self.topic_overrides.get(topic)
        spec = overrides.get(self.config_key, "") if overrides else ""
        if not spec:
            return False
        cached = self._parsed.get(topic)
        if cached is None or cached[0] != spec:
            cached = self._parsed[topic] = (spec, throttled_partitions(spec, self.broker_id))
        return partition in cached[1] or ALL in cached[1]

    def exceeded(self) -> bool:
        bound = self.bound()
        return bound < LONG_MAX and self.rate.measure(self.clock() * 1000) > bound

    def record(self, n: int) -> None:
        if n > 0:
            self.rate.record(float(n), self.clock() * 1000)

    def measured(self) -> float:
        return self.rate.measure(self.clock() * 1000)
