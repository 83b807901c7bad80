"""Consumer groups against real brokers, with kafka-python, aiokafka, confluent-kafka and kcat (-G).

Group members run as subprocesses (``group_consumer.py``, or kcat itself) so that they can leave cleanly
(SIGTERM: LeaveGroup) or die (SIGKILL: removed after session.timeout.ms=6000). The broker runs with
group.initial.rebalance.delay.ms=0 and a lowered group.min.session.timeout.ms. Every wait is bounded.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .harness import REPO_ROOT, BrokerProcess, wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 6
GROUP_BROKER = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000",
                "offsets.topic.num.partitions": "5", "num.partitions": str(PARTITIONS)}
RUNNER = Path(__file__).with_name("group_consumer.py")
CLIENTS = ["kafka-python", "aiokafka", "confluent", "kcat"]
_KCAT_ASSIGNED = re.compile(r"rebalanced \(memberid [^)]*\): assigned: (.*)$")


class Member:
    """One group member process and what it reported (assignments and records read)."""

    def __init__(self, client: str, bootstrap: str, topic: str, group: str, workdir: Path, name: str) -> None:
        self.client, self.name = client, name
        self.out = workdir / f"{name}.out"
        self.err = workdir / f"{name}.err"
        if client == "kcat":
            exe = shutil.which("kcat")
            assert exe, "kcat is not installed"
            # -u: unbuffered output; no -o: an explicit start offset would override the committed offsets
            cmd = [exe, "-u", "-b", bootstrap, "-G", group, topic, "-f", "%p %o %s\\n",
                   "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=1000",
                   "-X", "auto.commit.interval.ms=100"]
        else:
            cmd = [sys.executable, str(RUNNER), client, bootstrap, topic, group, str(self.out)]
        with open(self.out, "ab") as out, open(self.err, "ab") as err:
            self.proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=err)

    def _events(self) -> Iterator[dict[str, Any]]:
        if self.client != "kcat":
            for line in self.out.read_text().splitlines():
                if line.strip():
                    yield json.loads(line)
            return
        for line in self.err.read_text(errors="replace").splitlines():
            if "revoked:" in line:
                yield {"ev": "assigned", "partitions": []}
            m = _KCAT_ASSIGNED.search(line)
            if m:
                yield {"ev": "assigned", "partitions": sorted(int(p) for p in re.findall(r"\[(\d+)\]", m.group(1)))}

    def assignment(self) -> list[int]:
        current: list[int] = []
        for e in self._events():
            if e["ev"] == "assigned":
                current = e["partitions"]
        return current if self.alive() else []

    def records(self) -> list[tuple[int, int, str]]:
        if self.client == "kcat":
            rows = [line.split(" ", 2) for line in self.out.read_text(errors="replace").splitlines() if line]
            return [(int(p), int(o), v) for p, o, v in rows]
        return [tuple(item) for e in self._events() if e["ev"] == "records"
                for item in e["items"]]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> None:
        if self.alive():
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
                raise AssertionError(f"{self.name} ({self.client}) did not exit within {timeout}s of {sig}") from None

    def diagnostics(self) -> str:
        tail = self.err.read_text(errors="replace")[-1500:] if self.err.exists() else ""
        return f"--- {self.name} ({self.client}) alive={self.alive()} assignment={self.assignment()}\n{tail}"


@pytest.fixture
def members(tmp_path: Path) -> Iterator[Callable[..., Member]]:
    started: list[Member] = []

    def start(client: str, bootstrap: str, topic: str, group: str) -> Member:
        m = Member(client, bootstrap, topic, group, tmp_path, f"member{len(started)}")
        started.append(m)
        return m

    yield start
    for m in started:
        if m.alive():
            m.proc.kill()
            m.proc.wait(timeout=10)


def produce(bootstrap: str, topic: str, tag: str, per_partition: int) -> set[tuple[int, int, str]]:
    """per_partition records into each partition; returns {(partition, offset, value)}."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        futures = [(p, f"{tag}-{p}-{i}", producer.send(topic, value=f"{tag}-{p}-{i}".encode(), partition=p))
                   for p in range(PARTITIONS) for i in range(per_partition)]
        producer.flush(timeout=30)
        return {(p, f.get(timeout=30).offset, v) for p, v, f in futures}
    finally:
        producer.close(timeout=10)


def create_topic(bootstrap: str, topic: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        admin.close()


def covers_all(group: list[Member]) -> bool:
    """The live members' assignments are disjoint, non-empty and cover every partition."""
    assignments = [m.assignment() for m in group]
    flat = [p for a in assignments for p in a]
    return all(assignments) and sorted(flat) == list(range(PARTITIONS))


def read_by(group: list[Member]) -> Counter[tuple[int, int, str]]:
    return Counter(r for m in group for r in m.records())


def wait_read(group: list[Member], expected: set[tuple[int, int, str]], timeout: float, what: str) -> None:
    try:
        wait_until(lambda: expected <= set(read_by(group)), timeout, what)
    except TimeoutError:
        missing = sorted(expected - set(read_by(group)))[:10]
        raise AssertionError(f"{what}: missing e.g. {missing}\n" + "\n".join(m.diagnostics() for m in group)) from None


@pytest.mark.slow
@pytest.mark.parametrize("client", CLIENTS)
def test_three_members_share_leave_and_die(broker_factory: Callable[..., BrokerProcess], members: Any,
                                           topic: str, client: str) -> None:
    broker = broker_factory(GROUP_BROKER)
    create_topic(broker.bootstrap, topic)
    group_id = f"grp-{topic}"
    a, b, c = (members(client, broker.bootstrap, topic, group_id) for _ in range(3))
    everyone = [a, b, c]
    try:
        wait_until(lambda: covers_all(everyone), 40, "three members with disjoint assignments covering 6")
    except TimeoutError:
        raise AssertionError("\n".join(m.diagnostics() for m in everyone)) from None

    # 1. Together they read every record exactly once.
    first = produce(broker.bootstrap, topic, "one", 10)
    wait_read(everyone, first, 30, "the first 60 records")
    assert all(n == 1 for n in read_by(everyone).values()), read_by(everyone).most_common(3)
    assert all(m.records() for m in everyone), "every member read its share"

    # 2. One leaves cleanly (LeaveGroup): the two left cover everything, without waiting for its session to end.
    c.stop(signal.SIGTERM)
    wait_until(lambda: covers_all([a, b]), 20, "two members covering 6 after a clean leave")
    log = broker.stderr_text()
    assert f"is leaving group {group_id}" in log, "the stopped member sent no LeaveGroup"
    assert f"of group {group_id} has failed" not in log, "a member was removed by its session timeout"
    second = produce(broker.bootstrap, topic, "two", 5)
    wait_read(everyone, first | second, 30, "records after the leave")
    assert all(n == 1 for n in read_by(everyone).values()), read_by(everyone).most_common(3)

    # 3. One is killed: it stays a member until its session (6 s) runs out, then the last one takes over.
    b_read = set(b.records())
    t0 = time.monotonic()
    b.stop(signal.SIGKILL)
    wait_until(lambda: a.assignment() == list(range(PARTITIONS)), 40, "the survivor owning all 6 partitions")
    elapsed = time.monotonic() - t0
    assert 4.0 <= elapsed <= 25, f"survivor took over after {elapsed:.1f}s; expected after the 6 s session"
    third = produce(broker.bootstrap, topic, "three", 5)
    wait_read([a], third, 30, "records after the kill")
    counts = read_by(everyone)
    assert set(counts) == first | second | third
    twice = {r for r, n in counts.items() if n > 1}
    if client == "kcat":
        # kcat prints before its (auto) commit: the killed member's uncommitted tail may be read again.
        assert twice <= b_read
    else:
        assert not twice, sorted(twice)[:5]


def _kp_consumer(bootstrap: str, group: str, topic: str) -> Any:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=1000)
    consumer.subscribe([topic])
    consumer.topics()  # metadata after subscribe(), before the first join: see group_consumer.py
    return consumer


def _poll_until(consumer: Any, n: int, timeout: float) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        assert time.monotonic() < deadline, f"read {len(got)} of {n} records in {timeout}s"
        for recs in consumer.poll(timeout_ms=300).values():
            got.extend(recs)
    return got


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["stop", "kill9"])
def test_group_resumes_from_committed_offsets_after_broker_restart(
        broker_factory: Callable[..., BrokerProcess], topic: str, sig: int) -> None:
    from kafka import OffsetAndMetadata, TopicPartition

    broker = broker_factory(GROUP_BROKER)
    create_topic(broker.bootstrap, topic)
    produced = produce(broker.bootstrap, topic, "r", 20)
    group_id = f"resume-{topic}"
    consumer = _kp_consumer(broker.bootstrap, group_id, topic)
    try:
        got = _poll_until(consumer, 60, 30)
        read_by_partition: dict[int, list[int]] = {}
        for r in got:
            read_by_partition.setdefault(r.partition, []).append(r.offset)
        # Commit half of what was read in each partition: the other half is the uncommitted tail.
        commit_to = {p: offsets[len(offsets) // 2] for p, offsets in read_by_partition.items()}
        consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "half", -1) for p, o in commit_to.items()})
    finally:
        consumer.close(autocommit=False)
    broker.stop(sig)
    broker.start()
    consumer = _kp_consumer(broker.bootstrap, group_id, topic)
    try:
        expected = {(p, o, v) for p, o, v in produced if o >= commit_to.get(p, 0)}
        again = _poll_until(consumer, len(expected), 40)
        seen = {(r.partition, r.offset, r.value.decode()) for r in again}
        assert seen == expected, "resumed exactly at the committed offsets: nothing skipped, nothing older re-read"
        assert len(again) == len(expected)
        assert consumer.committed(TopicPartition(topic, 0)) == commit_to.get(0, None)
    finally:
        consumer.close()


def _groups_tool(*args: str) -> Any:
    proc = subprocess.run([sys.executable, "-m", "moldau.consumer_groups", *args], cwd=REPO_ROOT,
                          capture_output=True, timeout=60, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_consumer_groups_tool_shows_lag(broker_factory: Callable[..., BrokerProcess], topic: str) -> None:
    from kafka import OffsetAndMetadata, TopicPartition

    broker = broker_factory(GROUP_BROKER)
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, "lag", 8)  # 8 per partition
    group_id = f"lag-{topic}"
    consumer = _kp_consumer(broker.bootstrap, group_id, topic)
    try:
        _poll_until(consumer, 48, 30)
        commits = {p: p + 1 for p in range(PARTITIONS)}  # partition p: committed p+1 of 8
        consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in commits.items()})
        assert group_id in _groups_tool("--bootstrap-server", broker.bootstrap, "--list").split()
        [desc] = json.loads(_groups_tool("--bootstrap-server", broker.bootstrap, "--describe", "--group", group_id,
                                         "--json"))
        assert desc["state"] == "Stable" and len(desc["members"]) == 1
        rows = {r["partition"]: r for r in desc["partitions"] if r["topic"] == topic}
        assert sorted(rows) == list(range(PARTITIONS))
        for p, row in rows.items():
            assert (row["current_offset"], row["log_end_offset"], row["lag"]) == (commits[p], 8, 8 - commits[p])
            assert row["consumer_id"] == desc["members"][0]["consumer_id"]
        text = _groups_tool("--bootstrap-server", broker.bootstrap, "--describe", "--group", group_id)
        assert "LOG-END-OFFSET" in text and f"{topic}  0          1               8               7" in text
    finally:
        consumer.close(autocommit=False)
    [desc] = json.loads(_groups_tool("--bootstrap-server", broker.bootstrap, "--describe", "--group", group_id,
                                     "--json"))
    assert desc["state"] == "Empty" and desc["members"] == []
    assert sum(r["lag"] for r in desc["partitions"]) == sum(8 - c for c in commits.values())


def test_offset_errors_and_group_deletion(broker_factory: Callable[..., BrokerProcess], topic: str) -> None:
    from kafka import OffsetAndMetadata, TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import NoError, OffsetMetadataTooLargeError, UnknownTopicOrPartitionError

    broker = broker_factory({**GROUP_BROKER, "offset.metadata.max.bytes": "10"})
    create_topic(broker.bootstrap, topic)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    consumer = None
    try:
        group_id = f"simple-{topic}"
        def alter(tp: Any, offset: int, metadata: str) -> Any:
            result = admin.alter_group_offsets(group_id, {tp: OffsetAndMetadata(offset, metadata, -1)})
            return result[tp]["error"] if isinstance(result[tp], dict) else result[tp]

        assert alter(TopicPartition(topic, 1), 5, "ok") is NoError
        assert admin.list_group_offsets({group_id: None})[group_id][TopicPartition(topic, 1)].offset == 5
        assert alter(TopicPartition("no-such-topic", 0), 1, "") is UnknownTopicOrPartitionError
        assert alter(TopicPartition(topic, 0), 1, "x" * 11) is OffsetMetadataTooLargeError
        assert alter(TopicPartition(topic, 0), 1, "x" * 10) is NoError
        consumer = _kp_consumer(broker.bootstrap, f"busy-{topic}", topic)
        wait_until(lambda: consumer.poll(timeout_ms=200) is not None and consumer.assignment(), 20, "assignment")
        result = admin.delete_groups([f"busy-{topic}", group_id])
        pairs = result.items() if isinstance(result, dict) else result
        deleted = {g: getattr(e, "__name__", str(e)) for g, e in pairs}
        assert deleted == {f"busy-{topic}": "NonEmptyGroupError", group_id: "OK"}  # kafka-python's spelling
        assert group_id not in {g["group_id"] for g in admin.list_groups()}
    finally:
        if consumer is not None:
            consumer.close()
        admin.close()
