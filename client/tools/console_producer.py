"""``moldau-console-producer``: Kafka's console producer — stdin line by line to a topic.

    moldau-console-producer --bootstrap-server 127.0.0.1:9092 --topic t \\
        --property parse.key=true --property key.separator=:

Reader properties (Kafka's LineMessageReader): ``parse.key``, ``key.separator`` (tab), ``parse.headers``,
``headers.delimiter`` (tab), ``headers.separator`` (,), ``headers.key.separator`` (:), ``null.marker``,
``ignore.error``. On a terminal each line is prompted with ``>``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

from moldau.tools.common import (
    ToolError,
    ToolParser,
    UsageError,
    add_bootstrap,
    bootstrap_from,
    describe,
    parse_key_values,
    read_properties_file,
    run_tool,
    unescape,
)

READER_PROPERTIES = {"parse.key", "key.separator", "parse.headers", "headers.delimiter", "headers.separator",
                     "headers.key.separator", "null.marker", "ignore.error"}
_TRUE = ("true", "1", "yes")


@dataclass(slots=True)
class LineReader:
    """Turns one input line into (key, value, headers) following Kafka's LineMessageReader."""

    parse_key: bool = False
    key_separator: str = "\t"
    parse_headers: bool = False
    headers_delimiter: str = "\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    null_marker: str | None = None
    ignore_error: bool = False

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> LineReader:
        unknown = sorted(set(props) - READER_PROPERTIES)
        if unknown:
            raise UsageError(f"--property: unknown property {unknown[0]!r} "
                            f"(known: {', '.join(sorted(READER_PROPERTIES))})")
        reader = cls(
            parse_key=props.get("parse.key", "false").lower() in _TRUE,
            key_separator=unescape(props.get("key.separator", "\t")),
            parse_headers=props.get("parse.headers", "false").lower() in _TRUE,
            headers_delimiter=unescape(props.get("headers.delimiter", "\t")),
            headers_separator=unescape(props.get("headers.separator", ",")),
            headers_key_separator=unescape(props.get("headers.key.separator", ":")),
            null_marker=props.get("null.marker"),
            ignore_error=props.get("ignore.error", "false").lower() in _TRUE,
        )
        for name in ("key_separator", "headers_delimiter", "headers_separator", "headers_key_separator"):
            if not getattr(reader, name):
                raise UsageError(f"--property: {name.replace('_', '.')} must not be empty")
        return reader

    def _null(self, text: str) -> bytes | None:
        return None if self.null_marker is not None and text == self.null_marker else text.encode("utf-8")

    def parse(self, line: str, number: int) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
        rest = line
        headers: list[tuple[str, bytes | None]] = []
        if self.parse_headers:
            head, sep, tail = rest.partition(self.headers_delimiter)
            if sep:
                rest = tail
                headers = self._headers(head, number)
            elif not self.ignore_error:
                raise ToolError(f"No headers delimiter found on line number {number}: '{line}'")
        key: bytes | None = None
        if self.parse_key:
            k, sep, v = rest.partition(self.key_separator)
            if sep:
                key, rest = self._null(k), v
            elif not self.ignore_error:
                raise ToolError(f"No key separator found on line number {number}: '{line}'")
        return key, self._null(rest), headers

    def _headers(self, text: str, number: int) -> list[tuple[str, bytes | None]]:
        out: list[tuple[str, bytes | None]] = []
        for item in text.split(self.headers_separator):
            if not item:
                continue
            k, sep, v = item.partition(self.headers_key_separator)
            if self.null_marker is not None and k == self.null_marker:
                raise ToolError(f"Header keys should not be equal to the null marker '{self.null_marker}' as "
                                f"they can't be null. Error on line number {number}")
            out.append((k, self._null(v) if sep else None))
        return out


def _parser() -> ToolParser:
    p = ToolParser(prog="moldau-console-producer",
                   description="Reads data from standard input and publishes it to a Moldau (Kafka) topic.")
    add_bootstrap(p, broker_list=True)
    p.add_argument("--topic", help="REQUIRED: the topic id to produce messages to")
    p.add_argument("--property", action="append", default=[], metavar="PROP",
                   help="properties for the line reader: parse.key, key.separator, parse.headers, ...")
    p.add_argument("--producer-property", action="append", default=[], metavar="PROP",
                   help="a producer setting as key=value (Kafka's name)")
    p.add_argument("--producer.config", "--command-config", dest="producer_config", metavar="FILE",
                   help="producer config file (security settings, ...)")
    p.add_argument("--compression-codec", nargs="?", const="gzip", metavar="CODEC",
                   help="none, gzip, snappy, lz4 or zstd; without a value: gzip")
    p.add_argument("--request-required-acks", default=None, metavar="ACKS", help="acks (default -1)")
    p.add_argument("--sync", action="store_true", help="send each message synchronously")
    p.add_argument("--batch-size", type=int, default=None, help="messages per batch in async mode")
    p.add_argument("--timeout", type=int, default=None, metavar="MS", help="linger.ms (default 1000)")
    p.add_argument("--request-timeout-ms", type=int, default=None)
    p.add_argument("--message-send-max-retries", type=int, default=None)
    p.add_argument("--max-block-ms", type=int, default=None)
    return p


def producer_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The producer config from flags, --producer.config and --producer-property (the last wins, as in Kafka)."""
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap_from(args), "linger.ms": 1000, "acks": "-1",
                            "client.id": "console-producer"}
    if args.producer_config:
        conf.update(read_properties_file(args.producer_config, "--producer.config"))
    flag_map = {"compression_codec": "compression.type", "request_required_acks": "acks",
                "batch_size": "batch.size", "timeout": "linger.ms", "request_timeout_ms": "request.timeout.ms",
                "message_send_max_retries": "retries", "max_block_ms": "max.block.ms"}
    for attr, key in flag_map.items():
        value = getattr(args, attr)
        if value is not None:
            conf[key] = value
    conf.update(parse_key_values(args.producer_property, "--producer-property"))
    if str(conf.get("acks")) not in ("-1", "all") and "enable.idempotence" not in conf:
        conf["enable.idempotence"] = "false"  # Kafka's console producer: acks other than all turn it off
    return conf


def parse_args(argv: Sequence[str]) -> tuple[argparse.Namespace, dict[str, Any], LineReader]:
    args = _parser().parse_args(argv)
    if not args.topic:
        raise UsageError("Missing required argument \"[topic]\"")
    conf = producer_settings(args)
    reader = LineReader.from_properties(parse_key_values(args.property, "--property"))
    return args, conf, reader


def produce_lines(producer: Any, topic: str, reader: LineReader, stdin: IO[str], prompt: IO[str] | None,
                  sync: bool, failures: list[BaseException] | None = None) -> int:
    """Sends each stdin line; returns how many were handed to the producer. Each failed send is reported (one
    line) and appended to ``failures``."""
    count = 0
    number = 0
    while True:
        if prompt is not None:
            prompt.write(">")
            prompt.flush()
        line = stdin.readline()
        if not line:
            return count
        number += 1
        key, value, headers = reader.parse(line.rstrip("\r\n") if line.endswith("\n") else line, number)
        future = producer.send(topic, value, key, headers=headers or None,
                               on_delivery=_report(topic, key, value, failures))
        count += 1
        if sync:
            try:
                future.result()
            except Exception:  # already reported by the callback, like Kafka's ErrorLoggingCallback
                pass


def _report(topic: str, key: bytes | None, value: bytes | None, failures: list[BaseException] | None) -> Any:
    """Kafka's ErrorLoggingCallback message, in the tools' one style: ``moldau-console-producer: error: ...``."""
    def on_delivery(error: BaseException | None, _meta: Any) -> None:
        if error is not None:
            key_text = "null" if key is None else f"{len(key)} bytes"
            value_text = "null" if value is None else f"{len(value)} bytes"
            print(f"moldau-console-producer: error: sending to topic {topic} (key: {key_text}, value: {value_text})"
                  f" failed: {describe(error)}", file=sys.stderr, flush=True)
            if failures is not None:
                failures.append(error)
    return on_delivery


def main(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        from moldau.sync import Producer

        args, conf, reader = parse_args(sys.argv[1:] if argv is None else argv)
        producer = Producer(conf)
        failures: list[BaseException] = []
        try:
            prompt = sys.stdout if sys.stdin.isatty() else None
            produce_lines(producer, args.topic, reader, sys.stdin, prompt, args.sync, failures)
        finally:
            try:
                producer.close(timeout=30)
            except KeyboardInterrupt:
                pass
        return 1 if failures else 0
    return run_tool(body, "moldau-console-producer", argv)


if __name__ == "__main__":
    sys.exit(main())
