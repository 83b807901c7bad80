"""A real Prometheus (Debian's package) scrapes a real 3-broker cluster: what the dashboard and the alert rules
read is what Prometheus stores. URP rises to 1 on the leader while a follower is frozen (SIGSTOP) and returns to
0 after SIGCONT; the rules file loads. Every wait is bounded; Prometheus dies with the test."""

from __future__ import annotations

import json
import logging
import shutil
import signal
import subprocess
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import _die_with_parent, free_port, port_accepts, wait_until
from .test_cluster import Cluster, cluster, zookeeper  # noqa: F401
from .test_replication import create_topic, start, state

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ALERTS = Path(__file__).resolve().parents[2] / "ops" / "prometheus" / "alerts.yml"


class Prometheus:
    def __init__(self, workdir: Path, targets: list[str]) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.fail("prometheus is not installed: apt-get install -y prometheus (scripts/_setup.sh does)")
        self.port = free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        config = workdir / "prometheus.yml"
        # JSON is YAML: the generated config needs no YAML writer. One-second scrapes keep the test short.
        config.write_text(json.dumps({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(ALERTS)],
            "scrape_configs": [{"job_name": "moldau", "static_configs": [{"targets": targets}]}]}))
        self.log = workdir / "prometheus.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
                preexec_fn=_die_with_parent)
        wait_until(lambda: self.proc.poll() is None and port_accepts(self.port) and self._ready(), 60,
                   "Prometheus to be ready")

    def _ready(self) -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=5) as response:
            return response.status == 200

    def api(self, path: str, **params: str) -> object:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]

    def value(self, expr: str) -> float | None:
        """The instant value of a one-series expression, or None while it has no sample."""
        result = self.api("query", query=expr)["result"]  # type: ignore[index]
        return float(result[0]["value"][1]) if result else None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture
def prometheus_for(tmp_path: Path) -> Iterator[list[Prometheus]]:
    started: list[Prometheus] = []
    yield started
    for p in started:
        p.stop()


def test_prometheus_sees_urp_rise_and_clear(cluster: Cluster, prometheus_for: list[Prometheus],  # noqa: F811
                                            tmp_path: Path) -> None:
    start(cluster)
    brokers = cluster.brokers
    prom = Prometheus(tmp_path / "prometheus", [f"127.0.0.1:{b.metrics_port}" for b in brokers.values()])
    prometheus_for.append(prom)
    wait_until(lambda: prom.value('count(up{job="moldau"} == 1)') == 3, 30, "Prometheus scraping three brokers")
    groups = prom.api("rules")["groups"]  # type: ignore[index]
    assert {r["name"] for g in groups for r in g["rules"]} >= {"MoldauUnderReplicatedPartitions",
                                                                "MoldauOfflinePartitions"}

    create_topic(cluster, "watched")
    leader = state(cluster, "watched")["leader"]
    follower = next(i for i in state(cluster, "watched")["isr"] if i != leader)
    on_leader = f'moldau_under_replicated_partitions{{instance="127.0.0.1:{brokers[leader].metrics_port}"}}'
    wait_until(lambda: prom.value(on_leader) == 0.0, 30, "URP 0 on the leader before the pause")

    brokers[follower].proc.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
    try:
        wait_until(lambda: prom.value(on_leader) == 1.0, 45, "Prometheus to see URP 1 on the leader")
        assert prom.value('sum(moldau_offline_partitions)') == 0.0  # degraded, not offline
    finally:
        brokers[follower].proc.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
    wait_until(lambda: prom.value(on_leader) == 0.0, 60, "Prometheus to see URP back to 0 on the leader")
    history = prom.api("query", query=f"max_over_time({on_leader}[5m])")["result"]  # type: ignore[index]
    assert float(history[0]["value"][1]) == 1.0  # the stored series really went through 1


def test_prometheus_sees_the_idle_ratios_fall_under_load(cluster: Cluster,  # noqa: F811
                                                         prometheus_for: list[Prometheus], tmp_path: Path) -> None:
    from confluent_kafka import Producer

    start(cluster)
    brokers = cluster.brokers
    prom = Prometheus(tmp_path / "prometheus", [f"127.0.0.1:{b.metrics_port}" for b in brokers.values()])
    prometheus_for.append(prom)
    create_topic(cluster, "loaded")
    leader = brokers[state(cluster, "loaded")["leader"]]
    instance = f'instance="127.0.0.1:{leader.metrics_port}"'
    handler = f"moldau_request_handler_avg_idle_ratio{{{instance}}}"
    network = f"moldau_network_processor_avg_idle_ratio{{{instance}}}"
    at_rest = wait_until(lambda: (v := prom.value(handler)) is not None and v > 0.9 and v, 30,
                         "a mostly idle leader before the load")

    stop = threading.Event()

    def load() -> None:  # as fast as one client can: the broker's loop, not the client, should be the bottleneck
        producer = Producer({"bootstrap.servers": leader.bootstrap, "acks": "1", "linger.ms": 5})
        value = b"x" * 1000
        while not stop.is_set():
            try:
                producer.produce("loaded", value)
            except BufferError:
                producer.poll(0.01)
            producer.poll(0)
        producer.flush(30)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    try:
        # A clear fall from rest (0.99+), not a saturation level: how far it falls depends on the machine.
        wait_until(lambda: (v := prom.value(f"min_over_time({handler}[1m])")) is not None and v < at_rest - 0.1,
                   60, "the request-handler idle ratio to fall under load")
        handler_at_load = prom.value(f"min_over_time({handler}[1m])")
        network_at_load = prom.value(f"min_over_time({network}[1m])")
        logging.getLogger(__name__).info("idle at rest %.3f; under load: handler %s, network %s", at_rest,
                                         handler_at_load, network_at_load)
        assert network_at_load is not None and network_at_load < 0.99
    finally:
        stop.set()
        thread.join(60)
    assert at_rest > 0.9
    wait_until(lambda: (v := prom.value(handler)) is not None and v > 0.9, 60, "the idle ratio to recover")
