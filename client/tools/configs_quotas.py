"""``moldau-configs --entity-type users|clients|ips``: client quotas, as kafka-configs manages them (KIP-546).

    moldau-configs --bootstrap-server h:9092 --alter --entity-type users --entity-name alice \\
        --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    moldau-configs --bootstrap-server h:9092 --alter --entity-type users --entity-name alice \\
        --entity-type clients --entity-default --add-config request_percentage=50
    moldau-configs --bootstrap-server h:9092 --alter --entity-type clients --entity-default \\
        --delete-config producer_byte_rate
    moldau-configs --bootstrap-server h:9092 --describe --entity-type users [--entity-name alice]

Entity types and names pair up in the order given (``--user``/``--client``/``--user-defaults``/
``--client-defaults`` are Kafka's shorthands). Describe prints Kafka's lines:
``Quota configs for user-principal 'alice', the default client-id are request_percentage=50.0``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from moldau.tools.common import ToolError

QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate",
              "connection_creation_rate")
QUOTA_ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
DESCRIPTION = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
SHORTHANDS = {"--user": ("users", True), "--client": ("clients", True), "--ip": ("ips", True),
              "--user-defaults": ("users", False), "--client-defaults": ("clients", False),
              "--ip-defaults": ("ips", False)}


def entity_pairs(argv: Sequence[str]) -> list[tuple[str, str | None, bool]]:
    """(entity type, name, is default) in command-line order: each --entity-name / --entity-default goes to the
    earliest --entity-type that has neither yet (as kafka-configs pairs them); a type alone has name None."""
    pairs: list[list[Any]] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        opt, eq, inline = arg.partition("=")
        value = inline if eq else (argv[i + 1] if i + 1 < len(argv) else None)
        step = 1 if eq else 2
        if opt == "--entity-type" and value is not None:
            pairs.append([value, None, False])
            i += step
            continue
        if opt in ("--entity-name", "--entity-default"):
            target = next((p for p in pairs if p[1] is None and not p[2]), None)
            if target is not None:
                if opt == "--entity-name" and value is not None:
                    target[1] = value
                elif opt == "--entity-default":
                    target[2] = True
            i += step if opt == "--entity-name" else 1
            continue
        if opt in SHORTHANDS:
            entity_type, named = SHORTHANDS[opt]
            if named:
                pairs.append([entity_type, value, False])
                i += step
            else:
                pairs.append([entity_type, None, True])
                i += 1
            continue
        i += 1
    return [(t, n, d) for t, n, d in pairs]


def quota_entity(pairs: list[tuple[str, str | None, bool]]) -> list[tuple[str, int, str | None]]:
    """Filter components of a describe: a name is an exact match, --entity-default the default, none any."""
    from moldau.admin_quotas import MATCH_DEFAULT, MATCH_EXACT, MATCH_SPECIFIED

    out: list[tuple[str, int, str | None]] = []
    for entity_type, name, default in pairs:
        if entity_type not in QUOTA_ENTITY_TYPES:
            raise ToolError(f"--entity-type {entity_type} cannot be combined with users, clients or ips")
        kind = QUOTA_ENTITY_TYPES[entity_type]
        if default:
            out.append((kind, MATCH_DEFAULT, None))
        elif name is not None:
            out.append((kind, MATCH_EXACT, name))
        else:
            out.append((kind, MATCH_SPECIFIED, None))
    return out


def is_quota_command(args: argparse.Namespace) -> bool:
    """Quota keys (or a describe) of users/clients/ips; SCRAM credentials of users go to configs_users."""
    keys = set(args.add) | set(args.delete)
    if args.entity_type not in QUOTA_ENTITY_TYPES:
        return False
    if args.entity_type != "users" or len(args.entity_pairs) > 1:
        return True
    return args.describe or bool(keys & set(QUOTA_KEYS))


def describe_line(entity: dict[str, str | None], values: dict[str, float]) -> str:
    text = ", ".join(f"{DESCRIPTION.get(t, t)} '{n}'" if n is not None else f"the default {DESCRIPTION.get(t, t)}"
                     for t, n in entity.items())
    return f"Quota configs for {text} are {', '.join(f'{k}={v}' for k, v in sorted(values.items()))}"


def execute_quotas(args: argparse.Namespace, admin: Any, out: Any) -> int:
    components = quota_entity(args.entity_pairs)
    if args.describe:
        found = admin.describe_client_quotas(components, strict=True)
        for entity, values in sorted(found, key=lambda e: sorted((k, v or "") for k, v in e[0].items())):
            print(describe_line(entity, values), file=out)
        return 0
    from moldau.admin_quotas import MATCH_SPECIFIED

    if any(m == MATCH_SPECIFIED for _, m, _ in components):
        raise ToolError("--entity-name or --entity-default must be specified for each --entity-type with --alter")
    unknown = sorted((set(args.add) | set(args.delete)) - set(QUOTA_KEYS))
    if unknown:
        raise ToolError(f"Invalid config(s): {','.join(unknown)}")
    ops: dict[str, float | None] = {}
    for key, text in args.add.items():
        try:
            ops[key] = float(text)
        except ValueError:
            raise ToolError(f"Invalid value {text!r} for {key}: not a number") from None
    ops.update({key: None for key in args.delete})
    entity = {t: n for t, _, n in components}
    admin.alter_client_quotas([(entity, ops)])
    names = ", ".join(f"{DESCRIPTION[t]} '{n}'" if n is not None else f"the default {DESCRIPTION[t]}"
                      for t, n in entity.items())
    print(f"Completed updating config for {names}.", file=out)
    return 0
