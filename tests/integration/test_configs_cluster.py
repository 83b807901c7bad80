"""Topic and broker configs on a 3-broker ZooKeeper cluster: confluent-kafka's and kafka-python's admin clients,
kcat, moldau-configs as a process, and dynamic changes taking effect on every broker without a restart."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from moldau import AdminClient as MoldauAdmin
from moldau import AlterConfigOp
from moldau import ConfigResource as MoldauResource
from moldau.connection import BrokerConnection, api_for
from moldau.protocol.api import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.records import build_batch

from .harness import BrokerProcess, wait_until
from .test_cluster import Cluster, cluster, create_topic_confluent, run, zookeeper  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.slow]
BIN = Path(sys.executable).parent
FAST = {"log.retention.check.interval.ms": "300", "replica.lag.time.max.ms": "4000"}


def _topic() -> str:
    return f"cfg-{uuid.uuid4().hex[:8]}"


def _describe(admin: AdminClient, rtype: ResourceType, name: str) -> dict[str, Any]:
    [future] = admin.describe_configs([ConfigResource(rtype, name)], request_timeout=15).values()
    result: dict[str, Any] = future.result()
    return result


def _incremental(admin: AdminClient, rtype: ResourceType, name: str, entries: list[ConfigEntry],
                 validate_only: bool = False) -> None:
    [future] = admin.incremental_alter_configs([ConfigResource(rtype, name, incremental_configs=entries)],
                                               validate_only=validate_only, request_timeout=15).values()
    future.result()


def _kafka_error(fn: Any) -> KafkaError:
    with pytest.raises(KafkaException) as exc:
        fn()
    error: KafkaError = exc.value.args[0]
    return error


def _set(name: str, value: str) -> ConfigEntry:
    return ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)


def test_confluent_and_kafka_python_admin_clients(cluster: Cluster) -> None:  # noqa: F811
    cluster.start([1, 2, 3])
    topic = _topic()
    create_topic_confluent(cluster.bootstrap(), topic, partitions=1, rf=3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    T, B = ResourceType.TOPIC, ResourceType.BROKER

    # AlterConfigs replaces the set; DescribeConfigs shows the source and synonyms.
    [f] = admin.alter_configs([ConfigResource(T, topic, set_config={"retention.ms": "3600000"})],
                              request_timeout=15).values()
    f.result()
    entry = wait_until(lambda: _describe(admin, T, topic)["retention.ms"], 15, "describe")
    assert entry.value == "3600000" and entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not entry.is_read_only and not entry.is_sensitive
    assert "log.retention.hours" in entry.synonyms
    _incremental(admin, T, topic, [_set("cleanup.policy", "compact")])
    _incremental(admin, T, topic, [ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND)])
    assert _describe(admin, T, topic)["cleanup.policy"].value == "compact,delete"
    _incremental(admin, T, topic, [ConfigEntry("cleanup.policy", "compact",
                                               incremental_operation=AlterConfigOpType.SUBTRACT)])
    assert _describe(admin, T, topic)["cleanup.policy"].value == "delete"
    _incremental(admin, T, topic, [ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    assert _describe(admin, T, topic)["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    # Error cases: unknown key, bad value, unknown topic; validate_only changes nothing.
    err = _kafka_error(lambda: _incremental(admin, T, topic, [_set("retention.msx", "1")]))
    assert err.code() == KafkaError.INVALID_CONFIG and "retention.msx" in err.str()
    err = _kafka_error(lambda: _incremental(admin, T, topic, [_set("segment.bytes", "tiny")]))
    assert err.code() == KafkaError.INVALID_CONFIG and "segment.bytes" in err.str()
    err = _kafka_error(lambda: _describe(admin, T, "no-such-topic"))
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    _incremental(admin, T, topic, [_set("retention.ms", "5000")], validate_only=True)
    assert _describe(admin, T, topic)["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    # Broker configs: per broker, with read-only static settings; the cluster-wide default reaches every broker.
    broker_cfg = _describe(admin, B, "2")
    assert broker_cfg["num.io.threads"].is_read_only and not broker_cfg["log.retention.ms"].is_read_only
    assert broker_cfg["broker.id"].value == "2"
    # confluent-kafka refuses an empty broker name, so the cluster-wide default is set with Moldau's client.
    with MoldauAdmin({"bootstrap.servers": cluster.bootstrap()}) as moldau_admin:
        moldau_admin.incremental_alter_configs({MoldauResource("broker", ""): [
            AlterConfigOp("log.retention.ms", "SET", "7200000")]})
    for broker_id in (1, 2, 3):
        wait_until(lambda i=broker_id: _describe(admin, B, str(i))["log.retention.ms"].source ==
                   ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value, 15, f"broker {broker_id} took the default")
    err = _kafka_error(lambda: _incremental(admin, B, "1", [_set("num.io.threads", "2")]))
    assert err.code() == KafkaError.INVALID_CONFIG and "num.io.threads" in err.str()

    # kafka-python 3.0's admin client against the same cluster.
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(), request_timeout_ms=15000)
    try:
        done = kp.alter_configs([KpResource(ConfigResourceType.TOPIC, topic, {"max.message.bytes": "200000"})])
        assert done == {"topic": {topic: "OK"}}
        described = kp.describe_configs([KpResource(ConfigResourceType.TOPIC, topic)], include_synonyms=True)
        assert described["topic"][topic]["max.message.bytes"]["value"] == "200000"
        bad = kp.alter_configs([KpResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "x"})],
                               raise_on_unknown=False)
        assert "InvalidConfig" in bad["topic"][topic] or "INVALID_CONFIG" in bad["topic"][topic].upper()
        missing = kp.alter_configs([KpResource(ConfigResourceType.TOPIC, "nope", {"retention.ms": "1"})],
                                   raise_on_unknown=False)
        assert "UnknownTopicOrPartition" in missing["topic"]["nope"]
        legacy = kp.alter_configs([KpResource(ConfigResourceType.TOPIC, topic, {"segment.ms": "600000"})],
                                  incremental=False)
        assert legacy == {"topic": {topic: "OK"}}
        after = kp.describe_configs([KpResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
        assert after["segment.ms"]["value"] == "600000" and after["max.message.bytes"]["value"] == "200000"
        checked = kp.alter_configs([KpResource(ConfigResourceType.TOPIC, topic, {"flush.ms": "1000"})],
                                   validate_only=True)
        assert checked == {"topic": {topic: "OK"}}
        modified = kp.describe_configs([KpResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
        assert "flush.ms" not in modified  # validate_only changed nothing (kafka-python lists overrides only)
    finally:
        kp.close()

    # kcat (librdkafka 2.0.2) negotiates against the advertised APIs and lists the topic.
    exe = shutil.which("kcat")
    assert exe, "kcat is not installed"
    listed = subprocess.run([exe, "-L", "-J", "-b", cluster.bootstrap(), "-X", "api.version.request=true",
                             "-X", "topic.metadata.refresh.interval.ms=1000", "-t", topic],
                            capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    assert listed.returncode == 0, listed.stderr
    assert [t["topic"] for t in json.loads(listed.stdout)["topics"]] == [topic]

    # moldau-configs as a process.
    bs = ["--bootstrap-server", cluster.bootstrap()]
    changed = _tool(*bs, "--entity-type", "topics", "--entity-name", topic, "--alter", "--add-config",
                    "retention.ms=1000,cleanup.policy=[compact,delete]", "--delete-config", "segment.ms")
    assert changed.returncode == 0, changed.stderr
    assert changed.stdout == f"Completed updating config for topic {topic}.\n"
    shown = _tool(*bs, "--entity-type", "topics", "--entity-name", topic, "--describe")
    lines = shown.stdout.splitlines()
    assert lines[0] == f"Dynamic configs for topic {topic} are:"
    assert "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=" \
           "compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}" in lines
    assert sorted(line.split("=")[0].strip() for line in lines[1:]) == [
        "cleanup.policy", "max.message.bytes", "retention.ms"]
    bad = _tool(*bs, "--entity-type", "topics", "--entity-name", topic, "--alter", "--add-config", "flush.msx=1")
    assert bad.returncode == 1 and "flush.msx" in bad.stderr
    gone = _tool(*bs, "--entity-type", "topics", "--entity-name", topic, "--alter", "--delete-config", "segment.ms")
    assert gone.returncode == 1 and "Invalid config(s): segment.ms" in gone.stderr
    default = _tool(*bs, "--entity-type", "brokers", "--entity-default", "--describe")
    assert default.stdout.splitlines() == [
        "Default configs for brokers in the cluster are:",
        "  log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000}"]


def _tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "moldau-configs"), *args], capture_output=True, text=True, timeout=60)


def _produce(broker: BrokerProcess, topic: str, acks: int, value: bytes = b"v" * 200) -> int:
    async def go() -> int:
        async with BrokerConnection("127.0.0.1", broker.port, client_id="configs-test") as conn:
            answer = await conn.send(api_for(ApiKey.PRODUCE), {
                "transactional_id": None, "acks": acks, "timeout_ms": 10000, "topic_data": [
                    {"name": topic, "partition_data": [{"index": 0, "records": build_batch(
                        [(b"k", value, [], None)])}]}]})
            return int(answer["responses"][0]["partition_responses"][0]["error_code"])
    result: int = run(go())
    return result


def _segments(broker: BrokerProcess, topic: str) -> int:
    return len(list(broker.partition_dir(topic, 0).glob("*.log")))


def _produce_until_every_replica_rolls(c: Cluster, leader: BrokerProcess, topic: str, what: str) -> None:
    """Each broker applies a config change when its own ZooKeeper watch fires, so a replica may still append
    a few batches under the old segment size: produce until every replica holds 4 segments (one that never
    learns the 1 KiB segment size never gets there)."""
    def rolled() -> bool:
        if all(_segments(b, topic) >= 4 for b in c.brokers.values()):
            return True
        code = _produce(leader, topic, -1)
        assert code == ErrorCode.NONE, f"produce answered {code}"
        return False

    wait_until(rolled, 60, what, interval=0.2)


def test_topic_config_changes_reach_every_broker_without_restart(cluster: Cluster) -> None:  # noqa: F811
    cluster.start([1, 2, 3], extra=lambda _id: FAST)
    topic = _topic()
    create_topic_confluent(cluster.bootstrap(), topic, partitions=1, rf=3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    T = ResourceType.TOPIC
    leader_id = cluster.states(topic)[0]["leader"]
    leader = cluster.brokers[leader_id]
    wait_until(lambda: len(cluster.states(topic)[0]["isr"]) == 3, 30, "full ISR")

    # A malformed notification (a hand-edited znode) is skipped; the watch goes on.
    cluster.kazoo.create("/config/changes/config_change_", b"not json", sequence=True)
    # segment.bytes small: every replica rolls segments.
    _incremental(admin, T, topic, [_set("segment.bytes", "1024")])
    _produce_until_every_replica_rolls(cluster, leader, topic, "segments rolled on every broker")

    # retention.ms tiny: every replica deletes its old segments.
    _incremental(admin, T, topic, [_set("retention.ms", "1")])
    for broker_id, broker in cluster.brokers.items():
        wait_until(lambda b=broker: _segments(b, topic) == 1, 30, f"retention on broker {broker_id}")

    # min.insync.replicas=3 with one follower stopped: acks=all is refused, acks=1 still works.
    _incremental(admin, T, topic, [_set("min.insync.replicas", "3")])
    follower_id = next(i for i in cluster.brokers if i != leader_id)
    cluster.brokers[follower_id].stop(signal.SIGTERM)
    wait_until(lambda: follower_id not in cluster.states(topic)[0]["isr"], 30, "follower left the ISR")
    wait_until(lambda: _produce(leader, topic, -1) == ErrorCode.NOT_ENOUGH_REPLICAS, 20, "NOT_ENOUGH_REPLICAS")
    assert _produce(leader, topic, 1) == ErrorCode.NONE
    # Back to the default (1): acks=all works again with two replicas in sync.
    _incremental(admin, T, topic, [ConfigEntry("min.insync.replicas", None,
                                               incremental_operation=AlterConfigOpType.DELETE)])
    wait_until(lambda: _produce(leader, topic, -1) == ErrorCode.NONE, 20, "acks=all accepted again")

    # Dynamic broker defaults in ZooKeeper: a broker that was down reads them at start; a change of
    # log.segment.bytes rolls the segments of a topic without overrides on every broker.
    with MoldauAdmin({"bootstrap.servers": cluster.bootstrap()}) as moldau_admin:
        moldau_admin.incremental_alter_configs({MoldauResource("broker", ""): [
            AlterConfigOp("log.retention.bytes", "SET", "1000000000")]})
        cluster.brokers[follower_id].start()
        for broker in cluster.brokers.values():
            wait_until(lambda b=broker: Cluster._knows_cluster(b, [1, 2, 3]), 30, "the cluster view after restart")
        resource = MoldauResource("broker", str(follower_id))
        entries = {e.name: e for e in moldau_admin.describe_configs([resource])[resource]}  # type: ignore[union-attr]
        assert (entries["log.retention.bytes"].value, entries["log.retention.bytes"].source) == (
            "1000000000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        plain = _topic()
        create_topic_confluent(cluster.bootstrap(), plain, partitions=1, rf=3)
        moldau_admin.incremental_alter_configs({MoldauResource("broker", ""): [
            AlterConfigOp("log.segment.bytes", "SET", "1024")]})
    plain_leader = cluster.brokers[cluster.states(plain)[0]["leader"]]
    wait_until(lambda: len(cluster.states(plain)[0]["isr"]) == 3, 30, "full ISR of the second topic")
    _produce_until_every_replica_rolls(cluster, plain_leader, plain, "default segment.bytes on every broker")
