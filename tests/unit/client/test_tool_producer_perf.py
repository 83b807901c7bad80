"""moldau-producer-perf-test: flags and Kafka's progress/summary line formats."""

from __future__ import annotations

import re

import pytest

from moldau.tools import producer_perf_test as perf
from moldau.tools.common import ToolError


def test_flags() -> None:
    args, conf, payload = perf.parse_args(["--topic", "t", "--num-records", "10", "--record-size", "7",
                                           "--throughput", "-1", "--producer-props", "bootstrap.servers=h:1",
                                           "acks=1"])
    assert (args.topic, args.num_records, args.throughput) == ("t", 10, -1)
    assert conf == {"bootstrap.servers": "h:1", "acks": "1"}
    assert isinstance(payload, bytes) and len(payload) == 7


BASE = ["--topic", "t", "--num-records", "1", "--record-size", "1", "--throughput", "-1", "--producer-props",
        "bootstrap.servers=h:1"]


def test_transaction_flags_follow_kafka() -> None:
    args, conf, _ = perf.parse_args(BASE)
    assert args.transaction_duration_ms is None and "transactional.id" not in conf
    args, conf, _ = perf.parse_args([*BASE, "--transaction-duration-ms", "500"])
    assert (args.transaction_duration_ms, conf["transactional.id"]) == (500, perf.DEFAULT_TRANSACTIONAL_ID)
    args, conf, _ = perf.parse_args([*BASE, "transactional.id=from-props"])  # a transactional id alone: 3000 ms
    assert (args.transaction_duration_ms, conf["transactional.id"]) == (3000, "from-props")
    args, conf, _ = perf.parse_args([*BASE, "transactional.id=from-props", "--transactional-id", "flag"])
    assert conf["transactional.id"] == "flag"
    with pytest.raises(ToolError, match="--transaction-duration-ms"):
        perf.parse_args([*BASE, "--transaction-duration-ms", "0"])


@pytest.mark.parametrize(("argv", "text"), [
    (["--num-records", "1", "--record-size", "1", "--throughput", "-1"], "topic"),
    (["--topic", "t", "--num-records", "1", "--record-size", "1", "--throughput", "-1"], "bootstrap.servers"),
    (["--topic", "t", "--num-records", "1", "--throughput", "-1", "--producer-props", "bootstrap.servers=h:1"],
     "--record-size"),
    (["--topic", "t", "--num-records", "1", "--record-size", "1", "--throughput", "-1", "--producer-props",
      "nokv"], "--producer-props"),
])
def test_bad_flags(argv: list[str], text: str) -> None:
    with pytest.raises(ToolError, match=text):
        perf.parse_args(argv)


def test_output_formats() -> None:
    stats = perf.Stats(start=0.0, window_start=0.0)
    for ms in range(1, 1001):
        stats.record(float(ms), 100)
    line = stats.window_line(2.0)
    assert line == ("1000 records sent, 500.0 records/sec (0.05 MB/sec), 500.5 ms avg latency, 1000.0 ms max "
                    "latency.")
    summary = stats.summary(4.0)
    assert re.fullmatch(r"1000 records sent, 250\.0+ records/sec \(0\.02 MB/sec\), 500\.50 ms avg latency, "
                        r"1000\.00 ms max latency, 501 ms 50th, 951 ms 95th, 991 ms 99th, 1000 ms 99\.9th\.",
                        summary), summary
