"""moldau-topics and moldau-console-producer as processes against a real broker (with moldau-console-consumer
for the seeds' ch 2.4 walkthrough, piped input)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .clients import ck_consume
from .harness import BrokerProcess

pytestmark = pytest.mark.integration
BIN = Path(sys.executable).parent


def tool(name: str, *args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / name), *args], input=stdin, capture_output=True, text=True, timeout=timeout)


def test_topics_create_list_describe_delete(broker: BrokerProcess, topic: str) -> None:
    bs = ["--bootstrap-server", broker.bootstrap]
    created = tool("moldau-topics", *bs, "--create", "--topic", topic, "--partitions", "2",
                   "--replication-factor", "1")
    assert (created.returncode, created.stdout) == (0, f"Created topic {topic}.\n"), created.stderr
    again = tool("moldau-topics", *bs, "--create", "--topic", topic, "--partitions", "2")
    assert again.returncode == 1 and "already exists" in again.stderr and again.stderr.count("\n") == 1
    assert tool("moldau-topics", *bs, "--create", "--topic", topic, "--if-not-exists").returncode == 0
    listed = tool("moldau-topics", *bs, "--list")
    assert topic in listed.stdout.splitlines()
    described = tool("moldau-topics", *bs, "--describe", "--topic", topic)
    lines = described.stdout.splitlines()
    assert lines[0].startswith(f"Topic: {topic}\tTopicId: ") and "\tPartitionCount: 2\tReplicationFactor: 1\t" in lines[0]
    assert lines[1:] == [f"\tTopic: {topic}\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0" for p in (0, 1)]
    assert tool("moldau-topics", *bs, "--describe", "--under-replicated-partitions").stdout == ""
    assert tool("moldau-topics", *bs, "--delete", "--topic", topic).returncode == 0
    missing = tool("moldau-topics", *bs, "--delete", "--topic", topic)
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    assert tool("moldau-topics", *bs, "--delete", "--topic", topic, "--if-exists").returncode == 0


def test_console_producer_piped_keys_and_headers(broker: BrokerProcess, topic: str) -> None:
    lines = "h1:a\tk1:v1\nh2:b,h3:c\tk2:v2\n"
    run = tool("moldau-console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic,
               "--property", "parse.key=true", "--property", "key.separator=:", "--property", "parse.headers=true",
               "--compression-codec", "lz4", "--sync", stdin=lines)
    assert run.returncode == 0, run.stderr
    assert run.stdout == ""  # no prompt when stdin is not a terminal
    got = ck_consume(broker.bootstrap, topic, 2)
    assert [(m.key(), m.value(), m.headers()) for m in got] == [
        (b"k1", b"v1", [("h1", b"a")]), (b"k2", b"v2", [("h2", b"b"), ("h3", b"c")])]


def test_console_producer_bad_line_and_bad_property(broker: BrokerProcess, topic: str) -> None:
    run = tool("moldau-console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic,
               "--property", "parse.key=true", stdin="no separator here\n")
    assert run.returncode == 1 and "No key separator found on line number 1" in run.stderr
    assert "Traceback" not in run.stderr
    bad = tool("moldau-console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic,
               "--producer-property", "linger.ms=soon", stdin="")
    assert bad.returncode == 1 and bad.stderr.strip() == "moldau-console-producer: error: linger.ms: expected an integer, got 'soon'"


def test_seed_walkthrough_piped(broker: BrokerProcess, topic: str) -> None:
    """Seeds' ch 2.4 with piped input: key:value lines; on two partitions key1 -> 0 and key2 -> 1."""
    bs = ["--bootstrap-server", broker.bootstrap]
    first, second = f"{topic}-first", f"{topic}-second"
    assert tool("moldau-topics", *bs, "--create", "--topic", first).returncode == 0
    props = ["--property", "parse.key=true", "--property", "key.separator=:"]
    text = "key:my first message\nkey:my second message\nkey:my third message\n"
    assert tool("moldau-console-producer", *bs, "--topic", first, *props, stdin=text).returncode == 0
    consumed = tool("moldau-console-consumer", *bs, "--topic", first, "--from-beginning", "--property",
                    "print.key=true", "--property", "key.separator=-", "--max-messages", "3")
    assert consumed.stdout.splitlines() == ["key-my first message", "key-my second message", "key-my third message"]
    assert "Processed a total of 3 messages" in consumed.stderr

    assert tool("moldau-topics", *bs, "--create", "--topic", second, "--partitions", "2").returncode == 0
    text = "".join(f"{k}:{k} message {i}\n" for i in range(3) for k in ("key1", "key2"))
    assert tool("moldau-console-producer", *bs, "--topic", second, *props, stdin=text).returncode == 0
    for partition, key in ((0, "key1"), (1, "key2")):
        out = tool("moldau-console-consumer", *bs, "--topic", second, "--partition", str(partition),
                   "--from-beginning", "--property", "print.key=true", "--max-messages", "3")
        assert out.stdout.splitlines() == [f"{key}\t{key} message {i}" for i in range(3)], out.stderr


def test_producer_perf_test_summary(broker: BrokerProcess, topic: str) -> None:
    run = tool("moldau-producer-perf-test", "--topic", topic, "--num-records", "2000", "--record-size", "100",
               "--throughput", "-1", "--producer-props", f"bootstrap.servers={broker.bootstrap}", "acks=1")
    assert run.returncode == 0, run.stderr
    last = run.stdout.splitlines()[-1]
    assert last.startswith("2000 records sent, ") and last.endswith(" ms 99.9th."), last
    assert len(ck_consume(broker.bootstrap, topic, 2000)) == 2000
