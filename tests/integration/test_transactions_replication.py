"""Transactions across replicas: a WriteTxnMarkers answer waits for the ISR, followers build the same producer
state and aborted transaction index from the replicated batches, and a new leader after a controlled shutdown
still holds the LSO at the open transaction, takes its commit marker, and serves read_committed correctly."""

from __future__ import annotations

import pytest

from .clients import ck_consume
from .harness import wait_until
from .test_cluster import Cluster, cluster, zookeeper  # noqa: F401
from .test_replication import create_topic, leads, start
from .test_transactions_log import A, B, end_txn, latest, produce

pytestmark = pytest.mark.integration


def test_open_transaction_and_abort_move_to_the_new_leader(cluster: Cluster, topic: str) -> None:  # noqa: F811
    start(cluster)
    create_topic(cluster, topic, min_isr=2)
    old = cluster.states(topic)[0]["leader"]
    leader = cluster.brokers[old]
    produce(leader, topic, [b"a0"], A, 0)  # 0: stays open until the new leader commits it
    produce(leader, topic, [b"b0"], B, 0)  # 1
    end_txn(leader, topic, B, committed=False)  # 2: answered once the ISR has it
    produce(leader, topic, [b"p0"])  # 3
    assert latest(leader, topic, 1) == 0

    leader.stop()  # controlled shutdown: leadership moves to an in-sync follower
    wait_until(lambda: cluster.states(topic)[0]["leader"] not in (-1, old), 30, "a new leader")
    new = cluster.brokers[cluster.states(topic)[0]["leader"]]
    wait_until(lambda: leads(new, topic, 0) and latest(new, topic, 0) == 4, 30, "the new leader serving offsets")
    assert latest(new, topic, 1) == 0  # the follower's producer state knew A's open transaction
    end_txn(new, topic, A, committed=True)  # 4
    assert latest(new, topic, 1) == 5
    got = ck_consume(cluster.bootstrap(), topic, 2, start_offset=0, **{"isolation.level": "read_committed"})
    assert [m.value() for m in got] == [b"a0", b"p0"]  # B's abort came from the follower's .txnindex
