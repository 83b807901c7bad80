"""docker-compose.yml brought up for real on a private dockerd, with the local override (no image registry).

Steps, each bounded: start our own dockerd (tests/ops/dockerd.py; skipped with the reason where it cannot start),
the Debian base from debootstrap (reused when a previous run left ``moldau-local-base:bookworm`` in the cache),
the wheels on the host (pip inside builds cannot reach PyPI here), ``docker-compose build`` and ``up -d`` with
ops/local/docker-compose.local.yml on free host ports, wait for every container to be healthy; then Prometheus
(in compose) scrapes the three brokers; confluent-kafka produces and consumes from the host through the EXTERNAL
listeners; moldau-topics and the console producer/consumer run with ``docker-compose exec``; ``docker-compose kill
broker-2`` moves leadership with nothing acknowledged lost; ``down -v`` leaves nothing. Step times are logged
(``-o log_cli=true --log-cli-level=INFO`` shows them) and written to <cache>/compose-times.json.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..integration.harness import free_port, wait_until
from .dockerd import DockerdUnavailable, PrivateDockerd, build_local_base

# The first run builds the base and the images (~10 min on this machine); later runs reuse the cache.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1800)]
log = logging.getLogger("moldau.tests.compose")

ROOT = Path(__file__).resolve().parents[2]
BASE_IMAGE = "moldau-local-base:bookworm"
SERVICES = ["zookeeper", "broker-1", "broker-2", "broker-3", "prometheus"]
BROKERS = ["broker-1", "broker-2", "broker-3"]


class Compose:
    def __init__(self, dockerd: PrivateDockerd) -> None:
        self.dockerd = dockerd
        self.project = f"moldaut{os.getpid()}"
        self.ports = {b: free_port() for b in BROKERS}
        self.prometheus_port = free_port()
        self.times: dict[str, float] = {}

    def env(self) -> dict[str, str]:
        env = self.dockerd.env()
        env.update({f"MOLDAU_BROKER_{i}_PORT": str(self.ports[b]) for i, b in enumerate(BROKERS, 1)})
        env.update(MOLDAU_PROMETHEUS_PORT=str(self.prometheus_port), MOLDAU_LOCAL_BASE=BASE_IMAGE,
                   COMPOSE_HTTP_TIMEOUT="120")
        return env

    def run(self, *args: str, timeout: float = 120.0, stdin: bytes | None = None,
            check: bool = True) -> subprocess.CompletedProcess[bytes]:
        exe = shutil.which("docker-compose")
        assert exe, "docker-compose is not installed (apt-get install docker-compose)"
        cmd = [exe, "-p", self.project, "-f", "docker-compose.yml", "-f", "ops/local/docker-compose.local.yml",
               *args]
        proc = subprocess.run(cmd, cwd=ROOT, env=self.env(), input=stdin, capture_output=True, timeout=timeout,
                              stdin=None if stdin is not None else subprocess.DEVNULL)
        if check:
            assert proc.returncode == 0, (f"docker-compose {' '.join(args)} exited {proc.returncode}\n"
                                          f"{proc.stdout.decode(errors='replace')[-3000:]}\n"
                                          f"{proc.stderr.decode(errors='replace')[-3000:]}")
        return proc

    def timed(self, step: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        t0 = time.monotonic()
        try:
            return fn(*args, **kwargs)
        finally:
            self.times[step] = round(time.monotonic() - t0, 1)
            log.info("step %-22s %6.1f s", step, self.times[step])

    def container(self, service: str) -> str:
        return self.run("ps", "-q", service, timeout=30).stdout.decode().strip()

    def health(self) -> dict[str, str]:
        out = {}
        for service in SERVICES:
            cid = self.container(service)
            fmt = "{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}"
            proc = self.dockerd.docker("inspect", "--format", fmt, cid, check=False, timeout=30) if cid else None
            out[service] = proc.stdout.decode().strip() if proc is not None and proc.returncode == 0 else "missing"
        return out

    def exec(self, service: str, *cmd: str, stdin: bytes | None = None, timeout: float = 60.0) -> str:
        return self.run("exec", "-T", service, *cmd, stdin=stdin, timeout=timeout).stdout.decode()

    def bootstrap(self) -> str:
        return ",".join(f"localhost:{p}" for p in self.ports.values())

    def logs(self) -> str:
        proc = self.run("logs", "--no-color", "--tail", "40", timeout=60, check=False)
        return proc.stdout.decode(errors="replace")[-8000:]


@pytest.fixture(scope="module")
def compose() -> Iterator[Compose]:
    started = time.monotonic()
    dockerd = PrivateDockerd()
    try:
        dockerd_s = dockerd.start()
    except DockerdUnavailable as exc:
        dockerd.stop()
        pytest.skip(f"no dockerd here: {exc}")
    c = Compose(dockerd)
    c.times["dockerd start"] = round(dockerd_s, 1)
    log.info("step %-22s %6.1f s", "dockerd start", dockerd_s)
    try:
        c.timed("clear leftovers", dockerd.clear_leftovers)
        if dockerd.has_image(BASE_IMAGE):
            c.times["base image"] = 0.0  # cached from an earlier run
        else:
            c.timed("base image (debootstrap)", build_local_base, dockerd, BASE_IMAGE)
        c.timed("wheels", _build_wheels, dockerd.cache_dir / "wheels")
        c.timed("docker-compose build", c.run, "build", "zookeeper", "broker-1", "prometheus", timeout=1200)
        c.timed("up -d", c.run, "up", "-d", "--no-build", *SERVICES, timeout=300)
        dockerd.remember_networks()
        c.timed("healthy", _wait_healthy, c)
        yield c
    finally:
        try:
            if dockerd.proc is not None and dockerd.proc.poll() is None:
                c.run("down", "-v", "--remove-orphans", "-t", "5", timeout=120, check=False)
        finally:
            dockerd.stop()
            c.times["total"] = round(time.monotonic() - started, 1)
            log.info("compose test times: %s", c.times)
            with open(dockerd.cache_dir / "compose-times.json", "w") as f:
                json.dump(c.times, f, indent=1)


def _build_wheels(cache: Path) -> None:
    """wheelhouse/ for the Dockerfile: the project's wheel (fresh: it carries the code under test), its
    dependencies and the console tools' kafka-python. Dependency wheels are kept in the cache between runs."""
    cache.mkdir(parents=True, exist_ok=True)
    for old in cache.glob("moldau-*.whl"):
        old.unlink()
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-input", "--find-links", str(cache),
                           ".", "kafka-python>=3.0,<3.1", "-w", str(cache)], cwd=ROOT, capture_output=True,
                          timeout=300, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    wheelhouse = ROOT / "wheelhouse"
    shutil.rmtree(wheelhouse, ignore_errors=True)
    shutil.copytree(cache, wheelhouse)


def _wait_healthy(c: Compose) -> None:
    deadline = time.monotonic() + 240
    state: dict[str, str] = {}
    while time.monotonic() < deadline:
        state = c.health()
        if all(s in ("healthy", "running") for s in state.values()) and \
                all(state[b] == "healthy" for b in [*BROKERS, "zookeeper"]):
            return
        if any(s in ("exited", "dead", "unhealthy") for s in state.values()):
            break
        time.sleep(2)
    raise AssertionError(f"containers not healthy: {state}\n{c.logs()}")


def _prometheus_query(c: Compose, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{c.prometheus_port}{path}", timeout=10) as response:
        return json.loads(response.read())


def _metadata(bootstrap: str, topic: str) -> dict[int, int]:
    """partition -> leader, from a confluent-kafka Metadata request through the EXTERNAL listeners."""
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=15)
    return {p.id: p.leader for p in md.topics[topic].partitions.values()}


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> list[bytes]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 60000})
    acked: list[bytes] = []

    def done(err: Any, msg: Any) -> None:
        if err is None:
            acked.append(msg.value())

    for n, value in enumerate(values):
        producer.produce(topic, value=value, partition=n % 3, on_delivery=done)
        producer.poll(0)
    producer.flush(90)
    return acked


def _consume_all(bootstrap: str, topic: str, want: set[bytes], timeout: float = 90.0) -> set[bytes]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "compose-test-reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    got: set[bytes] = set()
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
        deadline = time.monotonic() + timeout
        while not want <= got and time.monotonic() < deadline:
            got.update(m.value() or b"" for m in consumer.consume(500, 0.5) if m.error() is None)
    finally:
        consumer.close()
    return got


def test_compose_cluster_from_the_host(compose: Compose) -> None:
    c = compose
    # Prometheus (in compose) scrapes all three brokers.
    def scraped() -> bool:
        targets = _prometheus_query(c, "/api/v1/targets")["data"]["activeTargets"]
        up = {t["labels"].get("instance", "") for t in targets if t["health"] == "up"}
        return all(any(b in instance for instance in up) for b in BROKERS)

    c.timed("prometheus scrapes", wait_until, scraped, 90, "Prometheus scrapes broker-1..3")
    result = _prometheus_query(c, "/api/v1/query?query=up")["data"]["result"]
    assert sum(float(r["value"][1]) for r in result if any(b in r["metric"]["instance"] for b in BROKERS)) == 3

    # Produce and consume from the host through the EXTERNAL listeners (needs per-listener Metadata).
    topic = "compose-host"
    c.timed("moldau-topics", c.exec, "broker-1", "moldau-topics", "--bootstrap-server", "broker-1:19092",
            "--create", "--topic", topic, "--partitions", "3", "--replication-factor", "3")
    described = c.exec("broker-1", "moldau-topics", "--bootstrap-server", "broker-1:19092", "--describe",
                       "--topic", topic)
    assert f"Topic: {topic}" in described and "ReplicationFactor: 3" in described, described
    wait_until(lambda: all(leader > 0 for leader in _metadata(c.bootstrap(), topic).values()), 60,
               "leaders for every partition, seen from the host")
    first = [b"host-%d" % n for n in range(300)]
    acked = c.timed("host produce", _produce, c.bootstrap(), topic, first)
    assert len(acked) == 300, f"{len(acked)} of 300 acknowledged"
    assert c.timed("host consume", _consume_all, c.bootstrap(), topic, set(first)) >= set(first)

    # Console producer/consumer inside a broker container, on a topic made with moldau-topics.
    c.exec("broker-1", "moldau-topics", "--bootstrap-server", "broker-1:19092", "--create", "--topic", "console",
           "--partitions", "1", "--replication-factor", "3")
    wait_until(lambda: _metadata(c.bootstrap(), "console").get(0, -1) > 0, 60, "a leader for console-0")
    produced = c.run("exec", "-T", "broker-1", "moldau-console-producer", "--bootstrap-server", "broker-1:19092",
                     "--topic", "console", stdin=b"one\ntwo\nthree\n",
                     timeout=60)
    consumed = c.run("exec", "-T", "broker-1", "moldau-console-consumer", "--bootstrap-server", "broker-2:19092",
                     "--topic", "console", "--from-beginning", "--max-messages", "3", "--timeout-ms", "30000",
                     timeout=60)
    assert consumed.stdout.split() == [b"one", b"two", b"three"], (produced.stderr, consumed.stderr)

    # Kill broker-2: its partitions get new leaders; nothing acknowledged is lost.
    leaders = _metadata(c.bootstrap(), topic)
    led_by_2 = [p for p, leader in leaders.items() if leader == 2]
    c.run("kill", "broker-2", timeout=60)
    survivors = f"localhost:{c.ports['broker-1']},localhost:{c.ports['broker-3']}"
    moved = c.timed("leadership moves", wait_until,
                    lambda: (lambda m: m if all(m[p] not in (2, -1) for p in m) else None)(_metadata(survivors,
                                                                                                     topic)),
                    90, "every partition led by a live broker after broker-2 was killed")
    assert all(moved[p] in (1, 3) for p in led_by_2), moved
    second = [b"after-kill-%d" % n for n in range(150)]
    acked2 = _produce(survivors, topic, second)
    assert len(acked2) == 150, f"{len(acked2)} of 150 acknowledged with broker-2 down"
    everything = set(acked) | set(acked2)
    assert c.timed("consume after kill", _consume_all, survivors, topic, everything) >= everything


def test_down_leaves_nothing(compose: Compose) -> None:
    c = compose
    c.timed("down -v", c.run, "down", "-v", "--remove-orphans", "-t", "5", timeout=120)
    assert c.dockerd.docker("ps", "-aq", "--filter", f"label=com.docker.compose.project={c.project}",
                            timeout=30).stdout.strip() == b""
    volumes = c.dockerd.docker("volume", "ls", "-q", "--filter", f"label=com.docker.compose.project={c.project}",
                               timeout=30).stdout.split()
    assert volumes == []
    networks = c.dockerd.docker("network", "ls", "-q", "--filter",
                                f"label=com.docker.compose.project={c.project}", timeout=30).stdout.split()
    assert networks == []
