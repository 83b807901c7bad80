"""Every console tool speaks one language (tools/common.py): a bad flag is one line ``<tool>: error: ...`` naming
the flag, exit 2; an unreachable broker one line, exit 1; never a class name or a traceback unless ``--verbose``;
``--version`` everywhere. In-process, against a closed port (nothing listens on 127.0.0.1:1): no broker needed.
The unknown-topic case needs a broker: tests/integration/test_tool_errors.py."""

from __future__ import annotations

import io
import re
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from moldau import consumer_groups
from moldau.broker import __main__ as server
from moldau.broker.security import scram_tool
from moldau.broker.verify import cli as verify
from moldau.tools import (
    acls,
    configs,
    console_consumer,
    console_producer,
    consumer_perf_test,
    delete_records,
    dump_log,
    leader_election,
    log_dirs,
    producer_perf_test,
    reassign_partitions,
    topics,
    transactions,
)
from moldau.tools.common import tool_version

B = "127.0.0.1:1"
Main = Callable[[Sequence[str]], int]

# prog -> its main; every entry point of pyproject.toml (test_every_entry_point_is_covered checks the list)
TOOLS: dict[str, Main] = {
    "moldau-server": server.main,  # type: ignore[dict-item]
    "moldau-consumer-groups": consumer_groups.main,
    "moldau-console-producer": console_producer.main,
    "moldau-console-consumer": console_consumer.main,
    "moldau-topics": topics.main,
    "moldau-producer-perf-test": producer_perf_test.main,
    "moldau-consumer-perf-test": consumer_perf_test.main,
    "moldau-dump-log": dump_log.main,
    "moldau-verify": verify.main,  # type: ignore[dict-item]
    "moldau-configs": configs.main,
    "moldau-leader-election": leader_election.main,
    "moldau-delete-records": delete_records.main,
    "moldau-log-dirs": log_dirs.main,
    "moldau-reassign-partitions": reassign_partitions.main,
    "moldau-scram": scram_tool.main,
    "moldau-acls": acls.main,
    "moldau-transactions": transactions.main,
}


def unreachable_args(tmp: Path) -> dict[str, list[str]]:
    """For each tool talking to brokers: a command that needs one, pointed at a closed port."""
    offsets = tmp / "offsets.json"
    offsets.write_text('{"version": 1, "partitions": [{"topic": "t", "partition": 0, "offset": 1}]}')
    plan = tmp / "plan.json"
    plan.write_text('{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]}]}')
    return {
        "moldau-consumer-groups": ["--bootstrap-server", B, "--list", "--timeout-ms", "3000"],
        "moldau-console-producer": ["--bootstrap-server", B, "--topic", "t"],
        "moldau-console-consumer": ["--bootstrap-server", B, "--topic", "t", "--timeout-ms", "1000"],
        "moldau-topics": ["--bootstrap-server", B, "--list"],
        "moldau-producer-perf-test": ["--topic", "t", "--num-records", "1", "--record-size", "1", "--throughput",
                                      "-1", "--producer-props", f"bootstrap.servers={B}"],
        "moldau-consumer-perf-test": ["--bootstrap-server", B, "--topic", "t", "--messages", "1"],
        "moldau-configs": ["--bootstrap-server", B, "--entity-type", "topics", "--entity-name", "t", "--describe"],
        "moldau-leader-election": ["--bootstrap-server", B, "--election-type", "preferred",
                                   "--all-topic-partitions"],
        "moldau-delete-records": ["--bootstrap-server", B, "--offset-json-file", str(offsets)],
        "moldau-log-dirs": ["--bootstrap-server", B, "--describe"],
        "moldau-reassign-partitions": ["--bootstrap-server", B, "--verify", "--reassignment-json-file", str(plan)],
        "moldau-acls": ["--bootstrap-server", B, "--list"],
        "moldau-transactions": ["--bootstrap-server", B, "list"],
        "moldau-verify": ["--bootstrap-server", B, "--duration", "1"],
        "moldau-scram": ["--zookeeper", B, "--describe"],  # its server is ZooKeeper
    }


# Tools that talk to no server, and why (every other tool has a command in unreachable_args).
NO_SERVER = {
    "moldau-server": "it is the broker",
    "moldau-dump-log": "it reads segment files",
}


def entry_points() -> set[str]:
    """The console scripts of pyproject.toml's [project.scripts]."""
    with open(Path(__file__).resolve().parents[3] / "pyproject.toml", "rb") as f:
        return set(tomllib.load(f)["project"]["scripts"])


def run(main: Main, argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line(prog: str, err: str) -> None:
    assert re.fullmatch(rf"{prog}: error: [^\n]+\n", err), repr(err)
    assert "Traceback" not in err and not re.search(r"\b[A-Z]\w+(Error|Exception)\b", err), err


def test_every_entry_point_is_covered() -> None:
    """A new tool in pyproject.toml fails here until it has a bad-flag, --version and --help case (TOOLS) and an
    unreachable-server case or a reason for having none; tests/integration/test_tool_errors.py does the same
    for the unknown topic."""
    names = entry_points()
    assert names == set(TOOLS)
    assert names == set(unreachable_args(Path("/tmp"))) | set(NO_SERVER)
    assert not set(unreachable_args(Path("/tmp"))) & set(NO_SERVER)


@pytest.mark.parametrize("prog", sorted(TOOLS))
def test_bad_flag_is_one_line_naming_it_exit_2(prog: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    valid = {**unreachable_args(tmp_path), "moldau-scram": ["--log-dir", str(tmp_path), "--describe"]}
    code, _, err = run(TOOLS[prog], [*valid.get(prog, []), "--no-such-flag"], capsys)
    assert code == 2
    assert_one_line(prog, err)
    assert "--no-such-flag" in err


@pytest.mark.parametrize("prog", sorted(TOOLS))
def test_version(prog: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(TOOLS[prog], ["--version"], capsys)
    assert code == 0 and out == f"{prog} {tool_version()}\n"


@pytest.mark.parametrize("prog", sorted(unreachable_args(Path("/tmp"))))
def test_unreachable_broker_is_one_line_exit_1(prog: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("a line\n"))
    monkeypatch.setattr(scram_tool, "ZK_CONNECTION_TIMEOUT_MS", 1000)  # the tool's 10 s, shortened
    code, _, err = run(TOOLS[prog], unreachable_args(tmp_path)[prog], capsys)
    assert code == 1
    assert_one_line(prog, err)
    assert B in err or "reach" in err or "connect" in err, err
    assert "Connection dropped" not in err  # kazoo's own log lines (moldau-scram --zookeeper)


def test_files_and_stores_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for prog, argv in (("moldau-dump-log", ["--files", str(tmp_path / "none.log")]),
                       ("moldau-server", [str(tmp_path / "none.properties")]),
                       ("moldau-scram", ["--log-dir", str(tmp_path), "--alter", "--entity-name", "u",
                                         "--delete-config", "SCRAM-SHA-1"])):
        code, _, err = run(TOOLS[prog], argv, capsys)
        assert code in (1, 2), (prog, err)
        assert_one_line(prog, err)


def test_verbose_prints_the_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(topics.main, ["--bootstrap-server", B, "--list", "--verbose"], capsys)
    assert code == 1 and "Traceback" in err and err.splitlines()[-1].startswith("moldau-topics: error: ")


def test_command_config_on_every_client_tool(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--command-config FILE (Kafka's KIP-1147 name) reaches every tool that connects as a client."""
    missing = str(tmp_path / "missing.properties")
    for prog, argv in unreachable_args(tmp_path).items():
        if prog == "moldau-scram":
            continue  # it talks to ZooKeeper (or a log dir), not as a Kafka client
        code, _, err = run(TOOLS[prog], [*argv, "--command-config", missing], capsys)
        assert code in (1, 2) and "missing.properties" in err, (prog, err)
        assert_one_line(prog, err)


@pytest.mark.parametrize("prog", sorted(TOOLS))
def test_help_is_plain_text(prog: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(TOOLS[prog], ["--help"], capsys)
    assert code == 0 and out.startswith("usage: ") and "``" not in out and ":class:" not in out
