"""One replication round over many partitions, in one process: what each step costs per partition (issue #21).

    .venv/bin/python bench/replication_round.py --partitions 3333 --rounds 7

A leader with ``--partitions`` partitions (RF 2: follower 1 in the ISR), its real Fetch and Produce handlers
(tests/unit/broker/apis/handler_env.py: logs in a temporary directory) and a follower's logs. Each round:
  * produce: one acks=all Produce v9 request with a 2-record batch for every partition (decoded as the broker
    decodes it; it parks waiting for the follower);
  * f0: the follower's incremental session fetch (request built as the replica fetcher builds it, encoded and
    decoded), the leader's handler, the answer encoded (file regions read as the network layer copies small
    ones), decoded by the follower, which appends every partition's batch;
  * f1: the follower's next fetch, naming every partition at its new log end offset: the leader updates its
    follower state, moves every high watermark and completes the Produce request, whose answer is encoded;
  * f2: an idle fetch (nothing changed anywhere).
``--idempotent``: the batches carry a producer id and sequences (the producer-state checks of every append, as
from an idempotent producer, the default of Kafka's clients and Moldau's). ``--records N``: N records of 100 B in
each partition's batch (default 2; ``bench/many_partitions.py``'s 10,000-partition phase writes 100 per partition, a
~10 KB batch, and then the write, CRC and copy of each batch weigh in; the follower's fetch is then allowed the whole
round's bytes, where the cluster's take 10 MiB a fetch). ``--profile FILE``: a cProfile of the
counted rounds. Prints the median CPU time (``time.process_time``) of each step over ``--rounds`` rounds, after a
first round that is not counted. With ``--no-freeze`` the partition state is left in CPython's full
collections (as before broker/gc_freeze.py); by default it is frozen after set-up, and the young generation's
threshold raised, as the broker's process does (``raise_young_threshold``; CPython's default on older commits).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from moldau.broker.apis import ROUTES  # noqa: E402
from moldau.broker.metadata import PartitionState  # noqa: E402
from moldau.broker.request_channel import Request  # noqa: E402
from moldau.protocol.api import REGISTRY, ApiKey  # noqa: E402
from moldau.protocol.fetch_session import FetcherSession  # noqa: E402
from moldau.protocol.header import RequestHeader  # noqa: E402
from moldau.protocol.records import build_batch  # noqa: E402
from moldau.protocol.schema import assemble  # noqa: E402
from moldau.storage.config import LogConfig, ManualClock  # noqa: E402
from moldau.storage.log_manager import LogManager  # noqa: E402
from tests.unit.broker.apis.handler_env import make_env  # noqa: E402

FETCH_V, PRODUCE_V = 12, 9
try:  # the follower's positions as tuples (since branch fetch10k); before, a request dict per partition
    from moldau.protocol.fetch_session import position_fields
    TUPLES = True
except ImportError:  # so the same bench measures older commits
    TUPLES = False
try:  # the broker's own process collects its young generation less often (since branch p10k8)
    from moldau.broker.gc_freeze import raise_young_threshold
except ImportError:
    def raise_young_threshold() -> tuple[int, int, int]:  # type: ignore[misc]
        return gc.get_threshold()


async def run(partitions: int, rounds: int, freeze: bool, profile: str | None = None, idempotent: bool = False,
              records: int = 2) -> dict[str, list[float]]:
    tmp = Path(tempfile.mkdtemp(prefix="moldau-round-"))
    thresholds = gc.get_threshold()
    try:
        env = make_env(tmp)
        await env.create_topic("t", partitions=partitions)
        for p in range(partitions):
            env.replica_manager.become_leader_or_follower("t", PartitionState(p, 0, 1, [0, 1], [0, 1]), {})
        follower_logs = LogManager([tmp / "follower"], LogConfig(), ManualClock())
        follower_logs.load()
        logs = [follower_logs.get_or_create_log("t", p, LogConfig()) for p in range(partitions)]
        if freeze:
            gc.collect()
            gc.freeze()
            thresholds = raise_young_threshold()  # as the broker's process does (broker/gc_freeze.py)
        fetch, produce = REGISTRY[ApiKey.FETCH], REGISTRY[ApiKey.PRODUCE]
        session = FetcherSession()
        batch = bytes(build_batch([(None, b"x" * 100, [], None)] * records))
        # One fetch takes the whole round (the cluster's followers take 10 MiB a fetch: several with large batches)
        max_bytes = max(10 << 20, 2 * len(batch) * partitions)
        times: dict[str, list[float]] = {}

        def took(step: str, since: float) -> float:
            now = time.process_time()
            times.setdefault(step, []).append(now - since)
            return now

        async def follower_fetch(step: str) -> None:
            t = time.process_time()
            if TUPLES:
                wanted: Any = {("t", p): (1, lg.log_end_offset, lg.latest_epoch, lg.log_start_offset, 1 << 20)
                               for p, lg in enumerate(logs)}
            else:
                wanted = {("t", p): {"partition": p, "current_leader_epoch": 1, "fetch_offset": lg.log_end_offset,
                                     "last_fetched_epoch": lg.latest_epoch, "log_start_offset": lg.log_start_offset,
                                     "partition_max_bytes": 1 << 20} for p, lg in enumerate(logs)}
            session_id, epoch, changed, forgotten = session.build(wanted)
            entries = [position_fields(tp[1], e) for tp, e in changed.items()] if TUPLES else list(changed.values())
            body = {"replica_id": 1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes, "isolation_level": 0,
                    "session_id": session_id, "session_epoch": epoch, "rack_id": "", "forgotten_topics_data": [],
                    "topics": [{"topic": "t", "partitions": entries}] if entries else []}
            wire = fetch.encode_request(FETCH_V, body)
            t = took(f"{step} follower: build + encode request", t)
            decoded, _ = fetch.request_decoder(FETCH_V)(wire, 0)
            request = Request(RequestHeader(ApiKey.FETCH, FETCH_V, 1, "f"), fetch, wire, 0, "127.0.0.1")
            answer: Any = ROUTES[ApiKey.FETCH](env.ctx, request, decoded)
            if not isinstance(answer, dict):
                answer = await answer
            t = took(f"{step} leader: decode + handler", t)
            out, external = bytearray(), []  # type: ignore[var-annotated]
            fetch.response_encoder(FETCH_V)(out, external, answer)
            data = bytearray()
            for part in assemble(out, external):
                if isinstance(part, (bytes, bytearray, memoryview)):
                    data += part
                else:
                    for region in getattr(part, "regions", [part]):
                        data += os.pread(region.fileobj.fileno(), region.length, region.position)
            t = took(f"{step} leader: encode answer", t)
            response, _ = fetch.response_decoder(FETCH_V)(bytes(data), 0)
            session.on_response(response["session_id"], epoch, changed, forgotten)
            for topic in response["responses"]:
                for p in topic["partitions"]:
                    if p["records"] is not None and len(p["records"]):
                        logs[p["partition_index"]].append_as_follower(p["records"])
            took(f"{step} follower: decode + append", t)

        profiler = None
        if profile:
            import cProfile
            profiler = cProfile.Profile()
        for r in range(rounds + 1):
            if profiler is not None and r == 1:
                profiler.enable()
            if idempotent:  # one producer id, its sequence in each partition
                one = bytes(build_batch([(None, b"x" * 100, [], None)] * records, producer_id=4242,
                                        producer_epoch=0, base_sequence=records * r))
                batches = [one] * partitions
            else:
                batches = [batch] * partitions
            body = {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [
                {"name": "t", "partition_data": [{"index": p, "records": b} for p, b in enumerate(batches)]}]}
            wire = produce.encode_request(PRODUCE_V, body)
            t = time.process_time()
            decoded, _ = produce.request_decoder(PRODUCE_V)(memoryview(bytearray(wire)), 0)
            request = Request(RequestHeader(ApiKey.PRODUCE, PRODUCE_V, 1, "p"), produce, wire, 0, "127.0.0.1")
            parked: Any = ROUTES[ApiKey.PRODUCE](env.ctx, request, decoded)
            took("produce: decode + handler (parks)", t)
            await follower_fetch("f0")
            await follower_fetch("f1")
            t = time.process_time()
            assert parked.done(), "the produce did not complete on the follower's report"
            produce.encode_response(PRODUCE_V, parked.result())
            took("produce: encode answer", t)
            await follower_fetch("f2 (idle)")
            if r == 0:
                times.clear()
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(profile)
        return times
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=3333)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--no-freeze", action="store_true")
    parser.add_argument("--profile", metavar="FILE", help="write a cProfile of the counted rounds to FILE (pstats)")
    parser.add_argument("--idempotent", action="store_true",
                        help="batches of an idempotent producer (a producer id and sequences), as Kafka's clients and "
                             "Moldau's send by default: the producer-state checks of each append")
    parser.add_argument("--records", type=int, default=2,
                        help="records of 100 B per partition and round (many_partitions' 10,000-partition phase: "
                             "100, a ~10 KB batch)")
    args = parser.parse_args()
    times = asyncio.run(run(args.partitions, args.rounds, not args.no_freeze, args.profile, args.idempotent,
                           args.records))
    print(f"{'step (median CPU time)':<42} {'ms':>8} {'us/partition':>13}")
    total = 0.0
    for step, values in times.items():
        median = sorted(values)[len(values) // 2]
        total += median
        print(f"{step:<42} {median * 1000:>8.1f} {median / args.partitions * 1e6:>13.1f}")
    print(f"{'one round, all steps':<42} {total * 1000:>8.1f} {total / args.partitions * 1e6:>13.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
