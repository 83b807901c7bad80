"""What a test holds: `MoldauBroker` (one broker, no ZooKeeper) and `MoldauCluster` (ZooKeeper + N brokers).

Both expose ``bootstrap_servers`` for any Kafka client and create topics through Moldau's own admin client,
returning once every partition has a leader and, in a cluster, every replica is in sync (so the first produce
or consume never meets LEADER_NOT_AVAILABLE).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path

from moldau import AdminClient, NewTopic
from moldau.testing.servers import (
    SINGLE_BROKER_DEFAULTS,
    START_TIMEOUT_S,
    BrokerThread,
    ZooKeeper,
    unique_topic_name,
    wait_until,
)

TOPIC_READY_TIMEOUT_S = 30.0


class _Topics:
    """Topic helpers shared by the broker and the cluster."""

    @property
    def bootstrap_servers(self) -> str:
        raise NotImplementedError

    def create_topic(self, name: str | None = None, partitions: int = 1, replication_factor: int = -1,
                     config: Mapping[str, str] | None = None) -> str:
        """Creates a topic (a unique name when `name` is None) and waits until it is ready; returns its name.
        `replication_factor=-1` takes the broker's `default.replication.factor` (a cluster's is min(3, N))."""
        topic = name or unique_topic_name()
        with AdminClient(bootstrap_servers=self.bootstrap_servers) as admin:
            admin.create_topics([NewTopic(topic, partitions, replication_factor, config=dict(config or {}))])
            wait_until(lambda: _ready(admin, topic, partitions), TOPIC_READY_TIMEOUT_S,
                       f"every partition of {topic} to have a leader and a full ISR")
        return topic

    def delete_topic(self, name: str) -> None:
        with AdminClient(bootstrap_servers=self.bootstrap_servers) as admin:
            admin.delete_topics([name])

    def list_topics(self) -> list[str]:
        with AdminClient(bootstrap_servers=self.bootstrap_servers) as admin:
            return admin.list_topics()


def _ready(admin: AdminClient, topic: str, partitions: int) -> bool:
    (description,) = admin.describe_topics([topic])
    return len(description.partitions) == partitions and all(
        p.leader >= 0 and sorted(p.isr) == sorted(p.replicas) for p in description.partitions)


class MoldauBroker(_Topics):
    """One in-process broker without ZooKeeper (its metadata in a file in its log dir)."""

    def __init__(self, data_dir: Path | None = None, overrides: Mapping[str, str] | None = None) -> None:
        self._own_dir = None if data_dir is not None else tempfile.TemporaryDirectory(prefix="moldau-broker-")
        self.data_dir = data_dir if data_dir is not None else Path(self._own_dir.name)  # type: ignore[union-attr]
        self.broker = BrokerThread(self.data_dir / "logs", {**SINGLE_BROKER_DEFAULTS, **(overrides or {})})

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:<port>``: what every client's bootstrap setting takes."""
        return self.broker.bootstrap_servers

    @property
    def port(self) -> int:
        return self.broker.port

    def start(self, timeout: float = START_TIMEOUT_S) -> MoldauBroker:
        self.broker.start(timeout)
        return self

    def stop(self) -> None:
        """Stops the broker and removes its data (when this object made the temp dir). Safe to call twice."""
        try:
            self.broker.stop()
        finally:
            if self._own_dir is not None:
                self._own_dir.cleanup()
                self._own_dir = None

    def __enter__(self) -> MoldauBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def cluster_defaults(brokers: int) -> dict[str, str]:
    """Replicated like a small production cluster (up to three replicas; two in sync for acks=all with three),
    with test-friendly group settings, and a quick teardown (no leadership hand-over when the fixture ends)."""
    factor = min(3, brokers)
    return {"default.replication.factor": str(factor), "offsets.topic.replication.factor": str(factor),
            "min.insync.replicas": "2" if factor >= 3 else "1", "offsets.topic.num.partitions": "3",
            "group.initial.rebalance.delay.ms": "0", "controlled.shutdown.enable": "false"}


class MoldauCluster(_Topics):
    """A ZooKeeper server (Java) and `size` in-process brokers with ids 1..size."""

    def __init__(self, size: int = 3, data_dir: Path | None = None,
                 overrides: Mapping[str, str] | None = None) -> None:
        if size < 1:
            raise ValueError("a cluster needs at least one broker")
        self._own_dir = None if data_dir is not None else tempfile.TemporaryDirectory(prefix="moldau-cluster-")
        self.data_dir = data_dir if data_dir is not None else Path(self._own_dir.name)  # type: ignore[union-attr]
        self.zookeeper = ZooKeeper(self.data_dir / "zookeeper")
        self.overrides = {**cluster_defaults(size), **(overrides or {})}
        self.brokers = [BrokerThread(self.data_dir / f"broker-{i}", self.overrides, broker_id=i)
                        for i in range(1, size + 1)]

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's ``127.0.0.1:<port>``, comma-separated."""
        return ",".join(b.bootstrap_servers for b in self.brokers)

    def broker(self, broker_id: int) -> BrokerThread:
        return next(b for b in self.brokers if b.broker_id == broker_id)

    def start(self, timeout: float = START_TIMEOUT_S) -> MoldauCluster:
        try:
            self.zookeeper.start(timeout)
            for b in self.brokers:
                b.overrides["zookeeper.connect"] = self.zookeeper.connect
                b.start(timeout)
            wait_until(self._all_registered, timeout, f"all {len(self.brokers)} brokers in the cluster metadata")
        except BaseException:
            self.stop()
            raise
        return self

    def _all_registered(self) -> bool:
        # Every broker's own view (a fresh client's first answer comes from its bootstrap broker). One view is not
        # enough: until the controller's first UpdateMetadata reaches it, a broker lists the brokers registered in
        # ZooKeeper, before the controller may have taken the last one in; the controller's own view says it has.
        for broker in self.brokers:
            with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
                description = admin.describe_cluster()
            if len(description.brokers) != len(self.brokers) or description.controller_id < 0:
                return False
        return True

    def stop(self) -> None:
        """Stops every broker, then ZooKeeper, and removes the data (when this object made the temp dir)."""
        try:
            for b in reversed(self.brokers):
                try:
                    b.stop()
                except Exception:  # noqa: BLE001 - the others must stop too; the thread is a daemon anyway
                    pass
        finally:
            self.zookeeper.stop()
            if self._own_dir is not None:
                self._own_dir.cleanup()
                self._own_dir = None

    def __enter__(self) -> MoldauCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
