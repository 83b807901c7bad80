"""Controller-to-broker request sending: one sender task with its own queue per live broker.

A broker that does not answer only delays its own queue (requests are retried with backoff until they succeed or
the broker leaves the cluster); the controller's event queue never waits on a broker. Requests to one broker are
sent in order, so a LeaderAndIsr always arrives before the UpdateMetadata enqueued after it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from moldau.broker.controller.zk_data import BrokerInfo
from moldau.connection import BrokerConnection, api_for
from moldau.protocol.api import ApiKey
from moldau.protocol.schema import Api
from moldau.security import ClientSecurity
from moldau.tasks import cancel_and_wait

log = logging.getLogger("moldau.controller.channel")
SENDER_STOP_S = 1.0  # how long a stopping sender may take to end (it holds no state worth waiting longer for)

ResponseCallback = Callable[[int, dict[str, Any]], None]


@dataclass(slots=True)
class QueuedRequest:
    api: Api
    body: dict[str, Any]
    callback: ResponseCallback | None = None


class BrokerSender:
    def __init__(self, broker: BrokerInfo, client_id: str, timeout_s: float, endpoint_name: str | None = None,
                 security: ClientSecurity | None = None) -> None:
        self.broker = broker
        self.security = security
        self.client_id = client_id
        self.timeout_s = timeout_s
        host, port = broker.host, broker.port
        for name, _, h, p in broker.endpoints:
            if name == endpoint_name:
                host, port = h, p
        self.address = (host, port)
        self.queue: asyncio.Queue[QueuedRequest] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None
        self._conn: BrokerConnection | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"controller-sender-{self.broker.broker_id}")

    async def stop(self) -> None:
        """Cancels the sender (waiting at most SENDER_STOP_S for it to end) and closes its connection. The
        caller's own cancellation (a shutdown deadline) goes through."""
        task, self.task = self.task, None
        if task is not None and not await cancel_and_wait([task], SENDER_STOP_S):
            log.warning("sender to broker %d did not stop within %.1f s of its cancellation; leaving it",
                        self.broker.broker_id, SENDER_STOP_S)
        await self._close()

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                result: Any = conn.close()
                if inspect.isawaitable(result):
                    await result
            except Exception:
                pass

    async def _send(self, item: QueuedRequest) -> dict[str, Any]:
        if self._conn is None:
            conn = BrokerConnection(self.address[0], self.address[1], client_id=self.client_id,
                                    request_timeout_ms=int(self.timeout_s * 1000), security=self.security)
            await conn.connect(self.timeout_s)
            self._conn = conn
        async with asyncio.timeout(self.timeout_s):  # not wait_for: see moldau.tasks
            response: dict[str, Any] = await self._conn.send(item.api, item.body)
        return response

    async def _run(self) -> None:
        while True:
            item = await self.queue.get()
            backoff, attempt = 0.1, 0
            while True:
                attempt += 1
                try:
                    response = await self._send(item)
                    break
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    level = logging.WARNING if attempt in (1, 10) else logging.DEBUG
                    log.log(level, "%s to broker %d at %s:%d failed (attempt %d: %r); retrying in %.1fs",
                            item.api.name, self.broker.broker_id, *self.address, attempt, exc, backoff)
                    await self._close()
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 5.0)
            if item.callback is not None:
                try:
                    item.callback(self.broker.broker_id, response)
                except Exception:
                    log.exception("response callback for %s failed", item.api.name)


class ControllerChannel:
    def __init__(self, controller_id: int, timeout_ms: int, endpoint_name: str | None = None,
                 security: ClientSecurity | None = None) -> None:
        self.security = security
        self.client_id = f"controller-{controller_id}"
        self.timeout_s = timeout_ms / 1000
        self.endpoint_name = endpoint_name
        self.senders: dict[int, BrokerSender] = {}

    def add_broker(self, broker: BrokerInfo) -> None:
        if broker.broker_id in self.senders:
            return
        sender = BrokerSender(broker, self.client_id, self.timeout_s, self.endpoint_name, self.security)
        self.senders[broker.broker_id] = sender
        sender.start()

    async def remove_broker(self, broker_id: int) -> None:
        sender = self.senders.pop(broker_id, None)
        if sender is not None:
            await sender.stop()

    def send(self, broker_id: int, api: ApiKey, body: dict[str, Any], callback: ResponseCallback | None = None) \
            -> bool:
        sender = self.senders.get(broker_id)
        if sender is None:
            return False
        sender.queue.put_nowait(QueuedRequest(api_for(api), body, callback))
        return True

    def pending(self) -> int:
        return sum(s.queue.qsize() for s in self.senders.values())

    async def close(self) -> None:
        senders, self.senders = list(self.senders.values()), {}
        await asyncio.gather(*(s.stop() for s in senders))  # side by side: one stuck sender delays no other
