"""The launcher's --security sasl_ssl: a two-broker cluster with a throwaway CA and SCRAM users in ZooKeeper;
kcat with the printed client properties produces and consumes (so the brokers replicate over SASL_SSL), a
client without them is refused, and the printed moldau-acls command works (ACLs are on)."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from moldau.broker.launcher import live_brokers_metric, shutdown_bound

from .harness import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def kcat(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    exe = shutil.which("kcat")
    assert exe, "kcat is not installed"
    return subprocess.run([exe, *args], input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
                          capture_output=True, timeout=90)


def test_launcher_starts_a_sasl_ssl_cluster(tmp_path: Path) -> None:
    out_path = tmp_path / "launcher.out"
    cmd = [sys.executable, "-m", "moldau.broker.launcher", "--brokers", "2", "--data", str(tmp_path / "data"),
           "--port", "0", "--security", "sasl_ssl"]
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=open(tmp_path / "launcher.err", "wb"),
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        def started() -> str | None:
            text = out_path.read_text()
            return text if "Stop everything" in text or proc.poll() is not None else None

        text = wait_until(started, 150, "the launcher's usage text")
        assert proc.poll() is None, f"the launcher exited: {(tmp_path / 'launcher.err').read_text()[-3000:]}"
        # Printed only once every broker knows both: an auto-created topic gets replication factor 2 at once.
        metrics = [int(m) for m in re.findall(r"metrics http://127\.0\.0\.1:(\d+)/metrics", text)]
        assert len(metrics) == 2 and all(live_brokers_metric(m) == 2 for m in metrics), text
        bootstrap = re.search(r"Bootstrap servers: (\S+)", text)
        props = re.search(r"kcat -F (\S+) -b", text)
        assert bootstrap and props, text
        conf = ["-F", props.group(1), "-b", bootstrap.group(1)]
        lines = [f"secure {i}" for i in range(20)]
        produced = kcat(*conf, "-P", "-t", "secured", "-p", "0", "-X", "acks=all",
                        stdin="\n".join(lines).encode() + b"\n")
        assert produced.returncode == 0, produced.stderr[-2000:]
        consumed = kcat(*conf, "-C", "-t", "secured", "-p", "0", "-o", "beginning", "-c", "20", "-e", "-q")
        assert consumed.stdout.decode().splitlines() == lines, consumed.stderr[-2000:]
        plain = kcat("-b", bootstrap.group(1), "-L", "-m", "5")
        assert plain.returncode != 0
        # ACLs are on: the printed moldau-acls command lists them (SECURITY_DISABLED would exit 1).
        acls = re.search(r"(moldau-acls .*--list)", text)
        assert acls, text
        listed = subprocess.run([sys.executable, "-m", "moldau.tools.acls", *acls.group(1).split()[1:]],
                                capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert listed.returncode == 0, listed.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=shutdown_bound(2))
        finally:
            if proc.poll() is None:
                proc.kill()
