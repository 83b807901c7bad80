"""moldau.testing, the pytest plugin (docs/testing.md), as a user's project sees it.

The plugin comes through the installed ``pytest11`` entry point: two tests run a fresh pytest in a scratch directory
with no conftest, so nothing but the installed package provides the fixtures. They check that loading the plugin
imports no broker code (so starts nothing), that a failing test's broker and cluster are gone before the next test
runs, and that ZooKeeper does not outlive a SIGKILLed test process. In this process (the plugin is loaded in
our own suite too) a marker changes a fixture broker's settings, seen through kafka-python.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer

from moldau import AdminClient
from moldau.testing import MoldauBroker, MoldauCluster

from .harness import port_accepts, wait_until

pytestmark = pytest.mark.integration

RUN_TIMEOUT_S = 240.0


def _pytest(project: Path, seen: Path | None = None) -> subprocess.Popen[str]:
    """A fresh pytest on project/test_app.py; the inner tests write what they saw to `seen` (SEEN_FILE)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MOLDAU_"))}
    if seen is not None:
        env["SEEN_FILE"] = str(seen)
    return subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "-W", "ignore::DeprecationWarning", f"--basetemp={project / 'tmp'}", "test_app.py"],
                            cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


FAILING_TESTS = '''
import json, os, socket, sys
from pathlib import Path

import pytest

SEEN = Path(os.environ["SEEN_FILE"])


def test_the_plugin_is_loaded_and_imported_no_broker_code(request):
    assert request.config.pluginmanager.get_plugin("moldau.testing") is not None
    assert [m for m in sys.modules if m.startswith(("moldau.broker", "moldau.testing."))] == []


def test_broker_fails(moldau_broker):
    SEEN.write_text(json.dumps({"broker": moldau_broker.port}))
    moldau_broker.create_topic("t", partitions=2)
    raise AssertionError("this test fails on purpose")


@pytest.mark.moldau_cluster(brokers=2)
def test_cluster_fails(moldau_cluster):
    seen = json.loads(SEEN.read_text())
    seen["cluster"] = [b.port for b in moldau_cluster.brokers]
    seen["zookeeper"] = [moldau_cluster.zookeeper.port, moldau_cluster.zookeeper.proc.pid]
    SEEN.write_text(json.dumps(seen))
    raise AssertionError("this test fails on purpose")


def _accepts(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def test_everything_the_failed_tests_started_is_gone():
    seen = json.loads(SEEN.read_text())
    zk_port, zk_pid = seen["zookeeper"]
    assert [p for p in [seen["broker"], *seen["cluster"], zk_port] if _accepts(p)] == []
    assert not Path(f"/proc/{zk_pid}").exists()  # stopped and reaped
'''


def test_the_plugin_loads_lazily_and_a_failing_tests_brokers_are_gone_before_the_next_test(
        tmp_path: Path) -> None:
    (tmp_path / "test_app.py").write_text(FAILING_TESTS)
    proc = _pytest(tmp_path, tmp_path / "seen.json")
    out, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
    assert "2 failed, 2 passed" in out, out
    assert "this test fails on purpose" in out


KILLED_TEST = '''
import json, os, threading
from pathlib import Path

import pytest


@pytest.mark.moldau_cluster(brokers=1)
def test_waits_to_be_killed(moldau_cluster):
    zk = moldau_cluster.zookeeper
    Path(os.environ["SEEN_FILE"]).write_text(json.dumps([zk.port, zk.proc.pid, moldau_cluster.brokers[0].port]))
    threading.Event().wait(600)
'''


def test_zookeeper_dies_with_a_killed_test_process(tmp_path: Path) -> None:
    (tmp_path / "test_app.py").write_text(KILLED_TEST)
    seen = tmp_path / "seen.json"
    proc = _pytest(tmp_path, seen)
    try:
        wait_until(seen.exists, RUN_TIMEOUT_S, "the inner test to start its cluster")
        _zk_port, zk_pid, broker_port = json.loads(seen.read_text())
        assert _pid_alive(zk_pid) and port_accepts(broker_port)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)  # pytest alone: what the kernel does to its children is the test
        proc.communicate(timeout=30)
    # ZooKeeper runs in a session of its own (Ctrl-C in a terminal goes to pytest, which stops it in order): only
    # the parent-death signal ends it here.
    wait_until(lambda: not _pid_alive(zk_pid), 30, f"ZooKeeper (pid {zk_pid}) to die with the test process")
    # The brokers lived in the killed process itself. No check that their ports refuse now: they came from bind(0),
    # and on a busy machine another process may listen on a just-freed ephemeral port (CI saw it once).


@pytest.mark.moldau_broker(overrides={"num.partitions": "3"})
def test_a_marker_sets_the_brokers_settings_and_any_client_works(moldau_broker: MoldauBroker) -> None:
    producer = KafkaProducer(bootstrap_servers=moldau_broker.bootstrap_servers)
    try:
        producer.send("auto-created", b"x").get(timeout=30)  # auto.create.topics.enable, with num.partitions=3
    finally:
        producer.close()
    admin = KafkaAdminClient(bootstrap_servers=moldau_broker.bootstrap_servers)
    try:
        (description,) = admin.describe_topics(["auto-created"])
    finally:
        admin.close()
    assert len(description["partitions"]) == 3
    assert moldau_broker.create_topic() in moldau_broker.list_topics()


@pytest.mark.moldau_cluster(brokers=2)
def test_a_cluster_broker_stops_and_starts_again_on_its_port_and_catches_up(
        moldau_cluster: MoldauCluster) -> None:
    from confluent_kafka import Producer

    topic = moldau_cluster.create_topic(partitions=1, replication_factor=2)
    assert moldau_cluster.zookeeper.connect.startswith("127.0.0.1:")
    second = moldau_cluster.broker(2)
    port = second.port
    second.stop()
    producer = Producer({"bootstrap.servers": moldau_cluster.bootstrap_servers, "acks": "all"})
    for i in range(10):
        producer.produce(topic, str(i).encode())
    assert producer.flush(30) == 0  # min.insync.replicas is 1 with two brokers: broker 1 alone takes them
    second.start()
    assert second.port == port
    with AdminClient(bootstrap_servers=second.bootstrap_servers) as admin:
        wait_until(lambda: sorted(admin.describe_topics([topic])[0].partitions[0].isr) == [1, 2], 30,
                   "broker 2 back in the ISR")
