"""``moldau-configs``: Kafka's kafka-configs for topic and broker configs (SCRAM users: configs_users.py; client
quotas of users, clients and ips: configs_quotas.py).

    moldau-configs --bootstrap-server 127.0.0.1:9092 --entity-type topics --entity-name t --describe [--all]
    moldau-configs --bootstrap-server 127.0.0.1:9092 --entity-type topics --entity-name t --alter \\
        --add-config retention.ms=3600000,cleanup.policy=[compact,delete] --delete-config segment.bytes
    moldau-configs --bootstrap-server 127.0.0.1:9092 --entity-type brokers --entity-default --alter \\
        --add-config log.retention.ms=86400000

Describe prints Kafka's lines: ``Dynamic configs for topic t are:`` (``All configs ...`` with --all), then one
line per config: ``  k=v sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:k=v, DEFAULT_CONFIG:log.k=v}``. Alter
uses IncrementalAlterConfigs (SET for --add-config, DELETE for --delete-config), as kafka-configs does.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from moldau.tools.common import (
    ToolError,
    ToolParser,
    UsageError,
    add_bootstrap,
    admin_config,
    read_properties_file,
    run_tool,
)

ENTITY_TYPES = {"topics": "topic", "brokers": "broker", "users": "user", "clients": "client", "ips": "ip"}
# The source a config has when it is a dynamic override of this kind of entity (what --describe shows).
DYNAMIC_SOURCE = {"topic": "DYNAMIC_TOPIC_CONFIG", "broker": "DYNAMIC_BROKER_CONFIG",
                  "default": "DYNAMIC_DEFAULT_BROKER_CONFIG"}


def _parser() -> ToolParser:
    p = ToolParser(prog="moldau-configs", description="Add, delete or describe configs of topics and brokers.")
    add_bootstrap(p)
    p.add_argument("--entity-type", choices=sorted(ENTITY_TYPES), action="append",
                   help="topics, brokers, users (SCRAM, quotas), clients or ips (quotas); users and clients "
                   "may be given together (docs/quotas.md)")
    p.add_argument("--entity-name", action="append", help="topic name, broker id, user, client id or ip")
    p.add_argument("--entity-default", action="append_const", const=True,
                   help="the cluster-wide broker default, or the default user, client id or ip")
    for flag, what in (("--user", "a user"), ("--client", "a client id"), ("--ip", "an ip")):
        p.add_argument(flag, action="append", help=f"shorthand for --entity-type ... --entity-name ({what})")
    for flag in ("--user-defaults", "--client-defaults", "--ip-defaults"):
        p.add_argument(flag, action="store_true", help="shorthand for --entity-type ... --entity-default")
    p.add_argument("--topic", help="shorthand for --entity-type topics --entity-name <topic>")
    p.add_argument("--broker", help="shorthand for --entity-type brokers --entity-name <id>")
    p.add_argument("--broker-defaults", action="store_true",
                   help="shorthand for --entity-type brokers --entity-default")
    p.add_argument("--describe", action="store_true")
    p.add_argument("--alter", action="store_true")
    p.add_argument("--all", action="store_true", help="with --describe: every config, not only the overrides")
    p.add_argument("--add-config", default=None, metavar="k1=v1,k2=[v1,v2,v2],k3=v3")
    p.add_argument("--add-config-file", default=None, metavar="FILE")
    p.add_argument("--delete-config", default=None, metavar="k1,k2")
    p.add_argument("--command-config", default=None, metavar="FILE", help="admin client config file")
    return p


def split_add_config(text: str) -> dict[str, str]:
    """``k1=v1,k2=[a,b]`` -> {"k1": "v1", "k2": "a,b"}: commas inside [...] belong to a list value."""
    items: list[str] = []
    depth, start = 0, 0
    for i, c in enumerate(text):
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    out: dict[str, str] = {}
    for item in items:
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--add-config: expected key=value, got {item!r}")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[key.strip()] = value
    return out


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    from moldau.tools.configs_quotas import entity_pairs

    args = _parser().parse_args(argv)
    args.entity_pairs = entity_pairs(argv)
    if len(args.entity_pairs) > 1 and any(t not in ("users", "clients", "ips") for t, _, _ in args.entity_pairs):
        raise ToolError("Only users and clients (or ips) can be combined in one entity")
    first = args.entity_pairs[0] if args.entity_pairs else (None, None, False)
    args.entity_type, args.entity_name, args.entity_default = first
    if args.topic is not None:
        args.entity_type, args.entity_name = "topics", args.topic
    if args.broker is not None:
        args.entity_type, args.entity_name = "brokers", args.broker
    if args.broker_defaults:
        args.entity_type, args.entity_default = "brokers", True
    if args.entity_type is None:
        raise UsageError("Missing required argument \"[entity-type]\"")
    if args.describe == args.alter:
        raise UsageError("Command must include exactly one action: --describe, --alter")
    if args.entity_default and args.entity_name is not None:
        raise UsageError("--entity-name and --entity-default cannot be used together")
    if args.entity_default and args.entity_type == "topics":
        raise UsageError("--entity-default is not valid with --entity-type topics")
    if args.entity_type == "brokers" and args.entity_name is not None and not args.entity_name.isdigit():
        raise UsageError(f"The entity name for brokers must be a valid integer broker id, but it is: "
                        f"{args.entity_name}")
    args.add = split_add_config(args.add_config) if args.add_config else {}
    if args.add_config_file:
        args.add.update(read_properties_file(args.add_config_file, "--add-config-file"))
    args.delete = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    if args.alter:
        if any(n is None and not d for _, n, d in args.entity_pairs[1:]):
            raise ToolError("--entity-name or --entity-default must be specified for each --entity-type")
        if args.entity_name is None and not args.entity_default:
            raise UsageError("--entity-name or --entity-default must be specified with --alter")
        if not args.add and not args.delete:
            raise UsageError("At least one of --add-config, --add-config-file or --delete-config must be "
                            "specified with --alter")
        both = sorted(set(args.add) & set(args.delete))
        if both:
            raise UsageError(f"Cannot add and delete the same config(s): {','.join(both)}")
    elif args.add or args.delete:
        raise UsageError("--add-config and --delete-config are only valid with --alter")
    if args.all and not args.describe:
        raise UsageError("--all is only valid with --describe")
    return args


def describe_lines(kind: str, name: str, entries: list[Any], describe_all: bool) -> list[str]:
    """Kafka's describe output for one entity (``kind`` topic, broker or default)."""
    if kind == "default":
        header = "Default configs for brokers in the cluster are:"
    else:
        header = f"{'All' if describe_all else 'Dynamic'} configs for {kind} {name} are:"
    lines = [header]
    for e in sorted(entries, key=lambda e: e.name):
        if not describe_all and e.source != DYNAMIC_SOURCE[kind]:
            continue
        synonyms = ", ".join(f"{s.source}:{s.name}={_text(s.value)}" for s in e.synonyms)
        lines.append(f"  {e.name}={_text(e.value)} sensitive={'true' if e.is_sensitive else 'false'} "
                     f"synonyms={{{synonyms}}}")
    return lines


def _text(value: str | None) -> str:
    return "null" if value is None else value  # as Java prints a null value


def _targets(args: argparse.Namespace, admin: Any) -> list[tuple[str, str]]:
    """(kind, resource name) pairs to describe: one entity, or all topics / all live brokers."""
    if args.entity_default:
        return [("default", "")]
    kind = ENTITY_TYPES[args.entity_type]
    if args.entity_name is not None:
        return [(kind, args.entity_name)]
    if kind == "topic":
        return [("topic", t) for t in admin.list_topics(include_internal=True)]
    return [("broker", str(b.node_id)) for b in sorted(admin.describe_cluster().brokers, key=lambda b: b.node_id)]


def execute(args: argparse.Namespace, admin: Any, out: Any) -> int:
    from moldau.admin_configs import AlterConfigOp, ConfigResource
    from moldau.tools.configs_quotas import execute_quotas, is_quota_command

    if is_quota_command(args):
        if args.entity_type == "users" and args.describe and len(args.entity_pairs) == 1:
            execute_quotas(args, admin, out)  # a user's quotas, then its SCRAM credentials (as kafka-configs)
        else:
            return execute_quotas(args, admin, out)
    if args.entity_type == "users":
        from moldau.tools.configs_users import execute_users

        return execute_users(args, admin, out)
    if args.describe:
        for kind, name in _targets(args, admin):
            resource = ConfigResource("broker" if kind == "default" else kind, name)
            entries = admin.describe_configs([resource], include_synonyms=True)[resource]
            for line in describe_lines(kind, name, entries, args.all):
                print(line, file=out)
        return 0
    kind = "default" if args.entity_default else ENTITY_TYPES[args.entity_type]
    resource = ConfigResource("broker" if kind == "default" else kind, "" if args.entity_default else args.entity_name)
    if args.delete:  # as kafka-configs: only keys that are set on the entity can be deleted
        entries = admin.describe_configs([resource], include_synonyms=False)[resource]
        present = {e.name for e in entries if e.source == DYNAMIC_SOURCE[kind]}
        missing = [k for k in args.delete if k not in present]
        if missing:
            raise ToolError(f"Invalid config(s): {','.join(missing)}")
    ops = [AlterConfigOp(k, "SET", v) for k, v in args.add.items()] + [AlterConfigOp(k, "DELETE") for k in args.delete]
    admin.incremental_alter_configs({resource: ops})
    if kind == "default":
        print("Completed updating default config for brokers in the cluster.", file=out)
    else:
        print(f"Completed updating config for {kind} {resource.name}.", file=out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        from moldau.sync import AdminClient

        args = parse_args(sys.argv[1:] if argv is None else argv)
        conf = admin_config(args, "moldau-configs")
        with AdminClient(conf) as admin:
            return execute(args, admin, sys.stdout)
    return run_tool(body, "moldau-configs", argv)


if __name__ == "__main__":
    sys.exit(main())
