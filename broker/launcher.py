"""``python -m moldau.broker.launcher --brokers 3 --data ./data``: ZooKeeper plus a cluster of brokers on this machine.

Starts ZooKeeper (Debian's ``zookeeper`` package: ZooKeeperServerMain on its jar) and the brokers as child
processes, prints their addresses and how to try them with kcat, and stops everything in order (brokers one by one,
each with a controlled shutdown, then ZooKeeper) on Ctrl-C, SIGTERM, SIGHUP (terminal closed) or a broken stdout
(``... | tee log`` interrupted), and when any child exits on its own. Every port is checked before anything starts;
``--port 0`` picks free ones below the kernel's ephemeral range (so no client connection can take one before its
broker binds it). The usage text comes once every broker's metadata holds all of them. Children die with the launcher even when it is SIGKILLed (a parent-death signal).
``--detach`` runs it in the background; ``status`` and ``stop --data <data>`` find it by ``<data>/launcher.pid``.
Data: ``<data>/zookeeper`` and ``<data>/broker-<id>``; each child's output goes to ``<data>/<name>.log``.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from moldau.broker.health_probe import HealthWatch

if TYPE_CHECKING:
    from moldau.broker.security.launch import SecureSetup

JAVA_DIR = Path("/usr/share/java")
# ZooKeeperServerMain's run-time dependencies, by their Debian jar names (version-less symlinks).
ZK_JARS = ("zookeeper", "zookeeper-jute", "slf4j-api", "slf4j-simple", "netty-handler", "netty-common",
           "netty-buffer", "netty-transport", "netty-resolver", "netty-codec", "netty-transport-native-epoll",
           "netty-transport-native-unix-common", "commons-cli", "metrics-core", "snappy-java")
REPO_ROOT = Path(__file__).resolve().parents[1]
BROKER_STOP_TIMEOUT_S = 30.0
ZOOKEEPER_STOP_TIMEOUT_S = 15.0
BROKERS_KNOWN_TIMEOUT_S = 60.0
PR_SET_PDEATHSIG = 1
PID_FILE = "launcher.pid"
GRAFANA_DASHBOARD_UID = "moldau-cluster"  # ops/grafana/dashboards/moldau.json


def shutdown_bound(brokers: int) -> float:
    """The longest an orderly stop takes: each broker in turn, then ZooKeeper (plus the SIGKILL grace)."""
    return brokers * (BROKER_STOP_TIMEOUT_S + 10) + ZOOKEEPER_STOP_TIMEOUT_S + 10


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


# ------------------------------------------------------------------------------------------------------- ports
@dataclass(frozen=True)
class Ports:
    zookeeper: int
    brokers: tuple[int, ...]
    metrics: tuple[int, ...]

    def named(self, first_id: int) -> list[tuple[str, int]]:
        out = [("ZooKeeper", self.zookeeper)]
        for i, (port, metrics) in enumerate(zip(self.brokers, self.metrics, strict=True)):
            out += [(f"broker {first_id + i}", port), (f"broker {first_id + i} metrics", metrics)]
        return out


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when a server could bind ``host:port`` now (SO_REUSEADDR, as servers do, so TIME_WAIT is no conflict)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
LINUX_EPHEMERAL_DEFAULT = range(32768, 61000)
# --port 0 picks from here: below Linux's ephemeral range, so no client's outgoing connection can take a chosen
# port in the seconds between the choice and the broker's bind (the kernel picks a connection's local port from
# the ephemeral range only). tests/integration/harness.py hands out 20000-31999: the two never meet.
PICK_RANGE = range(10000, 20000)


def ephemeral_range(path: str = EPHEMERAL_RANGE_FILE) -> range:
    """The kernel's range for outgoing connections' local ports (and bind(0))."""
    try:
        with open(path) as f:
            low, high = (int(x) for x in f.read().split())
        return range(low, high + 1)
    except (OSError, ValueError):
        return LINUX_EPHEMERAL_DEFAULT


def _free_ports(n: int, pick: range = PICK_RANGE, ephemeral: range | None = None) -> list[int]:
    """n distinct free ports from ``pick`` outside the ephemeral range, starting at a random place, all held
    open together while chosen so that none is picked twice; bind(0)'s ports where too few are found."""
    eph = ephemeral_range() if ephemeral is None else ephemeral
    pool = [p for p in pick if p not in eph]
    start = int.from_bytes(os.urandom(2), "big") % len(pool) if pool else 0
    socks: list[socket.socket] = []
    try:
        for port in pool[start:] + pool[:start]:
            if len(socks) == n:
                break
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: TIME_WAIT is no conflict
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            socks.append(s)
        while len(socks) < n:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(s)
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def plan_ports(brokers: int, port: int, metrics_port: int, zookeeper_port: int) -> Ports:
    """Ports from the flags: N consecutive ports from a first one, or free ones where the flag is 0."""
    wanted = (1 if zookeeper_port == 0 else 0) + (brokers if port == 0 else 0) + (brokers if metrics_port == 0
                                                                                   else 0)
    free = iter(_free_ports(wanted))
    zk = next(free) if zookeeper_port == 0 else zookeeper_port
    broker_ports = tuple(next(free) if port == 0 else port + i for i in range(brokers))
    metrics = tuple(next(free) if metrics_port == 0 else metrics_port + i for i in range(brokers))
    return Ports(zk, broker_ports, metrics)


def busy_ports(ports: Ports, first_id: int) -> list[str]:
    """Every planned port something else already holds (or that two roles share), as 'port N (role)'."""
    seen: dict[int, str] = {}
    problems = []
    for role, port in ports.named(first_id):
        if port in seen:
            problems.append(f"port {port} ({role}) is also planned for {seen[port]}")
        elif not 0 < port < 65536:
            problems.append(f"port {port} ({role}) is not a TCP port")
        elif not port_free(port):
            problems.append(f"port {port} ({role}) is already in use")
        seen.setdefault(port, role)
    return problems


# ------------------------------------------------------------------------------------------------------ output
class Output:
    """The launcher's stdout. A write that fails (reader gone: EPIPE; terminal hung up: EIO) must not kill the
    launcher before it stops its children: it marks the output lost, and the watcher treats that as a stop."""

    def __init__(self) -> None:
        self.lost = False

    def say(self, text: str, err: bool = False) -> None:
        if self.lost and not err:
            return
        try:
            stream = sys.stderr if err else sys.stdout
            print(text, file=stream, flush=True)
        except OSError:
            if not err:
                self._lose()

    def _lose(self) -> None:
        self.lost = True
        # Later prints (and the interpreter's final flush) go nowhere instead of raising again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)

    def check_reader(self) -> bool:
        """True when stdout is a pipe whose reader has gone (poll reports POLLERR on the write end)."""
        if self.lost:
            return True
        try:
            if not stat.S_ISFIFO(os.fstat(sys.stdout.fileno()).st_mode):
                return False
        except (OSError, ValueError):
            return False
        poller = select.poll()
        poller.register(sys.stdout.fileno(), 0)  # POLLERR/POLLHUP are always reported
        if any(ev & select.POLLERR for _, ev in poller.poll(0)):
            self._lose()
        return self.lost


def _answers(url: str, timeout: float) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return 200 <= response.status < 300
    except (OSError, ValueError):
        return False


def dashboard_lines(prometheus_url: str, grafana_url: str, timeout: float = 1.0) -> list[str]:
    """Usage lines naming the dashboards of a running Prometheus (and Grafana); [] when Prometheus does not
    answer its readiness endpoint."""
    prometheus_url, grafana_url = prometheus_url.rstrip("/"), grafana_url.rstrip("/")
    if not _answers(f"{prometheus_url}/-/ready", timeout):
        return []
    lines = [f"  Prometheus:       {prometheus_url}/targets (scrapes), {prometheus_url}/alerts (alert rules)"]
    if _answers(f"{grafana_url}/api/health", timeout):
        lines.append(f"  Grafana:          {grafana_url}/d/{GRAFANA_DASHBOARD_UID} (dashboard \"Moldau cluster\")")
    return lines


def _die_with_launcher(launcher_pid: int) -> None:
    """In each child before exec: the kernel SIGKILLs it when the launcher dies, however the launcher dies."""
    if sys.platform == "linux":
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != launcher_pid:  # the launcher died before prctl took effect
        os._exit(1)


def live_brokers_metric(metrics_port: int, timeout: float = 2.0) -> int | None:
    """``moldau_live_brokers`` from a broker's metrics endpoint (plain HTTP whatever the Kafka listeners' security);
    None when it does not answer (yet) or lacks the line."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=timeout) as response:
            text = response.read().decode(errors="replace")
    except (OSError, ValueError):
        return None
    for line in text.splitlines():
        if line.startswith("moldau_live_brokers "):
            try:
                return int(float(line.split()[1]))
            except (IndexError, ValueError):
                return None
    return None


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class Stop(Exception):
    """An orderly stop was asked for (a signal, or stdout's reader went away)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class ChildExited(RuntimeError):
    pass


class Cluster:
    def __init__(self, args: argparse.Namespace, ports: Ports, out: Output) -> None:
        self.args = args
        self.ports = ports
        self.out = out
        self.data = Path(args.data).resolve()
        self.children: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.stopping = False
        self.secure: SecureSetup | None = None  # with --security sasl_ssl
        self.health = HealthWatch(lambda text: self.out.say(text, err=True))

    def _spawn(self, name: str, cmd: list[str]) -> subprocess.Popen[bytes]:
        log = self.data / f"{name}.log"
        launcher = os.getpid()
        with open(log, "ab") as out:
            # Own session: a terminal's Ctrl-C or hang-up reaches the launcher only, which stops them in order.
            proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                    start_new_session=True, env=dict(os.environ, PYTHONUNBUFFERED="1"),
                                    preexec_fn=lambda: self._in_child(name, launcher))
        self.children.append((name, proc))
        return proc

    def _in_child(self, name: str, launcher_pid: int) -> None:
        """Runs in child ``name`` before exec (moldau-verify's launched cluster also places it in a cgroup)."""
        _die_with_launcher(launcher_pid)

    def _wait_port(self, name: str, proc: subprocess.Popen[bytes], port: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check()
            if _listening(port):
                return
            time.sleep(0.1)
        raise TimeoutError(f"{name} did not listen on 127.0.0.1:{port} within {timeout:.0f}s; "
                           f"see {self.data / (name + '.log')}")

    def start(self) -> None:
        a, p = self.args, self.ports
        self.data.mkdir(parents=True, exist_ok=True)
        zk = self._spawn("zookeeper", zookeeper_command(self.data / "zookeeper", p.zookeeper))
        self._wait_port("zookeeper", zk, p.zookeeper, 30)
        self.out.say(f"ZooKeeper     127.0.0.1:{p.zookeeper}   pid {zk.pid}   (data {self.data / 'zookeeper'})")
        if a.security == "sasl_ssl":
            from moldau.broker.security.launch import SecureSetup

            self.secure = SecureSetup(self.data)
            self.secure.create_users(f"127.0.0.1:{p.zookeeper}{a.chroot}")
            self.out.say(f"security      SASL_SSL, users admin and broker   (files {self.secure.dir})")
        for i in range(a.brokers):
            broker_id, port, metrics = a.first_id + i, p.brokers[i], p.metrics[i]
            proc = self._spawn(f"broker-{broker_id}", self.broker_command(i))
            self._wait_port(f"broker-{broker_id}", proc, port, 60)
            self.out.say(f"broker {broker_id:<6} 127.0.0.1:{port}   pid {proc.pid}   metrics "
                         f"http://127.0.0.1:{metrics}/metrics   (log {self.data / f'broker-{broker_id}.log'})")
        self._wait_brokers_known(BROKERS_KNOWN_TIMEOUT_S)

    def _wait_brokers_known(self, timeout: float) -> None:
        """Until every broker's metadata holds all of them: listening is not enough. A broker that has not yet
        heard of the others (the controller's UpdateMetadata) refuses to auto-create a topic with the
        launcher's replication factor (INVALID_REPLICATION_FACTOR) and hands clients a partial cluster."""
        if any(o.strip().startswith("metrics.port=") for o in self.args.override):
            return  # the user moved or disabled the metrics endpoint: nothing to read the count from
        want = self.args.brokers
        deadline = time.monotonic() + timeout
        seen: dict[int, int | None] = {}
        while True:
            self.check()
            seen = {self.args.first_id + i: live_brokers_metric(m) for i, m in enumerate(self.ports.metrics)}
            if all(n is not None and n >= want for n in seen.values()):
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        behind = ", ".join(f"broker {b} knows {'?' if n is None else n}" for b, n in seen.items()
                           if n is None or n < want)
        raise TimeoutError(f"the brokers did not all see each other within {timeout:.0f}s ({behind} of {want}); "
                           f"see the broker logs in {self.data}")

    def broker_command(self, i: int) -> list[str]:
        """The command line of the i-th broker (0-based)."""
        a, p = self.args, self.ports
        broker_id = a.first_id + i
        cmd = [sys.executable, "-m", "moldau.broker", str(Path(a.config).resolve()),
               "--override", f"broker.id={broker_id}",
               "--override", f"listeners=PLAINTEXT://127.0.0.1:{p.brokers[i]}",
               "--override", f"log.dirs={self.data / f'broker-{broker_id}'}",
               "--override", f"metrics.port={p.metrics[i]}",
               "--override", f"zookeeper.connect=127.0.0.1:{p.zookeeper}{a.chroot}"]
        for key, value in replication_defaults(a.brokers).items():
            cmd += ["--override", f"{key}={value}"]
        if self.secure is not None:
            for key, value in self.secure.broker_overrides(p.brokers[i]).items():
                cmd += ["--override", f"{key}={value}"]
        for override in a.override:  # the user's overrides come last, so they win
            cmd += ["--override", override]
        return cmd

    def usage(self) -> str:
        bootstrap = ",".join(f"127.0.0.1:{port}" for port in self.ports.brokers)
        return (f"\nBootstrap servers: {bootstrap}\n"
                "Try it from another terminal:\n"
                f"  produce:          kcat -b {bootstrap} -P -t test -K:      (key:value lines, Ctrl-D ends;\n"
                f"                    the topic is created on first use with replication factor "
                f"{replication_defaults(self.args.brokers)['default.replication.factor']};\n"
                "                    admin clients can choose partitions and replication factor)\n"
                f"  consume:          kcat -b {bootstrap} -C -t test -o beginning -e -f '%k:%s @%o p%p\\n'\n"
                f"  brokers, leaders: kcat -b {bootstrap} -L\n"
                f"{self.secure.usage(bootstrap) if self.secure is not None else ''}"
                f"{self._prometheus_hint()}"
                "Stop everything with Ctrl-C (or SIGTERM/SIGHUP to this process).\n")

    def _prometheus_hint(self) -> str:
        """ops/prometheus/prometheus-local.yml scrapes the default metrics ports: when a Prometheus (and Grafana)
        answers, name their dashboard URLs; otherwise say how to start one."""
        if self.ports.metrics != tuple(range(9404, 9404 + len(self.ports.metrics))) or len(self.ports.metrics) > 3:
            return ""
        lines = dashboard_lines(self.args.prometheus_url, self.args.grafana_url)
        if lines:
            return "".join(line + "\n" for line in lines)
        return ("  Prometheus:       prometheus --config.file=ops/prometheus/prometheus-local.yml, then "
                f"{self.args.prometheus_url} (alerts included)\n")

    def check(self) -> None:
        """Raises ChildExited when a child has exited on its own (the cluster is no longer what was asked for)."""
        for name, proc in self.children:
            if proc.poll() is not None:
                raise ChildExited(f"{name} exited unexpectedly with code {proc.returncode} "
                                  f"(see {self.data / (name + '.log')}); stopping the rest")

    def watch(self) -> None:
        while True:
            self.check()
            if self.out.check_reader():
                raise Stop("stdout was closed")
            self.probe_brokers()
            time.sleep(0.5)

    def probe_brokers(self) -> None:
        """Says when a broker stops answering requests (paused, hung) and when it answers again."""
        brokers = [(n, p) for n, p in self.children if n != "zookeeper"]
        for (name, proc), port in zip(brokers, self.ports.brokers, strict=False):
            self.health.check(name, proc.pid, port, str(self.data / f"{name}.log"))

    def stop(self) -> None:
        self.stopping = True
        brokers = [(n, p) for n, p in self.children if n != "zookeeper"]
        for name, proc in reversed(brokers):  # one by one: each hands its leaderships to the others
            self._terminate(name, proc, BROKER_STOP_TIMEOUT_S)
        for name, proc in self.children:
            if name == "zookeeper":
                self._terminate(name, proc, ZOOKEEPER_STOP_TIMEOUT_S)

    def _terminate(self, name: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
        if proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
            self.out.say(f"stopped {name} (exit code {proc.returncode})")
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
            self.out.say(f"killed {name}: it did not stop within {timeout:.0f}s")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m moldau.broker.launcher", description=__doc__.split("\n\n")[0])
    p.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    p.add_argument("--data", default="./data", help="data directory (default ./data)")
    p.add_argument("--config", default=str(REPO_ROOT / "config" / "server.properties"),
                   help="server.properties every broker reads (default config/server.properties)")
    p.add_argument("--port", type=int, default=9092,
                   help="first broker's port (default 9092, then 9093...); 0 = free ports for everything not "
                        "given explicitly (brokers, metrics, ZooKeeper)")
    p.add_argument("--metrics-port", type=int, default=None,
                   help="first metrics port (default 9404, or free ports with --port 0); 0 = free ports")
    p.add_argument("--zookeeper-port", type=int, default=None,
                   help="ZooKeeper client port (default 2181, or a free port with --port 0); 0 = a free port")
    p.add_argument("--chroot", default="", help="ZooKeeper chroot for the cluster, e.g. /moldau")
    p.add_argument("--first-id", type=int, default=1, help="broker.id of the first broker (default 1)")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting for every broker (may repeat)")
    p.add_argument("--security", choices=["plaintext", "sasl_ssl"], default="plaintext",
                   help="sasl_ssl: a throwaway CA, SCRAM-SHA-512 users admin/broker, one SASL_SSL listener per "
                        "broker; prints the client settings (docs/security.md)")
    p.add_argument("--detach", action="store_true",
                   help="run in the background (output in <data>/launcher.log, pid in <data>/launcher.pid); "
                        "then `status` / `stop --data <data>`")
    p.add_argument("--prometheus-url", default="http://127.0.0.1:9090",
                   help="where a Prometheus scraping the cluster answers; its dashboard URLs are printed when it "
                        "does (default http://127.0.0.1:9090)")
    p.add_argument("--grafana-url", default="http://127.0.0.1:3000",
                   help="where Grafana answers (default http://127.0.0.1:3000)")
    args = p.parse_args(argv)
    if args.brokers < 1:
        p.error("--brokers must be at least 1")
    if args.metrics_port is None:
        args.metrics_port = 0 if args.port == 0 else 9404
    if args.zookeeper_port is None:
        args.zookeeper_port = 0 if args.port == 0 else 2181
    return args


def _pid_alive(pid: int) -> bool:
    """True while the process runs (a zombie nobody reaped yet does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def _read_pid(data: Path) -> int | None:
    try:
        return int((data / PID_FILE).read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def detach(argv: list[str], data: Path, timeout: float = 120.0) -> int:
    """Starts this launcher again in its own session, writing to <data>/launcher.log, and returns once the
    cluster is up (or the launcher has failed), echoing what it printed."""
    data.mkdir(parents=True, exist_ok=True)
    pid = _read_pid(data)
    if pid is not None and _pid_alive(pid):
        print(f"launcher: a cluster is already running from {data} (pid {pid}); stop it first", file=sys.stderr)
        return 2
    log = data / "launcher.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "moldau.broker.launcher",
                                 *[a for a in argv if a != "--detach"]],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    (data / PID_FILE).write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + timeout
    while proc.poll() is None and "Stop everything" not in log.read_text(errors="replace"):
        if time.monotonic() > deadline:
            print(f"launcher: the cluster did not start within {timeout:.0f}s; see {log}", file=sys.stderr)
            return 1
        time.sleep(0.2)
    print(log.read_text(errors="replace").replace("Stop everything with Ctrl-C (or SIGTERM/SIGHUP to this "
                                                  "process).", f"Stop it with: python -m moldau.broker.launcher "
                                                  f"stop --data {data}"), end="", flush=True)
    if proc.poll() is not None:
        (data / PID_FILE).unlink(missing_ok=True)
        return proc.returncode or 1
    return 0


def control(argv: list[str]) -> int:
    """``status`` / ``stop`` for a cluster started with --detach: found by <data>/launcher.pid."""
    p = argparse.ArgumentParser(prog=f"python -m moldau.broker.launcher {argv[0]}")
    p.add_argument("--data", default="./data", help="the data directory it was started with (default ./data)")
    p.add_argument("--timeout", type=float, default=300.0, help="stop: seconds to wait (default 300)")
    args = p.parse_args(argv[1:])
    data = Path(args.data).resolve()
    pid = _read_pid(data)
    if pid is None or not _pid_alive(pid):
        print(f"no cluster is running from {data}")
        return 3 if argv[0] == "status" else 0
    if argv[0] == "status":
        lines = (data / "launcher.log").read_text(errors="replace").splitlines()
        print(f"running: launcher pid {pid}")
        print("\n".join(line for line in lines if " pid " in line))
        return 0
    os.kill(pid, signal.SIGTERM)  # the launcher stops its brokers one by one, then ZooKeeper
    deadline = time.monotonic() + args.timeout
    while _pid_alive(pid):
        if time.monotonic() > deadline:
            print(f"launcher: pid {pid} did not stop within {args.timeout:.0f}s", file=sys.stderr)
            return 1
        time.sleep(0.2)
    (data / PID_FILE).unlink(missing_ok=True)
    print(f"stopped the cluster of {data}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["status"], ["stop"]):
        return control(argv)
    args = parse_args(argv)
    if args.detach:
        return detach(argv, Path(args.data).resolve())
    out = Output()
    ports = plan_ports(args.brokers, args.port, args.metrics_port, args.zookeeper_port)
    problems = busy_ports(ports, args.first_id)
    if problems:  # refuse before anything starts: a cluster with a missing broker is not what was asked for
        for problem in problems:
            out.say(f"launcher: {problem}", err=True)
        out.say("launcher: nothing was started; free the port(s), choose others (--port, --metrics-port, "
                "--zookeeper-port) or let the launcher pick free ones with --port 0", err=True)
        return 2
    cluster = Cluster(args, ports, out)

    def on_signal(signum: int, frame: object) -> None:
        if not cluster.stopping:
            cluster.stopping = True
            raise Stop(f"{signal.Signals(signum).name} received")

    # Explicitly, also for SIGINT: a launcher started in the background of a script inherits SIGINT ignored.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    code = 0
    try:
        cluster.start()
        out.say(cluster.usage())
        cluster.watch()
    except Stop as stop:
        out.say(f"\n{stop.why}: stopping the cluster...")
    except ChildExited as exc:
        out.say(f"launcher: {exc}", err=True)
        code = 1
    except (RuntimeError, TimeoutError, FileNotFoundError) as exc:
        out.say(f"launcher: {exc}; stopping what was started", err=True)
        code = 1
    finally:
        cluster.stopping = True  # further signals while stopping are ignored: the stop is already under way
        cluster.stop()
    return code


if __name__ == "__main__":
    sys.exit(main())
