"""moldau-console-consumer: flag parsing, errors naming the flag, and Kafka's DefaultMessageFormatter output."""

from __future__ import annotations

import pytest

from moldau.fetcher import ConsumerRecord
from moldau.tools.console_consumer import UsageError, format_record, main, parse_args

BS = ["--bootstrap-server", "127.0.0.1:9092"]


def rec(key: bytes | None = b"k", value: bytes | None = b"v", headers: list | None = None,
        ts_type: int = 0) -> ConsumerRecord:
    return ConsumerRecord("t", 1, 42, 1700000000000, ts_type, key, value, headers or [])


def test_defaults_and_from_beginning() -> None:
    opts = parse_args(BS + ["--topic", "t"])
    assert (opts.topic, opts.offset, opts.group, opts.max_messages) == ("t", "latest", None, None)
    assert parse_args(BS + ["--topic", "t", "--from-beginning"]).offset == "earliest"


def test_isolation_level_sets_the_consumer_setting() -> None:
    assert "isolation.level" not in parse_args(BS + ["--topic", "t"]).consumer
    opts = parse_args(BS + ["--topic", "t", "--isolation-level", "read_committed"])
    assert opts.consumer["isolation.level"] == "read_committed"


def test_partition_offset_group_and_limits() -> None:
    opts = parse_args(BS + ["--topic", "t", "--partition", "2", "--offset", "17", "--max-messages", "5",
                            "--timeout-ms", "1000"])
    assert (opts.partition, opts.offset, opts.max_messages, opts.timeout_ms) == (2, 17, 5, 1000)
    assert parse_args(BS + ["--topic", "t", "--partition", "0", "--offset", "earliest"]).offset == "earliest"
    opts = parse_args(BS + ["--include", "a.*", "--group", "g"])
    assert opts.include is not None and opts.include.pattern == "a.*" and opts.group == "g"


def test_properties_and_consumer_properties() -> None:
    opts = parse_args(BS + ["--topic", "t", "--property", "print.key=true", "--property", "key.separator=:",
                            "--property", "line.separator=\\r\\n", "--consumer-property", "fetch.min.bytes=10"])
    assert opts.formatter["print.key"] is True and opts.formatter["key.separator"] == ":"
    assert opts.formatter["line.separator"] == "\r\n"
    assert opts.consumer == {"fetch.min.bytes": "10"}


@pytest.mark.parametrize("args, flag", [
    ([], "--bootstrap-server"),
    (BS, "--topic"),
    (BS + ["--topic", "t", "--include", "x"], "--topic"),
    (BS + ["--topic", "t", "--offset", "5"], "--offset"),
    (BS + ["--topic", "t", "--partition", "x"], "--partition"),
    (BS + ["--topic", "t", "--partition", "0", "--offset", "-3"], "--offset"),
    (BS + ["--topic", "t", "--partition", "0", "--offset", "3", "--from-beginning"], "--from-beginning"),
    (BS + ["--topic", "t", "--partition", "0", "--group", "g"], "--group"),
    (BS + ["--topic", "t", "--max-messages", "0"], "--max-messages"),
    (BS + ["--topic", "t", "--timeout-ms", "soon"], "--timeout-ms"),
    (BS + ["--topic", "t", "--property", "print.key=maybe"], "print.key"),
    (BS + ["--topic", "t", "--property", "print.colour=true"], "print.colour"),
    (BS + ["--topic", "t", "--property", "novalue"], "--property"),
    (BS + ["--topic", "t", "--consumer-property", "no.such.key=1"], "no.such.key"),
    (BS + ["--include", "(", "--group", "g"], "--include"),
    (BS + ["--topic", "t", "--bogus"], "--bogus"),
    (BS + ["--topic", "t", "--isolation-level", "committed"], "--isolation-level"),
])
def test_bad_input_names_the_flag(args: list[str], flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises((UsageError, SystemExit)) as err:  # argparse's own errors exit 2 at once
        parse_args(args)
    assert flag in (capsys.readouterr().err if err.type is SystemExit else str(err.value))


def test_main_reports_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(BS + ["--topic", "t", "--consumer-property", "fetch.min.bytes=lots"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "fetch.min.bytes" in err and "Traceback" not in err
    assert main(["--bootstrap-server", "nohostport", "--topic", "t"]) == 2
    assert "--bootstrap-server" in capsys.readouterr().err


def props(**kw: object) -> dict[str, object]:
    opts = parse_args(BS + ["--topic", "t"] + [a for k, v in kw.items()
                                                for a in ("--property", f"{k.replace('_', '.')}={v}")])
    return opts.formatter


def test_value_only_by_default() -> None:
    assert format_record(rec(), props()) == b"v\n"


def test_key_and_separator() -> None:
    assert format_record(rec(), props(print_key="true", key_separator="-")) == b"k-v\n"
    assert format_record(rec(key=None), props(print_key="true")) == b"null\tv\n"
    assert format_record(rec(value=None), props()) == b"null\n"


def test_all_fields_in_kafkas_order() -> None:
    p = props(print_timestamp="true", print_partition="true", print_offset="true", print_headers="true",
              print_key="true")
    line = format_record(rec(headers=[("h1", b"a"), ("h2", None)]), p)
    assert line == b"CreateTime:1700000000000\tPartition:1\tOffset:42\th1:a,h2:null\tk\tv\n"
    assert format_record(rec(ts_type=1), p).startswith(b"LogAppendTime:1700000000000\t")
    assert b"\tNO_HEADERS\t" in format_record(rec(), p)


def test_value_can_be_hidden() -> None:
    assert format_record(rec(), props(print_key="true", print_value="false")) == b"k\n"
