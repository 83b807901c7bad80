"""``moldau-console-consumer``: Kafka's kafka-console-consumer on Moldau's client.

    moldau-console-consumer --bootstrap-server 127.0.0.1:9092 --topic t --from-beginning \\
        --property print.key=true --property key.separator=-

Without ``--group`` the tool assigns itself every partition of the topic(s) (or the one ``--partition``) and
commits nothing; with ``--group`` it joins that group and auto-commits. Records go to stdout as Kafka's
DefaultMessageFormatter writes them; "Processed a total of N messages" goes to stderr on exit (also on Ctrl-C).
Bad input: one line naming the flag or property, exit code 2; a failure: one line, exit code 1 (tools/common.py).
"""

from __future__ import annotations

import asyncio
import logging
import re
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from moldau.config import CONSUMER_KEYS, consumer_config
from moldau.errors import ConfigError
from moldau.fetcher import ConsumerRecord, TopicPartition
from moldau.tools.common import ToolError, ToolParser, UsageError, run_tool

PROG = "moldau-console-consumer"
_BOOL_PROPS = ("print.key", "print.value", "print.timestamp", "print.partition", "print.offset", "print.headers")
_DEFAULT_PROPS = {"print.key": False, "print.value": True, "print.timestamp": False, "print.partition": False,
                  "print.offset": False, "print.headers": False, "key.separator": "\t", "line.separator": "\n",
                  "headers.separator": ",", "headers.key.separator": ":", "null.literal": "null"}


@dataclass
class Options:
    bootstrap: str
    topic: str | None = None
    include: re.Pattern[str] | None = None
    partition: int | None = None
    offset: str | int = "latest"
    group: str | None = None
    max_messages: int | None = None
    timeout_ms: int | None = None
    skip_on_error: bool = False
    formatter: dict[str, Any] = field(default_factory=lambda: dict(_DEFAULT_PROPS))
    consumer: dict[str, Any] = field(default_factory=dict)


def _parser() -> ToolParser:
    p = ToolParser(prog=PROG, description="Read records from a topic and print them to stdout.")
    p.add_argument("--bootstrap-server", help="REQUIRED: host:port[,host:port...] of brokers")
    p.add_argument("--topic", help="the topic to consume")
    p.add_argument("--include", "--whitelist", dest="include", help="regex of topics to consume")
    p.add_argument("--partition", help="consume only this partition (needs --topic)")
    p.add_argument("--offset", help="earliest, latest or a non-negative offset (needs --partition)")
    p.add_argument("--from-beginning", action="store_true", help="start at the earliest offset without a commit")
    p.add_argument("--group", help="consumer group id (joins the group, commits offsets)")
    p.add_argument("--max-messages", help="exit after this many records")
    p.add_argument("--timeout-ms", help="exit when no record arrives for this long")
    p.add_argument("--property", action="append", default=[], help="formatter property key=value (repeatable)")
    p.add_argument("--consumer-property", action="append", default=[], help="consumer setting key=value")
    p.add_argument("--consumer.config", "--command-config", dest="consumer_config", metavar="FILE",
                   help="properties file of consumer settings (security settings, ...)")
    p.add_argument("--skip-message-on-error", action="store_true", help="skip records that fail to format")
    p.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"), default=None,
                   help="read_committed: only committed transactional records; read_uncommitted (default): all")
    return p


def _key_value(flag: str, text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise UsageError(f"{flag} {text!r}: expected key=value")
    return key.strip(), value


def _int(flag: str, text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{flag}: {text!r} is not an integer") from None
    if value < minimum:
        raise UsageError(f"{flag}: {value} must be at least {minimum}")
    return value


def _unescape(text: str) -> str:
    # Kafka users pass separators such as \t or \n literally on the shell.
    return text.encode("latin-1", "backslashreplace").decode("unicode_escape") if "\\" in text else text


def _read_properties(path: str) -> dict[str, str]:
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as exc:
        raise UsageError(f"--consumer.config {path}: {exc.strerror}") from None
    out: dict[str, str] = {}
    for line in lines:
        line = line.strip()
        if line and not line.startswith(("#", "!")):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def parse_args(argv: Sequence[str]) -> Options:
    a = _parser().parse_args(list(argv))
    if not a.bootstrap_server:
        raise UsageError("--bootstrap-server is required")
    if (a.topic is None) == (a.include is None):
        raise UsageError("exactly one of --topic or --include is required")
    opts = Options(a.bootstrap_server, topic=a.topic, group=a.group, skip_on_error=a.skip_message_on_error)
    if a.include is not None:
        try:
            opts.include = re.compile(a.include)
        except re.error as exc:
            raise UsageError(f"--include {a.include!r}: invalid regex ({exc})") from None
    if a.partition is not None:
        if a.include is not None:
            raise UsageError("--partition needs --topic, not --include")
        if a.group is not None:
            raise UsageError("--partition and --group cannot be used together")
        opts.partition = _int("--partition", a.partition, 0)
    if a.offset is not None:
        if opts.partition is None:
            raise UsageError("--offset needs --partition")
        if a.from_beginning:
            raise UsageError("--offset and --from-beginning cannot be used together")
        opts.offset = a.offset if a.offset in ("earliest", "latest") else _int("--offset", a.offset, 0)
    elif a.from_beginning:
        opts.offset = "earliest"
    if a.max_messages is not None:
        opts.max_messages = _int("--max-messages", a.max_messages, 1)
    if a.timeout_ms is not None:
        opts.timeout_ms = _int("--timeout-ms", a.timeout_ms, 0)
    for text in a.property:
        key, value = _key_value("--property", text)
        if key in _BOOL_PROPS:
            if value.strip().lower() not in ("true", "false"):
                raise UsageError(f"--property {key}: expected true or false, got {value!r}")
            opts.formatter[key] = value.strip().lower() == "true"
        elif key in _DEFAULT_PROPS:
            opts.formatter[key] = _unescape(value)
        else:
            raise UsageError(f"--property {key}: unknown formatter property")
    settings: dict[str, Any] = _read_properties(a.consumer_config) if a.consumer_config else {}
    for text in a.consumer_property:
        key, value = _key_value("--consumer-property", text)
        settings[key] = value
    for key in settings:
        if key not in CONSUMER_KEYS:
            raise UsageError(f"--consumer-property {key}: unknown consumer setting")
    if a.isolation_level is not None:
        settings["isolation.level"] = a.isolation_level
    opts.consumer = settings
    return opts


def format_record(record: ConsumerRecord, props: dict[str, Any]) -> bytes:
    """One record as Kafka's DefaultMessageFormatter prints it (fields joined by key.separator)."""
    parts: list[bytes] = []
    null = props["null.literal"].encode()
    if props["print.timestamp"]:
        kind = "LogAppendTime" if record.timestamp_type == 1 else "CreateTime"
        parts.append(f"{kind}:{record.timestamp}".encode() if record.timestamp >= 0 else b"NO_TIMESTAMP")
    if props["print.partition"]:
        parts.append(f"Partition:{record.partition}".encode())
    if props["print.offset"]:
        parts.append(f"Offset:{record.offset}".encode())
    if props["print.headers"]:
        if record.headers:
            hsep, ksep = props["headers.separator"].encode(), props["headers.key.separator"].encode()
            parts.append(hsep.join(k.encode() + ksep + (null if v is None else bytes(v)) for k, v in record.headers))
        else:
            parts.append(b"NO_HEADERS")
    if props["print.key"]:
        parts.append(null if record.key is None else _as_bytes(record.key))
    if props["print.value"]:
        parts.append(null if record.value is None else _as_bytes(record.value))
    return props["key.separator"].encode().join(parts) + props["line.separator"].encode()


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return str(value).encode()


async def check_topic_exists(consumer: Any, topic: str) -> None:
    """Kafka's consumer warns ``Error while fetching metadata ... : {t=UNKNOWN_TOPIC_OR_PARTITION}`` and waits;
    the tool says so in one line and stops (exit 1) instead of waiting for a topic nobody creates."""
    deadline = time.monotonic() + 2.0  # a topic created a moment ago may still be reaching this broker's cache
    while topic not in await consumer.topics():
        if time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            continue
        raise ToolError(f"Error while fetching metadata: {{{topic}=UNKNOWN_TOPIC_OR_PARTITION}}: topic '{topic}' "
                        "does not exist (create it with moldau-topics --create, or pass --consumer-property "
                        "allow.auto.create.topics=true)")


async def _target_partitions(consumer: Any, opts: Options) -> list[TopicPartition]:
    assert opts.topic is not None
    if opts.partition is not None:
        parts = await consumer.partitions_for_topic(opts.topic)
        if opts.partition not in parts:
            raise UsageError(f"--partition {opts.partition}: topic {opts.topic!r} has partitions {sorted(parts)}")
        return [TopicPartition(opts.topic, opts.partition)]
    return [TopicPartition(opts.topic, p) for p in sorted(await consumer.partitions_for_topic(opts.topic))]


async def consume(opts: Options, out: IO[bytes], stop: asyncio.Event, counter: list[int]) -> None:
    """Runs until --max-messages, --timeout-ms or ``stop``; ``counter[0]`` counts the records printed."""
    from moldau.consumer import Consumer

    settings = dict(opts.consumer)
    settings["bootstrap.servers"] = opts.bootstrap
    settings.setdefault("auto.offset.reset", "earliest" if opts.offset == "earliest" else "latest")
    # a read-only tool does not create topics (Kafka's consumers may): only when asked with this property
    settings.setdefault("allow.auto.create.topics", "false")
    if opts.group is not None:
        settings["group.id"] = opts.group
    consumer = Consumer(settings)
    await consumer.start()
    try:
        if opts.topic is not None and str(consumer.config["allow.auto.create.topics"]).lower() != "true":
            await check_topic_exists(consumer, opts.topic)
        if opts.group is not None:
            if opts.include is not None:
                consumer.subscribe(pattern=opts.include.pattern)
            else:
                consumer.subscribe([opts.topic or ""])
        else:
            await _assign(consumer, opts)
        last = time.monotonic()
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=200)
            if not batch:
                if opts.timeout_ms is not None and (time.monotonic() - last) * 1000 >= opts.timeout_ms:
                    break
                continue
            last = time.monotonic()
            chunks: list[bytes] = []
            for records in batch.values():
                for record in records:
                    if opts.max_messages is not None and counter[0] >= opts.max_messages:
                        break
                    try:
                        chunks.append(format_record(record, opts.formatter))
                    except Exception as exc:
                        if not opts.skip_on_error:
                            raise
                        logging.getLogger(PROG).error("skipping %s-%d@%d: %s", record.topic, record.partition,
                                                      record.offset, exc)
                        continue
                    counter[0] += 1
            out.write(b"".join(chunks))
            out.flush()
            if opts.max_messages is not None and counter[0] >= opts.max_messages:
                break
    finally:
        await consumer.close()


async def _assign(consumer: Any, opts: Options) -> None:
    if opts.include is not None:
        pattern = opts.include
        topics = sorted(t for t in await consumer.topics() if pattern.fullmatch(t) and not t.startswith("__"))
        tps = [TopicPartition(t, p) for t in topics for p in sorted(await consumer.partitions_for_topic(t))]
    else:
        tps = await _target_partitions(consumer, opts)
    consumer.assign(tps)
    if isinstance(opts.offset, int):
        for tp in tps:
            consumer.seek(tp, opts.offset)
    elif opts.offset == "earliest":
        consumer.seek_to_beginning(*tps)
    else:
        consumer.seek_to_end(*tps)


async def _main(opts: Options, out: IO[bytes], counter: list[int]) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)  # Ctrl-C: leave the loop, close the consumer, print the total
    try:
        await consume(opts, out, stop, counter)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="[%(levelname)s] %(name)s: %(message)s")
    counter = [0]

    def body() -> int:
        opts = parse_args(sys.argv[1:] if argv is None else argv)
        try:
            consumer_config(dict(opts.consumer), bootstrap_servers=opts.bootstrap)  # validate before connecting
        except ConfigError as exc:
            flag = "--bootstrap-server" if exc.key == "bootstrap.servers" else "--consumer-property"
            raise UsageError(f"{flag} {exc}") from None
        try:
            asyncio.run(_main(opts, sys.stdout.buffer, counter))
        except (BrokenPipeError, KeyboardInterrupt):
            pass  # stdout closed (e.g. piped into head) or Ctrl-C: stop quietly, print the total
        except Exception:
            if counter[0]:  # the records printed so far count; an error before any stays one line
                print(f"Processed a total of {counter[0]} messages", file=sys.stderr)
            raise
        print(f"Processed a total of {counter[0]} messages", file=sys.stderr)
        return 0
    return run_tool(body, PROG, argv)


if __name__ == "__main__":
    sys.exit(main())
