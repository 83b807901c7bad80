"""moldau-consumer-groups: --reset-offsets argument parsing and target computation (no broker)."""

from __future__ import annotations

import argparse

import pytest

from moldau.consumer_groups import (
    UsageError,
    main,
    parse_datetime_ms,
    parse_duration_ms,
    parse_topic_spec,
    reset_target,
)


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
])
def test_bad_flags_exit_2_with_one_line(args: list[str], flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--bootstrap-server", "127.0.0.1:1", *args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert flag in err and len(err.splitlines()) == 1
