"""ZooKeeper and brokers on 127.0.0.1 for a benchmark: start, wait until ready, tear down (bench/ only).

    with cluster() as c:                                   # ZooKeeper + 3 brokers, ready for RF 3 topics
        leader = create_topic(c.bootstrap, "t", rf=3, full_isr=True)
    with cluster(single=True) as c:                        # also a standalone broker (no ZooKeeper): c.single
    with cluster(overrides={"offsets.topic.num.partitions": "5"}, work_dir="/var/tmp") as c: ...

The brokers are the tests' processes (tests/integration/harness.py) with the settings every bench used:
ZooKeeper chroot /bench, a 6 s session timeout, no automatic leader rebalance (a bench's leaders stay put).
``overrides`` go on top of those for every ZooKeeper broker. The tests do not use this module. Not
moldau.testing's MoldauCluster: its brokers run inside the calling process and would share the bench's GIL.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from moldau import AdminClient as MoldauAdmin  # noqa: E402
from tests.integration.harness import BrokerProcess, wait_until  # noqa: E402
from tests.integration.zookeeper import ZooKeeperProcess  # noqa: E402

CHROOT = "/bench"
TICKS = os.sysconf("SC_CLK_TCK")
BROKER_DEFAULTS = {"zookeeper.session.timeout.ms": "6000", "auto.leader.rebalance.enable": "false"}


@dataclass
class Cluster:
    root: Path
    zk: ZooKeeperProcess | None
    brokers: list[BrokerProcess]
    single: BrokerProcess | None = None

    @property
    def bootstrap(self) -> str:
        """The ZooKeeper brokers' addresses."""
        return ",".join(b.bootstrap for b in self.brokers)

    @property
    def zk_connect(self) -> str:
        assert self.zk is not None, "a cluster without ZooKeeper"
        return self.zk.connect + CHROOT

    def broker(self, broker_id: int) -> BrokerProcess:
        return next(b for b in self.brokers if b.broker_id == broker_id)

    def pids(self) -> list[int]:
        return [b.pid for b in ([self.single] if self.single else []) + self.brokers]


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def _ready(bootstrap: str, brokers: int, controller: bool, timeout: float = 60.0) -> None:
    def ready() -> bool:
        with MoldauAdmin(bootstrap_servers=bootstrap) as admin:  # a fresh client asks its bootstrap broker
            md = admin.describe_cluster()
        return len(md.brokers) == brokers and (not controller or md.controller_id > 0)
    wait_until(ready, timeout, f"{brokers} broker(s)" + (" and a controller" if controller else ""))


@contextmanager
def cluster(brokers: int = 3, *, single: bool = False, work_dir: str | Path | None = None,
            overrides: Mapping[str, str] | None = None, prefix: str = "moldau-bench-") -> Iterator[Cluster]:
    """ZooKeeper and ``brokers`` brokers (ids 1..n; none and no ZooKeeper with 0), plus with ``single`` a
    standalone broker of its own; every broker answers metadata (the cluster's with all n brokers and a
    controller) before the body runs. ``work_dir``: where the temporary directory goes (default: the system's)."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=work_dir))
    zk = ZooKeeperProcess(root / "zk") if brokers else None
    c = Cluster(root, zk, [], BrokerProcess(root / "single") if single else None)
    try:
        if c.single is not None:
            c.single.start()
        if zk is not None:
            zk.start()
            for i in range(1, brokers + 1):
                c.brokers.append(BrokerProcess(root / f"b{i}", broker_id=i, overrides={
                    "zookeeper.connect": zk.connect + CHROOT, **BROKER_DEFAULTS, **(overrides or {})}).start())
        if c.single is not None:
            _ready(c.single.bootstrap, 1, controller=False)
        # Each broker's own view: until the controller's first UpdateMetadata reaches it, a broker lists the
        # brokers registered in ZooKeeper, so one view cannot show that the controller has taken them all in.
        for b in c.brokers:
            _ready(b.bootstrap, brokers, controller=True)
        yield c
    finally:
        for b in ([c.single] if c.single else []) + c.brokers:
            b.kill()
        if zk is not None:
            zk.stop()
        shutil.rmtree(root, ignore_errors=True)


def create_topic(bootstrap: str, name: str, *, partitions: int = 1, rf: int = 3, min_insync: int | None = None,
                 full_isr: bool = False, timeout: float = 60.0) -> int:
    """Creates a topic (min.insync.replicas ``min_insync``, default min(rf, 2)) and waits until every partition has
    a leader and, with ``full_isr``, all ``rf`` replicas in sync (so acks=all waits for real followers). Returns
    the broker id leading partition 0. A create the client lost on the way is tried again (librdkafka may drop a
    bootstrap broker's handle with the request on it); the topic already being there counts as done."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, num_partitions=partitions, replication_factor=rf,
                     config={"min.insync.replicas": str(min(rf, 2) if min_insync is None else min_insync)})
    for attempt in range(3):
        try:
            admin.create_topics([topic])[name].result(timeout=timeout)
            break
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                break
            if attempt == 2:
                raise
            time.sleep(1)
    probe = Producer({"bootstrap.servers": bootstrap})

    def placed() -> bool:
        parts = probe.list_topics(name, timeout=5).topics[name].partitions.values()
        return len(parts) == partitions and all(p.leader >= 0 and (not full_isr or len(p.isrs) == rf)
                                                for p in parts)
    wait_until(placed, timeout, f"leaders{' and full ISRs' if full_isr else ''} for {name}")
    return int(probe.list_topics(name, timeout=5).topics[name].partitions[0].leader)
