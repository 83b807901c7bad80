"""``python -m moldau.broker.launcher --brokers 3 --data ./data``: ZooKeeper plus a cluster of brokers on this machine.

Starts ZooKeeper (Debian's ``zookeeper`` package: ZooKeeperServerMain on its jar) and the brokers as child
processes, prints their addresses and how to try them with kcat, and stops everything on Ctrl-C or SIGTERM
(brokers first, with a controlled shutdown each, then ZooKeeper). Data: ``<data>/zookeeper`` and
``<data>/broker-<id>``; each child's output goes to ``<data>/<name>.log``.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

JAVA_DIR = Path("/usr/share/java")
# ZooKeeperServerMain's run-time dependencies, by their Debian jar names (version-less symlinks).
ZK_JARS = ("zookeeper", "zookeeper-jute", "slf4j-api", "slf4j-simple", "netty-handler", "netty-common",
           "netty-buffer", "netty-transport", "netty-resolver", "netty-codec", "netty-transport-native-epoll",
           "netty-transport-native-unix-common", "commons-cli", "metrics-core", "snappy-java")
REPO_ROOT = Path(__file__).resolve().parents[1]


def zookeeper_classpath(java_dir: Path = JAVA_DIR) -> str:
    jars = [java_dir / f"{name}.jar" for name in ZK_JARS]
    if not jars[0].exists():
        raise FileNotFoundError(f"{jars[0]} not found: install ZooKeeper (apt-get install zookeeper)")
    return ":".join(str(j) for j in jars if j.exists())


def zookeeper_command(workdir: Path, port: int, tick_time_ms: int = 2000, heap_mb: int = 256) -> list[str]:
    """Writes ``workdir/zoo.cfg`` (data in ``workdir/data``) and returns the command that runs the server."""
    data = workdir / "data"
    data.mkdir(parents=True, exist_ok=True)
    cfg = workdir / "zoo.cfg"
    cfg.write_text(f"tickTime={tick_time_ms}\ndataDir={data.resolve()}\nclientPort={port}\n"
                   "clientPortAddress=127.0.0.1\nadmin.enableServer=false\nmaxClientCnxns=0\n"
                   f"minSessionTimeout={2 * tick_time_ms}\nmaxSessionTimeout=60000\n"
                   "4lw.commands.whitelist=ruok,stat,srvr\n")
    return ["java", f"-Xmx{heap_mb}m", "-Dzookeeper.admin.enableServer=false", "-cp", zookeeper_classpath(),
            "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg.resolve())]


def replication_defaults(brokers: int) -> dict[str, str]:
    """A launched cluster protects its data: new topics (and the offsets topic) get up to three replicas, and with
    three, acks=all needs two in sync. Kafka's own defaults (one replica) suit a single broker, not a cluster."""
    factor = min(3, brokers)
    return {"default.replication.factor": str(factor), "offsets.topic.replication.factor": str(factor),
            "min.insync.replicas": "2" if factor >= 3 else "1"}


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _wait_port(name: str, proc: subprocess.Popen[bytes], port: int, timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with code {proc.returncode}; see {log}")
        if _listening(port):
            return
        time.sleep(0.1)
    raise TimeoutError(f"{name} did not listen on 127.0.0.1:{port} within {timeout:.0f}s; see {log}")


class Cluster:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.data = Path(args.data).resolve()
        self.children: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.stopping = False

    def _spawn(self, name: str, cmd: list[str]) -> subprocess.Popen[bytes]:
        log = self.data / f"{name}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                    start_new_session=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self.children.append((name, proc))
        return proc

    def start(self) -> None:
        a = self.args
        self.data.mkdir(parents=True, exist_ok=True)
        if _listening(a.zookeeper_port):
            raise RuntimeError(f"port {a.zookeeper_port} is in use (another ZooKeeper?); pick --zookeeper-port")
        zk = self._spawn("zookeeper", zookeeper_command(self.data / "zookeeper", a.zookeeper_port))
        _wait_port("ZooKeeper", zk, a.zookeeper_port, 30, self.data / "zookeeper.log")
        print(f"ZooKeeper     127.0.0.1:{a.zookeeper_port}   (data {self.data / 'zookeeper'})", flush=True)
        connect = f"127.0.0.1:{a.zookeeper_port}{a.chroot}"
        replication = replication_defaults(a.brokers)
        for i in range(a.brokers):
            broker_id, port, metrics = a.first_id + i, a.port + i, a.metrics_port + i
            cmd = [sys.executable, "-m", "moldau.broker", str(Path(a.config).resolve()),
                   "--override", f"broker.id={broker_id}",
                   "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                   "--override", f"log.dirs={self.data / f'broker-{broker_id}'}",
                   "--override", f"metrics.port={metrics}",
                   "--override", f"zookeeper.connect={connect}"]
            for key, value in replication.items():
                cmd += ["--override", f"{key}={value}"]
            for override in a.override:  # the user's overrides come last, so they win
                cmd += ["--override", override]
            proc = self._spawn(f"broker-{broker_id}", cmd)
            _wait_port(f"broker {broker_id}", proc, port, 60, self.data / f"broker-{broker_id}.log")
            print(f"broker {broker_id:<6} 127.0.0.1:{port}   metrics http://127.0.0.1:{metrics}/metrics   "
                  f"(log {self.data / f'broker-{broker_id}.log'})", flush=True)

    def usage(self) -> str:
        bootstrap = ",".join(f"127.0.0.1:{self.args.port + i}" for i in range(self.args.brokers))
        return (f"\nBootstrap servers: {bootstrap}\n"
                "Try it from another terminal:\n"
                f"  produce:          kcat -b {bootstrap} -P -t test -K:      (key:value lines, Ctrl-D ends;\n"
                f"                    the topic is created on first use with replication factor "
                f"{replication_defaults(self.args.brokers)['default.replication.factor']};\n"
                "                    admin clients can choose partitions and replication factor)\n"
                f"  consume:          kcat -b {bootstrap} -C -t test -o beginning -e -f '%k:%s @%o p%p\\n'\n"
                f"  brokers, leaders: kcat -b {bootstrap} -L\n"
                "Stop everything with Ctrl-C (or SIGTERM to this process).\n")

    def watch(self) -> None:
        reported: set[str] = set()
        while not self.stopping:
            for name, proc in self.children:
                if proc.poll() is not None and name not in reported:
                    reported.add(name)
                    print(f"{name} exited with code {proc.returncode} (see {self.data / (name + '.log')})",
                          flush=True)
            time.sleep(0.5)

    def stop(self) -> None:
        self.stopping = True
        brokers = [(n, p) for n, p in self.children if n != "zookeeper"]
        for name, proc in reversed(brokers):  # one by one: each hands its leaderships to the others
            _terminate(name, proc, 30)
        for name, proc in self.children:
            if name == "zookeeper":
                _terminate(name, proc, 15)


def _terminate(name: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
        print(f"stopped {name} (exit code {proc.returncode})", flush=True)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
        print(f"killed {name}: it did not stop within {timeout:.0f}s", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m moldau.broker.launcher", description=__doc__.split("\n\n")[0])
    p.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    p.add_argument("--data", default="./data", help="data directory (default ./data)")
    p.add_argument("--config", default=str(REPO_ROOT / "config" / "server.properties"),
                   help="server.properties every broker reads (default config/server.properties)")
    p.add_argument("--port", type=int, default=9092, help="first broker's port (default 9092, then 9093...)")
    p.add_argument("--metrics-port", type=int, default=9404, help="first metrics port (default 9404)")
    p.add_argument("--zookeeper-port", type=int, default=2181, help="ZooKeeper client port (default 2181)")
    p.add_argument("--chroot", default="", help="ZooKeeper chroot for the cluster, e.g. /moldau")
    p.add_argument("--first-id", type=int, default=1, help="broker.id of the first broker (default 1)")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting for every broker (may repeat)")
    args = p.parse_args(argv)
    cluster = Cluster(args)

    def on_signal(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # Explicitly, also for SIGINT: a launcher started in the background of a script inherits SIGINT ignored.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        cluster.start()
        print(cluster.usage(), flush=True)
        cluster.watch()
    except KeyboardInterrupt:
        print("\nstopping the cluster...", flush=True)
    except (RuntimeError, TimeoutError, FileNotFoundError) as exc:
        print(f"launcher: {exc}", file=sys.stderr, flush=True)
        cluster.stop()
        return 1
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
