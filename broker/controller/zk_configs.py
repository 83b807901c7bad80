"""Dynamic configs in ZooKeeper, where Kafka keeps them, and the watch every broker runs on their changes.

* ``/config/<type>/<name>`` holds ``{"version":1,"config":{...}}`` for ``topics/<t>``, ``brokers/<id>`` and
  ``brokers/<default>`` (the cluster-wide broker defaults).
* A writer (any broker: AlterConfigs, like Kafka's AdminZkClient) then creates the sequential znode
  ``/config/changes/config_change_<seq>`` holding ``{"version":2,"entity_path":"<type>/<name>"}``.
* Every broker watches ``/config/changes`` and handles each notification newer than the last one it handled
  (Kafka's ZkNodeChangeNotificationListener); it re-reads the entity's znode, so a lost or repeated
  notification does no harm. Notifications older than 15 minutes are deleted, as Kafka does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable

from kazoo.exceptions import NodeExistsError

from moldau.broker.controller.zk import ZkClient
from moldau.broker.controller.zk_data import CONFIG_CHANGES, MalformedZnode
from moldau.tasks import cancel_and_wait

log = logging.getLogger("moldau.zk_configs")

CHANGE_PREFIX = "config_change_"
CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # Kafka's ZkConfigManager.DefaultChangeExpirationMs
# Client quota entities (users, clients, users/<u>/clients/<c>, ips) share the layout (broker/quota_config.py).
ENTITY_TYPES = ("topics", "brokers", "users", "clients", "ips")


def entity_path(entity_type: str, name: str) -> str:
    return f"/config/{entity_type}/{name}"


def entity_config(configs: dict[str, str]) -> bytes:
    return json.dumps({"version": 1, "config": {k: str(v) for k, v in sorted(configs.items())}},
                      separators=(",", ":")).encode()


def parse_entity_config(path: str, raw: bytes | None) -> dict[str, str]:
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        raise MalformedZnode(path, "not JSON") from None
    config = data.get("config", {}) if isinstance(data, dict) else None
    if not isinstance(config, dict):
        raise MalformedZnode(path, "config must be an object")
    return {str(k): str(v) for k, v in config.items()}


def change_notification(entity_type: str, name: str) -> bytes:
    return json.dumps({"version": 2, "entity_path": f"{entity_type}/{name}"}, separators=(",", ":")).encode()


def parse_change_notification(path: str, raw: bytes | None) -> tuple[str, str]:
    """(entity type, name) of a notification; version 1 ({"entity_type","entity_name"}) is read too."""
    try:
        data = json.loads(raw or b"")
    except ValueError:
        raise MalformedZnode(path, "not JSON") from None
    if isinstance(data, dict) and data.get("version") == 2 and isinstance(data.get("entity_path"), str):
        entity_type, sep, name = data["entity_path"].partition("/")
        if sep and entity_type in ENTITY_TYPES and name:
            return entity_type, name
    if isinstance(data, dict) and data.get("version") == 1:
        entity_type = {"topic": "topics", "topics": "topics", "broker": "brokers", "brokers": "brokers"}.get(
            str(data.get("entity_type")))
        if entity_type and isinstance(data.get("entity_name"), str):
            return entity_type, data["entity_name"]
    raise MalformedZnode(path, f"not a config change notification: {data!r}")


def sequence_of(child: str) -> int:
    return int(child[len(CHANGE_PREFIX):]) if child.startswith(CHANGE_PREFIX) and child[len(CHANGE_PREFIX):].isdigit() \
        else -1


class ZkConfigStore:
    """Reads and writes entity configs; every write is followed by a change notification."""

    def __init__(self, client: ZkClient) -> None:
        self.client = client

    async def read(self, entity_type: str, name: str) -> dict[str, str]:
        path = entity_path(entity_type, name)
        found = await self.client.get(path)
        if found is None:
            return {}
        try:
            return parse_entity_config(path, found[0])
        except MalformedZnode as exc:
            log.error("%s; treating it as empty", exc)
            return {}

    async def write(self, entity_type: str, name: str, configs: dict[str, str]) -> None:
        path = entity_path(entity_type, name)
        data = entity_config(configs)
        if await self.client.exists(path) is None:
            try:
                await self.client.create(path, data, makepath=True)
            except NodeExistsError:
                await self.client.set(path, data)
        else:
            await self.client.set(path, data)
        await self.client.create(f"{CONFIG_CHANGES}/{CHANGE_PREFIX}", change_notification(entity_type, name),
                                 sequence=True)


    async def list(self, entity_type: str) -> dict[str, dict[str, str]]:
        """Every entity of a type with its configs; for "users" also "<user>/clients/<client-id>"."""
        base = f"/config/{entity_type}"
        if await self.client.exists(base) is None:
            return {}
        names = list(await self.client.get_children(base))
        if entity_type == "users":
            for user in list(names):
                clients = f"{base}/{user}/clients"
                if await self.client.exists(clients) is not None:
                    names += [f"{user}/clients/{c}" for c in await self.client.get_children(clients)]
        return {name: await self.read(entity_type, name) for name in names}


ChangeHandler = Callable[[str, str], Awaitable[None]]


class ConfigChangeWatcher:
    """Handles /config/changes notifications in sequence order, one batch at a time."""

    def __init__(self, client: ZkClient, handler: ChangeHandler) -> None:
        self.client = client
        self.handler = handler
        self.last_handled = -1
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Skip the notifications that exist now (the caller has just read the configs they announce)."""
        children = await self.client.get_children(CONFIG_CHANGES)
        self.last_handled = max((sequence_of(c) for c in children), default=-1)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="config-change-watch")
        self.client.watch_children(CONFIG_CHANGES, lambda _children: self._wakeup.set())

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            try:
                await self.process()
            except asyncio.CancelledError:
                raise
            except Exception:  # ZooKeeper unavailable: the next watch event (or reconnect) retries
                log.exception("processing config change notifications failed")
                await asyncio.sleep(1)
                self._wakeup.set()

    async def process(self) -> None:
        children = sorted((sequence_of(c), c) for c in await self.client.get_children(CONFIG_CHANGES))
        now_ms = time.time() * 1000
        for seq, child in children:
            if seq < 0:
                continue
            path = f"{CONFIG_CHANGES}/{child}"
            found = await self.client.get(path)
            if found is None:
                continue
            if seq > self.last_handled:
                try:
                    entity_type, name = parse_change_notification(path, found[0])
                    await self.handler(entity_type, name)
                except MalformedZnode as exc:
                    log.error("%s; skipping it", exc)
                self.last_handled = seq
            if now_ms - found[1].ctime > CHANGE_EXPIRATION_MS:
                await self.client.delete(path)
