"""moldau-verify end to end: a launched 3-broker cluster under kill -9 and SIGSTOP faults checks clean, and a
history whose records were deleted out from under it (a truncated segment on a single broker) is flagged as lost.

Both run the installed console script as a user would; every run is bounded by its own --duration and a
subprocess timeout, and the tool stops what it launched.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .harness import BrokerProcess
from .secure import client_settings, make_certs, secured_broker

pytestmark = pytest.mark.integration


def verify(*argv: str, timeout: float) -> tuple[int, dict[str, Any], str]:
    """Runs moldau-verify --json; (exit code, the JSON it printed, its stderr)."""
    script = shutil.which("moldau-verify", path=str(Path(sys.executable).parent))
    assert script is not None, "moldau-verify is not installed next to this Python"
    done = subprocess.run([script, *argv, "--json", "--progress-interval", "2"], capture_output=True, text=True,
                          timeout=timeout)
    try:
        result = json.loads(done.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"exit {done.returncode}, no JSON on stdout:\n{done.stdout}\n{done.stderr[-3000:]}")
    return done.returncode, result, done.stderr


@pytest.mark.slow
def test_a_launched_cluster_under_kill_and_pause_faults_loses_nothing() -> None:
    code, result, err = verify("--launch", "3", "--duration", "30", "--faults", "kill,pause", "--rate", "200",
                               "--fault-interval", "8", "--seed", "7", timeout=420)
    print(err[-2000:])
    assert result["anomalies"] == {"lost": 0, "unexpected": 0, "duplicated": 0, "reordered": 0, "changed": 0}
    assert code == 0 and result["ok"]
    assert sum(result["faults"].values()) >= 3  # a fault every 8 s for 30 s
    assert result["acked"] > 3000 and result["final_read"] >= result["acked"]
    assert "fault: kill -9 broker-" in err or "fault: SIGSTOP broker-" in err
    assert "sent " in err and " acked " in err  # the progress lines


def test_command_config_carries_the_security_settings(tmp_path: Path) -> None:
    """--command-config gives every client of the run its SASL settings: a SCRAM listener checks clean with the
    right password; with a wrong one the run stops with one line in the tools' style."""
    certs = make_certs(tmp_path / "certs")
    broker = secured_broker(tmp_path / "broker", "SASL_PLAINTEXT", certs)
    try:
        good, bad = tmp_path / "client.properties", tmp_path / "wrong.properties"
        settings = client_settings("SASL_PLAINTEXT", certs, "SCRAM-SHA-256")
        good.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        bad.write_text(good.read_text().replace(settings["sasl.password"], "wrong-password")
                       + "socket.connection.setup.timeout.ms=3000\n")
        code, result, err = verify("--bootstrap-server", broker.bootstrap, "--command-config", str(good),
                                   "--partitions", "2", "--replication-factor", "1", "--duration", "2",
                                   "--rate", "100", "--consumers", "1", timeout=180)
        assert code == 0 and result["ok"] and result["acked"] >= 150, err[-2000:]
        script = shutil.which("moldau-verify", path=str(Path(sys.executable).parent))
        assert script is not None
        done = subprocess.run([script, "--bootstrap-server", broker.bootstrap, "--command-config", str(bad),
                               "--duration", "2"], capture_output=True, text=True, timeout=120)
    finally:
        broker.stop()
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("moldau-verify: error: "), done.stderr
    assert "uthentication" in lines[0], lines[0]


def _truncate_segment(broker: BrokerProcess, topic: str) -> int:
    """Cuts the partition's (only) segment in half while the broker is down; returns the bytes removed."""
    segment = max(broker.partition_dir(topic).glob("*.log"), key=lambda p: p.stat().st_size)
    size = segment.stat().st_size
    with open(segment, "r+b") as f:
        f.truncate(size // 2)
    return size - size // 2


@pytest.mark.slow
def test_records_deleted_under_a_finished_run_are_reported_lost(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "broker").start()
    try:
        history = tmp_path / "history.json"
        code, result, err = verify("--bootstrap-server", broker.bootstrap, "--topic", "victim", "--partitions", "1",
                                   "--replication-factor", "1", "--duration", "4", "--rate", "200",
                                   "--consumers", "1", "--history", str(history), timeout=180)
        assert code == 0 and result["ok"] and result["acked"] >= 400, err[-2000:]
        # Unchanged, a second read of the same history checks clean too: the loss below is what flags it.
        code, result, err = verify("--recheck", str(history), "--bootstrap-server", broker.bootstrap, timeout=120)
        assert code == 0 and result["ok"], err[-2000:]
        broker.kill()
        assert _truncate_segment(broker, "victim") > 0
        broker.start()
        code, result, err = verify("--recheck", str(history), "--bootstrap-server", broker.bootstrap, timeout=120)
    finally:
        broker.stop()
    assert code == 2 and not result["ok"], err[-2000:]
    assert result["anomalies"]["lost"] > 100
    assert result["anomalies"]["duplicated"] == result["anomalies"]["unexpected"] == 0
    assert "acked at 0/" in result["examples"]["lost"][0]


def _processes_using(path: Path) -> list[int]:
    """Pids whose command line mentions ``path`` (the launched cluster's ZooKeeper and brokers)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(path).encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue  # gone meanwhile
    return found


def test_sigint_stops_the_run_and_the_cluster_it_launched(tmp_path: Path) -> None:
    script = shutil.which("moldau-verify", path=str(Path(sys.executable).parent))
    assert script is not None
    data = tmp_path / "cluster"
    # SIGINT ignored on entry, as in a script's background job: the tool must still stop on it.
    proc = subprocess.Popen([script, "--launch", "1", "--duration", "300", "--faults", "kill",
                             "--fault-interval", "4", "--data", str(data), "--progress-interval", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # bounded by the subprocess's own start-up timeouts
            if " acked " in line:
                break
        assert _processes_using(data), "the launched cluster is running"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "SIGINT: the run was stopped and the launched cluster with it" in err
    assert _processes_using(data) == []
