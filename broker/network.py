"""Acceptors and connection coroutines: framing, one request in flight per connection, response writing, sendfile.

Each connection is a coroutine over a raw non-blocking socket (``loop.sock_recv_into`` / ``sock_sendall``) rather
than an asyncio transport, so that fetch responses can send log bytes straight from segment files with
``os.sendfile`` on the socket's descriptor. Like Kafka's processors, a connection reads the next request only after
the response to the previous one has been written ("muting"), which keeps responses in order without bookkeeping.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable
from typing import Any, Protocol

from moldau.broker.apis import ADVERTISED_VERSIONS
from moldau.broker.request_channel import Request, RequestChannel
from moldau.protocol.api import REGISTRY, api_name
from moldau.protocol.errors import ErrorCode
from moldau.protocol.frame import FrameDecoder, FrameTooLarge, InvalidFrame
from moldau.protocol.header import (
    API_VERSIONS_KEY,
    decode_request_header,
    encode_response_header,
    peek_api,
    request_header_version,
    response_header_version,
)
from moldau.protocol.messages.api_versions import API_VERSIONS
from moldau.protocol.schema import assemble
from moldau.protocol.types import INT16, INT32, DecodeError

log = logging.getLogger("moldau.network")

RECV_SIZE = 256 * 1024


class NetworkMetrics(Protocol):
    def network_busy(self, seconds: float) -> None: ...
    def bytes_in(self, n: int) -> None: ...
    def bytes_out(self, n: int, sendfile: int) -> None: ...
    def request_done(self, api: str, seconds: float) -> None: ...
    def connections(self, delta: int) -> None: ...


def supported_api_versions() -> list[dict[str, int]]:
    return ADVERTISED_VERSIONS


def _regions(part: Any) -> list[Any]:
    regions = getattr(part, "regions", None)
    return list(regions) if regions is not None else [part]


class Connection:
    def __init__(self, sock: socket.socket, peer: tuple[Any, ...], listener: str, channel: RequestChannel,
                 max_request_size: int, metrics: NetworkMetrics, on_close: Callable[[Connection], None]) -> None:
        self.sock = sock
        self.peer = peer
        self.listener = listener
        self.channel = channel
        self.metrics = metrics
        self.decoder = FrameDecoder(max_request_size)
        self.on_close = on_close
        self.loop = asyncio.get_running_loop()
        self.task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return f"{self.peer[0]}:{self.peer[1]}"

    async def run(self) -> None:
        loop = self.loop
        buf = bytearray(RECV_SIZE)
        view = memoryview(buf)
        try:
            while True:
                n = await loop.sock_recv_into(self.sock, view)
                if n == 0:
                    return
                t0 = time.perf_counter()
                self.metrics.bytes_in(n)
                try:
                    frames = self.decoder.feed(view[:n])
                except (FrameTooLarge, InvalidFrame) as exc:
                    log.warning("closing connection from %s: %s", self.name, exc)
                    return
                self.metrics.network_busy(time.perf_counter() - t0)
                for frame in frames:
                    if not await self._handle_frame(frame):
                        return
        except (ConnectionError, OSError) as exc:
            log.debug("connection %s ended: %s", self.name, exc)
        except asyncio.CancelledError:
            pass
        finally:
            self.close()

    async def _handle_frame(self, frame: bytearray) -> bool:
        """Dispatch one frame and write its response; False closes the connection."""
        t0 = time.perf_counter()
        try:
            api_key, version, correlation_id = peek_api(frame)
        except DecodeError as exc:
            log.warning("closing connection from %s: %s", self.name, exc)
            return False
        api = REGISTRY.get(api_key)
        if api is None or not api.supports(version):
            # ApiVersions answers in its v0 layout with the ranges we support, so the client can pick one.
            # Any other unsupported (key, version) gets UNSUPPORTED_VERSION right after the header.
            if api_key == API_VERSIONS_KEY:
                body = bytearray(8)
                API_VERSIONS.response_encoder(0)(body, [], {
                    "error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": supported_api_versions()})
            else:
                body = bytearray(8) + INT16.pack(ErrorCode.UNSUPPORTED_VERSION)
                log.info("unsupported api %s v%d from %s", api_name(api_key), version, self.name)
            INT32.pack_into(body, 0, len(body) - 4)
            INT32.pack_into(body, 4, correlation_id)
            self.metrics.network_busy(time.perf_counter() - t0)
            await self._send_bytes(body)
            return True
        try:
            header, pos = decode_request_header(frame, request_header_version(api_key, api.is_flexible(version),
                                                                              version))
        except DecodeError as exc:
            log.warning("closing connection from %s: bad request header: %s", self.name, exc)
            return False
        request = Request(header, api, frame, pos, self.peer[0], received_at=t0)
        request.done = self.loop.create_future()
        self.metrics.network_busy(time.perf_counter() - t0)
        await self.channel.send_request(request)
        await request.done
        if request.close_connection:
            return False
        if request.response is not None:
            await self._write_response(request)
        self.metrics.request_done(api_name(api_key), time.perf_counter() - request.received_at)
        return True

    async def _write_response(self, request: Request) -> None:
        t0 = time.perf_counter()
        api, version = request.api, request.version
        out = bytearray(4)
        encode_response_header(out, request.header.correlation_id,
                               response_header_version(api.key, api.is_flexible(version)))
        external: list[tuple[int, Any]] = []
        try:
            api.response_encoder(version)(out, external, request.response or {})
        except Exception:
            log.exception("failed to encode %s v%d response; closing %s", api.name, version, self.name)
            raise ConnectionError("unencodable response") from None
        total = len(out) + sum(len(obj) for _, obj in external)
        INT32.pack_into(out, 0, total - 4)
        self.metrics.network_busy(time.perf_counter() - t0)
        sent_by_sendfile = 0
        for part in assemble(out, external):
            if isinstance(part, (bytes, bytearray, memoryview)):
                await self.loop.sock_sendall(self.sock, part)
            else:
                for region in _regions(part):
                    sent_by_sendfile += await self._sendfile(region)
        self.metrics.bytes_out(total, sent_by_sendfile)

    async def _send_bytes(self, data: bytes | bytearray) -> None:
        await self.loop.sock_sendall(self.sock, data)
        self.metrics.bytes_out(len(data), 0)

    async def _sendfile(self, region: Any) -> int:
        """Send a file region with os.sendfile, waiting for writability when the socket buffer is full."""
        fd_out = self.sock.fileno()
        fd_in = region.fileobj.fileno()
        offset = region.position
        remaining = region.length
        while remaining > 0:
            try:
                sent = os.sendfile(fd_out, fd_in, offset, remaining)
            except BlockingIOError:
                await self._writable(fd_out)
                continue
            if sent == 0:
                # The segment shrank under us (truncation): the promised length can't be met, so the frame
                # would be corrupt. Closing is the only honest answer.
                raise ConnectionError("segment file shorter than the region being sent")
            offset += sent
            remaining -= sent
        return int(region.length)

    async def _writable(self, fd: int) -> None:
        fut: asyncio.Future[None] = self.loop.create_future()

        def ready() -> None:
            if not fut.done():
                fut.set_result(None)

        self.loop.add_writer(fd, ready)
        try:
            await fut
        finally:
            self.loop.remove_writer(fd)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
        self.on_close(self)


class SocketServer:
    """One acceptor per listener; a coroutine per connection feeding the request channel."""

    def __init__(self, listeners: list[tuple[str, str, int]], channel: RequestChannel, max_request_size: int,
                 metrics: NetworkMetrics, send_buffer: int = -1, receive_buffer: int = -1) -> None:
        self.listeners = listeners
        self.channel = channel
        self.max_request_size = max_request_size
        self.metrics = metrics
        self.send_buffer = send_buffer
        self.receive_buffer = receive_buffer
        self.bound: dict[str, tuple[str, int]] = {}
        self._sockets: list[socket.socket] = []
        self._acceptors: list[asyncio.Task[None]] = []
        self.connections: set[Connection] = set()

    async def start(self) -> None:
        for name, host, port in self.listeners:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            lsock = socket.socket(family, socket.SOCK_STREAM)
            lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                lsock.bind((host or "0.0.0.0", port))
            except OSError as exc:
                lsock.close()
                raise OSError(f"cannot listen on {name}://{host}:{port}: {exc.strerror}") from exc
            lsock.listen(1024)
            lsock.setblocking(False)
            self._sockets.append(lsock)
            self.bound[name] = (host, lsock.getsockname()[1])
            self._acceptors.append(asyncio.create_task(self._accept_loop(name, lsock)))
            log.info("listening on %s://%s:%d", name, host, self.bound[name][1])

    async def _accept_loop(self, name: str, lsock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, peer = await loop.sock_accept(lsock)
            except asyncio.CancelledError:
                return
            except OSError as exc:
                log.warning("accept failed on %s: %s", name, exc)
                await asyncio.sleep(0.05)
                continue
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.send_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer)
            if self.receive_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer)
            conn = Connection(sock, peer, name, self.channel, self.max_request_size, self.metrics,
                              self._forget)
            self.connections.add(conn)
            self.metrics.connections(1)
            conn.task = asyncio.create_task(conn.run())

    def _forget(self, conn: Connection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            self.metrics.connections(-1)

    def stop_accepting(self) -> None:
        for task in self._acceptors:
            task.cancel()
        for lsock in self._sockets:
            lsock.close()
        self._sockets.clear()

    async def close_all(self) -> None:
        self.stop_accepting()
        tasks = [c.task for c in list(self.connections) if c.task is not None]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
