"""The `python -m moldau.broker` contract: config errors name the key, SIGTERM is a clean exit, /metrics answers."""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from .clients import kp_produce, make_records
from .harness import REPO_ROOT, BrokerProcess, free_port, wait_until

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num.partitions", "abc"),
        ("num.partitions", "0"),
        ("listeners", "nonsense"),
        ("auto.create.topics.enable", "maybe"),
        ("log.segment.bytes", "-5"),
        ("broker.id", "x"),
    ],
)
def test_bad_config_value_exits_nonzero_naming_the_key(tmp_path: Path, key: str, value: str) -> None:
    props = tmp_path / "server.properties"
    props.write_text(
        f"broker.id=0\nlisteners=PLAINTEXT://127.0.0.1:{free_port()}\nlog.dirs={tmp_path / 'logs'}\nmetrics.port=-1\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "moldau.broker", str(props), "--override", f"{key}={value}"],
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode != 0, f"broker accepted {key}={value}"
    assert key in proc.stderr.decode(errors="replace"), proc.stderr.decode(errors="replace")[-2000:]


def test_missing_properties_file_exits_nonzero(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "moldau.broker", str(tmp_path / "nope.properties")],
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode != 0
    assert "nope.properties" in proc.stderr.decode(errors="replace")


def test_started_line_sigterm_clean_exit_and_metrics(
    broker_factory: Callable[..., BrokerProcess], topic: str
) -> None:
    broker = broker_factory()
    wait_until(lambda: "started" in broker.stderr_text(), 30, "a 'started' line on stderr")
    kp_produce(broker.bootstrap, topic, make_records(10, tag="metrics", with_nulls=False), acks=1)
    text = broker.fetch_metrics()
    assert "# TYPE" in text and "# HELP" in text, text[:500]
    assert broker.stop(signal.SIGTERM) == 0, broker.stderr_tail()


def test_metrics_port_minus_one_disables_the_endpoint(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(start=False)
    port = broker.metrics_port
    broker.overrides["metrics.port"] = "-1"
    broker.start()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=3)
