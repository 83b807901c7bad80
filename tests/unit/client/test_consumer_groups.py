"""moldau-consumer-groups: --reset-offsets argument parsing and target computation (no broker)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from moldau.consumer_groups import (
    GroupDescription,
    UsageError,
    export_reset,
    main,
    parse_datetime_ms,
    parse_duration_ms,
    parse_topic_spec,
    read_reset_file,
    render_members,
    render_state,
    reset_target,
)
from moldau.fetcher import TopicPartition


def test_duration() -> None:
    assert parse_duration_ms("PT1S") == 1000
    assert parse_duration_ms("P1DT2H3M4.5S") == ((26 * 60 + 3) * 60 + 4.5) * 1000
    assert parse_duration_ms("PT10M") == 600_000
    for bad in ("P", "PT", "1H", "PT1X", "P1DT"):
        with pytest.raises(UsageError, match="--by-duration"):
            parse_duration_ms(bad)


def test_datetime() -> None:
    assert parse_datetime_ms("1970-01-01T00:00:01.500") == 1500
    assert parse_datetime_ms("1970-01-01T01:00:00+01:00") == 0
    with pytest.raises(UsageError, match="--to-datetime"):
        parse_datetime_ms("yesterday")


def test_topic_spec() -> None:
    assert parse_topic_spec("t") == ("t", None)
    assert parse_topic_spec("t:0,2") == ("t", [0, 2])
    with pytest.raises(UsageError, match="--topic"):
        parse_topic_spec("t:x")


def ns(**kw: object) -> argparse.Namespace:
    base = dict(to_earliest=False, to_latest=False, to_current=False, to_offset=None, shift_by=None,
                to_datetime=None, by_duration=None)
    base.update(kw)
    return argparse.Namespace(**base)


def test_targets_are_clamped_to_the_log() -> None:
    assert reset_target(ns(to_earliest=True), 7, 2, 10, None) == 2
    assert reset_target(ns(to_latest=True), 7, 2, 10, None) == 10
    assert reset_target(ns(to_offset=50), 7, 2, 10, None) == 10
    assert reset_target(ns(to_offset=0), 7, 2, 10, None) == 2
    assert reset_target(ns(shift_by=-3), 7, 2, 10, None) == 4
    assert reset_target(ns(shift_by=-30), 7, 2, 10, None) == 2
    assert reset_target(ns(shift_by=1), None, 2, 10, None) == 10
    assert reset_target(ns(to_current=True), 7, 2, 10, None) == 7
    assert reset_target(ns(to_datetime="x"), 7, 2, 10, 5) == 5
    assert reset_target(ns(by_duration="PT1S"), 7, 2, 10, -1) == 10


@pytest.mark.parametrize("args, flag", [
    (["--reset-offsets", "--group", "g", "--to-earliest"], "--all-topics"),
    (["--reset-offsets", "--group", "g", "--topic", "t"], "--to-earliest"),
    (["--reset-offsets", "--group", "g", "--topic", "t", "--by-duration", "soon"], "--by-duration"),
    (["--reset-offsets", "--topic", "t", "--to-latest"], "--group"),
    (["--describe"], "--group"),
    (["--describe", "--group", "g", "--members", "--state"], "--members and --state"),
    (["--list", "--members"], "--members can only be used with --describe"),
    (["--list", "--verbose"], "--verbose"),
    (["--describe", "--group", "g", "--all-groups"], "--all-groups"),
    (["--describe", "--group", "g", "--to-earliest"], "--to-earliest can only be used with --reset-offsets"),
    (["--describe", "--group", "g", "--topic", "t"], "--topic"),
    (["--delete-offsets", "--group", "g"], "--topic"),
    (["--list", "--state", "Running"], "Running"),
    (["--describe", "--group", "g", "--state", "Stable"], "--state"),
    (["--reset-offsets", "--all-groups", "--all-topics", "--to-earliest", "--execute", "--export"], "--export"),
    (["--reset-offsets", "--group", "g", "--topic", "t", "--to-latest", "--from-file", "f"], "--from-file"),
])
def test_bad_flags_exit_2_with_one_line(args: list[str], flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--bootstrap-server", "127.0.0.1:1", *args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert flag in err and len(err.splitlines()) == 1


def test_reset_file_reads_kafkas_csv_of_one_or_several_groups(tmp_path: Path) -> None:
    plan = {"g": [("t", 0, 5), ("t", 1, 7)], "h": [("u", 0, 1)]}
    (tmp_path / "one.csv").write_text(export_reset({"g": plan["g"]}) + "\n")
    (tmp_path / "many.csv").write_text(export_reset(plan) + "\n\n")
    assert (tmp_path / "one.csv").read_text() == "t,0,5\nt,1,7\n"
    assert read_reset_file(str(tmp_path / "one.csv"), "g") == {TopicPartition("t", 0): 5, TopicPartition("t", 1): 7}
    assert read_reset_file(str(tmp_path / "many.csv"), "h") == {TopicPartition("u", 0): 1}
    (tmp_path / "bad.csv").write_text("t,0,5\nt,zero,5\n")
    with pytest.raises(UsageError, match="line 2"):
        read_reset_file(str(tmp_path / "bad.csv"), "g")
    with pytest.raises(UsageError, match="cannot read"):
        read_reset_file(str(tmp_path / "missing.csv"), "g")


def test_members_and_state_views_use_kafkas_columns() -> None:
    desc = GroupDescription("g", "Stable", "range", [
        {"consumer_id": "c-1", "group_instance_id": None, "host": "/127.0.0.1", "client_id": "app",
         "partitions": ["t-0", "t-2", "other-topic-1"]}], [], "127.0.0.1:9092 (0)")
    plain = render_members(desc, verbose=False).splitlines()
    assert plain[0].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    assert plain[1].split() == ["g", "c-1", "/127.0.0.1", "app", "3"]
    verbose = render_members(desc, verbose=True).splitlines()
    assert verbose[0].split() == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                                  "ASSIGNMENT"]
    assert verbose[1].split() == ["g", "c-1", "-", "/127.0.0.1", "app", "3", "other-topic(1),t(0,2)"]
    state = render_state(desc).splitlines()
    assert [c.strip() for c in state[0].split("  ") if c.strip()] == ["GROUP", "COORDINATOR (ID)",
                                                                     "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    assert state[1].split() == ["g", "127.0.0.1:9092", "(0)", "range", "Stable", "1"]
    empty = GroupDescription("g", "Empty", "", [], [])
    assert render_members(empty, verbose=True) == "Consumer group 'g' has no active members."
