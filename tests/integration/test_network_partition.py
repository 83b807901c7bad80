"""The zombie leader: a partition leader cut off from ZooKeeper and from the other brokers, while clients still
reach it (moldau.broker.verify.netfault makes the partition).

What must hold, as in Kafka: the zombie cannot acknowledge an acks=all write (min.insync.replicas=2: its
followers cannot fetch, and it cannot shrink the ISR without ZooKeeper); the others elect a new leader with a
higher leader epoch and go on acknowledging; when the partition heals, the zombie learns the new epoch, truncates
what only it had (its acks=1 write), catches up, rejoins the ISR and refuses produce as a follower. Nothing
acknowledged with acks=all is lost or duplicated.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from moldau.broker.verify.netfault import NetFaults
from moldau.protocol.errors import ErrorCode

from .harness import wait_until
from .test_cluster import SESSION_TIMEOUT_MS, Cluster, cluster, zookeeper  # noqa: F401
from .test_replication import create_topic, in_sync, produce, read_all, segment_bytes, start, state

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def netfaults() -> Iterator[NetFaults]:
    reason = NetFaults.unavailable()
    if reason is not None:
        pytest.skip(reason)
    faults = NetFaults()
    try:
        yield faults
    finally:
        faults.close()


def test_a_zombie_leader_acknowledges_no_acks_all_write_and_is_truncated_when_it_returns(
        cluster: Cluster, netfaults: NetFaults) -> None:  # noqa: F811
    cluster.cgroup_for = lambda broker_id: netfaults.group(f"b{broker_id}")
    start(cluster)
    topic = "zombie"
    create_topic(cluster, topic, partitions=1, min_isr=2)
    old_id = state(cluster, topic)["leader"]
    old = cluster.brokers[old_id]
    others = {b: cluster.brokers[b] for b in (1, 2, 3) if b != old_id}
    wait_until(in_sync(cluster, topic), 20, "all three in sync")
    before = [f"before-{i}".encode() for i in range(5)]
    assert produce(old, topic, before) == ErrorCode.NONE
    epoch_before = state(cluster, topic)["leader_epoch"]

    netfaults.isolate(f"b{old_id}", old.port,
                      {"zookeeper": cluster.zk.port, **{f"b{b}": o.port for b, o in others.items()}})

    # The others elect a new leader from the ISR, with a higher epoch, and acknowledge acks=all writes.
    wait_until(lambda: state(cluster, topic)["leader"] in others, SESSION_TIMEOUT_MS / 1000 + 20,
               "a new leader among the others")
    new_state = state(cluster, topic)
    assert new_state["leader_epoch"] > epoch_before
    assert old_id not in new_state["isr"]
    new = others[new_state["leader"]]
    after = [f"after-{i}".encode() for i in range(5)]
    wait_until(lambda: produce(new, topic, after[:1]) == ErrorCode.NONE, 30, "the new leader acknowledging")
    assert produce(new, topic, after[1:]) == ErrorCode.NONE

    # The zombie, which has heard nothing of this, still takes writes from clients, but can acknowledge none
    # with acks=all; an acks=1 write it accepts exists on it alone (the followers now fetch from the new leader).
    assert produce(old, topic, [b"zombie-all"]) in (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS,
                                                     ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                                                     ErrorCode.NOT_LEADER_OR_FOLLOWER)
    zombie_acks_1 = produce(old, topic, [b"zombie-one"], acks=1)

    netfaults.heal()
    wait_until(in_sync(cluster, topic), 60, f"broker {old_id} back in the ISR after the partition healed")
    # As a follower it refuses produce: its old leader epoch is over.
    assert produce(old, topic, [b"late"]) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    values = [v for _, v in read_all(cluster.bootstrap(), topic)]
    assert values == before + after, (zombie_acks_1, values)
    wait_until(lambda: segment_bytes(old, topic) == segment_bytes(new, topic), 20,
               "the old leader's log identical to the new leader's")
