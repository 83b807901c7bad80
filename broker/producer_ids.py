"""Producer id allocation for idempotent producers.

Ids are handed out from blocks; the end of the current block is persisted before any id from it is used, so a
restart never reuses an id (it skips the rest of the old block instead). In ZooKeeper mode the blocks come from
``/latest_producer_id_block`` (shared by the cluster) through ``ZkProducerIdManager``, behind the same ``next_id()``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

log = logging.getLogger("moldau.producer_ids")

BLOCK_SIZE = 1000
FILE_NAME = "moldau-producer-id-block"


class FileProducerIdManager:
    def __init__(self, directory: Path, block_size: int = BLOCK_SIZE) -> None:
        self.path = directory / FILE_NAME
        self.block_size = block_size
        self._next = 0
        self._block_end = 0

    def _reserve_block(self) -> None:
        start = 0
        if self.path.exists():
            text = self.path.read_text().strip()
            start = int(text) if text else 0
        end = start + self.block_size
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as f:
            f.write(f"{end}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self._next, self._block_end = start, end

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._reserve_block()
        pid = self._next
        self._next += 1
        return pid


class ProducerIdsUnavailable(Exception):
    """No block of producer ids is at hand (ZooKeeper is slow or unreachable); the client should retry."""


class ZkProducerIdManager:
    """Blocks from ZooKeeper (see ``KafkaZk.allocate_producer_id_block``); the next block is fetched in the
    background when 10% of the current one is left, so ``next_id()`` stays synchronous."""

    def __init__(self, allocate: Callable[[], Awaitable[tuple[int, int]]]) -> None:
        self._allocate = allocate
        self._next = 0
        self._end = -1  # inclusive
        self._size = 0
        self._pending: tuple[int, int] | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        start, end = await self._allocate()
        self._next, self._end, self._size = start, end, end - start + 1

    def _prefetch(self) -> None:
        if self._task is not None or self._pending is not None:
            return

        async def fetch() -> None:
            try:
                self._pending = await self._allocate()
            except Exception as exc:
                log.warning("could not allocate a producer id block: %s", exc)
            finally:
                self._task = None

        self._task = asyncio.get_running_loop().create_task(fetch(), name="producer-id-block")

    def next_id(self) -> int:
        if self._next > self._end and self._pending is not None:
            (self._next, self._end), self._pending = self._pending, None
        if self._next > self._end:
            self._prefetch()
            raise ProducerIdsUnavailable("no producer id block is available yet")
        pid = self._next
        self._next += 1
        if self._end - self._next < max(1, self._size // 10):
            self._prefetch()
        return pid

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
