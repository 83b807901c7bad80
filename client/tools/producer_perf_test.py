"""``moldau-producer-perf-test``: Kafka's kafka-producer-perf-test over Moldau's async producer.

    moldau-producer-perf-test --topic t --num-records 100000 --record-size 100 --throughput -1 \\
        --producer-props bootstrap.servers=127.0.0.1:9092 acks=1

Prints Kafka's progress line every 5 s and the final summary with latency percentiles; Ctrl-C ends the run early
with the summary of what was acknowledged.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from moldau.tools.common import (
    ToolError,
    ToolParser,
    UsageError,
    parse_key_values,
    read_properties_file,
    run_tool,
)

REPORT_INTERVAL_S = 5.0


@dataclass(slots=True)
class Stats:
    """Latencies (ms) of acknowledged records, per window and overall, in Kafka's output formats."""

    start: float = field(default_factory=time.monotonic)
    count: int = 0
    bytes: int = 0
    latencies: list[float] = field(default_factory=list)
    window_start: float = field(default_factory=time.monotonic)
    window_count: int = 0
    window_bytes: int = 0
    window_total_ms: float = 0.0
    window_max_ms: float = 0.0

    def record(self, latency_ms: float, size: int) -> None:
        self.count += 1
        self.bytes += size
        self.latencies.append(latency_ms)
        self.window_count += 1
        self.window_bytes += size
        self.window_total_ms += latency_ms
        self.window_max_ms = max(self.window_max_ms, latency_ms)

    def window_line(self, now: float) -> str:
        elapsed = max(now - self.window_start, 1e-9)
        n = self.window_count
        line = (f"{n} records sent, {n / elapsed:.1f} records/sec ({self.window_bytes / elapsed / 1048576:.2f} "
                f"MB/sec), {self.window_total_ms / max(n, 1):.1f} ms avg latency, {self.window_max_ms:.1f} ms max "
                "latency.")
        self.window_start, self.window_count, self.window_bytes = now, 0, 0
        self.window_total_ms = self.window_max_ms = 0.0
        return line

    def summary(self, now: float) -> str:
        elapsed = max(now - self.start, 1e-9)
        lat = sorted(self.latencies)

        def pct(p: float) -> int:
            return int(lat[min(int(p * len(lat)), len(lat) - 1)]) if lat else 0
        avg = sum(lat) / len(lat) if lat else 0.0
        return (f"{self.count} records sent, {self.count / elapsed:f} records/sec "
                f"({self.bytes / elapsed / 1048576:.2f} MB/sec), {avg:.2f} ms avg latency, "
                f"{(lat[-1] if lat else 0.0):.2f} ms max latency, {pct(0.5)} ms 50th, {pct(0.95)} ms 95th, "
                f"{pct(0.99)} ms 99th, {pct(0.999)} ms 99.9th.")


DEFAULT_TRANSACTIONAL_ID = "performance-producer-default-transactional-id"  # Kafka's defaults
DEFAULT_TRANSACTION_DURATION_MS = 3000


def _parser() -> ToolParser:
    p = ToolParser(prog="moldau-producer-perf-test", description="Producer performance test.")
    p.add_argument("--topic", required=False)
    p.add_argument("--num-records", type=int, default=None)
    p.add_argument("--record-size", type=int, default=None)
    p.add_argument("--payload-file", default=None)
    p.add_argument("--throughput", type=float, default=None, help="records/sec cap; -1 for none")
    p.add_argument("--producer-props", nargs="+", default=[], metavar="PROP=VALUE")
    p.add_argument("--producer.config", "--command-config", dest="producer_config", default=None, metavar="FILE",
                   help="producer config file (security settings, ...)")
    p.add_argument("--print-metrics", action="store_true")
    p.add_argument("--transactional-id", default=None,
                   help="the transactional id to use (overrides transactional.id of --producer-props/--producer.config)")
    p.add_argument("--transaction-duration-ms", type=int, default=None,
                   help="the max age of each transaction: commit_transaction() after this long (> 0); transactions "
                        f"are on when set (transactional id {DEFAULT_TRANSACTIONAL_ID} unless given) or when a "
                        f"transactional id is (then {DEFAULT_TRANSACTION_DURATION_MS} ms)")
    return p


def parse_args(argv: Sequence[str]) -> tuple[argparse.Namespace, dict[str, Any], bytes | list[bytes]]:
    args = _parser().parse_args(list(argv))
    for flag, value in (("--topic", args.topic), ("--num-records", args.num_records),
                        ("--throughput", args.throughput)):
        if value is None:
            raise UsageError(f"Missing required argument \"[{flag.lstrip('-')}]\"")
    if args.num_records < 0:
        raise UsageError("--num-records must not be negative")
    conf: dict[str, Any] = {}
    if args.producer_config:
        conf.update(read_properties_file(args.producer_config, "--producer.config"))
    conf.update(parse_key_values(args.producer_props, "--producer-props"))
    if args.transactional_id is not None:
        conf["transactional.id"] = args.transactional_id
    if args.transaction_duration_ms is not None:
        if args.transaction_duration_ms <= 0:
            raise UsageError("--transaction-duration-ms must be greater than 0")
        conf.setdefault("transactional.id", DEFAULT_TRANSACTIONAL_ID)
    elif conf.get("transactional.id"):
        args.transaction_duration_ms = DEFAULT_TRANSACTION_DURATION_MS
    if "bootstrap.servers" not in conf:
        raise UsageError("--producer-props: bootstrap.servers is required")
    if (args.record_size is None) == (args.payload_file is None):
        raise UsageError("exactly one of --record-size or --payload-file is required")
    payload: bytes | list[bytes]
    if args.record_size is not None:
        if args.record_size < 0:
            raise UsageError("--record-size must not be negative")
        payload = bytes(random.choice(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(args.record_size))
    else:
        try:
            lines = open(args.payload_file, "rb").read().split(b"\n")
        except OSError as exc:
            raise ToolError(f"--payload-file: {exc}") from None
        payload = [line for line in lines if line]
        if not payload:
            raise ToolError(f"--payload-file: {args.payload_file} has no payloads")
    return args, conf, payload


def _acked(stats: Stats, sent_at: float, size: int, future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is None:
        stats.record((time.monotonic() - sent_at) * 1000, size)


async def run(args: argparse.Namespace, conf: dict[str, Any], payload: bytes | list[bytes], out: Any,
              stats: Stats) -> Stats:
    from moldau.aio import Producer

    async with Producer(conf) as producer:
        txn_s = (args.transaction_duration_ms or 0) / 1000  # > 0: transactions (Kafka's --transaction-duration-ms)
        if txn_s:
            await producer.init_transactions()
            producer.begin_transaction()
        start = txn_start = time.monotonic()
        next_report = start + REPORT_INTERVAL_S
        try:
            for i in range(args.num_records):
                value = payload if isinstance(payload, bytes) else random.choice(payload)
                sent_at = time.monotonic()
                future = await producer.send(args.topic, value)
                future.add_done_callback(functools.partial(_acked, stats, sent_at, len(value)))
                if txn_s and sent_at - txn_start >= txn_s:
                    await producer.commit_transaction()
                    producer.begin_transaction()
                    txn_start = time.monotonic()
                if args.throughput > 0:
                    ahead = start + (i + 1) / args.throughput - time.monotonic()
                    if ahead > 0:
                        await asyncio.sleep(ahead)
                now = time.monotonic()
                if now >= next_report:
                    print(stats.window_line(now), file=out, flush=True)
                    next_report = now + REPORT_INTERVAL_S
            await (producer.commit_transaction() if txn_s else producer.flush())
        except asyncio.CancelledError:
            pass
    return stats


def main(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        args, conf, payload = parse_args(sys.argv[1:] if argv is None else argv)
        stats = Stats()
        try:
            asyncio.run(run(args, conf, payload, sys.stdout, stats))
        except KeyboardInterrupt:
            pass
        print(stats.summary(time.monotonic()), flush=True)
        return 0
    return run_tool(body, "moldau-producer-perf-test", argv)


if __name__ == "__main__":
    sys.exit(main())
