"""``moldau-configs --entity-type users``: SCRAM credentials, as kafka-configs manages them.

    moldau-configs --bootstrap-server h:9092 --alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]'
    moldau-configs --bootstrap-server h:9092 --alter --entity-type users --entity-name alice \\
        --delete-config SCRAM-SHA-512
    moldau-configs --bootstrap-server h:9092 --describe --entity-type users [--entity-name alice]

Over AlterUserScramCredentials / DescribeUserScramCredentials (KIP-554); the password is salted and hashed here.
"""

from __future__ import annotations

import argparse
from typing import Any

from moldau.protocol.scram import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS
from moldau.tools.common import ToolError


def scram_additions(add: dict[str, str]) -> list[tuple[str, str, int]]:
    """``{"SCRAM-SHA-256": "iterations=8192,password=pw"}`` (split_add_config's output) -> (mech, pw, iterations)."""
    out = []
    for mech, value in add.items():
        if mech not in MECHANISMS:
            raise ToolError(f"Invalid config(s): {mech} (users take {', '.join(MECHANISMS)})")
        opts = dict(kv.split("=", 1) for kv in value.split(",") if "=" in kv)
        if "password" not in opts:
            raise ToolError(f"{mech} needs password=... in --add-config")
        try:
            iterations = int(opts.get("iterations", MIN_ITERATIONS))
        except ValueError:
            raise ToolError(f"iterations of {mech} is not a number") from None
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise ToolError(f"iterations of {mech} must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")
        out.append((mech, opts["password"], iterations))
    return out


def execute_users(args: argparse.Namespace, admin: Any, out: Any) -> int:
    if args.describe:
        users = None if args.entity_name is None else [args.entity_name]
        for user, creds in sorted(admin.describe_user_scram_credentials(users).items()):
            if isinstance(creds, Exception):
                raise ToolError(str(creds))
            text = ", ".join(f"{m}=iterations={i}" for m, i in creds)
            print(f"SCRAM credential configs for user-principal '{user}' are {text}", file=out)
        return 0
    for mech in args.delete:
        if mech not in MECHANISMS:
            raise ToolError(f"Invalid config(s): {mech}")
    user = args.entity_name
    results = admin.alter_user_scram_credentials(
        [(user, m, pw, it) for m, pw, it in scram_additions(args.add)], [(user, m) for m in args.delete])
    for err in results.values():
        if err is not None:
            raise ToolError(str(err))
    print(f"Completed updating config for user {user}.", file=out)
    return 0
