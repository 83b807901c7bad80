"""moldau-configs: Kafka's kafka-configs flags and output lines."""

from __future__ import annotations

import pytest

from moldau.admin_configs import ConfigEntry, ConfigSynonym
from moldau.tools.common import ToolError
from moldau.tools.configs import describe_lines, parse_args, split_add_config

BS = ["--bootstrap-server", "127.0.0.1:9092"]


def test_add_config_splits_on_commas_outside_brackets() -> None:
    assert split_add_config("retention.ms=1000,cleanup.policy=[compact,delete],x=a=b") == {
        "retention.ms": "1000", "cleanup.policy": "compact,delete", "x": "a=b"}
    with pytest.raises(ToolError, match="expected key=value"):
        split_add_config("retention.ms")


def test_alter_flags() -> None:
    args = parse_args(BS + ["--entity-type", "topics", "--entity-name", "t", "--alter", "--add-config",
                            "retention.ms=5", "--delete-config", "segment.bytes,flush.ms"])
    assert (args.entity_type, args.entity_name, args.add, args.delete) == (
        "topics", "t", {"retention.ms": "5"}, ["segment.bytes", "flush.ms"])
    default = parse_args(BS + ["--entity-type", "brokers", "--entity-default", "--alter", "--add-config", "a=1"])
    assert default.entity_default and default.entity_name is None
    short = parse_args(BS + ["--topic", "t", "--describe", "--all"])
    assert (short.entity_type, short.entity_name, short.all) == ("topics", "t", True)


@pytest.mark.parametrize("argv, message", [
    (["--entity-name", "t", "--describe"], "entity-type"),
    (["--entity-type", "topics", "--entity-name", "t"], "exactly one action"),
    (["--entity-type", "topics", "--entity-name", "t", "--alter"], "--add-config"),
    (["--entity-type", "topics", "--alter", "--add-config", "a=1"], "--entity-name or --entity-default"),
    (["--entity-type", "topics", "--entity-default", "--describe"], "not valid with --entity-type topics"),
    (["--entity-type", "brokers", "--entity-name", "x", "--describe"], "valid integer broker id"),
    (["--entity-type", "topics", "--entity-name", "t", "--describe", "--add-config", "a=1"], "only valid with"),
    (["--entity-type", "topics", "--entity-name", "t", "--alter", "--add-config", "a=1", "--delete-config", "a"],
     "same config"),
])
def test_bad_flags_name_the_problem(argv: list[str], message: str) -> None:
    with pytest.raises(ToolError, match=message):
        parse_args(BS + argv)


def test_unknown_entity_type_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(BS + ["--entity-type", "groups", "--describe"])
    assert exc.value.code == 2 and "entity-type" in capsys.readouterr().err


def test_describe_output_is_kafkas() -> None:
    entries = [
        ConfigEntry("segment.bytes", "1073741824", "DEFAULT_CONFIG",
                    synonyms=[ConfigSynonym("log.segment.bytes", "1073741824", "DEFAULT_CONFIG")]),
        ConfigEntry("retention.ms", "1000", "DYNAMIC_TOPIC_CONFIG",
                    synonyms=[ConfigSynonym("retention.ms", "1000", "DYNAMIC_TOPIC_CONFIG"),
                              ConfigSynonym("log.retention.hours", "168", "DEFAULT_CONFIG")]),
    ]
    assert describe_lines("topic", "t", entries, False) == [
        "Dynamic configs for topic t are:",
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, "
        "DEFAULT_CONFIG:log.retention.hours=168}"]
    assert describe_lines("topic", "t", entries, True)[0] == "All configs for topic t are:"
    assert len(describe_lines("topic", "t", entries, True)) == 3
    secret = [ConfigEntry("ssl.key.password", None, "DYNAMIC_BROKER_CONFIG", is_sensitive=True)]
    assert describe_lines("broker", "1", secret, False) == [
        "Dynamic configs for broker 1 are:", "  ssl.key.password=null sensitive=true synonyms={}"]
    assert describe_lines("default", "", [], False) == ["Default configs for brokers in the cluster are:"]
