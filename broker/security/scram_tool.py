"""moldau-scram: add, delete and list SCRAM users, as ``kafka-configs --entity-type users`` does.

    moldau-scram --zookeeper 127.0.0.1:2181 --alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]'
    moldau-scram --log-dir /var/lib/moldau --alter --entity-name alice --delete-config SCRAM-SHA-512
    moldau-scram --zookeeper 127.0.0.1:2181 --describe [--entity-name alice]

``--zookeeper`` writes /config/users/<name> (any broker of that cluster sees it at the next login); ``--log-dir``
writes the standalone broker's users file in its first log dir. ``alter_user`` is the function other tools
(moldau-configs) call.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from moldau.broker.security.credentials import (
    USERS_FILE,
    CredentialStore,
    FileCredentialStore,
    ZkCredentialStore,
)
from moldau.protocol.scram import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, make_credential
from moldau.tools.common import ToolError, ToolParser, UsageError, run_tool

_ENTRY_RE = re.compile(r"\s*(SCRAM-SHA-\d+)\s*=\s*\[([^\]]*)\]\s*(?:,|$)")


def parse_add_config(text: str) -> dict[str, tuple[str, int]]:
    """'SCRAM-SHA-256=[iterations=8192,password=pw],...' -> {mechanism: (password, iterations)}."""
    out: dict[str, tuple[str, int]] = {}
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _ENTRY_RE.match(text, pos)
        if m is None:
            raise ValueError(f"--add-config: expected MECHANISM=[password=...] near {text[pos:pos + 30]!r}")
        mech = m.group(1)
        if mech not in MECHANISMS:
            raise ValueError(f"--add-config: unknown mechanism {mech} (one of {', '.join(MECHANISMS)})")
        opts = dict(kv.split("=", 1) for kv in m.group(2).split(",") if "=" in kv)
        if "password" not in opts:
            raise ValueError(f"--add-config: {mech} needs password=...")
        try:
            iterations = int(opts.get("iterations", MIN_ITERATIONS))
        except ValueError:
            raise ValueError(f"--add-config: iterations of {mech} is not a number") from None
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise ValueError(f"--add-config: iterations of {mech} must be {MIN_ITERATIONS}-{MAX_ITERATIONS}")
        out[mech] = (opts["password"], iterations)
        pos = m.end()
    return out


async def alter_user(store: CredentialStore, user: str, add: dict[str, tuple[str, int]],
                     delete: Sequence[str] = ()) -> None:
    for mech in delete:
        if mech not in MECHANISMS:
            raise ValueError(f"--delete-config: unknown mechanism {mech}")
        await store.alter(user, mech, None)
    for mech, (password, iterations) in add.items():
        await store.alter(user, mech, make_credential(mech, password, iterations))


async def describe(store: CredentialStore, user: str | None) -> list[str]:
    lines = []
    for name in [user] if user else await store.users():
        creds = await store.credentials(name)
        if creds:
            lines.append(f"SCRAM credential configs for user-principal '{name}' are " + ", ".join(
                f"{m}=iterations={c.iterations}" for m, c in sorted(creds.items())))
    return lines


# Kafka's zookeeper.session.timeout.ms and (a shorter) zookeeper.connection.timeout.ms for the tool's session.
ZK_SESSION_TIMEOUT_MS = 18000
ZK_CONNECTION_TIMEOUT_MS = 10000


async def _run(args: argparse.Namespace) -> int:
    zk = None
    store: CredentialStore
    if args.zookeeper:
        from moldau.broker.controller.zk import ZkClient

        if not args.verbose:  # kazoo logs each failed connection attempt; the one error line says it all
            logging.getLogger("kazoo").addHandler(logging.NullHandler())
            logging.getLogger("kazoo").propagate = False
        zk = ZkClient(args.zookeeper, ZK_SESSION_TIMEOUT_MS, ZK_CONNECTION_TIMEOUT_MS)
        await zk.start()
        store = ZkCredentialStore(zk)
    else:
        log_dir = Path(args.log_dir)
        if args.alter:  # before the broker's first start the log dir does not exist yet: make it, as the broker would
            try:
                log_dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ToolError(f"--log-dir: cannot create {log_dir}: {exc.strerror}") from None
        store = FileCredentialStore(log_dir / USERS_FILE)
    try:
        if args.describe:
            for line in await describe(store, args.entity_name):
                print(line)
            return 0
        add = parse_add_config(args.add_config) if args.add_config else {}
        delete = [m.strip() for m in (args.delete_config or "").split(",") if m.strip()]
        await alter_user(store, args.entity_name, add, delete)
        print(f"Completed updating config for user {args.entity_name}.")
        return 0
    finally:
        if zk is not None:
            await zk.close()


def main(argv: Sequence[str] | None = None) -> int:
    p = ToolParser(prog="moldau-scram", description="Manage SCRAM users (kafka-configs "
                                "--entity-type users).")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--zookeeper", help="ZooKeeper connect string of the cluster")
    where.add_argument("--log-dir", help="first log dir of a standalone broker")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", action="store_true")
    action.add_argument("--describe", action="store_true")
    p.add_argument("--entity-type", default="users", choices=["users"])
    p.add_argument("--entity-name")
    p.add_argument("--add-config", help="'SCRAM-SHA-256=[iterations=4096,password=...],SCRAM-SHA-512=[...]'")
    p.add_argument("--delete-config", help="comma-separated mechanisms to remove")
    args = p.parse_args(argv)
    if args.alter and not args.entity_name:
        p.error("--alter needs --entity-name")
    if args.alter and not (args.add_config or args.delete_config):
        p.error("--alter needs --add-config or --delete-config")

    def body() -> int:
        try:
            return asyncio.run(_run(args))
        except ValueError as exc:  # a bad --add-config or --delete-config
            raise UsageError(str(exc)) from None
    return run_tool(body, "moldau-scram", argv)


if __name__ == "__main__":
    sys.exit(main())
