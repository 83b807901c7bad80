"""SIGTERM ends within controlled.shutdown.max.retries x controlled.shutdown.retry.backoff.ms plus a few seconds,
whatever ZooKeeper does: killed (SIGKILL) or hung (SIGSTOP). The data written before survives the restart.

Each test has its own ZooKeeper, since the test kills or freezes it. Every wait is bounded.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.broker.exit_watchdog import EXIT_SHUTDOWN_TIMEOUT, WATCHDOG_SLACK_S
from moldau.broker.server import SHUTDOWN_GRACE_S
from moldau.storage.log_manager import CLEAN_SHUTDOWN_FILE

from .clients import kp_consume, kp_produce, make_records
from .conftest import _remember
from .harness import BrokerProcess, wait_until
from .zookeeper import ZooKeeperProcess

log = logging.getLogger(__name__)
pytestmark = [pytest.mark.integration, pytest.mark.slow]

RETRIES, BACKOFF_MS = 3, 1000
# The documented hard bound (docs/operations.md): retries x backoff, the grace of the steps after controlled
# shutdown, and the watchdog's slack for the log flush and the interpreter's exit; +1 s for the signal and the reap.
BOUND_S = RETRIES * BACKOFF_MS / 1000 + SHUTDOWN_GRACE_S + WATCHDOG_SLACK_S + 1.0


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[ZooKeeperProcess]:
    zk = ZooKeeperProcess(tmp_path / "zookeeper")
    zk.start()
    try:
        yield zk
    finally:
        if zk.proc is not None and zk.proc.poll() is None:
            zk.proc.send_signal(signal.SIGCONT)
        zk.stop()


def _brokers(zk: ZooKeeperProcess, root: Path, request: pytest.FixtureRequest) -> list[BrokerProcess]:
    chroot = "/" + uuid.uuid4().hex[:10]
    brokers = []
    for broker_id in (1, 2):
        broker = BrokerProcess(root / f"broker{broker_id}", broker_id=broker_id, overrides={
            "zookeeper.connect": zk.connect + chroot, "zookeeper.session.timeout.ms": "6000",
            "controlled.shutdown.max.retries": str(RETRIES),
            "controlled.shutdown.retry.backoff.ms": str(BACKOFF_MS),
            "controller.socket.timeout.ms": "30000", "default.replication.factor": "2",
            "replica.lag.time.max.ms": "2000", "num.partitions": "2",  # each broker leads one partition
            "offsets.topic.replication.factor": "2"})
        _remember(request, broker)
        request.addfinalizer(broker.kill)  # not left running (idle, on a dead ZooKeeper) until the session ends
        brokers.append(broker.start())
    return brokers


def _sigterm_duration(broker: BrokerProcess) -> tuple[float, int | None]:
    t0 = time.monotonic()
    code = broker.stop(signal.SIGTERM, timeout=BOUND_S + 30)  # generous kill-timeout: we measure, then assert
    duration = time.monotonic() - t0
    log.info("broker %d: SIGTERM to exit %.2fs (code %s)", broker.broker_id, duration, code)
    return duration, code


@pytest.mark.parametrize("fault", ["kill", "stop", "stop-and-peer-killed"])
def test_sigterm_is_bounded_whatever_zookeeper_does(fault: str, zookeeper: ZooKeeperProcess, tmp_path: Path,
                                                    request: pytest.FixtureRequest) -> None:
    b1, b2 = _brokers(zookeeper, tmp_path, request)
    topic = "bounded-" + fault
    records = make_records(50, fault, with_nulls=False)
    # Both brokers registered and the topic replicated: acks=all succeeds only with both in the ISR.
    offsets = wait_until(lambda: _try_produce(b1.bootstrap, topic, records), 40, "acks=all produce")
    assert offsets == list(range(50))

    assert zookeeper.proc is not None
    zookeeper.proc.send_signal(signal.SIGKILL if fault == "kill" else signal.SIGSTOP)
    if fault == "kill":
        zookeeper.proc.wait(timeout=10)
    if fault == "stop-and-peer-killed":
        # The peer dies too: whichever broker leads a partition the peer followed tries to shrink its ISR in a
        # ZooKeeper that does not answer, so SIGTERM finds an ISR write pending.
        b2.kill()
        wait_until(lambda: "out of sync" in b1.stderr_text(), 30, "broker 1 shrinking an ISR")
    duration, code = _sigterm_duration(b1)
    assert code == 0, b1.stderr_tail()
    assert duration < BOUND_S, f"SIGTERM took {duration:.1f}s (bound {BOUND_S:.1f}s)\n{b1.stderr_tail()}"
    # Everything was flushed and closed before exit, so the marker is there and the next start skips recovery.
    assert (b1.log_dir / CLEAN_SHUTDOWN_FILE).exists()

    if b2.is_running():  # the other broker obeys the same bound
        duration2, code2 = _sigterm_duration(b2)
        assert code2 == 0 and duration2 < BOUND_S, f"{duration2:.1f}s\n{b2.stderr_tail()}"
    # Everything comes back with the data intact.
    if fault != "kill":
        zookeeper.proc.send_signal(signal.SIGCONT)
    zookeeper.stop()
    zookeeper.start()
    b1.start()
    b2.start()
    got = kp_consume(b1.bootstrap + "," + b2.bootstrap, topic, 50, timeout=60)
    assert [r.value for r in got] == [r.value for r in records]


@pytest.mark.parametrize("finished,code", [(True, 0), (False, EXIT_SHUTDOWN_TIMEOUT)])
def test_exit_watchdog_ends_a_hung_process_at_its_deadline(finished: bool, code: int) -> None:
    """The last resort behind the bounded steps, in a real process whose main thread hangs."""
    script = (f"import time; from moldau.broker import exit_watchdog; "
              f"exit_watchdog.arm(1.0, lambda: {finished}); time.sleep(60)")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=30)
    assert proc.returncode == code, proc.stderr.decode(errors="replace")
    assert 0.9 < time.monotonic() - t0 < 20
    assert b"shutdown-watchdog" in proc.stderr or b"Thread" in proc.stderr  # the stacks were dumped


_ADVANCING = """
import time
from moldau.broker import exit_watchdog
from moldau.storage.log_manager import ShutdownProgress

class Scripted(ShutdownProgress):
    # Each look of the watchdog sees the next value: logs closed go 1, 2, ... up to STOP; syncing for SYNC looks.
    def __init__(self):
        self.logs_total, self.looks, self.sync_looks = 10, 0, 0
    @property
    def logs_closed(self):
        self.looks += 1
        return min(self.looks, STOP)
    @property
    def syncing(self):
        self.sync_looks += 1
        return self.sync_looks <= SYNC

exit_watchdog.arm(0.5, lambda: False, Scripted(), check_s=0.2)
time.sleep(60)
"""


@pytest.mark.parametrize("stop,sync,waits", [(4, 0, 3), (1, 2, 2), (3, 4, 4)])
def test_exit_watchdog_waits_for_a_log_close_that_makes_progress(stop: int, sync: int, waits: int) -> None:
    """Past its deadline the watchdog waits on while logs are being closed (or the file system synced), one
    check at a time, and ends the process at the first check that finds neither. Scripted progress: each look
    sees the next value, so the number of waits is exact whatever the machine's load."""
    script = _ADVANCING.replace("STOP", str(stop)).replace("SYNC", str(sync))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=30)
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == EXIT_SHUTDOWN_TIMEOUT, err
    assert err.count("waiting on") == waits, err
    assert "logs not closed: the next start recovers them" in err


def test_exit_watchdog_does_not_wait_before_the_log_close_begins() -> None:
    script = ("import time; from moldau.broker import exit_watchdog; "
              "from moldau.storage.log_manager import ShutdownProgress; "
              "exit_watchdog.arm(0.5, lambda: False, ShutdownProgress(), check_s=30); time.sleep(60)")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=30)
    assert proc.returncode == EXIT_SHUTDOWN_TIMEOUT, proc.stderr.decode(errors="replace")
    assert time.monotonic() - t0 < 20  # not the 30 s of a progress check
    assert b"waiting on" not in proc.stderr


def _try_produce(bootstrap: str, topic: str, records: list) -> list[int] | None:  # type: ignore[type-arg]
    try:
        return kp_produce(bootstrap, topic, records, acks="all", retries=5)
    except Exception:
        return None
