"""What an acks=all write costs when the follower follows many partitions and only a few take writes (issue #21).

    .venv/bin/python bench/follower_many_partitions.py --partitions 3333 --writes 300

In one process, over loopback: a leader (socket server, worker pool, its real Produce and Fetch handlers over
tests/unit/broker/apis/handler_env.py) and a real follower ``Fetcher`` (broker 1) that follows ``--partitions``
partitions of one topic, as each broker of a 10,000-partition RF 3 cluster follows ~6,666 from two leaders. Once
every partition has one record and the fetcher is steady, a client writes ``--writes`` acks=all records, one at a
time, round robin over the first ``--active`` partitions; each write completes when the follower's next fetch
reports it. Prints CPU time (``time.process_time``: leader and follower together) and wall time per write; run it
against two commits to compare (the follower's positions were built for every partition on every fetch before
the steady fetch looked only at the partitions its last answer touched). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.unit.broker.test_replica_exchange import Producer, _until, exchange  # noqa: E402


async def run(partitions: int, writes: int, active: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        async with exchange(Path(tmp), partitions=partitions) as ex:
            for index in range(partitions):
                ex.follow(index)
            producer = Producer(ex.server)
            try:
                for index in range(partitions):
                    await producer.produce(index)
                await _until(lambda: ex.fetcher._steady, "steady")
                for i in range(20):  # warm-up
                    await producer.produce(i % active)
                cpu, wall = time.process_time(), time.perf_counter()
                for i in range(writes):
                    await producer.produce(i % active)
                return (time.process_time() - cpu) / writes, (time.perf_counter() - wall) / writes
            finally:
                producer.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=3333, help="partitions the follower follows")
    parser.add_argument("--writes", type=int, default=300)
    parser.add_argument("--active", type=int, default=3, help="partitions the writes go to, round robin")
    args = parser.parse_args()
    cpu, wall = asyncio.run(run(args.partitions, args.writes, min(args.active, args.partitions)))
    print(f"{args.partitions:,} followed partitions, writes to {min(args.active, args.partitions)}: "
          f"{cpu * 1000:.2f} ms CPU, {wall * 1000:.2f} ms wall per acks=all write")
    return 0


if __name__ == "__main__":
    sys.exit(main())
