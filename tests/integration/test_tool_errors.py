"""A topic that does not exist, for every tool that names one: one line ``<tool>: error: ...``, exit 1, and the
topic is still absent afterwards (no tool that only reads or administers creates it). The producers are driven
against a broker with ``auto.create.topics.enable=false`` (with it on they create the topic, as Kafka's do).
In-process; bad flags and unreachable brokers are in tests/unit/client/test_tool_error_style.py. Every console
script of pyproject.toml has a case here or a reason in NO_TOPIC (test_every_tool_is_covered)."""

from __future__ import annotations

import io
import re
import tomllib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from moldau import consumer_groups
from moldau.tools import (
    configs,
    console_consumer,
    console_producer,
    consumer_perf_test,
    delete_records,
    leader_election,
    producer_perf_test,
    reassign_partitions,
    topics,
    transactions,
)

from .clients import make_records
from .harness import REPO_ROOT, BrokerProcess
from .test_confluent import produce

pytestmark = pytest.mark.integration

# Tools with no unknown-topic case, and why.
NO_TOPIC = {
    "moldau-server": "it is the broker",
    "moldau-dump-log": "it reads segment files",
    "moldau-scram": "it manages users",
    "moldau-acls": "an ACL may name a topic that does not exist yet (as in Kafka)",
    "moldau-log-dirs": "--topic-list filters what the brokers hold (as Kafka's tool, no check)",
    "moldau-verify": "it creates its own topic",
}


def _commands(bs: str, name: str, tmp: Path) -> list[tuple[str, Callable[[Sequence[str]], int], list[str]]]:
    offsets = tmp / "offsets.json"
    offsets.write_text(f'{{"version": 1, "partitions": [{{"topic": "{name}", "partition": 0, "offset": 1}}]}}')
    plan = tmp / "plan.json"
    plan.write_text(f'{{"version": 1, "partitions": [{{"topic": "{name}", "partition": 0, "replicas": [1]}}]}}')
    b = ["--bootstrap-server", bs]
    return [
        ("moldau-topics", topics.main, [*b, "--describe", "--topic", name]),
        ("moldau-topics", topics.main, [*b, "--delete", "--topic", name]),
        ("moldau-configs", configs.main, [*b, "--entity-type", "topics", "--entity-name", name, "--describe"]),
        ("moldau-delete-records", delete_records.main, [*b, "--offset-json-file", str(offsets)]),
        ("moldau-reassign-partitions", reassign_partitions.main, [*b, "--execute", "--reassignment-json-file",
                                                                  str(plan)]),
        # read-only tools do not create the topic (Kafka's consumer would, through Metadata auto-creation)
        ("moldau-console-consumer", console_consumer.main, [*b, "--topic", name, "--timeout-ms", "1000"]),
        ("moldau-console-consumer", console_consumer.main, [*b, "--topic", name, "--group", "g"]),
        ("moldau-consumer-perf-test", consumer_perf_test.main, [*b, "--topic", name, "--messages", "1",
                                                                "--hide-header"]),
        ("moldau-consumer-groups", consumer_groups.main, [*b, "--reset-offsets", "--group", "g", "--topic", name,
                                                          "--to-earliest", "--execute"]),
        ("moldau-consumer-groups", consumer_groups.main, [*b, "--delete-offsets", "--group", "g", "--topic",
                                                          name]),
        ("moldau-transactions", transactions.main, [*b, "describe-producers", "--topic", name, "--partition", "0"]),
    ]


def _producer_commands(bs: str, name: str) -> list[tuple[str, Callable[[Sequence[str]], int], list[str]]]:
    """The producers, against a broker that does not auto-create: Kafka's max.block.ms, shortened."""
    return [
        ("moldau-console-producer", console_producer.main, ["--bootstrap-server", bs, "--topic", name,
                                                            "--producer-property", "max.block.ms=2000"]),
        ("moldau-producer-perf-test", producer_perf_test.main, [
            "--topic", name, "--num-records", "1", "--record-size", "10", "--throughput", "-1",
            "--producer-props", f"bootstrap.servers={bs}", "max.block.ms=2000"]),
    ]


@pytest.fixture(scope="module")
def no_auto_create(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("no-auto-create"))
    broker.overrides["auto.create.topics.enable"] = "false"
    try:
        yield broker.start()
    finally:
        broker.stop()


def test_every_tool_is_covered(tmp_path: Path) -> None:
    """A new console script in pyproject.toml fails here until it has an unknown-topic case or a reason."""
    with open(REPO_ROOT / "pyproject.toml", "rb") as f:
        scripts = set(tomllib.load(f)["project"]["scripts"])
    driven = {prog for prog, _, _ in [*_commands("h:1", "t", tmp_path), *_producer_commands("h:1", "t")]}
    assert driven | {"moldau-leader-election"} | set(NO_TOPIC) == scripts
    assert not driven & set(NO_TOPIC)


def test_producers_on_an_unknown_topic_say_so_in_one_line(no_auto_create: BrokerProcess, topic: str,
                                                         capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    for prog, main, argv in _producer_commands(no_auto_create.bootstrap, topic):
        monkeypatch.setattr("sys.stdin", io.StringIO("one line\n"))
        code = main(argv)
        out, err = capsys.readouterr()
        assert code == 1, (prog, out, err)
        assert re.fullmatch(rf"{prog}: error: [^\n]+\n", err) and topic in err, (prog, out, err)
        assert "UNKNOWN_TOPIC_OR_PARTITION" in err, err
        assert not re.search(r"\b[A-Z]\w+(Error|Exception)\b", err), err


def test_unknown_topic_is_one_line_and_stays_unknown(broker: BrokerProcess, topic: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    for prog, main, argv in _commands(broker.bootstrap, topic, tmp_path):
        code = main(argv)
        out, err = capsys.readouterr()
        assert code == 1, (prog, argv, out, err)
        assert re.fullmatch(rf"{prog}: error: [^\n]+\n", err) and topic in out + err, (prog, out, err)
        assert "Traceback" not in err and not re.search(r"\b[A-Z]\w+(Error|Exception)\b", err), err
    # leader election reports per partition on stdout (Kafka's format) and one line on stderr
    code = leader_election.main(["--bootstrap-server", broker.bootstrap, "--election-type", "preferred",
                                 "--topic", topic, "--partition", "0"])
    out, err = capsys.readouterr()
    assert code == 1 and f"{topic}-0: UNKNOWN_TOPIC_OR_PARTITION" in out
    assert re.fullmatch(r"moldau-leader-election: error: [^\n]+\n", err), err
    assert topics.main(["--bootstrap-server", broker.bootstrap, "--list"]) == 0
    assert topic not in capsys.readouterr().out.split()


def test_consumer_perf_detailed_stats_add_up(broker: BrokerProcess, topic: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Kafka's detailed rows (time, threadId, totals so far, interval rates) under their header, the last partial
    interval included, then the summary under its own header: every record counted."""
    produce(broker.bootstrap, topic, make_records(3000, tag="perf", with_nulls=False))
    assert consumer_perf_test.main(["--bootstrap-server", broker.bootstrap, "--topic", topic, "--messages", "3000",
                                    "--show-detailed-stats", "--reporting-interval", "1",
                                    "--timeout", "30000"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == consumer_perf_test.DETAILED_HEADER
    rows = [line.split(", ") for line in lines[1:-2]]
    width = len(consumer_perf_test.DETAILED_HEADER.split(", "))
    assert rows and all(len(r) == width and r[1] == "0" for r in rows), lines
    totals = [int(r[4]) for r in rows]
    assert totals == sorted(totals) and totals[-1] == 3000
    assert lines[-2] == consumer_perf_test.HEADER
    assert lines[-1].split(", ")[4] == "3000"
