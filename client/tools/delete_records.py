"""``moldau-delete-records``: Kafka's kafka-delete-records -- delete records below an offset per partition.

    moldau-delete-records --bootstrap-server 127.0.0.1:9092 --offset-json-file offsets.json

The file is Kafka's: ``{"partitions": [{"topic": "t", "partition": 0, "offset": 10}], "version": 1}`` (offset -1:
everything below the high watermark). Prints Kafka's lines: one ``partition: t-0<TAB>low_watermark: 10`` or
``partition: t-0<TAB>error: ...`` per partition; exit 1 when any failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from moldau.protocol.types import TopicPartition
from moldau.tools.common import (
    ToolError,
    ToolParser,
    UsageError,
    add_bootstrap,
    admin_config,
    run_tool,
)


def _parser() -> ToolParser:
    p = ToolParser(prog="moldau-delete-records", description="Delete records below the given offsets.")
    add_bootstrap(p)
    p.add_argument("--offset-json-file", metavar="FILE", help="REQUIRED: the partitions and offsets, as JSON")
    p.add_argument("--command-config", default=None, metavar="FILE", help="admin client config file")
    return p


def parse_offsets_json(text: str, source: str) -> dict[TopicPartition, int]:
    try:
        data = json.loads(text)
        version = data.get("version", 1)
        items = data["partitions"]
        pairs = [((str(i["topic"]), int(i["partition"])), int(i["offset"])) for i in items]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ToolError(f"--offset-json-file: {source} is not Kafka's offsets JSON ({exc!r})") from None
    if version != 1:
        raise ToolError(f"--offset-json-file: {source}: not supported version field value {version}")
    tps = [tp for tp, _ in pairs]
    dups = sorted({tp for tp in tps if tps.count(tp) > 1})
    if dups:
        raise ToolError(f"Offset json file contains duplicate topic partitions: "
                        f"{','.join(f'{t}-{p}' for t, p in dups)}")
    return dict(pairs)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    args = _parser().parse_args(argv)
    if not args.offset_json_file:
        raise UsageError("Missing required argument \"[offset-json-file]\"")
    path = Path(args.offset_json_file)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ToolError(f"--offset-json-file: cannot read {path}: {exc.strerror or exc}") from None
    args.offsets = parse_offsets_json(text, str(path))
    return args


def report(results: dict[TopicPartition, Any], out: Any) -> int:
    failed = 0
    print("Records delete operation completed:", file=out)
    for (topic, partition), value in sorted(results.items()):
        if isinstance(value, int):
            print(f"partition: {topic}-{partition}\tlow_watermark: {value}", file=out)
        else:
            failed += 1
            print(f"partition: {topic}-{partition}\terror: {value}", file=out)
    if failed:
        print(f"moldau-delete-records: error: {failed} partition(s) failed", file=sys.stderr)
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        from moldau.sync import AdminClient

        args = parse_args(sys.argv[1:] if argv is None else argv)
        conf = admin_config(args, "moldau-delete-records")
        print("Executing records delete operation", file=sys.stdout)
        with AdminClient(conf) as admin:
            results = admin.delete_records(args.offsets, raise_errors=False)
        return report(results, sys.stdout)
    return run_tool(body, "moldau-delete-records", argv)


if __name__ == "__main__":
    sys.exit(main())
