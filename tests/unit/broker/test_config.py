from __future__ import annotations

import logging
import runpy
import sys
import warnings
from pathlib import Path

import pytest

from moldau.broker import config as config_mod
from moldau.broker.config import (
    BROKER_SETTINGS,
    INERT_TOPIC_SETTINGS,
    LONG_MAX,
    SETTINGS,
    SOURCE_DEFAULT,
    SOURCE_STATIC_BROKER,
    SOURCE_TOPIC,
    TOPIC_SETTINGS,
    BrokerConfig,
    ConfigError,
    Endpoint,
    Password,
    load_properties,
    parse_properties,
    render_markdown,
    validate_topic_configs,
)

REPO = Path(__file__).resolve().parents[3]


def cfg(**props: str) -> BrokerConfig:
    return BrokerConfig({k.replace("_", "."): v for k, v in props.items()})


def make(props: dict[str, str]) -> BrokerConfig:
    return BrokerConfig(props)


# --- properties parser


def test_properties_separators_and_comments() -> None:
    text = (
        "# a comment\n"
        "! another comment\n"
        "\n"
        "   \t\n"
        "a=1\n"
        "b: 2\n"
        "c 3\n"
        "d = spaced value  \n"
        "  e\t=\tx\n"
        "f\n"
        "g=\n"
        "h:=weird\n"
        "i  :  colon\n"
        "j=a=b:c\n"
    )
    assert parse_properties(text) == {
        "a": "1", "b": "2", "c": "3", "d": "spaced value  ", "e": "x", "f": "", "g": "", "h": "=weird",
        "i": "colon", "j": "a=b:c",
    }


def test_properties_continuations() -> None:
    text = "list = a,\\\n     b,\\\n\t c\nnext=1\n"
    assert parse_properties(text) == {"list": "a,b,c", "next": "1"}
    # an even number of trailing backslashes is an escaped backslash, not a continuation
    assert parse_properties("k=v\\\\\nn=2") == {"k": "v\\", "n": "2"}
    # a continuation line starting with # is data, not a comment
    assert parse_properties("k=a\\\n#b\n") == {"k": "a#b"}
    # continuation at end of file
    assert parse_properties("k=a\\") == {"k": "a"}


def test_properties_escapes_and_line_endings() -> None:
    text = "k1=tab\\there\r\nk2=nl\\nx\rk3=\\u0041\\u00e9\nk\\ 4=v\nk\\=5=w\nk6=c:\\\\dir\nk7=\\q\n"
    assert parse_properties(text) == {
        "k1": "tab\there", "k2": "nl\nx", "k3": "Aé", "k 4": "v", "k=5": "w", "k6": "c:\\dir", "k7": "q",
    }


def test_properties_malformed_unicode_names_key() -> None:
    with pytest.raises(ConfigError, match="bad.key"):
        parse_properties("bad.key=\\u12g4\n")


def test_properties_duplicate_key_last_wins(tmp_path: Path) -> None:
    p = tmp_path / "server.properties"
    p.write_text("num.io.threads=2\nnum.io.threads=4\n")
    assert load_properties(p) == {"num.io.threads": "4"}


def test_load_properties_latin1_fallback(tmp_path: Path) -> None:
    p = tmp_path / "l1.properties"
    p.write_bytes("broker.rack=caf\xe9\n".encode("latin-1"))
    assert load_properties(p) == {"broker.rack": "café"}


# --- defaults and types


def test_defaults() -> None:
    c = BrokerConfig()
    assert c.broker_id == -1
    assert c.listeners == [Endpoint("PLAINTEXT", "127.0.0.1", 9092)]
    assert c.advertised_listeners == c.listeners
    assert c.log_dirs == [Path("/tmp/kafka-logs")]
    assert c.get("num.network.threads") == 3
    assert c.get("num.io.threads") == 8
    assert c.get("queued.max.requests") == 500
    assert c.get("socket.request.max.bytes") == 104857600
    assert c.get("message.max.bytes") == 1048588
    assert c.get("log.segment.bytes") == 1073741824
    assert c.get("auto.create.topics.enable") is True
    assert c.get("log.cleanup.policy") == ["delete"]
    assert c.get("log.flush.interval.messages") == LONG_MAX
    assert c.get("offsets.topic.replication.factor") == 3
    assert c.get("fetch.max.bytes") == 57671680
    assert c.get("zookeeper.connect") is None
    assert c.get("metrics.port") == -1
    assert c.get("moldau.event.loop") == "uvloop"
    assert c.retention_ms == 168 * 3600 * 1000
    assert c.roll_ms == 168 * 3600 * 1000
    assert c.roll_jitter_ms == 0
    assert c.flush_interval_ms == LONG_MAX
    assert c.zookeeper_connection_timeout_ms == 18000
    assert c.offsets_retention_ms == 10080 * 60_000


def test_every_declared_default_passes_its_own_parser() -> None:
    for s in (*BROKER_SETTINGS, *TOPIC_SETTINGS):
        assert s.type in config_mod.TYPES, s.name
        if s.default is not None and s.type != "password":
            assert s.parse(s.format(s.default) or "") == s.default, s.name


def test_typed_values() -> None:
    c = make({"broker.id": " 7 ", "log.cleaner.min.cleanable.ratio": "0.25", "delete.topic.enable": "FALSE",
              "log.dirs": " /a , /b ,", "broker.rack": "  r1 ", "ssl.key.password": " s3cret "})
    assert c.broker_id == 7
    assert c.get("log.cleaner.min.cleanable.ratio") == 0.25
    assert c.get("delete.topic.enable") is False
    assert c.log_dirs == [Path("/a"), Path("/b")]
    assert c.broker_rack == "r1"
    secret = c.get("ssl.key.password")
    assert isinstance(secret, Password) and secret.value == " s3cret "
    assert "s3cret" not in repr(secret) and "s3cret" not in str(secret)


def test_log_dir_used_when_log_dirs_missing() -> None:
    assert make({"log.dir": "/data/one"}).log_dirs == [Path("/data/one")]
    assert make({"log.dir": "/x", "log.dirs": "/y,/z"}).log_dirs == [Path("/y"), Path("/z")]


@pytest.mark.parametrize("key,value,reason", [
    ("log.retention.ms", "abc", "not a number"),
    ("num.io.threads", "0", "at least 1"),
    ("num.io.threads", "1.5", "not a number"),
    ("num.io.threads", "3000000000", "out of range"),
    ("log.segment.bytes", "13", "at least 14"),
    ("metrics.port", "70000", "no more than 65535"),
    ("metrics.port", "-2", "at least -1"),
    ("auto.create.topics.enable", "yes", "true or false"),
    ("log.message.timestamp.type", "createtime", "CreateTime"),
    ("log.cleanup.policy", "delete,shred", "compact, delete"),
    ("moldau.event.loop", "trio", "uvloop"),
    ("log.cleaner.min.cleanable.ratio", "half", "not a number"),
    ("listeners", "localhost:9092", "NAME://host:port"),
    ("listeners", "PLAINTEXT://:99999", "0-65535"),
    ("listeners", "PLAINTEXT://:9092,PLAINTEXT://:9093", "more than once"),
    ("broker.id", "5000", "reserved.broker.max.id"),
    ("log.retention.ms", "0", "unlimited"),
    ("log.retention.minutes", "0", "unlimited"),
    ("replica.fetch.wait.max.ms", "40000", "replica.lag.time.max.ms"),
])
def test_bad_values_name_the_key(key: str, value: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        make({key: value})
    msg = str(info.value)
    assert key in msg and reason in msg
    assert info.value.key == key


def test_error_message_format() -> None:
    with pytest.raises(ConfigError) as info:
        make({"log.retention.ms": "abc"})
    assert str(info.value) == "Invalid value 'abc' for configuration log.retention.ms: not a number"


# --- precedence


def test_retention_precedence_ms_over_minutes_over_hours() -> None:
    assert make({"log.retention.hours": "2"}).retention_ms == 2 * 3_600_000
    assert make({"log.retention.hours": "2", "log.retention.minutes": "3"}).retention_ms == 3 * 60_000
    assert make({"log.retention.hours": "2", "log.retention.minutes": "3",
                 "log.retention.ms": "1234"}).retention_ms == 1234
    assert make({"log.retention.minutes": "3", "log.retention.ms": "1234"}).retention_ms == 1234


def test_retention_negative_means_unlimited() -> None:
    assert make({"log.retention.ms": "-1"}).retention_ms == -1
    assert make({"log.retention.hours": "-5"}).retention_ms == -1
    assert make({"log.retention.minutes": "-1", "log.retention.hours": "1"}).retention_ms == -1


def test_roll_and_flush_fallbacks() -> None:
    c = make({"log.roll.hours": "1", "log.roll.jitter.hours": "2", "log.flush.scheduler.interval.ms": "3000"})
    assert (c.roll_ms, c.roll_jitter_ms, c.flush_interval_ms) == (3_600_000, 7_200_000, 3000)
    c = make({"log.roll.hours": "1", "log.roll.ms": "500", "log.roll.jitter.ms": "7",
              "log.flush.scheduler.interval.ms": "3000", "log.flush.interval.ms": "10"})
    assert (c.roll_ms, c.roll_jitter_ms, c.flush_interval_ms) == (500, 7, 10)
    assert make({"zookeeper.session.timeout.ms": "6000"}).zookeeper_connection_timeout_ms == 6000
    assert make({"zookeeper.connection.timeout.ms": "100"}).zookeeper_connection_timeout_ms == 100


# --- sources


def test_overrides_win_over_file(tmp_path: Path) -> None:
    p = tmp_path / "server.properties"
    p.write_text("broker.id=1\nnum.partitions=3\nlog.dirs=/from/file\n")
    c = BrokerConfig.from_sources(str(p), ["num.partitions=6", "log.dirs = /from/override"])
    assert c.broker_id == 1
    assert c.get("num.partitions") == 6
    assert c.log_dirs == [Path("/from/override")]
    assert BrokerConfig.from_sources(None, ["broker.id=4"]).broker_id == 4
    assert BrokerConfig.from_sources(p).get("num.partitions") == 3


def test_override_without_equals_is_an_error() -> None:
    with pytest.raises(ConfigError, match="broker.id"):
        BrokerConfig.from_sources(None, ["broker.id"])


def test_override_value_may_contain_equals() -> None:
    c = BrokerConfig.from_sources(None, ["zookeeper.connect=zk:2181/a=b"])
    assert c.get("zookeeper.connect") == "zk:2181/a=b"


def test_unknown_keys_are_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="moldau.broker.config"):
        c = make({"broker.id": "3", "no.such.setting": "x", "log.message.format.version": "2.8"})
    assert c.broker_id == 3
    text = caplog.text
    # a Kafka 3.9 setting without effect here is known (kafka_inert_settings.py): accepted without a warning
    assert "no.such.setting" in text and "log.message.format.version" not in text
    assert c.get("log.message.format.version") == "2.8"
    assert "broker 3" in text
    with pytest.raises(KeyError):
        c.get("no.such.setting")


# --- listeners


def test_listener_parsing() -> None:
    c = make({"listeners": "PLAINTEXT://:9092, internal://10.0.0.1:9093,V6://[::1]:0",
              "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,V6:PLAINTEXT",
              "advertised.listeners": "PLAINTEXT://broker1.example:9092"})
    assert c.listeners == [Endpoint("PLAINTEXT", "", 9092), Endpoint("INTERNAL", "10.0.0.1", 9093),
                           Endpoint("V6", "::1", 0)]
    assert c.advertised_listeners == [Endpoint("PLAINTEXT", "broker1.example", 9092)]
    assert str(c.listeners[2]) == "V6://[::1]:0"
    assert c.inter_broker_listener_name == "PLAINTEXT"


def test_inter_broker_listener_name() -> None:
    c = make({"listeners": "A://:1,B://:2", "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT",
              "inter.broker.listener.name": "b"})
    assert c.inter_broker_listener_name == "B"
    with pytest.raises(ConfigError, match="inter.broker.listener.name"):
        make({"inter.broker.listener.name": "NOPE"})


def test_listener_without_protocol_mapping() -> None:
    with pytest.raises(ConfigError, match="listener.security.protocol.map"):
        make({"listeners": "CLIENT://:9092"})


def test_advertised_listener_checks() -> None:
    with pytest.raises(ConfigError, match="advertised.listeners.*not in listeners"):
        make({"advertised.listeners": "OTHER://h:1",
              "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT"})
    with pytest.raises(ConfigError, match="advertised.listeners.*meta-address"):
        make({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"})


def test_duplicate_log_dirs() -> None:
    with pytest.raises(ConfigError, match="log.dirs"):
        make({"log.dirs": "/a,/b/../a"})


# --- topic configs


def test_validate_topic_configs() -> None:
    validate_topic_configs({"retention.ms": "-1", "cleanup.policy": "compact,delete",
                            "segment.bytes": "1024"})
    with pytest.raises(ConfigError) as info:
        validate_topic_configs({"retention.ms": "soon"})
    assert info.value.key == "retention.ms" and "retention.ms" in str(info.value)
    with pytest.raises(ConfigError, match="segment.bytes"):
        validate_topic_configs({"segment.bytes": "10"})
    with pytest.raises(ConfigError, match="retention.ms"):
        validate_topic_configs({"retention.ms": "-2"})
    with pytest.raises(ConfigError, match="no.such.topic.config"):
        validate_topic_configs({"no.such.topic.config": "1"})
    with pytest.raises(ConfigError, match="message.timestamp.type"):
        validate_topic_configs({"message.timestamp.type": "Now"})


def test_topic_settings_fall_back_to_broker_settings() -> None:
    for s in TOPIC_SETTINGS:  # Kafka has topic settings without a broker default (throttles, tiered storage)
        assert s.fallback in SETTINGS or (s.fallback is None and (
            s in INERT_TOPIC_SETTINGS or s.name == "remote.storage.enable"
            or s.name.endswith(".replication.throttled.replicas"))), s.name
    c = make({"log.retention.minutes": "5", "log.segment.bytes": "2048", "log.cleanup.policy": "compact",
              "message.max.bytes": "999"})
    eff = c.topic_config({"segment.bytes": "4096"})
    assert eff["retention.ms"] == 300_000
    assert eff["segment.bytes"] == 4096
    assert eff["cleanup.policy"] == ["compact"]
    assert eff["max.message.bytes"] == 999
    assert eff["segment.ms"] == c.roll_ms


def test_log_config() -> None:
    from moldau.storage.config import LogConfig

    c = make({"log.retention.ms": "1000", "log.roll.ms": "2000", "log.flush.interval.messages": "5",
              "log.message.timestamp.type": "LogAppendTime", "log.index.size.max.bytes": "4096"})
    lc = c.log_config({"retention.bytes": "123", "cleanup.policy": "compact,delete"})
    assert isinstance(lc, LogConfig)
    assert lc.retention_ms == 1000
    assert lc.segment_ms == 2000
    assert lc.retention_bytes == 123
    assert lc.flush_interval_messages == 5
    assert lc.flush_interval_ms == LONG_MAX
    assert lc.message_timestamp_type == "LogAppendTime"
    assert lc.segment_index_bytes == 4096
    assert lc.max_message_bytes == 1048588
    assert lc.cleanup_policy == "compact,delete"
    assert BrokerConfig().log_config() == LogConfig()  # our defaults agree with storage's
    with pytest.raises(ConfigError, match="segment.ms"):
        c.log_config({"segment.ms": "0"})


def test_describe_sources_and_secrets() -> None:
    c = make({"num.partitions": "4", "ssl.key.password": "pw", "log.retention.hours": "1"})
    rows = {e.name: e for e in c.describe_broker()}
    assert rows["num.partitions"].value == "4" and rows["num.partitions"].source == SOURCE_STATIC_BROKER
    assert rows["num.io.threads"].value == "8" and rows["num.io.threads"].source == SOURCE_DEFAULT
    assert rows["ssl.key.password"].value is None and rows["ssl.key.password"].sensitive
    assert rows["log.cleanup.policy"].value == "delete"
    assert rows["zookeeper.connect"].value is None
    trows = {e.name: e for e in c.describe_topic({"segment.bytes": "100000"})}
    assert trows["segment.bytes"].source == SOURCE_TOPIC and trows["segment.bytes"].value == "100000"
    assert trows["retention.ms"].value == "3600000"
    assert trows["compression.type"].source == SOURCE_DEFAULT


# --- docs


def test_docs_are_up_to_date() -> None:
    doc = REPO / "docs" / "configuration.md"
    assert doc.read_text(encoding="utf-8") == render_markdown(), (
        "docs/configuration.md is stale: run `python -m moldau.broker.config --markdown > docs/configuration.md`")


def test_markdown_lists_every_setting() -> None:
    md = render_markdown()
    for s in (*BROKER_SETTINGS, *TOPIC_SETTINGS):
        assert f"| `{s.name}` |" in md
    assert md.index("## Broker settings") < md.index("## Topic settings")


def test_cli_prints_markdown(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m moldau.broker.config --markdown``, run in-process (the unit tier starts no process)."""
    for argv, code in ((["--markdown"], 0), ([], 2)):
        monkeypatch.setattr(sys, "argv", ["config", *argv])
        with warnings.catch_warnings():  # runpy warns that the package already imported the module
            warnings.simplefilter("ignore", RuntimeWarning)
            with pytest.raises(SystemExit) as exit_:
                runpy.run_module("moldau.broker.config", run_name="__main__")
        assert exit_.value.code == code
        out, err = capsys.readouterr()
        assert (out, "usage" in err) == ((render_markdown(), False) if code == 0 else ("", True))
