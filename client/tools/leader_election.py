"""``moldau-leader-election``: Kafka's kafka-leader-election -- preferred or unclean election on demand.

    moldau-leader-election --bootstrap-server 127.0.0.1:9092 --election-type preferred --all-topic-partitions
    moldau-leader-election --bootstrap-server ... --election-type unclean --topic t --partition 0
    moldau-leader-election --bootstrap-server ... --election-type preferred --path-to-json-file parts.json

The JSON file is Kafka's: ``{"partitions": [{"topic": "t", "partition": 0}, ...]}``. Output and exit code follow
Kafka's tool: succeeded partitions, partitions whose leader was already the one asked for, then one line per
failure (exit 1 when any failed).
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
    bootstrap_from,
    read_properties_file,
    run_tool,
)


def _parser() -> ToolParser:
    p = ToolParser(prog="moldau-leader-election", description="Elect preferred or unclean leaders.")
    add_bootstrap(p)
    p.add_argument("--election-type", help="REQUIRED: preferred or unclean")
    p.add_argument("--all-topic-partitions", action="store_true", help="elect leaders of every partition")
    p.add_argument("--topic", help="the topic (with --partition)")
    p.add_argument("--partition", type=int, default=None, help="the partition (with --topic)")
    p.add_argument("--path-to-json-file", metavar="FILE", help="the partitions, in Kafka's JSON format")
    p.add_argument("--admin.config", "--command-config", dest="admin_config", metavar="FILE",
                   help="admin client config file")
    return p


def parse_partitions_json(text: str, source: str) -> list[TopicPartition]:
    """Kafka's ``{"partitions": [{"topic": ..., "partition": ...}]}``; duplicates are refused as Kafka does."""
    try:
        data = json.loads(text)
        items = data["partitions"]
        parts = [(str(i["topic"]), int(i["partition"])) for i in items]
    except (ValueError, KeyError, TypeError) as exc:
        raise ToolError(f"--path-to-json-file: {source} is not Kafka's partitions JSON ({exc!r})") from None
    dups = sorted({tp for tp in parts if parts.count(tp) > 1})
    if dups:
        raise ToolError(f"Replica election data contains duplicate partitions: "
                        f"{', '.join(f'{t}-{p}' for t, p in dups)}")
    return parts


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    args = _parser().parse_args(argv)
    if args.election_type is None:
        raise UsageError("Missing required option(s) [election-type]")
    args.kind = args.election_type.lower()
    if args.kind not in ("preferred", "unclean"):
        raise UsageError(f"--election-type: expected preferred or unclean, got {args.election_type!r}")
    sources = [bool(args.all_topic_partitions), args.topic is not None, args.path_to_json_file is not None]
    if sum(sources) != 1:
        raise UsageError("One and only one of the following options is required: all-topic-partitions, topic, "
                        "path-to-json-file")
    if (args.topic is None) != (args.partition is None):
        raise UsageError("--topic and --partition must be given together")
    if args.all_topic_partitions:
        args.partitions = None
    elif args.topic is not None:
        args.partitions = [(args.topic, args.partition)]
    else:
        path = Path(args.path_to_json_file)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ToolError(f"--path-to-json-file: cannot read {path}: {exc.strerror or exc}") from None
        args.partitions = parse_partitions_json(text, str(path))
    return args


def report(kind: str, results: dict[TopicPartition, Any], out: Any) -> int:
    """Kafka's LeaderElectionCommand lines; 1 when any partition failed."""
    from moldau.protocol.errors import ErrorCode

    label = kind.upper()
    names = {tp: f"{tp[0]}-{tp[1]}" for tp in results}
    done = [names[tp] for tp, e in sorted(results.items()) if e is None]
    noop = [names[tp] for tp, e in sorted(results.items()) if e is not None and e.code == ErrorCode.ELECTION_NOT_NEEDED]
    failed = [(names[tp], e) for tp, e in sorted(results.items())
              if e is not None and e.code != ErrorCode.ELECTION_NOT_NEEDED]
    if done:
        print(f"Successfully completed leader election ({label}) for partitions {', '.join(done)}", file=out)
    if noop:
        print(f"Valid replica already elected for partitions {', '.join(noop)}", file=out)
    for name, err in failed:
        print(f"Error completing leader election ({label}) for partition: {name}: {err}", file=out)
    if failed:
        print(f"moldau-leader-election: error: {len(failed)} replica(s) could not be elected", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        from moldau.sync import AdminClient

        args = parse_args(sys.argv[1:] if argv is None else argv)
        conf: dict[str, Any] = {"bootstrap.servers": bootstrap_from(args), "client.id": "moldau-leader-election"}
        if args.admin_config:
            conf.update(read_properties_file(args.admin_config, "--admin.config"))
        with AdminClient(conf) as admin:
            results = admin.elect_leaders(args.kind, args.partitions, raise_errors=False)
        return report(args.kind, results, sys.stdout)
    return run_tool(body, "moldau-leader-election", argv)


if __name__ == "__main__":
    sys.exit(main())
