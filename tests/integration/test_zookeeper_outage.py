"""ZooKeeper goes away for a while and comes back: the brokers keep serving reads and acks=all writes on the
leaders they have, none of them exits, all re-register, a controller is there again, nothing acknowledged is lost.

The cluster has its own ZooKeeper here (the module-wide one of test_cluster.py must not be stopped).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from .harness import wait_until
from .test_broker_death import PARTITIONS, Writer, read_everything
from .test_cluster import Cluster
from .test_replication import create_topic
from .zookeeper import ZooKeeperProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OUTAGE_S = 20.0
SETTINGS = {"zookeeper.session.timeout.ms": "6000", "replica.lag.time.max.ms": "10000",
            "auto.leader.rebalance.enable": "false", "default.replication.factor": "3",
            "offsets.topic.replication.factor": "3"}


def test_brokers_keep_serving_through_a_zookeeper_outage(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    zk = ZooKeeperProcess(tmp_path / "zookeeper")
    zk.start()
    cluster = Cluster(zk, tmp_path, request)
    try:
        cluster.start([1, 2, 3], extra=lambda _: SETTINGS)
        topic = "outage"
        create_topic(cluster, topic, partitions=PARTITIONS, min_isr=2)
        writer = Writer(cluster.bootstrap(), topic)
        writer.thread.start()
        try:
            t0 = time.monotonic()
            wait_until(lambda: len(writer.acked_after(t0)) == PARTITIONS, 60, "every partition acknowledging")
            zk.stop()
            t_down = time.monotonic()
            # The outage lasts OUTAGE_S whatever the brokers do: this sleep is the scenario, not a wait.
            time.sleep(OUTAGE_S)
            t_up = time.monotonic()
            assert all(b.is_running() for b in cluster.brokers.values()), "a broker exited during the outage"
            # Writes were acknowledged on every partition during the last part of the outage, not only before it.
            late = writer.acked_between(t_down + OUTAGE_S / 2, t_up)
            assert late == set(range(PARTITIONS)), f"partitions acknowledging late in the outage: {sorted(late)}"
            zk.start()
            wait_until(lambda: sorted(cluster.kazoo.get_children("/brokers/ids")) == ["1", "2", "3"], 60,
                       "every broker registered again")
            wait_until(lambda: cluster.kazoo.exists("/controller") is not None, 30, "a controller again")
            controller = json.loads(cluster.kazoo.get("/controller")[0])["brokerid"]
            assert controller in (1, 2, 3)
            t_back = time.monotonic()
            wait_until(lambda: len(writer.acked_after(t_back)) == PARTITIONS, 60,
                       "every partition acknowledging after ZooKeeper's return")
        finally:
            writer.stop.set()
            writer.thread.join(90)
        assert all(b.is_running() for b in cluster.brokers.values())
        acked = writer.values()
        seen = read_everything(cluster.bootstrap(), topic, len(acked))
        assert acked <= seen, f"{len(acked - seen)} acknowledged values lost"
    finally:
        cluster.close()
        zk.stop()
