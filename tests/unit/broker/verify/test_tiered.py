"""moldau-verify --tiered: the topic's and a launched cluster's settings, and what --topic-config and --override
change of them."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from moldau.broker.verify import cli
from moldau.broker.verify.tiered import broker_overrides, remote_segments, topic_configs
from moldau.tools.common import ToolError


def parse(*argv: str) -> argparse.Namespace:
    args = cli.parser().parse_args(list(argv))
    cli.validate(args)
    return args


def test_tiered_topic_and_launched_cluster(tmp_path: Path) -> None:
    args = parse("--launch", "3", "--tiered", "--topic-config", "local.retention.bytes=1")
    assert topic_configs(args) == {"remote.storage.enable": "true", "segment.bytes": "8192",
                                   "local.retention.bytes": "1"}
    settings = dict(o.split("=", 1) for o in broker_overrides(args, tmp_path))
    assert settings["remote.log.storage.system.enable"] == "true"
    assert settings["remote.log.storage.manager.class.name"] == "filesystem"
    assert settings["rsm.config.dir"] == str(tmp_path / "remote-storage")
    assert settings["rlmm.config.remote.log.metadata.topic.replication.factor"] == "3"
    single = parse("--launch", "1", "--tiered")
    assert "rlmm.config.remote.log.metadata.topic.replication.factor=1" in broker_overrides(single, tmp_path)


def test_an_overridden_store_and_an_untiered_run(tmp_path: Path) -> None:
    s3 = parse("--launch", "3", "--tiered", "--override", "remote.log.storage.manager.class.name=s3")
    assert not any(o.startswith(("rsm.config.dir=", "remote.log.storage.manager.class.name="))
                   for o in broker_overrides(s3, tmp_path))
    plain = parse("--launch", "3", "--topic-config", "retention.ms=600000")
    assert broker_overrides(plain, tmp_path) == []
    assert topic_configs(plain) == {"retention.ms": "600000"}
    assert remote_segments(tmp_path) == 0
    with pytest.raises(ToolError, match="expected KEY=VALUE"):
        parse("--launch", "3", "--topic-config", "retention.ms")
