"""CPU time of each process over the produce and consume phases of bench/many_partitions.py (issue #21).

    .venv/bin/python bench/phase_cpu.py -- --partitions 10000 --records 1000000 --client moldau --skip-failover

Runs ``bench/many_partitions.py`` with the arguments after ``--`` (one ``--records`` value), samples utime+stime
of it (the client) and of its child processes (the brokers, ZooKeeper) from ``/proc`` every 50 ms, and prints its
report followed by the CPU seconds of each process over the 10-partition and the 10,000-partition produce and
consume phases (from the line that announces a phase to the next phase's; the first round's with ``--rounds``). Throughput ratios move with whatever else falls into
a phase; CPU seconds per phase are the finer measure of a per-partition cost. The phases include the producer's
set-up and metadata warm-up, which are the same in both; the consume phases the consumer's assign and seeks (10,000
seeks are ~0.4 s of the client's CPU, outside the timed part).

``--timeline MS`` (before ``--``) also prints, for the first 10-partition and 10,000-partition produce phases, each
process's share of a core in every ``MS`` milliseconds (``/proc`` counts CPU in 10 ms ticks, so bins of 100 ms or more
are meaningful): when a phase keeps fewer than the two cores busy, it shows who waits when.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[float, int] | None:
    """(CPU seconds, parent pid) of a process, None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICK, int(fields[1])


def _label(pid: int, root: int) -> str:
    if pid == root:
        return "client"
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "?"
    return "broker" if "moldau.broker" in cmdline else "zookeeper" if "zookeeper" in cmdline.lower() else "other"


def main() -> int:
    own = sys.argv[1:sys.argv.index("--")] if "--" in sys.argv else []
    args = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:]
    timeline_ms = int(own[own.index("--timeline") + 1]) if "--timeline" in own else 0
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "many_partitions.py"), *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[tuple[float, str]] = []
    samples: list[tuple[float, dict[int, float]]] = []
    labels: dict[int, str] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            now = time.monotonic()
            pids = [proc.pid] + [int(d) for d in os.listdir("/proc") if d.isdigit()
                                 and (s := _stat(int(d))) is not None and s[1] == proc.pid]
            snap = {}
            for pid in pids:
                s = _stat(pid)
                if s is not None:
                    snap[pid] = s[0]
                    if labels.get(pid, "other") == "other":  # until exec: the bench's own command line
                        labels[pid] = _label(pid, proc.pid)
            samples.append((now, snap))
            time.sleep(0.05)

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append((time.monotonic(), line.rstrip()))
            sys.stderr.write(line)

    threading.Thread(target=sample, daemon=True).start()
    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    assert proc.stdout is not None
    report = proc.stdout.read()
    proc.wait()
    done.set()
    reader.join(5)
    print(report, end="")

    def when(prefix: str) -> float | None:
        return next((t for t, line in lines if line.startswith(prefix)), None)

    def at(t: float) -> dict[int, float]:
        return min(samples, key=lambda s: abs(s[0] - t))[1]

    produce = [t for t, line in lines if line.startswith("produce ")]
    consume = [t for t, line in lines if line.startswith("consume ")]
    end = when("end of the consume phases")
    if len(produce) < 2 or len(consume) < 2 or end is None:
        print("phase CPU: the phases were not found in the bench's output")
        return proc.returncode
    # the first round's phases (with --rounds, later rounds are not split)
    for name, (a, b) in (("produce over 10 partitions", (produce[0], produce[1])),
                         ("produce over all partitions", (produce[1], consume[0])),
                         ("consume over 10 partitions", (consume[0], consume[1])),
                         ("consume over all partitions", (consume[1], end))):
        before, after = at(a), at(b)
        parts = [(labels.get(pid, "?"), after[pid] - before.get(pid, 0.0)) for pid in sorted(after)]
        total = sum(d for label, d in parts if label in ("client", "broker"))
        shown = ", ".join(f"{label} {d:.2f}" for label, d in parts if label != "other")
        print(f"phase CPU, {name}: {b - a:.2f} s wall; CPU s: {shown}; client + brokers {total:.2f}")
    if timeline_ms:
        for name, (a, b) in (("produce over 10 partitions", (produce[0], produce[1])),
                             ("produce over all partitions", (produce[1], consume[0]))):
            _timeline(name, [s for s in samples if a - 0.1 <= s[0] <= b + 0.1], labels, timeline_ms / 1000)
    return proc.returncode


def _timeline(name: str, samples: list[tuple[float, dict[int, float]]], labels: dict[int, str], step: float) -> None:
    """Each client and broker process's share of a core per ``step`` seconds over ``samples`` (one phase)."""
    if len(samples) < 2:
        return
    pids = [pid for pid in sorted(samples[-1][1]) if labels.get(pid) in ("client", "broker")]
    names = [labels[pid] for pid in pids]
    t0 = samples[0][0]
    print(f"timeline, {name}: share of a core per {step * 1000:.0f} ms ({', '.join(names)}; sum); 0 s is "
          f"{t0:.3f} s of the monotonic clock")
    start = samples[0]
    for s in samples[1:]:
        if s[0] - start[0] < step - 0.025 and s is not samples[-1]:
            continue
        span = s[0] - start[0]
        shares = [(s[1].get(pid, 0.0) - start[1].get(pid, 0.0)) / span for pid in pids]
        print(f"  {start[0] - t0:5.2f}-{s[0] - t0:5.2f} s  " + " ".join(f"{x:4.2f}" for x in shares)
              + f"  {sum(shares):4.2f}")
        start = s


if __name__ == "__main__":
    sys.exit(main())
