"""moldau-topics --alter, moldau-delete-records, moldau-leader-election and moldau-log-dirs as processes against
three brokers (they ride Moldau's own AdminClient)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from . import test_cluster as tc
from .harness import wait_until
from .test_cluster import Cluster

zookeeper = tc.zookeeper
cluster = tc.cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]
BIN = Path(sys.executable).parent


def tool(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / name), *args], capture_output=True, text=True, timeout=90)


def test_partition_tools(cluster: Cluster, tmp_path: Path) -> None:
    from confluent_kafka import Producer

    cluster.start([1, 2, 3])
    bs = ["--bootstrap-server", cluster.bootstrap()]
    created = tool("moldau-topics", *bs, "--create", "--topic", "tooled", "--partitions", "2",
                   "--replication-factor", "3")
    assert created.returncode == 0, created.stderr

    altered = tool("moldau-topics", *bs, "--alter", "--topic", "tooled", "--partitions", "4")
    assert altered.returncode == 0, altered.stderr
    assert altered.stdout.splitlines()[-1] == "Adding partitions succeeded!"
    assert sorted(cluster.assignment("tooled")) == [0, 1, 2, 3]
    lower = tool("moldau-topics", *bs, "--alter", "--topic", "tooled", "--partitions", "2")
    assert lower.returncode == 1 and "currently has 4 partitions" in lower.stderr, lower.stderr
    wait_until(lambda: (lambda d: d.returncode == 0 and d.stdout.count("\tPartition: ") == 4
                        and "Leader: none" not in d.stdout)(tool("moldau-topics", *bs, "--describe", "--topic",
                                                                   "tooled")), 20, "4 partitions with leaders")

    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all"})
    for i in range(20):
        producer.produce("tooled", str(i).encode(), partition=0)
    assert producer.flush(20) == 0

    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"partitions": [{"topic": "tooled", "partition": 0, "offset": 5}], "version": 1}))
    deleted = tool("moldau-delete-records", *bs, "--offset-json-file", str(offsets))
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.splitlines() == ["Executing records delete operation", "Records delete operation completed:",
                                           "partition: tooled-0\tlow_watermark: 5"]
    offsets.write_text(json.dumps({"partitions": [{"topic": "tooled", "partition": 0, "offset": 999}]}))
    too_far = tool("moldau-delete-records", *bs, "--offset-json-file", str(offsets))
    assert too_far.returncode == 1 and "partition: tooled-0\terror: OFFSET_OUT_OF_RANGE" in too_far.stdout

    elected = tool("moldau-leader-election", *bs, "--election-type", "preferred", "--all-topic-partitions")
    assert elected.returncode == 0, elected.stderr
    assert elected.stdout.startswith("Valid replica already elected for partitions ") and "tooled-3" in elected.stdout
    unknown = tool("moldau-leader-election", *bs, "--election-type", "unclean", "--topic", "tooled",
                   "--partition", "9")
    assert unknown.returncode == 1 and "tooled-9: UNKNOWN_TOPIC_OR_PARTITION" in unknown.stdout
    bad = tool("moldau-leader-election", *bs, "--election-type", "preferred")
    assert bad.returncode == 2 and bad.stderr.startswith("moldau-leader-election: error: One and only one") and "Traceback" not in bad.stderr

    described = tool("moldau-log-dirs", *bs, "--describe", "--topic-list", "tooled")
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert lines[:2] == ["Querying brokers for log directories information",
                         "Received log directory information from brokers 1,2,3"]
    data = json.loads(lines[2])
    assert data["version"] == 1 and [b["broker"] for b in data["brokers"]] == [1, 2, 3]
    for broker in data["brokers"]:
        [log_dir] = broker["logDirs"]
        assert log_dir["error"] is None and log_dir["logDir"] == str(cluster.brokers[broker["broker"]].log_dir.resolve())
        assert sorted(p["partition"] for p in log_dir["partitions"]) == [f"tooled-{p}" for p in range(4)]
    leader0 = cluster.states("tooled")[0]["leader"]
    sizes = {p["partition"]: p["size"] for b in data["brokers"] if b["broker"] == leader0
             for p in b["logDirs"][0]["partitions"]}
    assert sizes["tooled-0"] > 0 and sizes["tooled-1"] == 0
