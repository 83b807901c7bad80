"""Micro-benchmark of the schema codecs on the hot path: Produce request decode and response encode, Fetch
request decode and response encode (records as bytes, no sendfile), at realistic shapes (10 topics x 10
partitions). Runs in-process, starts nothing; compare two commits by running it in each.

    .venv/bin/python bench/codec.py             # best of 7 rounds, microseconds per message
    .venv/bin/python bench/codec.py --rounds 15
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from moldau.protocol.messages.fetch import FETCH  # noqa: E402
from moldau.protocol.messages.produce import PRODUCE  # noqa: E402

TOPICS, PARTITIONS = 10, 10
RECORDS = bytes(1000)


def produce_request() -> dict[str, Any]:
    return {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
            "topic_data": [{"name": f"topic-{t}", "partition_data": [{"index": p, "records": RECORDS}
                                                                      for p in range(PARTITIONS)]}
                           for t in range(TOPICS)]}


def produce_response() -> dict[str, Any]:
    return {"throttle_time_ms": 0, "responses": [
        {"name": f"topic-{t}", "partition_responses": [
            {"index": p, "error_code": 0, "base_offset": 1000 * p, "log_append_time_ms": -1,
             "log_start_offset": 0, "error_message": None} for p in range(PARTITIONS)]} for t in range(TOPICS)]}


def fetch_request() -> dict[str, Any]:
    return {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800, "isolation_level": 0,
            "topics": [{"topic": f"topic-{t}", "partitions": [
                {"partition": p, "current_leader_epoch": 0, "fetch_offset": 100, "log_start_offset": -1,
                 "partition_max_bytes": 1048576} for p in range(PARTITIONS)]} for t in range(TOPICS)]}


def fetch_response() -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": f"topic-{t}", "partitions": [
            {"partition_index": p, "error_code": 0, "high_watermark": 2000, "last_stable_offset": 2000,
             "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
             "records": RECORDS} for p in range(PARTITIONS)]} for t in range(TOPICS)]}


def best_us(fn: Callable[[], Any], rounds: int, per_round: int = 2000) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(per_round):
            fn()
        best = min(best, (time.perf_counter() - t0) / per_round)
    return best * 1e6


def cases() -> list[tuple[str, Callable[[], Any]]]:
    out: list[tuple[str, Callable[[], Any]]] = []
    for api, version, req, resp in ((PRODUCE, 9, produce_request(), produce_response()),
                                    (PRODUCE, 7, produce_request(), produce_response()),
                                    (FETCH, 12, fetch_request(), fetch_response()),
                                    (FETCH, 11, fetch_request(), fetch_response())):
        wire = api.encode_request(version, req)
        dec = api.request_decoder(version)
        enc = api.response_encoder(version)

        def decode(dec: Any = dec, wire: bytes = wire) -> Any:
            return dec(memoryview(wire), 0)

        def encode(enc: Any = enc, resp: dict[str, Any] = resp) -> Any:
            enc(bytearray(), [], resp)

        out.append((f"{api.name} v{version} request decode", decode))
        out.append((f"{api.name} v{version} response encode", encode))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print(f"{TOPICS} topics x {PARTITIONS} partitions, best of {args.rounds} rounds")
    for name, fn in cases():
        print(f"  {name:32s} {best_us(fn, args.rounds):8.1f} us")


if __name__ == "__main__":
    main()
