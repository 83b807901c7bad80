"""``moldau-acls``: Kafka's kafka-acls -- add, remove and list ACLs through the Admin API.

    moldau-acls --bootstrap-server h:9092 --command-config admin.properties --add \\
        --allow-principal User:alice --operation Read --operation Describe --topic orders
    moldau-acls ... --add --allow-principal User:alice --producer --topic logs- --resource-pattern-type prefixed
    moldau-acls ... --add --allow-principal User:bob --consumer --topic orders --group app
    moldau-acls ... --list [--topic orders] [--resource-pattern-type match] [--principal User:alice]
    moldau-acls ... --remove --force --allow-principal User:alice --operation Read --topic orders

As in Kafka: ``--operation`` defaults to All, hosts to ``*``; ``--producer`` grants Write, Describe and Create on
the topics (IdempotentWrite on the cluster with ``--idempotent``, Write and Describe on ``--transactional-id``),
``--consumer`` Read and Describe on the topics and Read on the groups. ``--remove`` without principals removes
every ACL of the named resources; it asks for confirmation on a terminal unless ``--force``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from moldau.admin_acls import AclBinding, AclBindingFilter
from moldau.protocol.acl import CLUSTER_NAME, Operation, PatternType, Permission, ResourceType
from moldau.tools.common import (
    ToolError,
    ToolParser,
    UsageError,
    add_bootstrap,
    admin_config,
    run_tool,
)

OPERATIONS = {"all": Operation.ALL, "read": Operation.READ, "write": Operation.WRITE, "create": Operation.CREATE,
              "delete": Operation.DELETE, "alter": Operation.ALTER, "describe": Operation.DESCRIBE,
              "clusteraction": Operation.CLUSTER_ACTION, "describeconfigs": Operation.DESCRIBE_CONFIGS,
              "alterconfigs": Operation.ALTER_CONFIGS, "idempotentwrite": Operation.IDEMPOTENT_WRITE}
PATTERNS = {"literal": PatternType.LITERAL, "prefixed": PatternType.PREFIXED, "match": PatternType.MATCH,
            "any": PatternType.ANY}
Resource = tuple[ResourceType, str]


def _parser() -> ToolParser:
    p = ToolParser(prog="moldau-acls", description="Add, remove and list ACLs.")
    add_bootstrap(p)
    p.add_argument("--command-config", metavar="FILE", help="admin client properties (security settings)")
    for flag in ("--add", "--remove", "--list"):
        p.add_argument(flag, action="store_true")
    p.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME")
    p.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST")
    p.add_argument("--deny-host", action="append", default=[], metavar="HOST")
    p.add_argument("--principal", help="--list: only ACLs of this principal")
    p.add_argument("--operation", action="append", default=[], help="one of " + ", ".join(o.name.title().replace(
        "_", "") for o in OPERATIONS.values()))
    p.add_argument("--topic", action="append", default=[])
    p.add_argument("--group", action="append", default=[])
    p.add_argument("--transactional-id", action="append", default=[])
    p.add_argument("--cluster", action="store_true")
    p.add_argument("--resource-pattern-type", default=None, help="literal (default), prefixed, match or any")
    p.add_argument("--producer", action="store_true", help="the ACLs a producer needs")
    p.add_argument("--consumer", action="store_true", help="the ACLs a consumer needs (needs --group)")
    p.add_argument("--idempotent", action="store_true", help="with --producer: IdempotentWrite on the cluster")
    p.add_argument("--force", action="store_true", help="--remove without asking")
    return p


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    args = _parser().parse_args(argv)
    if sum((args.add, args.remove, args.list)) != 1:
        raise UsageError("Command must include exactly one action: --list, --add, --remove.")
    name = (args.resource_pattern_type or "literal").lower()
    if name not in PATTERNS:
        raise UsageError(f"--resource-pattern-type: expected literal, prefixed, match or any, got "
                        f"{args.resource_pattern_type!r}")
    args.pattern = PATTERNS[name]
    if args.add and args.pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise UsageError(f"A '--resource-pattern-type' value of '{name}' is not valid when adding acls.")
    try:
        args.operations = [OPERATIONS[o.lower()] for o in args.operation] or [Operation.ALL]
    except KeyError as exc:
        raise UsageError(f"--operation: unknown operation {exc.args[0]!r}") from None
    for flag in ("allow_principal", "deny_principal"):
        for principal in getattr(args, flag):
            if ":" not in principal:
                raise UsageError(f"--{flag.replace('_', '-')}: expected Type:name (User:alice), got {principal!r}")
    if args.consumer and not args.group:
        raise UsageError("With --consumer you must specify a --group")
    if (args.producer or args.consumer) and (args.operation or args.cluster):
        raise UsageError("--producer and --consumer take no --operation or --cluster")
    if (args.add or args.remove) and not resources(args):
        raise UsageError("You must specify one of: --topic, --cluster, --group, --transactional-id")
    if args.add and not (args.allow_principal or args.deny_principal):
        raise UsageError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    return args


def resources(args: argparse.Namespace) -> list[Resource]:
    out: list[Resource] = [(ResourceType.TOPIC, t) for t in args.topic]
    out += [(ResourceType.GROUP, g) for g in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def _operations(args: argparse.Namespace, rtype: ResourceType) -> list[Operation]:
    """The operations on one resource type: --operation, or the --producer/--consumer sets."""
    if not (args.producer or args.consumer):
        return list(args.operations)
    ops: list[Operation] = []
    if args.producer and rtype == ResourceType.TOPIC:
        ops += [Operation.WRITE, Operation.DESCRIBE, Operation.CREATE]
    if args.producer and rtype == ResourceType.TRANSACTIONAL_ID:
        ops += [Operation.WRITE, Operation.DESCRIBE]
    if args.producer and args.idempotent and rtype == ResourceType.CLUSTER:
        ops += [Operation.IDEMPOTENT_WRITE]
    if args.consumer and rtype == ResourceType.TOPIC:
        ops += [Operation.READ, Operation.DESCRIBE]
    if args.consumer and rtype == ResourceType.GROUP:
        ops += [Operation.READ]
    return list(dict.fromkeys(ops))


def bindings(args: argparse.Namespace) -> list[AclBinding]:
    """The ACLs --add creates (and --remove with principals deletes)."""
    targets = resources(args)
    if args.producer and args.idempotent:
        targets.append((ResourceType.CLUSTER, CLUSTER_NAME))
    out = []
    for principals, hosts, perm in ((args.allow_principal, args.allow_host, Permission.ALLOW),
                                    (args.deny_principal, args.deny_host, Permission.DENY)):
        for rtype, name in targets:
            pattern = PatternType.LITERAL if rtype == ResourceType.CLUSTER else args.pattern
            for op in _operations(args, rtype):
                out += [AclBinding(rtype, name, pattern, p, h, op, perm) for p in principals for h in hosts or ["*"]]
    return out


def _pattern_text(rtype: ResourceType, name: str, pattern: PatternType) -> str:
    return f"ResourcePattern(resourceType={rtype.name}, name={name}, patternType={pattern.name})"


def _acl_text(b: AclBinding) -> str:
    return (f"(principal={b.principal}, host={b.host}, operation={b.operation.name}, "
            f"permissionType={b.permission_type.name})")


def print_grouped(header: str, acls: list[AclBinding], out: Any) -> None:
    grouped: dict[tuple[ResourceType, str, PatternType], list[AclBinding]] = {}
    for b in acls:
        grouped.setdefault((b.resource_type, b.name, b.pattern_type), []).append(b)
    for key, found in sorted(grouped.items()):
        print(f"{header} `{_pattern_text(*key)}`: ", file=out)
        for b in sorted(found, key=_acl_text):
            print(f" \t{_acl_text(b)} ", file=out)
        print("", file=out)


def list_acls(args: argparse.Namespace, admin: Any, out: Any) -> int:
    filters = [AclBindingFilter(rtype, name, args.pattern, args.principal) for rtype, name in resources(args)] \
        or [AclBindingFilter(pattern_type=args.pattern if args.resource_pattern_type else PatternType.ANY,
                             principal=args.principal)]
    found: list[AclBinding] = []
    for f in filters:
        found += [b for b in admin.describe_acls(f) if b not in found]
    print_grouped("Current ACLs for resource", found, out)
    return 0


def execute(args: argparse.Namespace, admin: Any, out: Any) -> int:
    if args.list:
        return list_acls(args, admin, out)
    if args.add:
        wanted = bindings(args)
        print_grouped("Adding ACLs for resource", wanted, out)
        for acl, err in admin.create_acls(wanted).items():
            if err is not None:
                raise ToolError(f"Error while adding ACLs: {_acl_text(acl)}: {err}")
        return 0
    if not args.force and sys.stdin.isatty():
        answer = input("Are you sure you want to remove ACLs: \n" + "\n".join(
            f" \t{_pattern_text(r, n, args.pattern)}" for r, n in resources(args)) + " \n (y/n)")
        if not answer.lower().startswith("y"):
            return 0
    if args.allow_principal or args.deny_principal:
        filters = [AclBindingFilter(b.resource_type, b.name, b.pattern_type, b.principal, b.host, b.operation,
                                    b.permission_type) for b in bindings(args)]
    else:
        filters = [AclBindingFilter(rtype, name, args.pattern) for rtype, name in resources(args)]
    for result in admin.delete_acls(filters):
        if isinstance(result, Exception):
            raise ToolError(f"Error while removing ACLs: {result}")
        print_grouped("Removed ACLs for resource", result, out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        from moldau.sync import AdminClient

        args = parse_args(sys.argv[1:] if argv is None else argv)
        conf = admin_config(args, "moldau-acls")
        with AdminClient(conf) as admin:
            return execute(args, admin, sys.stdout)

    return run_tool(body, "moldau-acls", argv)


if __name__ == "__main__":
    sys.exit(main())
