"""``--launch N``: ZooKeeper and N brokers in a temporary directory (broker/launcher.py's machinery), and the
faults moldau-verify injects into them: kill -9 and restart, SIGSTOP/SIGCONT, network partitions
(netfault.py) and ZooKeeper restarts. Every fault is undone by ``heal_all()``.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import signal
import subprocess
from pathlib import Path

from moldau.broker import launcher

from .netfault import NetFaults

log = logging.getLogger("moldau.verify")

FAULTS = ("kill", "pause", "partition", "zk-restart")
# Failure detection within seconds, so faults every few seconds exercise failover rather than waiting on it.
BROKER_SETTINGS = {"zookeeper.session.timeout.ms": "6000", "replica.lag.time.max.ms": "10000",
                   "auto.create.topics.enable": "false", "unclean.leader.election.enable": "false",
                   "controlled.shutdown.retry.backoff.ms": "500", "controller.socket.timeout.ms": "5000",
                   "leader.imbalance.check.interval.seconds": "5", "group.initial.rebalance.delay.ms": "0"}


class _Quiet(launcher.Output):
    """The launcher's messages go to the log: stdout belongs to the report (``--json``)."""

    def say(self, text: str, err: bool = False) -> None:
        log.info("%s", text.strip())


class LaunchedCluster(launcher.Cluster):
    def __init__(self, brokers: int, workdir: Path, overrides: list[str], netfaults: NetFaults | None) -> None:
        config = workdir / "server.properties"
        workdir.mkdir(parents=True, exist_ok=True)
        config.write_text("".join(f"{k}={v}\n" for k, v in BROKER_SETTINGS.items()))
        args = argparse.Namespace(brokers=brokers, data=str(workdir), config=str(config), chroot="", first_id=1,
                                  override=overrides, security="plaintext")
        super().__init__(args, launcher.plan_ports(brokers, 0, 0, 0), _Quiet())
        self.netfaults = netfaults
        self.paused: set[str] = set()
        self.down: set[str] = set()

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.ports.brokers)

    def broker_names(self) -> list[str]:
        return [f"broker-{self.args.first_id + i}" for i in range(self.args.brokers)]

    def _in_child(self, name: str, launcher_pid: int) -> None:
        super()._in_child(name, launcher_pid)
        if self.netfaults is not None and name.startswith("broker-"):
            # Before exec: every socket the broker will open belongs to its cgroup (netfault.py).
            with open(self.netfaults.group(name) / "cgroup.procs", "w") as f:
                f.write(f"{os.getpid()}\n")

    def check(self) -> None:
        """As the launcher's, except for the children a fault stopped on purpose."""
        for name, proc in self.children:
            if name not in self.down and proc.poll() is not None:
                raise launcher.ChildExited(f"{name} exited unexpectedly with code {proc.returncode} "
                                           f"(see {self.data / (name + '.log')})")

    def proc(self, name: str) -> subprocess.Popen[bytes]:
        return next(p for n, p in self.children if n == name)

    def _respawn(self, name: str) -> None:
        self.children = [(n, p) for n, p in self.children if n != name]
        if name == "zookeeper":
            cmd = launcher.zookeeper_command(self.data / "zookeeper", self.ports.zookeeper)
            port = self.ports.zookeeper
        else:
            i = int(name.split("-")[1]) - self.args.first_id
            cmd, port = self.broker_command(i), self.ports.brokers[i]
        self._wait_port(name, self._spawn(name, cmd), port, 90)

    # ------------------------------------------------------------------------------------------------ faults
    def start_fault(self, kind: str, rng: random.Random) -> str:
        """Injects one fault of ``kind``; returns what it did (heal() undoes it)."""
        if kind == "zk-restart":
            proc = self.proc("zookeeper")
            proc.terminate()
            proc.wait(timeout=launcher.ZOOKEEPER_STOP_TIMEOUT_S)
            self.down.add("zookeeper")
            return "ZooKeeper stopped"
        victim = rng.choice(self.broker_names())
        if kind == "kill":
            self.proc(victim).kill()
            self.proc(victim).wait(timeout=30)
            self.down.add(victim)
            return f"kill -9 {victim}"
        if kind == "pause":
            self.proc(victim).send_signal(signal.SIGSTOP)
            self.paused.add(victim)
            return f"SIGSTOP {victim}"
        if kind == "partition":
            assert self.netfaults is not None
            i = int(victim.split("-")[1]) - self.args.first_id
            peers = {n: self.ports.brokers[j] for j, n in enumerate(self.broker_names()) if n != victim}
            self.netfaults.isolate(victim, self.ports.brokers[i], {**peers, "zookeeper": self.ports.zookeeper})
            return f"{victim} cut off from ZooKeeper and the other brokers (clients still reach it)"
        raise ValueError(f"unknown fault {kind}")

    def heal_all(self) -> None:
        """Resumes paused brokers, heals partitions, restarts what was stopped (ZooKeeper first)."""
        for name in sorted(self.paused):
            self.proc(name).send_signal(signal.SIGCONT)
        self.paused.clear()
        if self.netfaults is not None:
            self.netfaults.heal()
        for name in sorted(self.down, key=lambda n: n != "zookeeper"):
            self._respawn(name)
        self.down.clear()

    def close(self) -> None:
        try:
            self.heal_all()
        except (OSError, TimeoutError, RuntimeError) as exc:
            log.warning("healing before the stop failed: %s", exc)
        finally:
            self.stopping = True
            self.stop()


def fault_unavailable(faults: list[str]) -> str | None:
    """Why the chosen faults cannot run here (partitions need root, iptables' cgroup match, cgroup2)."""
    if "partition" in faults:
        why = NetFaults.unavailable()
        if why is not None:
            return f"--faults partition: {why}"
    return None

