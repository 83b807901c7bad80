"""What a transaction costs the cluster: CPU per transaction of each broker and of the client, and the requests
each broker handles per transaction, beside the idempotent producer's cost for the same records.

    .venv/bin/python bench/txn_cpu.py                         # 300,000 x 100 B each way, transactions of 1,000
    .venv/bin/python bench/txn_cpu.py --busy 1                # the same with one busy-looping process (a core taken)
    .venv/bin/python bench/txn_cpu.py --spy /tmp/prof         # and py-spy (raw stacks, GIL-holding samples) per broker
    .venv/bin/python bench/txn_cpu.py --strace /tmp/sc        # and `strace -c -f` per broker (system calls)

The cluster and the producers are bench/transactions.py's (ZooKeeper, three brokers, a topic of 4 partitions RF 3,
min.insync.replicas=2, confluent-kafka, acks=all, linger.ms=5; every 10th transaction aborted). After a warm-up
of each kind, one idempotent phase and one transactional phase run back to back; for each the bench prints
records/s, the user and system CPU seconds of every broker (/proc/<pid>/stat) and of the bench process (the
client: librdkafka's threads), the brokers' event-loop context switches (/proc/<pid>/status), and the requests
each broker counted (``moldau_requests_total``), per transaction of ``--txn-records`` records (the idempotent
phase per as many records).

``--busy N`` starts N processes that spin for the whole run: a repeatable stand-in for a loaded machine (the
ratio of bench/transactions.py drops from ~0.75 to ~0.5 with one on the 2-core VM). ``--spy DIR`` records each
broker with py-spy (``/tmp/spy/bin/py-spy`` or ``py-spy`` on the PATH; never ``--native``) during the
transactional phase, ``--gil`` so that the event loop's idle waits are left out. ``--strace DIR`` counts each
broker's system calls during the transactional phase (``strace -c -f``: it slows the brokers, so its run's CPU
and rates are not comparable with others'). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import collections
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import transactions as bench  # noqa: E402

from bench import _cluster  # noqa: E402

SPIN = "while True: pass"


def cpu(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / _cluster.TICKS, int(fields[12]) / _cluster.TICKS


BYTES = {"moldau_fetch_sendfile_bytes_total ": "sendfile bytes", "moldau_fetch_copied_bytes_total ": "copied bytes"}


def switches(pid: int) -> tuple[int, int]:
    """(voluntary, involuntary) context switches of ``pid``'s main thread (the event loop's) so far: how often
    it went to sleep (each a wake-up later), and how often it was preempted."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["voluntary_ctxt_switches"]), int(fields["nonvoluntary_ctxt_switches"])


def requests(c: _cluster.Cluster) -> collections.Counter[tuple[int, str]]:
    """(broker id, api) -> requests handled so far, from each broker's metrics; also (broker id, "sendfile
    bytes" / "copied bytes"): the fetch answers' record bytes sent by sendfile or read into the answer."""
    out: collections.Counter[tuple[int, str]] = collections.Counter()
    for b in c.brokers:
        with urllib.request.urlopen(b.metrics_url, timeout=5) as resp:
            for line in resp.read().decode().splitlines():
                if line.startswith("moldau_requests_total{"):
                    api = line.split('api="', 1)[1].split('"', 1)[0]
                    out[(b.broker_id, api)] += float(line.rsplit(" ", 1)[1])
                for prefix, name in BYTES.items():
                    if line.startswith(prefix):
                        out[(b.broker_id, name)] += float(line.rsplit(" ", 1)[1])
    return out


class Phase:
    """CPU and request counters around one phase, from ``start()`` (the producer's clock starting: after its
    creation and warm-up, whose wait for a producer id would count as the phase's) to the block's end."""

    def __init__(self, c: _cluster.Cluster) -> None:
        self.c = c
        self.pids = {b.broker_id: b.pid for b in c.brokers}

    def __enter__(self) -> Phase:
        return self

    def start(self) -> None:
        self.requests = requests(self.c)
        self.cpu = {i: cpu(p) for i, p in self.pids.items()}
        self.switches = {i: switches(p) for i, p in self.pids.items()}
        self.client = resource.getrusage(resource.RUSAGE_SELF)
        self.t0 = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.t0
        client = resource.getrusage(resource.RUSAGE_SELF)
        self.client_cpu = (client.ru_utime - self.client.ru_utime, client.ru_stime - self.client.ru_stime)
        self.cpu = {i: tuple(b - a for a, b in zip(self.cpu[i], cpu(p), strict=True)) for i, p in self.pids.items()}
        self.switches = {i: tuple(b - a for a, b in zip(self.switches[i], switches(p), strict=True))
                         for i, p in self.pids.items()}
        after = requests(self.c)
        self.requests = collections.Counter({k: n - self.requests.get(k, 0) for k, n in after.items()})

    def report(self, name: str, records: int, units: int) -> str:
        per = 1000 / units  # ms per unit from seconds
        lines = [f"{name}: {records / self.seconds:,.0f} records/s, {self.seconds:.2f} s; CPU ms per "
                 f"{records // units:,} records (user + sys):"]
        total = 0.0
        for i, (user, system) in sorted(self.cpu.items()):
            total += user + system
            lines.append(f"  broker {i}  {user * per:6.2f} + {system * per:5.2f}")
        lines.append(f"  brokers   {total * per:6.2f}")
        woken = sum(v for v, _ in self.switches.values())
        preempted = sum(n for _, n in self.switches.values())
        lines.append(f"  brokers' event loops: {woken / units:.1f} wake-ups, {preempted / units:.1f} preemptions "
                     f"(voluntary / involuntary context switches)")
        lines.append(f"  client    {self.client_cpu[0] * per:6.2f} + {self.client_cpu[1] * per:5.2f}")
        lines.append(f"  CPU in use: {(total + sum(self.client_cpu)) / self.seconds:.2f} cores "
                     f"(brokers and client)")
        counts = {k: n / units for k, n in self.requests.items() if n / units >= 0.05}
        for i in sorted(self.pids):
            mine = ", ".join(f"{api} {n:.2f}" if api not in BYTES.values() else f"{api} {n:,.0f}"
                             for (b, api), n in sorted(counts.items()) if b == i)
            lines.append(f"  broker {i} requests: {mine or '-'}")
        return "\n".join(lines)


def py_spy() -> str:
    for path in ("/tmp/spy/bin/py-spy", shutil.which("py-spy")):
        if path and os.access(path, os.X_OK):
            return path
    raise SystemExit("py-spy not found (/tmp/spy/bin/py-spy or on the PATH)")


def run(records: int, txn_records: int, abort_every: int, busy: int, spy: Path | None,
        strace: Path | None = None) -> str:
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(busy)]
    try:
        with _cluster.cluster(overrides=bench.BROKER_OVERRIDES, prefix="moldau-bench-txncpu-") as c:
            bootstrap = c.bootstrap
            bench.create_topic(bootstrap, "idem")
            bench.create_topic(bootstrap, "txn")
            bench.idempotent(bootstrap, "idem", 20_000)  # warm-up: connections, the coordinator's topic
            bench.transactional(bootstrap, "txn", 20 * txn_records, txn_records, abort_every, "warm-up")
            units = max(records // txn_records, 1)
            with Phase(c) as idem:
                bench.idempotent(bootstrap, "idem", records, on_start=idem.start)
            spies = []
            if spy is not None:
                spy.mkdir(parents=True, exist_ok=True)
                spies = [subprocess.Popen([py_spy(), "record", "--nonblocking", "--gil", "-r", "200", "-f", "raw",
                                           "-o", str(spy / f"broker-{b.broker_id}.txt"), "-p", str(b.pid)],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                         for b in c.brokers]
            if strace is not None:
                strace.mkdir(parents=True, exist_ok=True)
                spies += [subprocess.Popen(["strace", "-c", "-f", "-o", str(strace / f"broker-{b.broker_id}.txt"),
                                            "-p", str(b.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                          for b in c.brokers]
            if spies:
                time.sleep(1.0)  # attached
            with Phase(c) as txn:
                _, commits, _ = bench.transactional(bootstrap, "txn", records, txn_records, abort_every, "cpu",
                                                    on_start=txn.start)
            for s in spies:
                s.send_signal(signal.SIGINT)
            for s in spies:
                s.wait(60)
    finally:
        for s in spinners:
            s.kill()
            s.wait()
    commits.sort()
    return "\n".join([
        idem.report("idempotent", records, units),
        txn.report(f"transactional ({txn_records:,} per transaction)", records, units),
        f"commit_transaction() p50 {commits[len(commits) // 2]:.1f} ms; {busy} busy process(es). (Compare the records/s "
        "within a run only: the idempotent rate also moves with --records, ~270,000 at 300,000 here and "
        "250,000-400,000 in bench/transactions.py's rounds of 100,000 on the 2-core VM, so their ratio is not "
        "bench/transactions.py's.)"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--txn-records", type=int, default=1000)
    parser.add_argument("--abort-every", type=int, default=10)
    parser.add_argument("--busy", type=int, default=0, help="busy-looping processes for the whole run")
    parser.add_argument("--spy", type=Path, help="directory for py-spy's raw stacks of each broker")
    parser.add_argument("--strace", type=Path, help="directory for `strace -c -f` of each broker")
    args = parser.parse_args(argv)
    print(run(args.records, args.txn_records, args.abort_every, args.busy, args.spy, args.strace))
    return 0


if __name__ == "__main__":
    sys.exit(main())
