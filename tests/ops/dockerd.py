"""A private Docker daemon for the compose test (no pytest in here).

``PrivateDockerd.start()`` runs Debian's ``dockerd`` in the background with its own socket, pid file and exec-root
under a fresh temp dir, and its data-root in a cache directory that survives the run (``MOLDAU_DOCKER_CACHE``,
default /tmp/moldau-docker-cache): the base image and the build cache of one run serve the next. A lock file keeps
two runs off one data-root. ``stop()`` is idempotent and runs from the test's finalizer, at exit, and on
SIGTERM/SIGHUP: ``docker-compose down -v`` is the caller's job; here the daemon is stopped by its pid (then
killed), processes under our exec-root (containerd, shims) are killed by pid, the bridges of the networks it
created are deleted, and -- when no other dockerd runs on the machine -- the iptables chains Docker adds.
Every step is bounded.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import fcntl
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import IO, Any

log = logging.getLogger("moldau.tests.dockerd")

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
DOCKER_CHAINS = {"filter": ["DOCKER", "DOCKER-ISOLATION-STAGE-1", "DOCKER-ISOLATION-STAGE-2", "DOCKER-USER"],
                 "nat": ["DOCKER"]}


class DockerdUnavailable(Exception):
    """dockerd cannot run here (not installed, not root, no cgroups ...): the caller skips with this reason."""


def _die_with_parent() -> None:
    # PR_SET_PDEATHSIG: dockerd gets SIGTERM (and stops its containers) if the test process is SIGKILLed.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _pids_with(fragment: str) -> list[int]:
    """Pids whose command line contains `fragment` (our exec-root path: our containerd and shims only)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if fragment in cmdline:
            out.append(int(entry.name))
    return out


def _other_dockerd_running(own_pid: int | None) -> bool:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == own_pid:
            continue
        try:
            if (entry / "comm").read_text().strip() == "dockerd":
                return True
        except OSError:
            continue
    return False


class PrivateDockerd:
    def __init__(self, cache_dir: Path | None = None) -> None:
        self.cache_dir = cache_dir or Path(os.environ.get("MOLDAU_DOCKER_CACHE", "/tmp/moldau-docker-cache"))
        self.data_root = self.cache_dir / "data"
        # exec-root holds unix sockets: keep its path short (108-byte limit).
        self.run_dir = Path(tempfile.mkdtemp(prefix="mdk-", dir="/tmp"))
        self.exec_root = self.run_dir / "x"
        self.pidfile = self.run_dir / "dockerd.pid"
        self.socket = self.run_dir / "docker.sock"
        self.log_path = self.run_dir / "dockerd.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._lock: IO[str] | None = None
        self._networks: set[str] = set()
        self._stopped = False
        self._previous_handlers: dict[int, Any] = {}

    @property
    def host(self) -> str:
        return f"unix://{self.socket}"

    def env(self) -> dict[str, str]:
        return dict(os.environ, DOCKER_HOST=self.host)

    def docker(self, *args: str, timeout: float = 60.0, check: bool = True,
               stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        docker = shutil.which("docker")
        assert docker, "docker CLI missing"
        proc = subprocess.run([docker, *args], env=self.env(), input=stdin, capture_output=True, timeout=timeout,
                              stdin=None if stdin is not None else subprocess.DEVNULL)
        if check and proc.returncode != 0:
            raise RuntimeError(f"docker {' '.join(args)} exited {proc.returncode}: "
                               f"{proc.stderr.decode(errors='replace')[-2000:]}")
        return proc

    # ------------------------------------------------------------------------------------------- start
    def start(self) -> float:
        """Starts the daemon; returns the seconds it took. Raises DockerdUnavailable with the reason."""
        dockerd = shutil.which("dockerd")
        if dockerd is None or shutil.which("docker") is None:
            raise DockerdUnavailable("dockerd/docker not installed (apt-get install docker.io)")
        if os.geteuid() != 0:
            raise DockerdUnavailable("dockerd needs root")
        self.data_root.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.cache_dir / "lock", "w")  # noqa: SIM115 - held until stop()
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise DockerdUnavailable(f"another run holds {self.cache_dir}/lock (its dockerd uses the cache)") from None
        self._install_cleanup()
        t0 = time.monotonic()
        with open(self.log_path, "wb") as out:
            self.proc = subprocess.Popen(
                [dockerd, "--data-root", str(self.data_root), "--exec-root", str(self.exec_root),
                 "--pidfile", str(self.pidfile), "-H", self.host, "--bridge=none"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
                preexec_fn=_die_with_parent)
        deadline = t0 + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                reason = self.log_tail()
                self.stop()
                raise DockerdUnavailable(f"dockerd exited with {self.proc.returncode}: {reason}")
            if self.docker("version", "--format", "{{.Server.Version}}", check=False, timeout=10).returncode == 0:
                return time.monotonic() - t0
            time.sleep(0.25)
        reason = self.log_tail()
        self.stop()
        raise DockerdUnavailable(f"dockerd did not answer within {START_TIMEOUT_S:.0f}s: {reason}")

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no dockerd log)"

    def clear_leftovers(self) -> None:
        """Containers, volumes and networks a killed earlier run left in the cached data-root (only images are
        meant to be reused; its containers with restart policies would come back up with the daemon), and the
        dangling images each rebuild leaves."""
        containers = self.docker("ps", "-aq", timeout=30).stdout.decode().split()
        if containers:
            log.info("removing %d containers left by an earlier run", len(containers))
            self.docker("rm", "-f", "-v", *containers, timeout=120)
        self.docker("volume", "prune", "-f", timeout=60)
        self.docker("network", "prune", "-f", timeout=60)
        self.docker("image", "prune", "-f", timeout=120)

    def has_image(self, name: str) -> bool:
        return self.docker("image", "inspect", name, check=False, timeout=30).returncode == 0

    def remember_networks(self) -> None:
        """Records the ids of the daemon's networks (their bridges are br-<id[:12]>) for the cleanup."""
        proc = self.docker("network", "ls", "-q", "--no-trunc", check=False, timeout=30)
        self._networks.update(proc.stdout.decode().split())

    # -------------------------------------------------------------------------------------------- stop
    def _install_cleanup(self) -> None:
        atexit.register(self.stop)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            self._previous_handlers[sig] = signal.getsignal(sig)
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stop()
        previous = self._previous_handlers.get(signum)
        signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(Exception):
                self.remember_networks()
        own_pid = self.proc.pid if self.proc is not None else None
        try:
            self._stop_daemon()
            for pid in _pids_with(str(self.exec_root)):  # containerd and shims that outlived the daemon
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self._delete_bridges()
            if not _other_dockerd_running(own_pid):
                self._delete_iptables_chains()
        finally:
            self._unmount_run_dir()
            shutil.rmtree(self.run_dir, ignore_errors=True)
            if self._lock is not None:
                self._lock.close()
            for sig, handler in self._previous_handlers.items():
                with contextlib.suppress(ValueError, TypeError):
                    if signal.getsignal(sig) == self._on_signal:
                        signal.signal(sig, handler)
            atexit.unregister(self.stop)

    def _unmount_run_dir(self) -> None:
        """dockerd leaves mounts under its exec-root (netns/default, an nsfs bind mount): unmount, deepest first."""
        umount = shutil.which("umount")
        if umount is None:
            return
        try:
            points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
        except OSError:
            return
        prefix = str(self.run_dir) + "/"
        for point in sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True):
            subprocess.run([umount, "-l", point], capture_output=True, timeout=10)

    def _stop_daemon(self) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            log.warning("dockerd (pid %d) did not stop within %.0fs: killing it", proc.pid, STOP_TIMEOUT_S)
            proc.kill()
            proc.wait(10)

    def _delete_bridges(self) -> None:
        ip = shutil.which("ip")
        if ip is None:
            return
        for network in self._networks:
            bridge = f"br-{network[:12]}"
            if Path(f"/sys/class/net/{bridge}").exists():
                subprocess.run([ip, "link", "delete", bridge], capture_output=True, timeout=10)

    def _delete_iptables_chains(self) -> None:
        """Removes the rules that jump to Docker's chains, then the chains (they outlive dockerd)."""
        iptables = shutil.which("iptables")
        if iptables is None:
            return
        for table, chains in DOCKER_CHAINS.items():
            listed = subprocess.run([iptables, "-t", table, "-S"], capture_output=True, text=True, timeout=10)
            if listed.returncode != 0:
                continue
            for line in listed.stdout.splitlines():
                parts = line.split()
                if len(parts) > 2 and parts[0] == "-A" and parts[1] not in chains and \
                        ("DOCKER" in line or any(f"br-{n[:12]}" in line for n in self._networks)):
                    subprocess.run([iptables, "-t", table, "-D", *parts[1:]], capture_output=True, timeout=10)
            for chain in chains:
                subprocess.run([iptables, "-t", table, "-F", chain], capture_output=True, timeout=10)
            for chain in chains:
                subprocess.run([iptables, "-t", table, "-X", chain], capture_output=True, timeout=10)


def build_local_base(dockerd: PrivateDockerd, tag: str, timeout: float = 900.0) -> float:
    """debootstrap --variant=minbase bookworm (python3, venv, passwd) + docker import; returns the seconds taken."""
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise DockerdUnavailable("debootstrap not installed (apt-get install debootstrap)")
    t0 = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="moldau-base-"))
    try:
        proc = subprocess.run([debootstrap, "--variant=minbase", "--include=python3,python3-venv,passwd",
                               "bookworm", str(root)], capture_output=True, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"debootstrap failed: {proc.stdout.decode(errors='replace')[-2000:]}")
        for junk in ("var/lib/apt/lists", "var/cache/apt/archives"):
            shutil.rmtree(root / junk, ignore_errors=True)
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        docker = shutil.which("docker")
        assert docker is not None and tar.stdout is not None
        imported = subprocess.run([docker, "import", "-", tag], stdin=tar.stdout, env=dockerd.env(),
                                  capture_output=True, timeout=timeout)
        tar.stdout.close()
        tar.wait(60)
        if imported.returncode != 0:
            raise RuntimeError(f"docker import failed: {imported.stderr.decode(errors='replace')[-2000:]}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return time.monotonic() - t0
