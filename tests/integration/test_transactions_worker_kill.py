"""Consume-transform-produce, exactly once, across a kill -9: a worker process (tests/integration/txn_worker.py,
Moldau's client or confluent-kafka) commits its input offsets with its output in transactions
(send_offsets_to_transaction); it is SIGKILLed after a few commits with a transaction open (its output written),
and started again with the same transactional id and group instance id. The output then holds every input exactly
once, in input order per partition, and the group's committed offsets are at the end of the input."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from moldau.aio import TopicPartition as MTopicPartition

from .harness import BrokerProcess, wait_until
from .test_cluster import create_topic_confluent
from .test_moldau_transactions import _read_to_end, _run

pytestmark = pytest.mark.integration

WORKER = Path(__file__).with_name("txn_worker.py")
PER_PARTITION = 40


class Worker:
    def __init__(self, args: list[str], log: Path) -> None:
        self.log = log
        with open(log, "ab") as err:
            self.proc = subprocess.Popen([sys.executable, str(WORKER), *args], stdout=subprocess.PIPE, stderr=err,
                                         stdin=subprocess.DEVNULL, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.committed = 0

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.decode())

    def wait_open(self, committed_at_least: int, timeout: float) -> None:
        """Until a transaction's output is written but not committed, after ``committed_at_least`` records were
        committed."""
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc.poll() is None, f"worker exited {self.proc.returncode}: {self.log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"{self.committed} records committed: {self.log.read_text()[-3000:]}"
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            if line.startswith("committed"):
                self.committed += int(line.split()[1])
            elif line.startswith("open") and self.committed >= committed_at_least:
                return

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


@pytest.mark.parametrize("client", ["moldau", "confluent"])
def test_a_killed_and_restarted_worker_outputs_every_input_exactly_once(broker: BrokerProcess, client: str,
                                                                         tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:6]
    source, sink, group, tid = f"eos-in-{tag}", f"eos-out-{tag}", f"eos-{tag}", f"eos-{client}-{tag}"
    create_topic_confluent(broker.bootstrap, source, partitions=2, rf=1)
    create_topic_confluent(broker.bootstrap, sink, partitions=2, rf=1)
    inputs = {p: [f"in-{p}-{i}".encode() for i in range(PER_PARTITION)] for p in range(2)}
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for p, values in inputs.items():
        for v in values:
            plain.produce(source, v, partition=p)
    assert plain.flush(30) == 0

    args = [client, broker.bootstrap, source, sink, group, tid, "--batch", "8", "--pause-ms", "100"]
    first = Worker(args, tmp_path / "worker.log")
    try:
        first.wait_open(16, 60)  # a few transactions in, and one open: its output in the log
    finally:
        first.kill()
    assert first.committed < 2 * PER_PARTITION  # killed before it was done
    second = Worker(args, tmp_path / "worker.log")
    try:
        committed = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                              "isolation.level": "read_committed"})
        try:
            wait_until(lambda: [tp.offset for tp in committed.committed(
                [TopicPartition(source, 0), TopicPartition(source, 1)], timeout=10)] == [PER_PARTITION] * 2, 90,
                "the group's offsets at the end of the input")
        finally:
            committed.close()
    finally:
        second.kill()
    out = _run(_read_to_end(broker.bootstrap, [MTopicPartition(sink, p) for p in range(2)], "read_committed"))
    for p, values in inputs.items():
        assert out[MTopicPartition(sink, p)] == [b"out-" + v for v in values], p
    everything = _run(_read_to_end(broker.bootstrap, [MTopicPartition(sink, p) for p in range(2)],
                                   "read_uncommitted"))
    assert sum(map(len, everything.values())) > 2 * PER_PARTITION  # the killed worker's open transaction, aborted
