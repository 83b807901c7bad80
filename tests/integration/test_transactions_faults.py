"""Transactions under faults, with real processes: one ZooKeeper and three brokers shared by the module (RF 3,
min.insync.replicas=2), confluent-kafka's transactional producer, read_committed consumers.

- kill -9 of the transaction coordinator with a transaction open, and between EndTxn and the markers: a data partition's leader is SIGSTOPped
  so its marker cannot land, the commit is answered (PrepareCommit written), the coordinator is killed; its
  successor loads PrepareCommit and completes it once the leader runs again;
- kill -9 of a partition leader while its marker is in flight (it was SIGSTOPped, the marker request waiting on
  it): the marker is retried to the new leader;
- a producer process paused (SIGSTOP) in the middle of a transaction: the coordinator aborts it on its
  ``transaction.timeout.ms``, the LSO moves on, and the producer's commit, once it runs again, is refused;
- the coordinator cut off by a network partition (from ZooKeeper and the other brokers; clients still reach it)
  with a transaction open: the commit completes at the coordinator the others elect, and the cut-off one, healed,
  truncates what it alone wrote.

Every test checks the same three things: every committed record is read by read_committed, no aborted one is, and
the last stable offset reaches the high watermark on every partition (no transaction left hanging).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.broker.coordinator.txn_log import partition_for
from moldau.broker.verify.netfault import NetFaults
from moldau.protocol.api import ApiKey
from moldau.protocol.errors import ErrorCode

from .harness import BrokerProcess, wait_until
from .test_cluster import Cluster, run, send, zookeeper  # noqa: F401
from .test_transactions_coordinator import read_all
from .zookeeper import ZooKeeperProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TXN_PARTITIONS = 3
SETTINGS = {"transaction.state.log.num.partitions": str(TXN_PARTITIONS), "offsets.topic.num.partitions": "3",
            # A stopped follower leaves the ISR soon, so acks=all writes (PrepareCommit, markers) go on.
            "replica.lag.time.max.ms": "2500",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "300"}
IDS = [1, 2, 3]


@pytest.fixture(scope="module")
def netfaults() -> Iterator[NetFaults | None]:
    if NetFaults.unavailable() is not None:
        yield None
        return
    faults = NetFaults()
    try:
        yield faults
    finally:
        faults.close()


@pytest.fixture(scope="module")
def shared(zookeeper: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory,  # noqa: F811
           request: pytest.FixtureRequest, netfaults: NetFaults | None) -> Iterator[Cluster]:
    c = Cluster(zookeeper, tmp_path_factory.mktemp("txn-faults"), request)
    if netfaults is not None:
        c.cgroup_for = lambda broker_id: netfaults.group(f"b{broker_id}")
    try:
        c.start(IDS, extra=lambda _id: SETTINGS)
        yield c
    finally:
        c.close()


class Roles:
    """A transactional id and the brokers that matter for it: its coordinator, the controller, and the third
    broker (neither), which leads partition 0 of the test's topic; partition 1 is led by the coordinator."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.stopped: set[int] = set()
        self.controller, self.coordinator, self.tid = wait_until(self._pick, 30, "a coordinator that is not the "
                                                                 "controller")
        self.other = next(i for i in IDS if i not in (self.controller, self.coordinator))
        self.topic = f"txf-{uuid.uuid4().hex[:6]}"
        leaders = [self.other, self.coordinator, self.controller]
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        assignment = [[lead, *[i for i in IDS if i != lead]] for lead in leaders]
        new = NewTopic(self.topic, num_partitions=3, replica_assignment=assignment, config={"min.insync.replicas": "2"})
        admin.create_topics([new])[self.topic].result(timeout=30)
        wait_until(lambda: [s["leader"] for _, s in sorted(cluster.states(self.topic).items())] == leaders, 30,
                   "the topic's preferred leaders")
        self.partitions = [(self.topic, p) for p in range(3)]

    def _pick(self) -> tuple[int, int, str] | None:
        controller = self.cluster.controller()
        leaders = {p: s["leader"] for p, s in self.cluster.states("__transaction_state").items()}
        for _ in range(200):
            tid = f"txf-{uuid.uuid4().hex[:8]}"
            leader = leaders.get(partition_for(tid, TXN_PARTITIONS), -1)
            if leader not in (-1, controller):
                return controller, leader, tid
        return None

    def broker(self, broker_id: int) -> BrokerProcess:
        return self.cluster.brokers[broker_id]

    def pause(self, broker_id: int) -> None:
        os.kill(self.broker(broker_id).pid, signal.SIGSTOP)
        self.stopped.add(broker_id)

    def resume(self, broker_id: int) -> None:
        if broker_id in self.stopped and self.broker(broker_id).is_running():
            os.kill(self.broker(broker_id).pid, signal.SIGCONT)
        self.stopped.discard(broker_id)

    def find_coordinator(self, via: int) -> int:
        [entry] = run(send(self.broker(via), ApiKey.FIND_COORDINATOR,
                           {"key_type": 1, "coordinator_keys": [self.tid]}))["coordinators"]
        return int(entry["node_id"]) if entry["error_code"] == ErrorCode.NONE else -1

    def state(self, broker_id: int) -> str:
        """The transaction's state as ``broker_id`` describes it ("" when it is not its coordinator)."""
        [entry] = run(send(self.broker(broker_id), ApiKey.DESCRIBE_TRANSACTIONS,
                           {"transactional_ids": [self.tid]}))["transaction_states"]
        return str(entry["transaction_state"]) if entry["error_code"] == ErrorCode.NONE else ""

    def stable(self) -> bool:
        """The LSO equals the high watermark on every partition of the topic (asked of each leader)."""
        for p, s in self.cluster.states(self.topic).items():
            leader = self.broker(s["leader"])
            offsets = [run(send(leader, ApiKey.LIST_OFFSETS, {"replica_id": -1, "isolation_level": isolation,
                                                              "topics": [{"name": self.topic, "partitions": [
                                                                  {"partition_index": p, "timestamp": -1}]}]}))
                       ["topics"][0]["partitions"][0] for isolation in (0, 1)]
            if any(o["error_code"] != ErrorCode.NONE for o in offsets) or offsets[0]["offset"] != offsets[1]["offset"]:
                return False
        return True

    def producer(self, **extra: Any) -> Any:
        p = Producer({"bootstrap.servers": self.cluster.bootstrap(), "transactional.id": self.tid,
                      "transaction.timeout.ms": 60000, "linger.ms": 5, **extra})
        p.init_transactions(30)
        return p

    def write(self, p: Any, tag: str, per_partition: int = 2) -> list[bytes]:
        """Produces and flushes ``per_partition`` records to each partition in the open transaction."""
        values = [f"{tag}-{part}-{i}".encode() for _, part in self.partitions for i in range(per_partition)]
        for value in values:
            p.produce(self.topic, value, partition=int(value.split(b"-")[1]))
        assert p.flush(30) == 0
        return values

    def check(self, committed: list[bytes], aborted: list[bytes] = ()) -> None:  # type: ignore[assignment]
        """read_committed sees exactly ``committed``, and no transaction is left open on any partition."""
        wait_until(self.stable, 60, "the LSO at the high watermark on every partition")
        got = [v for _, _, v in read_all(self.cluster.bootstrap(), self.partitions, "read_committed",
                                         len(committed), timeout=60)]
        assert sorted(got) == sorted(committed) and not set(got) & set(aborted), got


@pytest.fixture
def roles(shared: Cluster) -> Iterator[Roles]:
    """Every broker running and in the ISR of __transaction_state before the test; afterwards nothing left
    stopped."""
    for broker in shared.brokers.values():
        if not broker.is_running():
            broker.start()
    wait_until(lambda: sorted(shared.kazoo.get_children("/brokers/ids")) == [str(i) for i in IDS], 30,
               "all brokers registered")
    if not shared.kazoo.exists("/brokers/topics/__transaction_state"):  # created by the first FindCoordinator
        run(send(shared.brokers[1], ApiKey.FIND_COORDINATOR, {"key_type": 1, "coordinator_keys": ["x"]}))
    # In sync and led by the preferred replicas, so the leader rebalance of a restarted broker does not move a
    # coordinator in the middle of the test.
    wait_until(lambda: len(states := shared.states("__transaction_state")) == TXN_PARTITIONS and all(
        sorted(s["isr"]) == IDS and s["leader"] == shared.assignment("__transaction_state")[p][0]
        for p, s in states.items()), 60, "__transaction_state fully in sync, led by its preferred replicas")
    r = Roles(shared)
    try:
        yield r
    finally:
        for broker_id in list(r.stopped):
            r.resume(broker_id)


def test_a_new_coordinator_completes_a_commit_whose_markers_had_not_landed(roles: Roles) -> None:
    """kill -9 of the coordinator after EndTxn was answered (PrepareCommit written) while the marker for the
    partition led by a SIGSTOPped broker could not land: the new coordinator loads PrepareCommit and completes
    it once that broker runs again."""
    r = roles
    p = r.producer()
    p.begin_transaction()
    values = r.write(p, "c")
    r.pause(r.other)  # the leader of partition 0: its marker cannot be written
    p.commit_transaction(30)  # answered once PrepareCommit is in __transaction_state (after the ISR shrinks)
    assert r.state(r.coordinator) == "PrepareCommit"
    r.broker(r.coordinator).kill()
    new = wait_until(lambda: (c := r.find_coordinator(r.controller)) not in (-1, r.coordinator) and c, 30,
                     "a new coordinator")
    assert new == r.controller  # the only other in-sync replica of the partition
    # Loaded; still PrepareCommit unless the controller has meanwhile moved partition 0 away from the stopped
    # broker (its ZooKeeper session expired), in which case the marker landed at the new leader.
    wait_until(lambda: r.state(new) in ("PrepareCommit", "CompleteCommit"), 30, "the new coordinator's load")
    r.resume(r.other)
    wait_until(lambda: r.state(new) == "CompleteCommit", 60, "the new coordinator to complete the commit")
    r.check(values)


def test_a_new_coordinator_takes_over_an_open_transaction(roles: Roles) -> None:
    """kill -9 of the coordinator with a transaction open (before EndTxn): the new coordinator loads it Ongoing and
    librdkafka's commit, retried there, completes."""
    r = roles
    p = r.producer()
    p.begin_transaction()
    values = r.write(p, "c")
    r.broker(r.coordinator).kill()
    p.commit_transaction(60)  # NOT_COORDINATOR / lost connection: librdkafka finds the new one and retries
    new = r.find_coordinator(r.controller)
    assert new not in (-1, r.coordinator)
    wait_until(lambda: r.state(new) == "CompleteCommit", 30, "the commit to complete")
    r.check(values)


def test_a_marker_in_flight_to_a_killed_leader_goes_to_the_new_leader(roles: Roles) -> None:
    """A commit's marker request is waiting on a SIGSTOPped partition leader, which is then killed (-9): the
    coordinator retries the marker at the partition's new leader and completes the commit; an aborted transaction
    before it stays invisible."""
    r = roles
    p = r.producer()
    p.begin_transaction()
    aborted = r.write(p, "a")
    p.abort_transaction(30)
    p.begin_transaction()
    values = r.write(p, "c")
    r.pause(r.other)
    p.commit_transaction(30)
    assert r.state(r.coordinator) == "PrepareCommit"  # partition 0's marker is in flight to the stopped leader
    r.broker(r.other).kill()
    r.stopped.discard(r.other)
    wait_until(lambda: r.cluster.states(r.topic)[0]["leader"] not in (-1, r.other), 30, "a new leader")
    wait_until(lambda: r.state(r.coordinator) == "CompleteCommit", 30, "the commit to complete")
    r.check(values, aborted)


PAUSED_PRODUCER = """
import sys
from confluent_kafka import Producer
bootstrap, tid, topic = sys.argv[1:4]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 2000,
              "message.timeout.ms": 2000, "linger.ms": 5})
p.init_transactions(30)
p.begin_transaction()
for part in range(3):
    p.produce(topic, f"hanging-{part}".encode(), partition=part)
assert p.flush(30) == 0
print("open", flush=True)
sys.stdin.readline()  # the test pauses this process here, then resumes it and sends a line
try:
    p.commit_transaction(30)
    print("committed", flush=True)
except Exception as exc:
    print("refused", exc, flush=True)
"""


def test_a_paused_producers_transaction_is_aborted_on_its_timeout(roles: Roles, tmp_path: Path) -> None:
    """A producer process stopped (SIGSTOP) in the middle of a transaction: the coordinator aborts the
    transaction after transaction.timeout.ms (2 s), the LSO moves past it (records written after it become
    readable), and the producer's commit, once it runs again, is refused (its epoch was bumped)."""
    r = roles
    script = tmp_path / "paused_producer.py"
    script.write_text(PAUSED_PRODUCER)
    proc = subprocess.Popen([sys.executable, str(script), r.cluster.bootstrap(), r.tid, r.topic],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        line = proc.stdout.readline()
        assert line.strip() == "open", (line, proc.stderr.read() if proc.poll() is not None else "")  # type: ignore
        os.kill(proc.pid, signal.SIGSTOP)
        plain = Producer({"bootstrap.servers": r.cluster.bootstrap(), "acks": "all"})
        after = [f"after-{part}".encode() for part in range(3)]
        for part, value in enumerate(after):
            plain.produce(r.topic, value, partition=part)
        assert plain.flush(30) == 0
        r.check(after, [f"hanging-{part}".encode() for part in range(3)])  # bounded: aborted on its timeout
        assert r.state(r.find_coordinator(r.controller)) == "CompleteAbort"
        os.kill(proc.pid, signal.SIGCONT)
        proc.stdin.write("commit\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=60)
        assert out.startswith("refused"), (out, err[-2000:])
    finally:
        os.kill(proc.pid, signal.SIGCONT) if proc.poll() is None else None
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    r.check(after, [f"hanging-{part}".encode() for part in range(3)])


def test_a_partitioned_coordinator_is_replaced_and_the_commit_completes(roles: Roles,
                                                                        netfaults: NetFaults | None) -> None:
    """The coordinator is cut off from ZooKeeper and the other brokers (clients still reach it) with a
    transaction open: its PrepareCommit cannot be replicated, the others elect a new coordinator, the producer's
    commit completes there; healed, the old coordinator follows and answers for the id no more."""
    if netfaults is None:
        pytest.skip(str(NetFaults.unavailable()))
    r = roles
    p = r.producer(**{"transaction.timeout.ms": 60000})
    p.begin_transaction()
    values = r.write(p, "c")
    cut = r.broker(r.coordinator)
    peers = {"zookeeper": r.cluster.zk.port, **{f"b{i}": r.broker(i).port for i in IDS if i != r.coordinator}}
    netfaults.isolate(f"b{r.coordinator}", cut.port, peers)
    try:
        p.commit_transaction(90)  # NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE until the new one has loaded
        new = r.find_coordinator(r.controller)
        assert new not in (-1, r.coordinator), new
        wait_until(lambda: r.state(new) == "CompleteCommit", 30, "the new coordinator to complete the commit")
    finally:
        netfaults.heal()
    r.check(values)
    wait_until(lambda: r.find_coordinator(r.coordinator) == new, 60, "the healed broker to name the new coordinator")
    assert r.state(r.coordinator) == ""
