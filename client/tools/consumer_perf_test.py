"""``moldau-consumer-perf-test``: Kafka's kafka-consumer-perf-test on Moldau's asyncio consumer.

    moldau-consumer-perf-test --bootstrap-server 127.0.0.1:9092 --topic t --messages 1000000

Joins a group (``--group``, default ``perf-consumer-<random>``), reads ``--messages`` records (keys and values are
touched, as an application would) and prints Kafka's summary line: start/end time, MB and records consumed and
per second, the time until the first assignment (rebalance.time.ms) and the rates after it (fetch.*).
``--show-detailed-stats`` prints Kafka's progress row (time, threadId, totals so far, the interval's rates) every
``--reporting-interval`` ms and for the last partial interval, then the summary (with its own header) as well.
Ctrl-C prints the summary so far. A topic that does not exist is an error (the tool does not create it).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import signal
import sys
import time
from collections.abc import Sequence
from datetime import datetime

from moldau.config import CONSUMER_KEYS, consumer_config
from moldau.errors import ConfigError
from moldau.tools.common import ToolParser, UsageError, read_properties_file, run_tool
from moldau.tools.console_consumer import check_topic_exists

PROG = "moldau-consumer-perf-test"
HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
          "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
DETAILED_HEADER = ("time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                   "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


def _positive(flag: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{flag}: {text!r} is not an integer") from None
    if value <= 0:
        raise UsageError(f"{flag}: must be positive, got {value}")
    return value


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = ToolParser(prog=PROG, description="Measure how fast Moldau's consumer reads a topic.")
    p.add_argument("--bootstrap-server", "--broker-list", dest="bootstrap_server", help="REQUIRED: host:port")
    p.add_argument("--topic", help="REQUIRED: the topic to read")
    p.add_argument("--messages", help="REQUIRED: how many records to read")
    p.add_argument("--group", help="consumer group (default perf-consumer-<random>)")
    p.add_argument("--from-latest", action="store_true", help="start at the log end when nothing is committed")
    p.add_argument("--timeout", default="10000", help="ms without a record before giving up (default 10000)")
    p.add_argument("--reporting-interval", default="5000", help="ms between --show-detailed-stats lines")
    p.add_argument("--show-detailed-stats", action="store_true", help="print stats every --reporting-interval")
    p.add_argument("--hide-header", action="store_true", help="do not print the header line")
    p.add_argument("--print-metrics", action="store_true", help="print the consumer's settings at the end")
    p.add_argument("--consumer-property", action="append", default=[], help="consumer setting key=value")
    p.add_argument("--consumer.config", "--command-config", dest="consumer_config", metavar="FILE",
                   help="properties file of consumer settings (security settings, ...)")
    a = p.parse_args(list(argv))
    for flag, value in (("--bootstrap-server", a.bootstrap_server), ("--topic", a.topic), ("--messages", a.messages)):
        if not value:
            raise UsageError(f"{flag} is required")
    a.messages = _positive("--messages", a.messages)
    a.timeout = _positive("--timeout", a.timeout)
    a.reporting_interval = _positive("--reporting-interval", a.reporting_interval)
    props: dict[str, str] = {}
    if a.consumer_config:
        props.update(read_properties_file(a.consumer_config, "--consumer.config"))
    for text in a.consumer_property:
        key, sep, value = text.partition("=")
        if not sep or key not in CONSUMER_KEYS:
            raise UsageError(f"--consumer-property {text!r}: expected a known consumer setting key=value")
        props[key] = value
    a.props = props
    return a


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S:") + f"{int(t * 1000) % 1000:03d}"


def detailed_line(last: float, now: float, nbytes: int, last_bytes: int, count: int, last_count: int,
                  rebalance: float) -> str:
    """Kafka's --show-detailed-stats row over the interval ``last``..``now``: totals so far, the interval's rates,
    the interval's rebalance time and the rates over its fetch time (the rest of the interval)."""
    elapsed = max(now - last, 1e-9)
    interval_mb = (nbytes - last_bytes) / (1024 * 1024)
    interval_n = count - last_count
    fetch = elapsed - rebalance
    fetch_mb, fetch_n = (interval_mb / fetch, interval_n / fetch) if fetch > 0 else (0.0, 0.0)
    return (f"{_stamp(now)}, 0, {nbytes / (1024 * 1024):.4f}, {interval_mb / elapsed:.4f}, {count}, "
            f"{interval_n / elapsed:.4f}, {int(rebalance * 1000)}, {int(max(fetch, 0) * 1000)}, {fetch_mb:.4f}, "
            f"{fetch_n:.4f}")


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def stats_line(start: float, end: float, nbytes: int, count: int, joined: float | None) -> str:
    """Kafka's summary line (MB = 1024 * 1024 bytes)."""
    elapsed = max(end - start, 1e-9)
    mb = nbytes / (1024 * 1024)
    rebalance = (joined - start) if joined is not None else 0.0
    fetch = max(elapsed - rebalance, 1e-9)
    return (f"{_stamp(start)}, {_stamp(end)}, {mb:.4f}, {mb / elapsed:.4f}, {count}, {count / elapsed:.4f}, "
            f"{int(rebalance * 1000)}, {int(fetch * 1000)}, {mb / fetch:.4f}, {count / fetch:.4f}")


async def run(args: argparse.Namespace, stop: asyncio.Event) -> str:
    from moldau.consumer import Consumer

    settings: dict[str, object] = dict(args.props)
    settings.update({"bootstrap.servers": args.bootstrap_server,
                     "group.id": args.group or f"perf-consumer-{random.randint(0, 99999)}"})
    settings.setdefault("auto.offset.reset", "latest" if args.from_latest else "earliest")
    settings.setdefault("allow.auto.create.topics", "false")  # a read-only tool does not create the topic
    start = time.time()
    count = nbytes = last_count = last_bytes = 0
    joined: float | None = None
    last_report = start

    def report(now: float) -> None:
        rebalance = _overlap(start, joined if joined is not None else now, last_report, now)
        print(detailed_line(last_report, now, nbytes, last_bytes, count, last_count, rebalance), flush=True)

    async with Consumer(settings) as consumer:
        if str(consumer.config["allow.auto.create.topics"]).lower() != "true":
            await check_topic_exists(consumer, args.topic)
        consumer.subscribe([args.topic])
        last_record = time.monotonic()
        while count < args.messages and not stop.is_set():
            batch = await consumer.getmany(timeout_ms=200)
            if joined is None and consumer.assignment():
                joined = time.time()
            if not batch:
                if (time.monotonic() - last_record) * 1000 > args.timeout:
                    print(f"WARNING: Exiting before consuming the expected number of messages: timeout "
                          f"({args.timeout} ms) exceeded.", file=sys.stderr)
                    break
                continue
            last_record = time.monotonic()
            for records in batch.values():
                for r in records:  # touch key and value as an application would
                    nbytes += (len(r.key) if r.key is not None else 0) + (len(r.value) if r.value is not None else 0)
                count += len(records)
            now = time.time()
            if args.show_detailed_stats and (now - last_report) * 1000 >= args.reporting_interval:
                report(now)
                last_report, last_count, last_bytes = now, count, nbytes
        if args.show_detailed_stats and count > last_count:
            report(time.time())  # the last, partial interval: the rows add up to the total
        if args.print_metrics:
            for key, value in sorted(consumer.config.as_dict().items()):
                print(f"{key:<45} : {value}")
    return stats_line(start, time.time(), nbytes, count, joined)


async def _main(args: argparse.Namespace) -> str:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)  # Ctrl-C: stop reading, still print the summary
    return await run(args, stop)


def main(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        try:
            consumer_config(dict(args.props), bootstrap_servers=args.bootstrap_server)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
        if not args.hide_header:
            print(DETAILED_HEADER if args.show_detailed_stats else HEADER, flush=True)
        line = asyncio.run(_main(args))
        if args.show_detailed_stats and not args.hide_header:
            print(HEADER)  # the summary has Kafka's summary columns, under their own header
        print(line)
        return 0
    return run_tool(body, PROG, argv)


if __name__ == "__main__":
    sys.exit(main())
