"""Where SCRAM credentials live: ``/config/users/<name>`` in ZooKeeper (Kafka's layout and text format), or a
JSON file next to the standalone metadata file. The broker reads them at each authentication, so changes made
by any broker or by ``moldau-scram`` apply to the next login without a notification round.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote, unquote

from moldau.protocol.scram import MECHANISMS, ScramCredential

log = logging.getLogger("moldau.security")

USERS_PATH = "/config/users"
CHANGES_PATH = "/config/changes/config_change_"
USERS_FILE = "moldau-scram-users.json"


class CredentialStore(Protocol):
    async def credentials(self, user: str) -> dict[str, ScramCredential]: ...
    async def users(self) -> list[str]: ...
    async def alter(self, user: str, mechanism: str, credential: ScramCredential | None) -> None: ...


def decode_user_config(data: bytes) -> dict[str, str]:
    """The ``config`` map of a /config/users/<name> znode (Kafka's ``{"version":1,"config":{...}}``)."""
    if not data:
        return {}
    config = json.loads(data).get("config", {})
    return {str(k): str(v) for k, v in config.items()}


def encode_user_config(config: dict[str, str]) -> bytes:
    return json.dumps({"version": 1, "config": config}, separators=(",", ":")).encode()


def scram_credentials(config: dict[str, str]) -> dict[str, ScramCredential]:
    out: dict[str, ScramCredential] = {}
    for mech in MECHANISMS:
        if mech in config:
            try:
                out[mech] = ScramCredential.from_kafka(config[mech])
            except ValueError as exc:
                log.warning("ignoring malformed %s credential: %s", mech, exc)
    return out


def apply(config: dict[str, str], mechanism: str, credential: ScramCredential | None) -> dict[str, str]:
    out = dict(config)
    if credential is None:
        out.pop(mechanism, None)
    else:
        out[mechanism] = credential.to_kafka()
    return out


def user_path(user: str) -> str:
    # Kafka's Sanitizer URL-encodes entity names so that any user name is one znode.
    return f"{USERS_PATH}/{quote(user, safe='')}"


class ZkCredentialStore:
    def __init__(self, client: Any) -> None:
        self.client = client  # moldau.broker.controller.zk.ZkClient

    async def _config(self, user: str) -> dict[str, str]:
        found = await self.client.get(user_path(user))
        return {} if found is None else decode_user_config(found[0])

    async def credentials(self, user: str) -> dict[str, ScramCredential]:
        return scram_credentials(await self._config(user))

    async def users(self) -> list[str]:
        return sorted(unquote(u) for u in await self.client.get_children(USERS_PATH))

    async def alter(self, user: str, mechanism: str, credential: ScramCredential | None) -> None:
        path = user_path(user)
        found = await self.client.get(path)
        config = apply({} if found is None else decode_user_config(found[0]), mechanism, credential)
        if found is None:
            await self.client.create(path, encode_user_config(config), makepath=True)
        else:
            await self.client.set(path, encode_user_config(config), found[1].version)
        # Kafka's config-change notification, so Kafka tooling watching /config/changes sees the update.
        note = json.dumps({"version": 2, "entity_path": f"users/{quote(user, safe='')}"}).encode()
        await self.client.create(CHANGES_PATH, note, sequence=True, makepath=True)


class FileCredentialStore:
    """Standalone mode: ``{"users": {name: {mechanism: kafka-format credential}}}`` written atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        return {str(u): dict(c) for u, c in data.get("users", {}).items()}

    def save(self, users: dict[str, dict[str, str]]) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"version": 1, "users": users}, indent=1, sort_keys=True))
        os.replace(tmp, self.path)

    async def credentials(self, user: str) -> dict[str, ScramCredential]:
        return scram_credentials(self.load().get(user, {}))

    async def users(self) -> list[str]:
        return sorted(self.load())

    async def alter(self, user: str, mechanism: str, credential: ScramCredential | None) -> None:
        self.alter_sync(user, mechanism, credential)

    def alter_sync(self, user: str, mechanism: str, credential: ScramCredential | None) -> None:
        users = self.load()
        config = apply(users.get(user, {}), mechanism, credential)
        if config:
            users[user] = config
        else:
            users.pop(user, None)
        self.save(users)
