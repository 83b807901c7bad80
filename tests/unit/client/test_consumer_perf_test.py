"""moldau-consumer-perf-test: flags and Kafka's summary line (no broker)."""

from __future__ import annotations

import pytest

from moldau.tools.consumer_perf_test import UsageError, detailed_line, main, parse_args, stats_line

BS = ["--bootstrap-server", "127.0.0.1:9092", "--topic", "t"]


def test_flags() -> None:
    a = parse_args(BS + ["--messages", "100", "--timeout", "500", "--consumer-property", "fetch.min.bytes=5"])
    assert (a.messages, a.timeout, a.props) == (100, 500, {"fetch.min.bytes": "5"})


@pytest.mark.parametrize("args, flag", [
    (BS, "--messages"),
    (BS + ["--messages", "x"], "--messages"),
    (BS + ["--messages", "0"], "--messages"),
    (BS + ["--messages", "1", "--timeout", "-1"], "--timeout"),
    (BS + ["--messages", "1", "--consumer-property", "nope=1"], "--consumer-property"),
    (["--topic", "t", "--messages", "1"], "--bootstrap-server"),
])
def test_bad_flags(args: list[str], flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UsageError, match=flag):
        parse_args(args)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert flag in err and len(err.strip().splitlines()) == 1


def test_stats_line() -> None:
    line = stats_line(1000.0, 1010.0, 10 * 1024 * 1024, 100000, joined=1002.0)
    fields = [f.strip() for f in line.split(",")]
    assert fields[2:] == ["10.0000", "1.0000", "100000", "10000.0000", "2000", "8000", "1.2500", "12500.0000"]


def test_detailed_line_is_kafkas_progress_row() -> None:
    # 2 s interval, 0.5 s of it rebalancing; 4 MB and 20000 records so far, 2 MB and 10000 of them in the interval
    mb = 1024 * 1024
    line = detailed_line(1000.0, 1002.0, 4 * mb, 2 * mb, 20000, 10000, rebalance=0.5)
    fields = [f.strip() for f in line.split(",")]
    assert fields[1:] == ["0", "4.0000", "1.0000", "20000", "5000.0000", "500", "1500", "1.3333", "6666.6667"]
