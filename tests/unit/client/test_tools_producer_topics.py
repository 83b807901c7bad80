"""Flag parsing and output formats of moldau-console-producer and moldau-topics (no broker needed)."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest

from moldau.cluster import PartitionInfo
from moldau.tools import common, console_producer, topics
from moldau.tools.common import ToolError


def test_line_reader_seed_walkthrough_key_separator() -> None:
    _, _, reader = console_producer.parse_args(
        ["--bootstrap-server", "h:9092", "--topic", "t", "--property", "parse.key=true",
         "--property", "key.separator=:"])
    assert reader.parse("key:my first message", 1) == (b"key", b"my first message", [])
    assert reader.parse("key:a:b", 2) == (b"key", b"a:b", [])  # the first separator splits
    with pytest.raises(ToolError, match="No key separator found on line number 3: 'nokey'"):
        reader.parse("nokey", 3)


def test_line_reader_headers_null_marker_and_ignore_error() -> None:
    reader = console_producer.LineReader.from_properties({
        "parse.headers": "true", "parse.key": "true", "null.marker": "NULL", "ignore.error": "true"})
    assert reader.parse("h1:v1,h2\tk\tv", 1) == (b"k", b"v", [("h1", b"v1"), ("h2", None)])
    assert reader.parse("h1:NULL\tNULL\tNULL", 2) == (None, None, [("h1", None)])
    assert reader.parse("plain", 3) == (None, b"plain", [])  # ignore.error: the whole line is the value


def test_unknown_reader_property_is_named() -> None:
    with pytest.raises(ToolError, match="'parse.kye'"):
        console_producer.LineReader.from_properties({"parse.kye": "true"})


def test_producer_settings_precedence(tmp_path: pytest.TempPathFactory) -> None:
    cfg = tmp_path / "p.properties"  # type: ignore[operator]
    cfg.write_text("# comment\nlinger.ms=7\nbatch.size: 1000\n")
    args, conf, _ = console_producer.parse_args(
        ["--broker-list", "h:1", "--topic", "t", "--producer.config", str(cfg), "--compression-codec",
         "--request-required-acks", "1", "--producer-property", "linger.ms=9"])
    assert conf["bootstrap.servers"] == "h:1"
    assert conf["compression.type"] == "gzip" and conf["acks"] == "1"
    assert conf["linger.ms"] == "9" and conf["batch.size"] == "1000"
    assert conf["enable.idempotence"] == "false"
    assert not args.sync


@pytest.mark.parametrize(("argv", "message"), [
    (["--topic", "t"], "bootstrap-server"),
    (["--bootstrap-server", "h:1"], "topic"),
    (["--bootstrap-server", "h:1", "--topic", "t", "--producer-property", "oops"], "--producer-property"),
])
def test_console_producer_bad_flags(argv: list[str], message: str) -> None:
    with pytest.raises(ToolError, match=message):
        console_producer.parse_args(argv)


def test_bad_flag_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        console_producer.main(["--bootstrap-server", "h:1", "--topic", "t", "--nope"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--nope" in err and "Traceback" not in err
    assert topics.main(["--bootstrap-server", "h:1", "--list", "--create"]) == 2
    assert "exactly one action" in capsys.readouterr().err


def test_produce_lines_prompts_and_sends() -> None:
    sent: list[tuple[object, ...]] = []

    class FakeSink:  # stands in for the network side only: the reader logic is what is tested
        def send(self, topic: str, value: bytes, key: bytes, headers: object, on_delivery: object) -> object:
            sent.append((topic, key, value, headers))
            return SimpleNamespace(result=lambda: None)

    reader = console_producer.LineReader(parse_key=True, key_separator=":")
    prompt = io.StringIO()
    count = console_producer.produce_lines(FakeSink(), "t", reader, io.StringIO("a:1\nb:2\n"), prompt, sync=True)
    assert count == 2 and prompt.getvalue() == ">>>"
    assert sent == [("t", b"a", b"1", None), ("t", b"b", b"2", None)]


def test_topics_flags() -> None:
    args = topics.parse_args(["--bootstrap-server", "h:1", "--create", "--topic", "t", "--partitions", "2",
                              "--replication-factor", "1", "--config", "retention.ms=1000", "--if-not-exists"])
    assert (args.action, args.partitions, args.replication_factor) == ("create", 2, 1)
    assert args.configs == {"retention.ms": "1000"}
    args = topics.parse_args(["--bootstrap-server", "h:1", "--create", "--topic", "t",
                              "--replica-assignment", "0:1,1:2"])
    assert args.assignment == {0: [0, 1], 1: [1, 2]}
    for bad, text in ((["--create"], "topic"), (["--delete", "--topic", "t", "--if-not-exists"], "--if-not-exists"),
                      (["--create", "--topic", "t", "--replica-assignment", "0:0"], "same broker|twice"),
                      (["--create", "--topic", "t", "--replica-assignment", "0,1:2"], "same number")):
        with pytest.raises(ToolError, match=text):
            topics.parse_args(["--bootstrap-server", "h:1", *bad])
    with pytest.raises(SystemExit):
        topics.parse_args(["--bootstrap-server", "h:1", "--create", "--topic", "t", "--partitions", "0"])


def test_describe_lines_in_kafka_format() -> None:
    parts = [PartitionInfo(0, 1, 0, [1, 2, 3], [1, 2, 3], [], 0), PartitionInfo(1, -1, 0, [2, 3, 1], [2], [3], 0)]
    desc = SimpleNamespace(name="t", partitions=parts)
    lines = topics.describe_lines(desc, bytes(16))
    assert lines == [
        "Topic: t\tTopicId: AAAAAAAAAAAAAAAAAAAAAA\tPartitionCount: 2\tReplicationFactor: 3\tConfigs: ",
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3",
        "\tTopic: t\tPartition: 1\tLeader: none\tReplicas: 2,3,1\tIsr: 2\tOffline: 3",
    ]
    assert topics.describe_lines(desc, None, under_replicated=True) == lines[2:]
    assert topics.describe_lines(desc, None, unavailable=True) == lines[2:]


def test_properties_file_and_key_values(tmp_path: pytest.TempPathFactory) -> None:
    f = tmp_path / "c.properties"  # type: ignore[operator]
    f.write_text("! c\na=b=c\n\nbad line\n")
    with pytest.raises(ToolError, match="line 4"):
        common.read_properties_file(str(f), "--producer.config")
    assert common.parse_key_values(["a=b=c"], "--config") == {"a": "b=c"}
    with pytest.raises(ToolError, match="cannot read"):
        common.read_properties_file(str(tmp_path) + "/missing", "--producer.config")  # type: ignore[operator]


def test_unreachable_bootstrap_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert topics.main(["--bootstrap-server", "127.0.0.1:1", "--list"]) == 1  # nothing listens on port 1
    err = capsys.readouterr().err
    assert err.startswith("moldau-topics: error: no broker reachable: 127.0.0.1:1") and err.count("\n") == 1
