"""The README's Docker section, run as written: ``bash scripts/compose.sh up`` to healthy, its produce/consume
commands, then ``down -v``, after which ``iptables -S``, ``mount`` and ``ip link`` read as before ``up``.

On this machine no image can be pulled: scripts/compose.sh starts its own dockerd (data root in the image cache,
``MOLDAU_DOCKER_CACHE``, kept between runs so the debootstrap base and the ZooKeeper/Prometheus images are built
once) and builds the images locally. The only change to the README's commands is the host ports (free ones: a
neighbour may hold 9092-9094), passed as docker-compose.yml's ``MOLDAU_BROKER_N_PORT``. Between ``up`` and
``down`` the cluster is also checked from the host: Prometheus (in compose) scrapes the three brokers,
confluent-kafka produces and consumes through the EXTERNAL listeners, the console tools run in the image, and
``compose.sh kill broker-2`` moves leadership with nothing acknowledged lost. Step times are logged
(``-o log_cli=true --log-cli-level=INFO``) and written to <cache>/compose-times.json.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..integration.harness import free_port, wait_until

# A first run builds the base and the images (~10 min on this machine); later runs reuse the cache (~2 min).
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1800)]
log = logging.getLogger("moldau.tests.compose")

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_SH = ROOT / "scripts" / "compose.sh"
CACHE = Path(os.environ.get("MOLDAU_DOCKER_CACHE", "/tmp/moldau-docker-cache"))
BROKERS = ["broker-1", "broker-2", "broker-3"]
README_PORTS = {"broker-1": 9092, "broker-2": 9093, "broker-3": 9094}

# Lines of the host's state that other tests running beside this one change (broker/verify/netfault.py's
# MOLDAU-<tag> chains, test_disk_faults' tmpfs): not ours, and left out of the before/after diff.
NEIGHBOURS = re.compile(r"MOLDAU-[0-9a-f]{8}|/small-disk\b|/pytest-of-")


def readme_commands() -> list[str]:
    """The code block of the README's "Run with Docker" section, one command a line (comments dropped)."""
    text = (ROOT / "README.md").read_text()
    section = text.split("### Run with Docker", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    commands = []
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            commands.append(line)
    return commands


def host_state() -> dict[str, list[str]]:
    """What `down` must leave as it found: iptables (every table, v4 and v6), mounts and links."""
    out: dict[str, list[str]] = {}
    commands = {f"{cmd} -t {table} -S": [cmd, "-w", "5", "-t", table, "-S"]
                for cmd in ("iptables", "ip6tables") for table in ("filter", "nat", "raw", "mangle")}
    commands.update({"mount": ["mount"], "ip link": ["ip", "-o", "link"]})
    for name, argv in commands.items():
        if shutil.which(argv[0]) is None:
            continue
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        lines = proc.stdout.splitlines() if proc.returncode == 0 else [f"(exit {proc.returncode})"]
        if name == "ip link":  # counters and the link's state flags change with traffic, not with us
            lines = [re.sub(r"^\d+: (\S+).*$", r"\1", line) for line in lines]
        out[name] = sorted(line for line in lines if not NEIGHBOURS.search(line))
    return out


class Compose:
    def __init__(self) -> None:
        self.project = f"moldaut{os.getpid()}"
        self.ports = {b: free_port() for b in BROKERS}
        self.prometheus_port = free_port()
        self.times: dict[str, float] = {}
        self.up_output = ""
        self.before: dict[str, list[str]] = {}

    def env(self) -> dict[str, str]:
        env = dict(os.environ, MOLDAU_COMPOSE_PROJECT=self.project, MOLDAU_DOCKER_CACHE=str(CACHE),
                   MOLDAU_COMPOSE_LOCK_WAIT="300", MOLDAU_PROMETHEUS_PORT=str(self.prometheus_port))
        env.update({f"MOLDAU_BROKER_{i}_PORT": str(self.ports[b]) for i, b in enumerate(BROKERS, 1)})
        return env

    def readme_line(self, line: str) -> str:
        """A README command on this run's ports."""
        for broker, port in README_PORTS.items():
            line = line.replace(f"127.0.0.1:{port}", f"127.0.0.1:{self.ports[broker]}")
        return line

    def shell(self, line: str, timeout: float = 120.0, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(["bash", "-c", line], cwd=ROOT, env=self.env(), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
        if check:
            assert proc.returncode == 0, f"{line}\nexit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        return proc

    def sh(self, *args: str, timeout: float = 120.0, check: bool = True,
           stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """bash scripts/compose.sh ARGS."""
        proc = subprocess.run(["bash", str(COMPOSE_SH), *args], cwd=ROOT, env=self.env(), input=stdin,
                              capture_output=True, text=True, timeout=timeout,
                              stdin=None if stdin is not None else subprocess.DEVNULL)
        if check:
            assert proc.returncode == 0, (f"compose.sh {' '.join(args)} exited {proc.returncode}\n"
                                          f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return proc

    def timed(self, step: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        t0 = time.monotonic()
        try:
            return fn(*args, **kwargs)
        finally:
            self.times[step] = round(time.monotonic() - t0, 1)
            log.info("step %-22s %6.1f s", step, self.times[step])

    def bootstrap(self) -> str:
        return ",".join(f"localhost:{p}" for p in self.ports.values())


def _prerequisites() -> str | None:
    for tool in ("docker", "docker-compose", "kcat"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not Path("/var/run/docker.sock").exists() and "DOCKER_HOST" not in os.environ:
        if shutil.which("dockerd") is None:
            return "no Docker answers and dockerd is not installed"
        if os.geteuid() != 0:
            return "no Docker answers and a private dockerd needs root"
    return None


@pytest.fixture(scope="module")
def compose() -> Iterator[Compose]:
    missing = _prerequisites()
    if missing:
        pytest.skip(missing)
    started = time.monotonic()
    c = Compose()
    c.before = host_state()
    commands = readme_commands()
    assert commands[0].startswith("bash scripts/compose.sh up"), commands
    try:
        up = c.timed("up (to healthy)", c.shell, c.readme_line(commands[0]), timeout=1500, check=False)
        if up.returncode != 0 and "another run's dockerd uses" in up.stderr:
            pytest.skip(up.stderr.strip())  # a neighbour's run held the image cache for 300 s
        assert up.returncode == 0, f"{up.stdout[-3000:]}\n{up.stderr[-5000:]}"
        c.up_output = up.stdout + up.stderr
        for line in up.stderr.splitlines():
            log.info("%s", line)
        yield c
    finally:
        # The README's last line runs in test_down_leaves_nothing; this is the safety net.
        c.sh("down", "-v", timeout=300, check=False)
        c.times["total"] = round(time.monotonic() - started, 1)
        log.info("compose test times: %s", c.times)
        with open(CACHE / "compose-times.json", "w") as f:
            json.dump(c.times, f, indent=1)


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


def test_readme_commands(compose: Compose) -> None:
    """The README's block between `up` and `down`, line by line, as written (on this run's ports)."""
    c = compose
    ports = ",".join(f"127.0.0.1:{p}" for p in c.ports.values())
    assert f"bootstrap servers: {ports}" in c.up_output, c.up_output
    outputs = {}
    for line in readme_commands()[1:-1]:
        outputs[line] = c.timed(line.split("#")[0].strip()[:40], c.shell, c.readme_line(line), timeout=300).stdout
    listed = next(out for line, out in outputs.items() if line.startswith("bash scripts/compose.sh ps"))
    assert listed.count("(healthy)") >= 5 and "Exit" not in listed, listed
    consumed = next(out for line, out in outputs.items() if line.startswith("kcat") and " -C " in line)
    assert sorted(consumed.split()) == ["k1:v1", "k2:v2"], consumed


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
    c.timed("moldau-topics", c.sh, "exec", "broker-1", "moldau-topics", "--bootstrap-server", "broker-1:19092",
            "--create", "--topic", topic, "--partitions", "3", "--replication-factor", "3")
    described = c.sh("exec", "broker-1", "moldau-topics", "--bootstrap-server", "broker-1:19092", "--describe",
                     "--topic", topic).stdout
    assert f"Topic: {topic}" in described and "ReplicationFactor: 3" in described, described
    wait_until(lambda: all(leader > 0 for leader in _metadata(c.bootstrap(), topic).values()), 60,
               "leaders for every partition, seen from the host")
    first = [b"host-%d" % n for n in range(300)]
    acked = c.timed("host produce", _produce, c.bootstrap(), topic, first)
    assert len(acked) == 300, f"{len(acked)} of 300 acknowledged"
    assert c.timed("host consume", _consume_all, c.bootstrap(), topic, set(first)) >= set(first)

    # Console producer/consumer inside a broker container.
    c.sh("exec", "broker-1", "moldau-topics", "--bootstrap-server", "broker-1:19092", "--create", "--topic",
         "console", "--partitions", "1", "--replication-factor", "3")
    wait_until(lambda: _metadata(c.bootstrap(), "console").get(0, -1) > 0, 60, "a leader for console-0")
    produced = c.sh("exec", "broker-1", "moldau-console-producer", "--bootstrap-server", "broker-1:19092",
                    "--topic", "console", stdin="one\ntwo\nthree\n", timeout=60)
    consumed = c.sh("exec", "broker-1", "moldau-console-consumer", "--bootstrap-server", "broker-2:19092",
                    "--topic", "console", "--from-beginning", "--max-messages", "3", "--timeout-ms", "30000",
                    timeout=60)
    assert consumed.stdout.split() == ["one", "two", "three"], (produced.stderr, consumed.stderr)

    # Kill broker-2: its partitions get new leaders; nothing acknowledged is lost.
    leaders = _metadata(c.bootstrap(), topic)
    led_by_2 = [p for p, leader in leaders.items() if leader == 2]
    c.sh("kill", "broker-2", timeout=60)
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
    """The README's last line, `down -v`: the host's iptables, mounts and links are as before `up`, and nothing
    of compose.sh's private dockerd is left."""
    c = compose
    last = readme_commands()[-1]
    assert last.startswith("bash scripts/compose.sh down"), last
    c.timed("down", c.shell, last, timeout=300)
    after = host_state()
    before = c.before
    diff = {name: {"gone": sorted(set(before[name]) - set(after[name])),
                   "new": sorted(set(after[name]) - set(before[name]))}
            for name in before if set(before[name]) != set(after[name])}
    assert diff == {}, json.dumps(diff, indent=1)
    assert not (CACHE / "run").exists(), "compose.sh left its run dir"
    assert subprocess.run(["pgrep", "-f", str(CACHE / "run")], capture_output=True).stdout == b""
