"""Where ACLs are kept, and the in-memory copy every broker's authorizer decides from.

ZooKeeper mode keeps them where Kafka's AclAuthorizer does: ``/kafka-acl/<Type>/<name>`` (literal patterns) and
``/kafka-acl-extended/prefixed/<Type>/<name>``. A writer (CreateAcls/DeleteAcls on any broker) updates the
resource's znode with a conditional set, then announces it with a sequential znode: ``/kafka-acl-changes/
acl_changes_<seq>`` holding ``Topic:orders`` for literal patterns, ``/kafka-acl-extended-changes/acl_changes_<seq>``
holding ``{"version":1,"resourceType":"Topic","name":"logs-","patternType":"PREFIXED"}`` for prefixed ones.
Every broker watches both and re-reads the announced resource, so a lost or repeated notification does no harm;
notifications older than 15 minutes are deleted, as Kafka does. A standalone broker keeps its ACLs in
``acls.json`` in its first log directory. The request path only ever reads ``AclCache``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from moldau.broker.security.acl import (
    OPERATION_NAMES,
    RESOURCE_NAMES,
    AclBinding,
    PatternType,
    Permission,
    ResourceType,
    decode_zk,
    encode_zk,
    zk_path,
)
from moldau.tasks import cancel_and_wait

log = logging.getLogger("moldau.acls")

LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
ACLS_FILE = "acls.json"
TYPE_BY_NAME = {v.lower(): k for k, v in RESOURCE_NAMES.items()} | {"transactional_id": ResourceType.TRANSACTIONAL_ID}

Resource = tuple[ResourceType, str, PatternType]


def resource_of(b: AclBinding) -> Resource:
    return b.resource_type, b.name, b.pattern


class AclCache:
    """The ACLs this broker knows, per resource pattern; ``version`` moves on every change so the authorizer
    rebuilds its decision index once per change, not per request."""

    def __init__(self) -> None:
        self.by_resource: dict[Resource, frozenset[AclBinding]] = {}
        self.version = 0

    def set(self, resource: Resource, bindings: Iterable[AclBinding]) -> None:
        found = frozenset(bindings)
        if found:
            self.by_resource[resource] = found
        else:
            self.by_resource.pop(resource, None)
        self.version += 1

    def all(self) -> list[AclBinding]:
        return [b for bindings in self.by_resource.values() for b in bindings]


class AclStore(Protocol):
    cache: AclCache

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def add(self, bindings: list[AclBinding]) -> None: ...

    async def remove(self, bindings: list[AclBinding]) -> None: ...


def _group(bindings: Iterable[AclBinding]) -> dict[Resource, set[AclBinding]]:
    out: dict[Resource, set[AclBinding]] = {}
    for b in bindings:
        out.setdefault(resource_of(b), set()).add(b)
    return out


# ----------------------------------------------------------------------------------------------- ZooKeeper
def change_note(resource: Resource) -> tuple[str, bytes]:
    """(notification root, data) announcing a change of one resource pattern, in Kafka's formats."""
    rtype, name, pattern = resource
    if pattern == PatternType.LITERAL:
        return LITERAL_CHANGES, f"{RESOURCE_NAMES[rtype]}:{name}".encode()
    note = {"version": 1, "resourceType": RESOURCE_NAMES[rtype], "name": name, "patternType": pattern.name}
    return EXTENDED_CHANGES, json.dumps(note, separators=(",", ":")).encode()


def parse_change_note(root: str, data: bytes) -> Resource:
    """The resource a notification names; ValueError if it is not one."""
    if root == LITERAL_CHANGES:
        kind, sep, name = data.decode().partition(":")
        if not sep or kind.lower() not in TYPE_BY_NAME:
            raise ValueError(f"not an ACL change notification: {data!r}")
        return TYPE_BY_NAME[kind.lower()], name, PatternType.LITERAL
    note = json.loads(data)
    pattern = PatternType[str(note["patternType"]).upper()]
    return TYPE_BY_NAME[str(note["resourceType"]).lower()], str(note["name"]), pattern


def _sequence(child: str) -> int:
    tail = child[len(CHANGE_PREFIX):]
    return int(tail) if child.startswith(CHANGE_PREFIX) and tail.isdigit() else -1


class ZkAclStore:
    def __init__(self, client: Any) -> None:
        self.client = client  # moldau.broker.controller.zk.ZkClient
        self.cache = AclCache()
        self.last_handled = {LITERAL_CHANGES: -1, EXTENDED_CHANGES: -1}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Load every ACL, then follow the change notifications made after that."""
        for path in (LITERAL_CHANGES, EXTENDED_CHANGES, *(f"{root}/{t}" for root in (LITERAL_ROOT, PREFIXED_ROOT)
                                                          for t in RESOURCE_NAMES.values())):
            await self.client.ensure_path(path)
        for root in self.last_handled:
            children = await self.client.get_children(root)
            self.last_handled[root] = max((_sequence(c) for c in children), default=-1)
        for root, pattern in ((LITERAL_ROOT, PatternType.LITERAL), (PREFIXED_ROOT, PatternType.PREFIXED)):
            for rtype, type_name in RESOURCE_NAMES.items():
                for name in await self.client.get_children(f"{root}/{type_name}"):
                    await self._reload((rtype, name, pattern))
        log.info("loaded %d ACLs from ZooKeeper", len(self.cache.all()))
        self._task = asyncio.get_running_loop().create_task(self._run(), name="acl-change-watch")
        for root in self.last_handled:
            self.client.watch_children(root, lambda _children: self._wakeup.set())

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])

    async def _reload(self, resource: Resource) -> None:
        path = zk_path(*resource)
        found = await self.client.get(path)
        try:
            self.cache.set(resource, [] if found is None or not found[0] else decode_zk(*resource, found[0]))
        except (ValueError, KeyError, TypeError) as exc:
            log.error("malformed ACL znode %s (%s); ignoring it", path, exc)

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            try:
                for root in self.last_handled:
                    await self._process(root)
            except asyncio.CancelledError:
                raise
            except Exception:  # ZooKeeper unavailable: the next watch event (or reconnect) retries
                log.exception("processing ACL change notifications failed")
                await asyncio.sleep(1)
                self._wakeup.set()

    async def _process(self, root: str) -> None:
        now_ms = time.time() * 1000
        for seq, child in sorted((_sequence(c), c) for c in await self.client.get_children(root)):
            path = f"{root}/{child}"
            found = await self.client.get(path)
            if found is None:
                continue
            if seq > self.last_handled[root]:
                try:
                    await self._reload(parse_change_note(root, found[0]))
                except (ValueError, KeyError, TypeError) as exc:
                    log.error("malformed ACL change notification %s (%s); skipping it", path, exc)
                self.last_handled[root] = seq
            if now_ms - found[1].ctime > CHANGE_EXPIRATION_MS:
                try:
                    await self.client.delete(path)
                except NoNodeError:
                    pass

    async def add(self, bindings: list[AclBinding]) -> None:
        for resource, new in _group(bindings).items():
            await self._update(resource, lambda old, new=new: old | new)  # type: ignore[misc]

    async def remove(self, bindings: list[AclBinding]) -> None:
        for resource, gone in _group(bindings).items():
            await self._update(resource, lambda old, gone=gone: old - gone)  # type: ignore[misc]

    async def _update(self, resource: Resource, change: Callable[[set[AclBinding]], set[AclBinding]]) -> None:
        """Read-modify-write of one resource's znode, retried when another broker wrote it in between."""
        path = zk_path(*resource)
        while True:
            found = await self.client.get(path)
            old = set(decode_zk(*resource, found[0])) if found is not None and found[0] else set()
            new = change(old)
            if new == old:
                break
            try:
                if found is None:
                    await self.client.create(path, encode_zk(sorted(new, key=_order)), makepath=True)
                elif not new:
                    await self.client.delete(path, found[1].version)
                else:
                    await self.client.set(path, encode_zk(sorted(new, key=_order)), found[1].version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue
            root, note = change_note(resource)
            await self.client.create(f"{root}/{CHANGE_PREFIX}", note, sequence=True, makepath=True)
            break
        await self._reload(resource)  # this broker sees its own change at once


def _order(b: AclBinding) -> tuple[str, str, int, int]:
    return b.principal, b.host, int(b.operation), int(b.permission)


# ---------------------------------------------------------------------------------------------- standalone
class FileAclStore:
    """Standalone mode: ``{"version":1,"acls":[{resourceType, name, patternType, principal, host, operation,
    permissionType}]}`` with Kafka's names, written atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.cache = AclCache()

    async def start(self) -> None:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return
        by_op = {v: k for k, v in OPERATION_NAMES.items()}
        bindings = [AclBinding(TYPE_BY_NAME[a["resourceType"].lower()], a["name"], PatternType[a["patternType"]],
                               a["principal"], a["host"], by_op[a["operation"]], Permission[a["permissionType"]])
                    for a in data.get("acls", [])]
        for resource, found in _group(bindings).items():
            self.cache.set(resource, found)

    async def stop(self) -> None:
        pass

    async def add(self, bindings: list[AclBinding]) -> None:
        changed = {r: self.cache.by_resource.get(r, frozenset()) | new for r, new in _group(bindings).items()}
        self._save_then_apply(changed)

    async def remove(self, bindings: list[AclBinding]) -> None:
        changed = {r: self.cache.by_resource.get(r, frozenset()) - gone for r, gone in _group(bindings).items()}
        self._save_then_apply(changed)

    def _save_then_apply(self, changed: dict[Resource, frozenset[AclBinding]]) -> None:
        """Write the file first: a failed write changes nothing, on disk or in the authorizer."""
        after = {**self.cache.by_resource, **changed}
        acls = [{"resourceType": RESOURCE_NAMES[b.resource_type], "name": b.name, "patternType": b.pattern.name,
                 "principal": b.principal, "host": b.host, "operation": OPERATION_NAMES[b.operation],
                 "permissionType": b.permission.name}
                for b in sorted((b for found in after.values() for b in found), key=_file_order)]
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"version": 1, "acls": acls}, indent=1))
        os.replace(tmp, self.path)
        for resource, found in changed.items():
            self.cache.set(resource, found)


def _file_order(b: AclBinding) -> tuple[int, str, int, str, str, int, int]:
    return int(b.resource_type), b.name, int(b.pattern), *_order(b)

