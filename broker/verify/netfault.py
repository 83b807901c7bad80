"""Network partitions between processes on 127.0.0.1, for the reliability tests and moldau-verify.

Each process that takes part goes into a cgroup (v2) of its own, and iptables drops the TCP packets that one
cgroup sends to another process's port, in a chain of our own that OUTPUT jumps to. A cut therefore acts like a
partition on a real network (packets vanish: connections time out, new ones hang), while everything else on the
machine, the test process and its clients included, still reaches every port. We use this rather than network
namespaces with veth pairs because every address stays on loopback and the brokers need no other listeners; it
needs root, iptables with the cgroup match and a cgroup2 mount. ``NetFaults.unavailable()`` says why not where
that is missing, and the tests skip with that reason.

Everything is undone by ``close()``: the chain is flushed and deleted, processes go back to the root cgroup and
our cgroups are removed. Rule names carry a random suffix, so runs never touch each other's rules.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path


def _cgroup2_root() -> Path | None:
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    for line in mounts:
        parts = line.split()
        if len(parts) >= 3 and parts[2] == "cgroup2":
            return Path(parts[1])
    return None


def _iptables(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["iptables", "-w", "5", *args], capture_output=True, text=True, timeout=20)


class NetFaults:
    def __init__(self) -> None:
        root = _cgroup2_root()
        assert root is not None, "no cgroup2 mount (check NetFaults.unavailable() first)"
        self.cgroup2 = root
        self.tag = uuid.uuid4().hex[:8]
        self.base = root / f"moldau-{self.tag}"
        self.chain = f"MOLDAU-{self.tag}"
        self.rules: list[list[str]] = []
        self.base.mkdir()
        _iptables("-N", self.chain).check_returncode()
        _iptables("-I", "OUTPUT", "-j", self.chain).check_returncode()

    @staticmethod
    def unavailable() -> str | None:
        """Why partitions cannot be made here, or None if they can."""
        if os.geteuid() != 0:
            return "network partitions need root (iptables, cgroups)"
        if shutil.which("iptables") is None:
            return "iptables is not installed"
        root = _cgroup2_root()
        if root is None:
            return "no cgroup2 file system is mounted"
        probe = root / f"moldau-probe-{uuid.uuid4().hex[:8]}"
        try:
            probe.mkdir()
        except OSError as exc:
            return f"cannot create a cgroup under {root}: {exc}"
        try:
            rule = ["OUTPUT", "-m", "cgroup", "--path", str(probe.relative_to(root)), "-j", "ACCEPT"]
            added = _iptables("-A", *rule)
            if added.returncode != 0:
                return f"iptables has no usable cgroup match: {added.stderr.strip()}"
            _iptables("-D", *rule)
            return None
        finally:
            probe.rmdir()

    def group(self, name: str) -> Path:
        """The cgroup ``name`` (created on first use). A process must start in it (the tests' BrokerProcess
        ``cgroup``, moldau-verify's launched cluster): iptables matches a socket by the cgroup its process was
        in when the socket was made, so moving a running process would leave its open connections uncut."""
        group = self.base / name
        group.mkdir(exist_ok=True)
        return group

    def cut(self, name: str, port: int) -> None:
        """Drops every TCP packet that processes of cgroup ``name`` send to ``port`` on this machine."""
        rule = ["-m", "cgroup", "--path", str((self.base / name).relative_to(self.cgroup2)), "-p", "tcp",
                "--dport", str(port), "-j", "DROP"]
        _iptables("-A", self.chain, *rule).check_returncode()
        self.rules.append(rule)

    def isolate(self, name: str, own_port: int, peers: dict[str, int]) -> None:
        """Cuts ``name`` (listening on ``own_port``) off from each peer cgroup (listening on its port) both ways.
        A peer with port 0 is only cut from ``name``'s side (e.g. ZooKeeper, which we do not place)."""
        for peer, port in peers.items():
            self.cut(name, port)
            if (self.base / peer).exists():
                self.cut(peer, own_port)

    def heal(self) -> None:
        _iptables("-F", self.chain)
        self.rules.clear()

    def close(self) -> None:
        self.heal()
        _iptables("-D", "OUTPUT", "-j", self.chain)
        _iptables("-X", self.chain)
        root_procs = self.cgroup2 / "cgroup.procs"
        for group in self.base.glob("*"):
            if not group.is_dir():
                continue
            for pid in (group / "cgroup.procs").read_text().split():
                try:
                    root_procs.write_text(f"{pid}\n")
                except OSError:
                    pass  # the process is gone
            group.rmdir()
        self.base.rmdir()
