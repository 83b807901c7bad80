"""A standalone broker keeps dynamic topic and broker configs in its metadata file: moldau-configs changes them,
they apply at once (segments roll) and survive a restart."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from moldau import AdminClient, ConfigResource, NewTopic, Producer

from .harness import BrokerProcess, wait_until

pytestmark = pytest.mark.integration
BIN = Path(sys.executable).parent


def _tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "moldau-configs"), *args], capture_output=True, text=True, timeout=60)


def _produce_batches(bootstrap: str, topic: str) -> None:
    with Producer(bootstrap_servers=bootstrap, linger_ms=0) as producer:
        for i in range(20):  # one batch each: a segment rolls when the next batch would pass segment.bytes
            producer.send(topic, b"x" * 500, key=str(i).encode())
            producer.flush()


def _sources(bootstrap: str, resource: ConfigResource) -> dict[str, tuple[str | None, str]]:
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        entries = admin.describe_configs([resource])[resource]
    assert isinstance(entries, list)
    return {e.name: (e.value, e.source) for e in entries}


def test_configs_apply_at_once_and_survive_a_restart(fresh_broker: BrokerProcess, topic: str) -> None:
    bs = ["--bootstrap-server", fresh_broker.bootstrap]
    with AdminClient(bootstrap_servers=fresh_broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    changed = _tool(*bs, "--topic", topic, "--alter", "--add-config", "segment.bytes=2048")
    assert changed.returncode == 0, changed.stderr
    default = _tool(*bs, "--broker-defaults", "--alter", "--add-config", "log.retention.ms=86400000")
    assert default.returncode == 0 and default.stdout == \
        "Completed updating default config for brokers in the cluster.\n", default.stderr
    _produce_batches(fresh_broker.bootstrap, topic)
    wait_until(lambda: len(list(fresh_broker.partition_dir(topic).glob("*.log"))) >= 3, 20, "segments rolled")

    plain = topic + "-plain"  # no overrides: takes the broker-wide dynamic log.segment.bytes, also after a restart
    with AdminClient(bootstrap_servers=fresh_broker.bootstrap) as admin:
        admin.create_topics([NewTopic(plain, 1, 1)])
    assert _tool(*bs, "--broker-defaults", "--alter", "--add-config", "log.segment.bytes=2048").returncode == 0

    fresh_broker.restart()
    _produce_batches(fresh_broker.bootstrap, plain)
    wait_until(lambda: len(list(fresh_broker.partition_dir(plain).glob("*.log"))) >= 3, 20,
               "segments rolled by the dynamic default after the restart")
    topic_cfg = _sources(fresh_broker.bootstrap, ConfigResource("topic", topic))
    assert topic_cfg["segment.bytes"] == ("2048", "DYNAMIC_TOPIC_CONFIG")
    assert topic_cfg["retention.ms"] == ("86400000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    broker_cfg = _sources(fresh_broker.bootstrap, ConfigResource("broker", str(fresh_broker.broker_id)))
    assert broker_cfg["log.retention.ms"] == ("86400000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    shown = _tool(*bs, "--entity-type", "brokers", "--entity-name", str(fresh_broker.broker_id), "--describe")
    assert shown.stdout == f"Dynamic configs for broker {fresh_broker.broker_id} are:\n", shown.stderr
    every_broker = _tool(*bs, "--entity-type", "brokers", "--describe")  # no name: every live broker
    assert every_broker.stdout == shown.stdout, every_broker.stderr
    every_topic = _tool(*bs, "--entity-type", "topics", "--describe")  # no name: every topic
    assert f"Dynamic configs for topic {topic} are:\n  segment.bytes=2048 sensitive=false synonyms=" \
           f"{{DYNAMIC_TOPIC_CONFIG:segment.bytes=2048, DYNAMIC_DEFAULT_BROKER_CONFIG:log.segment.bytes=2048, " \
           f"DEFAULT_CONFIG:log.segment.bytes=1073741824}}\nDynamic configs for topic {plain} are:\n" \
           in every_topic.stdout, every_topic.stdout
