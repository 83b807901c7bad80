"""moldau-verify's flags: defaults, and one clear error naming the flag for each bad combination (exit 1)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from moldau.broker.verify import cli
from moldau.tools.common import ToolError
from tests.integration.harness import closed_port


def parse(*argv: str) -> argparse.Namespace:
    args = cli.parser().parse_args(list(argv))
    cli.validate(args)
    return args


def test_command_config_is_read_into_the_client_settings(tmp_path: Path) -> None:
    props = tmp_path / "client.properties"
    props.write_text("# SASL\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism = PLAIN\n")
    args = parse("--bootstrap-server", "h:9092", "--command-config", str(props))
    assert args.client_config == {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}
    assert parse("--bootstrap-server", "h:9092").client_config == {}
    with pytest.raises(ToolError, match="missing.properties"):
        parse("--bootstrap-server", "h:9092", "--command-config", str(tmp_path / "missing.properties"))


def test_launch_defaults_follow_the_cluster_size() -> None:
    args = parse("--launch", "3", "--faults", "kill, pause")
    assert (args.replication_factor, args.min_insync_replicas) == (3, 2)
    assert args.faults == ["kill", "pause"]
    assert args.fault_duration == 5.0 and args.topic.startswith("moldau-verify-")
    single = parse("--launch", "1")
    assert (single.replication_factor, single.min_insync_replicas) == (1, 1)
    external = parse("--bootstrap-server", "h:9092", "--replication-factor", "2", "--topic", "t")
    assert (external.replication_factor, external.min_insync_replicas, external.topic) == (2, 1, "t")


@pytest.mark.parametrize(("argv", "flag"), [
    ([], "--bootstrap-server or --launch"),
    (["--bootstrap-server", "h:1", "--faults", "kill"], "--faults needs --launch"),
    (["--launch", "3", "--faults", "kill,meteor"], "unknown fault 'meteor'"),
    (["--launch", "0"], "--launch must be at least 1"),
    (["--launch", "3", "--rate", "0"], "--rate must be positive"),
    (["--launch", "3", "--partitions", "-1"], "--partitions must be positive"),
    (["--launch", "3", "--consumers", "-2"], "--consumers"),
    (["--launch", "3", "--min-insync-replicas", "4"], "--min-insync-replicas"),
    (["--launch", "3", "--fault-interval", "4", "--fault-duration", "4"], "--fault-duration"),
    (["--launch", "3", "--command-config", "c.properties"], "--command-config needs --bootstrap-server"),
    (["--recheck", "h.json"], "--recheck needs --bootstrap-server"),
    (["--launch", "1", "--producer-property", "linger.ms"], "expected KEY=VALUE"),
])
def test_bad_flags_name_the_problem(argv: list[str], flag: str) -> None:
    with pytest.raises(ToolError, match=flag.replace("(", r"\(")):
        parse(*argv)


def test_main_prints_one_error_line_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--bootstrap-server", "h:1", "--faults", "pause"]) == 2  # a usage error
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["moldau-verify: error: --faults needs --launch: faults are only injected into a cluster the tool launched"]


def test_argparse_errors_also_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--launch", "3", "--bootstrap-server", "h:1"])
    assert exit_info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_recheck_of_an_unreadable_history_names_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--recheck", "/nonexistent/h.json", "--bootstrap-server", "127.0.0.1:1"]) == 1
    assert capsys.readouterr().err.startswith("moldau-verify: error: --recheck: cannot read a history from /nonexistent/h.json")


def test_an_unreachable_cluster_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--bootstrap-server", f"127.0.0.1:{closed_port()}", "--duration", "1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("moldau-verify: error: ") and "Traceback" not in err
