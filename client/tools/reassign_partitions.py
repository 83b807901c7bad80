"""``moldau-reassign-partitions``: Kafka's kafka-reassign-partitions -- propose, start and check replica moves.

    moldau-reassign-partitions --bootstrap-server H:P --generate --topics-to-move-json-file topics.json \\
        --broker-list 2,3,4
    moldau-reassign-partitions --bootstrap-server H:P --execute --reassignment-json-file plan.json \
        [--throttle 10000000]
    moldau-reassign-partitions --bootstrap-server H:P --verify --reassignment-json-file plan.json

Kafka's JSON: topics to move ``{"topics": [{"topic": "t"}], "version": 1}``; a plan ``{"version": 1,
"partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3, 4]}]}`` (``log_dirs`` is accepted and only
"any" is allowed). The first replica listed becomes the preferred leader. ``--throttle`` sets Kafka's replication
throttles (KIP-73: the rates on every broker involved, the throttled replica lists on the topics); ``--verify``
removes them once no partition of the plan is still moving (docs/quotas.md).
"""

from __future__ import annotations

import argparse
import json
import random
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

ACTIONS = ("generate", "execute", "verify")


def _parser() -> ToolParser:
    p = ToolParser(prog="moldau-reassign-partitions", description="Move partitions between brokers.")
    add_bootstrap(p)
    for action in ACTIONS:
        p.add_argument(f"--{action}", action="store_true")
    p.add_argument("--topics-to-move-json-file", metavar="FILE", help="--generate: the topics to move")
    p.add_argument("--broker-list", metavar="ID[,ID...]", help="--generate: the brokers to move them to")
    p.add_argument("--reassignment-json-file", metavar="FILE", help="--execute/--verify: the plan")
    p.add_argument("--throttle", type=int, default=-1, metavar="BYTES/S",
                   help="--execute: bound the replication of the moving replicas (KIP-73); --verify removes it")
    p.add_argument("--command-config", default=None, metavar="FILE", help="admin client config file")
    return p


def _read_json(path: str, flag: str) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ToolError(f"{flag}: cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ToolError(f"{flag}: {path} is not JSON: {exc}") from None


def parse_plan(data: Any, source: str) -> dict[TopicPartition, list[int]]:
    try:
        plan = {(str(p["topic"]), int(p["partition"])): [int(r) for r in p["replicas"]] for p in data["partitions"]}
        for p in data["partitions"]:
            if any(d != "any" for d in p.get("log_dirs", [])):
                raise ToolError(f"--reassignment-json-file: {source}: only \"any\" log_dirs are supported")
    except (KeyError, TypeError, ValueError) as exc:
        raise ToolError(f"--reassignment-json-file: {source} is not Kafka's reassignment JSON ({exc!r})") from None
    if len(plan) != len(data["partitions"]):
        raise ToolError("Partition reassignment contains duplicate topic partitions")
    for (t, p), replicas in plan.items():
        if not replicas:
            raise ToolError(f"Partition replica list cannot be empty ({t}-{p})")
        if len(set(replicas)) != len(replicas):
            raise ToolError(f"Partition replica list cannot contain duplicate entries ({t}-{p}: {replicas})")
    return plan


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    args = _parser().parse_args(argv)
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        raise UsageError("Command must include exactly one action: --generate, --execute or --verify")
    args.action = chosen[0]
    if args.action == "generate":
        if not args.topics_to_move_json_file or not args.broker_list:
            raise UsageError("--generate needs --topics-to-move-json-file and --broker-list")
        try:
            args.brokers = sorted({int(b) for b in args.broker_list.split(",") if b.strip()})
        except ValueError:
            raise UsageError(f"--broker-list: expected comma-separated broker ids, got {args.broker_list!r}") from None
        data = _read_json(args.topics_to_move_json_file, "--topics-to-move-json-file")
        try:
            args.topics = [str(t["topic"]) for t in data["topics"]]
        except (KeyError, TypeError) as exc:
            raise ToolError(f"--topics-to-move-json-file: not Kafka's topics JSON ({exc!r})") from None
    else:
        if not args.reassignment_json_file:
            raise UsageError(f"--{args.action} needs --reassignment-json-file")
        if args.throttle != -1 and args.action != "execute":
            raise UsageError("--throttle is only valid with --execute")
        if args.throttle == 0 or args.throttle < -1:
            raise UsageError("--throttle must be a positive number of bytes/s")
        args.plan = parse_plan(_read_json(args.reassignment_json_file, "--reassignment-json-file"),
                               args.reassignment_json_file)
    return args


def plan_json(plan: dict[TopicPartition, list[int]]) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)} for (t, p), r in sorted(plan.items())]},
        separators=(",", ":"))


def propose(current: dict[TopicPartition, list[int]], brokers: list[int], rng: random.Random | None = None) -> dict[TopicPartition, list[int]]:
    """Kafka's rack-unaware proposal per topic: leaders round-robin from a random broker, followers at a shift
    that grows each time the partitions wrap around the broker list (the broker's own algorithm)."""
    r = rng or random.Random()
    out: dict[TopicPartition, list[int]] = {}
    n = len(brokers)
    for topic in sorted({t for t, _ in current}):
        parts = sorted(p for t, p in current if t == topic)
        rf = len(current[(topic, parts[0])])
        if rf > n:
            raise ToolError(f"Replication factor: {rf} larger than available brokers: {n}.")
        start, shift = r.randrange(n), r.randrange(n)
        for i, p in enumerate(parts):
            if i > 0 and i % n == 0:
                shift += 1
            first = (i + start) % n
            out[(topic, p)] = [brokers[first]] + [brokers[(first + 1 + (shift + j) % (n - 1)) % n]
                                                  for j in range(rf - 1)]
    return out


def execute(args: argparse.Namespace, admin: Any, out: Any) -> int:
    if args.action == "generate":
        descs = admin.describe_topics(args.topics)
        current = {(d.name, p.partition): list(p.replicas) for d in descs for p in d.partitions}
        print("Current partition replica assignment", file=out)
        print(plan_json(current), file=out)
        print("", file=out)
        print("Proposed partition reassignment configuration", file=out)
        print(plan_json(propose(current, args.brokers)), file=out)
        return 0
    plan: dict[TopicPartition, list[int]] = args.plan
    topics = sorted({t for t, _ in plan})
    descs = admin.describe_topics(topics)
    current = {(d.name, p.partition): list(p.replicas) for d in descs for p in d.partitions}
    missing = sorted(tp for tp in plan if tp not in current)
    if missing:
        raise ToolError(f"Topic or partition does not exist: {', '.join(f'{t}-{p}' for t, p in missing)}")
    if args.action == "execute":
        print("Current partition replica assignment\n", file=out)
        print(plan_json({tp: current[tp] for tp in plan}), file=out)
        print("\nSave this to use as the --reassignment-json-file option during rollback", file=out)
        if args.throttle > 0:
            set_throttles(admin, plan, current, args.throttle, out)
        results = admin.alter_partition_reassignments(plan, raise_errors=False)
        failed = {tp: e for tp, e in results.items() if e is not None}
        if failed:
            for (t, p), err in sorted(failed.items()):
                print(f"Error reassigning partition(s):\n{t}-{p}: {err}", file=sys.stderr)
            return 1
        print(f"Successfully started partition reassignment{'s' if len(plan) > 1 else ''} for "
              f"{','.join(f'{t}-{p}' for t, p in sorted(plan))}", file=out)
        return 0
    ongoing = admin.list_partition_reassignments(list(plan))
    print("Status of partition reassignment:", file=out)
    for (t, p), target in sorted(plan.items()):
        if (t, p) in ongoing:
            print(f"Reassignment of partition {t}-{p} is still in progress.", file=out)
        elif current[(t, p)] == target:
            print(f"Reassignment of partition {t}-{p} is completed.", file=out)
        else:
            print(f"There is no active reassignment of partition {t}-{p}, but replica set is "
                  f"{','.join(map(str, current[(t, p)]))} rather than {','.join(map(str, target))}.", file=out)
    if not any(tp in ongoing for tp in plan):  # as kafka-reassign-partitions: done, so the throttles go
        clear_throttles(admin, topics, out)
    return 0


LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LEADER_REPLICAS, FOLLOWER_REPLICAS = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"


def throttled_replicas(plan: dict[TopicPartition, list[int]], current: dict[TopicPartition, list[int]]
                       ) -> dict[str, tuple[str, str]]:
    """Per topic Kafka's (leader, follower) throttled replica lists: the moving partitions' current replicas
    (they serve the copy) and the replicas being added (they fetch it)."""
    out: dict[str, tuple[list[str], list[str]]] = {}
    for (t, p), target in sorted(plan.items()):
        if target == current[(t, p)]:
            continue
        leaders, followers = out.setdefault(t, ([], []))
        leaders += [f"{p}:{b}" for b in current[(t, p)]]
        followers += [f"{p}:{b}" for b in target if b not in current[(t, p)]]
    return {t: (",".join(lead), ",".join(follow)) for t, (lead, follow) in out.items()}


def set_throttles(admin: Any, plan: dict[TopicPartition, list[int]], current: dict[TopicPartition, list[int]],
                  rate: int, out: Any) -> None:
    from moldau.admin_configs import AlterConfigOp, ConfigResource

    brokers = sorted({b for tp in plan for b in plan[tp] + current[tp]})
    admin.incremental_alter_configs({ConfigResource("broker", str(b)): [
        AlterConfigOp(LEADER_RATE, "SET", str(rate)), AlterConfigOp(FOLLOWER_RATE, "SET", str(rate))]
        for b in brokers})
    ops = {}
    for topic, (leaders, followers) in throttled_replicas(plan, current).items():
        ops[ConfigResource("topic", topic)] = [
            AlterConfigOp(LEADER_REPLICAS, "SET", leaders) if leaders else AlterConfigOp(LEADER_REPLICAS, "DELETE"),
            AlterConfigOp(FOLLOWER_REPLICAS, "SET", followers) if followers
            else AlterConfigOp(FOLLOWER_REPLICAS, "DELETE")]
    if ops:
        admin.incremental_alter_configs(ops)
    print("Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle "
          "is removed.", file=out)
    print(f"The inter-broker throttle limit was set to {rate} B/s", file=out)


def clear_throttles(admin: Any, topics: list[str], out: Any) -> None:
    from moldau.admin_configs import AlterConfigOp, ConfigResource

    brokers = sorted(b.node_id for b in admin.describe_cluster().brokers)
    admin.incremental_alter_configs({ConfigResource("broker", str(b)): [
        AlterConfigOp(LEADER_RATE, "DELETE"), AlterConfigOp(FOLLOWER_RATE, "DELETE")] for b in brokers})
    print(f"Clearing broker-level throttles on broker{'s' if len(brokers) > 1 else ''} "
          f"{','.join(map(str, brokers))}", file=out)
    admin.incremental_alter_configs({ConfigResource("topic", t): [
        AlterConfigOp(LEADER_REPLICAS, "DELETE"), AlterConfigOp(FOLLOWER_REPLICAS, "DELETE")] for t in topics})
    print(f"Clearing topic-level throttles on topic{'s' if len(topics) > 1 else ''} {','.join(topics)}", file=out)


def main(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        from moldau.sync import AdminClient

        args = parse_args(sys.argv[1:] if argv is None else argv)
        conf = admin_config(args, "moldau-reassign-partitions")
        with AdminClient(conf) as admin:
            return execute(args, admin, sys.stdout)
    return run_tool(body, "moldau-reassign-partitions", argv)


if __name__ == "__main__":
    sys.exit(main())
