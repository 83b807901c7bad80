"""Start-up (and stop) times of moldau.testing's brokers, against a broker started as a subprocess.

    .venv/bin/python bench/fixture_startup.py [--singles 5] [--clusters 3] [--subprocesses 3]

The figures go to docs/testing.md ("Start-up times"). The cluster runs need ZooKeeper (Debian's package) and Java.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def subprocess_start() -> float:
    """Seconds until a `python -m moldau.broker` child accepts connections."""
    with tempfile.TemporaryDirectory() as data, socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        t = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "moldau.broker", "--override",
                                 f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={data}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while not _accepts(port):
                if proc.poll() is not None or time.perf_counter() - t > 60:
                    raise RuntimeError("the broker did not start")
                time.sleep(0.01)
            return time.perf_counter() - t
        finally:
            proc.terminate()
            proc.wait(30)


def _summary(name: str, times: list[float]) -> None:
    if times:
        print(f"{name:<44} {min(times):7.3f} {statistics.median(times):7.3f} {max(times):7.3f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--singles", type=int, default=5)
    p.add_argument("--clusters", type=int, default=3)
    p.add_argument("--subprocesses", type=int, default=3)
    args = p.parse_args()
    t = time.perf_counter()
    from moldau.testing.cluster import MoldauBroker, MoldauCluster

    imported = time.perf_counter() - t
    singles, clusters, cluster_stops = [], [], []
    for _ in range(args.singles):
        t = time.perf_counter()
        broker = MoldauBroker().start()
        singles.append(time.perf_counter() - t)
        broker.stop()
    for _ in range(args.clusters):
        t = time.perf_counter()
        cluster = MoldauCluster(3).start()
        clusters.append(time.perf_counter() - t)
        t = time.perf_counter()
        cluster.stop()
        cluster_stops.append(time.perf_counter() - t)
    subprocesses = [subprocess_start() for _ in range(args.subprocesses)]
    print(f"{'seconds':<44} {'min':>7} {'median':>7} {'max':>7}")
    _summary("import of the broker modules (once)", [imported])
    _summary("single broker, in-process start", singles)
    _summary("single broker, subprocess start", subprocesses)
    _summary("3-broker cluster + ZooKeeper, start", clusters)
    _summary("3-broker cluster + ZooKeeper, stop", cluster_stops)


if __name__ == "__main__":
    main()
