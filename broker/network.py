"""Acceptors and connection coroutines: framing, one request in flight per connection, response writing, sendfile.

Each connection is a coroutine over a raw non-blocking socket (``recv_into`` when readable / ``send``) rather
than an asyncio transport, so that fetch responses can send log bytes straight from segment files with
``os.sendfile`` on the socket's descriptor. Like Kafka's processors, a connection reads the next request only after
the response to the previous one has been written ("muting"), which keeps responses in order without bookkeeping.

Produce requests are the exception (issue #21): a client that pipelines them (librdkafka with linger.ms=0 and
unbounded in-flight requests sends one per handful of records) would otherwise get one acks=all request answered
per replication round trip, and its queue grows without bound. A Produce request goes to the request channel
without waiting for the answers of the Produce requests before it (at most ``MAX_PIPELINED_PRODUCES`` of them);
a writer coroutine sends their responses strictly in request order (one answered in the handler's own call while
no earlier answer is outstanding, an acks=1 request read alone, is written by the connection itself: no writer
task, no loop turn). The appends still happen in request order:
requests enter the one FIFO channel in order, and a worker runs a handler's synchronous part (the append) to the
end before the next request is taken, so idempotence sequences are checked in the order the client sent them.
The Produce requests of one read (a pipelining client's frames arrive by the dozen) go to the channel as one
group (``RequestChannel.send_group``), so that the handler appends each partition's records from all of them
with one log append (broker/apis/produce.py ``handle_produce_many``); each still gets its own answer, in order.
Any other request waits until every earlier response has been written, as before. TLS connections keep strict
muting (reading and writing one TLS session from two coroutines is not safe).
Connection limits (max.connections, per IP, idle time, the partial-frame budget) live in ``SocketServer``; see
docs/operations.md. Client quotas (docs/quotas.md) reach the network layer through a ``Throttler``: a throttled
response goes out at once and the connection is then muted for its throttle time (KIP-219).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import struct
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from moldau.broker.apis import ADVERTISED, ADVERTISED_VERSIONS
from moldau.broker.config import BrokerConfig, parse_ip_overrides
from moldau.broker.request_channel import EncodedBody, Request, RequestChannel
from moldau.broker.security.credentials import CredentialStore
from moldau.broker.security.listener_config import ListenerSecurity
from moldau.broker.security.principal_mapping import DEFAULT_MAPPER, NoMatchingRule, PrincipalMapper
from moldau.broker.security.sasl import SaslAuthenticator, Step
from moldau.broker.security.tls import ReloadingContext, TlsIO, certificate_principal
from moldau.broker.socket_wait import ReadableWatch
from moldau.protocol.api import REGISTRY, api_name
from moldau.protocol.errors import ErrorCode
from moldau.protocol.frame import FrameDecoder, FrameTooLarge, InvalidFrame
from moldau.protocol.header import (
    API_VERSIONS_KEY,
    decode_request_header,
    decode_request_header_rest,
    request_header_version,
    response_header_version,
)
from moldau.protocol.messages.api_versions import API_VERSIONS
from moldau.protocol.schema import assemble
from moldau.protocol.types import INT16, INT32, DecodeError
from moldau.tasks import cancel_and_wait

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import ApiVersionsResponseApiKeys

log = logging.getLogger("moldau.network")

RECV_SIZE = 256 * 1024
UNLIMITED = 2**63 - 1
PRODUCE_KEY = 0
# Produce requests of one connection in the broker at once (handled or waiting for replication); the next one is
# read when the oldest has been answered. Bounds the frames a connection holds (each at most
# socket.request.max.bytes, as queued.max.requests bounds them across connections).
MAX_PIPELINED_PRODUCES = 64
PRODUCE_NAME = api_name(PRODUCE_KEY)
_PRODUCE_API = REGISTRY[PRODUCE_KEY]


class NetworkMetrics(Protocol):
    def network_busy(self, seconds: float) -> None: ...
    def bytes_in(self, n: int) -> None: ...
    def bytes_out(self, n: int, sendfile: int) -> None: ...
    def request_done(self, api: str, seconds: float, queue: float = ..., local: float = ...,
                     remote: float = ..., response_queue: float = ..., send: float = ...) -> None: ...
    def connections(self, delta: int) -> None: ...
    def connection_refused(self, reason: str) -> None: ...
    def connection_evicted(self, reason: str) -> None: ...
    def fetch_copied(self, n: int) -> None: ...
    def authentication(self, listener: str, ok: bool) -> None: ...


def request_time(request: Request) -> float:
    """What request_percentage charges: the worker's CPU time on the request, so time the broker process spends
    descheduled on a busy host is not charged to the client (on a loaded machine one preempted Metadata request
    measured 6 ms of wall time: 32 s of throttle under request_percentage=0.02); wall time if not measured."""
    if request.cpu_seconds >= 0:
        return request.cpu_seconds
    return max(request.local_done_at - (request.dequeued_at or request.received_at), 0.0)


class Throttler(Protocol):
    """Client quotas (broker/quotas.py): the throttle time of a response about to be written (set in it too),
    and for an accepted connection (seconds before the next accept, close it)."""

    def throttle(self, request: Request, local_seconds: float) -> int: ...
    def connection_delay(self, ip: str) -> tuple[float, bool]: ...
    def pipelining_allowed(self, principal: str, client_id: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """max.connections, max.connections.per.ip (+ overrides, keyed by IP), connections.max.idle.ms (-1 = never)
    and the budget for partially received frames summed over all connections."""

    max_connections: int = UNLIMITED
    max_per_ip: int = UNLIMITED
    per_ip_overrides: dict[str, int] = field(default_factory=dict)
    max_idle_ms: int = -1
    partial_bytes_budget: int = UNLIMITED

    def limit_for(self, ip: str) -> int:
        return self.per_ip_overrides.get(ip, self.max_per_ip)

    @classmethod
    def from_config(cls, cfg: BrokerConfig) -> ConnectionLimits:
        """The limits of a broker config; override host names are resolved once, here, as Kafka does."""
        overrides: dict[str, int] = {}
        for host, limit in parse_ip_overrides(str(cfg.get("max.connections.per.ip.overrides"))).items():
            try:
                overrides[socket.gethostbyname(host)] = limit
            except OSError:
                log.warning("max.connections.per.ip.overrides: cannot resolve %s; using it as given", host)
                overrides[host] = limit
        return cls(int(cfg.get("max.connections")), int(cfg.get("max.connections.per.ip")), overrides,
                   int(cfg.get("connections.max.idle.ms")), int(cfg.get("moldau.socket.partial.requests.max.bytes")))


def supported_api_versions() -> list[ApiVersionsResponseApiKeys]:
    return ADVERTISED_VERSIONS


_SIZE_AND_ID = struct.Struct(">ii")
_HEADER_START = struct.Struct(">hhi")  # api key, api version, correlation id: the first 8 bytes of every header
# (api key, version) -> whether its response header is v1 (a tagged-field section), asked once per pair.
_FLEXIBLE_RESPONSE_HEADER: dict[tuple[int, int], bool] = {}
# (api key, version) -> (its Api, request header version), or (None, -1) for one we do not serve: asked once per
# pair instead of per request.
_SERVED: dict[tuple[int, int], tuple[Any, int]] = {}


def _served(api_key: int, version: int) -> tuple[Any, int]:
    api = REGISTRY.get(api_key)
    # A declared API without a handler yet (protocol.api.TRANSACTION_APIS) is unsupported, as if unknown.
    if api is None or api_key not in ADVERTISED or not api.supports(version):
        served: tuple[Any, int] = (None, -1)
    else:
        served = (api, request_header_version(api_key, api.is_flexible(version), version))
    if len(_SERVED) < 4096:  # bounded: a client may send any pair
        _SERVED[(api_key, version)] = served
    return served


# A fetch answer's file region below this size is copied into the bytes around it rather than sent with its own
# sendfile: a syscall and an await per region cost more than the copy (3,333 regions of ~200 bytes: 25 ms
# against 4 ms on the 2-core VM).
COPY_BELOW = 16 * 1024
# An answer whose file regions add up to less than this is read whole into one write, larger regions too: a
# replication round's answer (a transaction's batch of 1,000 x 100 B records on 4 partitions is ~27 KiB per
# partition) then goes with one ``send`` in the call that gives it, where sendfile cost a writer task, a loop
# turn and a send per part (the copy of ~27 KiB from the page cache costs a few microseconds).
COPY_WHOLE_BELOW = 128 * 1024
FLUSH_AT = 1 << 20  # copied bytes are written out once this many have gathered


def _copy_limit(region_bytes: int) -> int:
    """The region size from which an answer whose file regions add up to ``region_bytes`` goes by sendfile."""
    return COPY_BELOW if region_bytes >= COPY_WHOLE_BELOW else COPY_WHOLE_BELOW


def _regions(part: Any) -> list[Any]:
    regions = getattr(part, "regions", None)
    return list(regions) if regions is not None else [part]


class Connection:
    """One client socket. Reads go into the socket server's one shared receive buffer (read and decoded without
    an await in between, so connections never see each other's bytes): an idle connection holds no buffer of
    its own, only the bytes of a frame it has partly received."""

    def __init__(self, sock: socket.socket, peer: tuple[Any, ...], listener: str, channel: RequestChannel,
                 max_request_size: int, metrics: NetworkMetrics, on_close: Callable[[Connection], None],
                 recv_view: memoryview | None = None,
                 on_partial: Callable[[Connection, int], None] | None = None,
                 tls: TlsIO | None = None, auth: SaslAuthenticator | None = None,
                 mapper: PrincipalMapper = DEFAULT_MAPPER, throttler: Throttler | None = None) -> None:
        self.sock = sock
        self.throttler = throttler
        self.tls = tls
        self.mapper = mapper
        self.auth = auth
        self.max_request_size = max_request_size
        self.peer = peer
        self.listener = listener
        self.channel = channel
        self.metrics = metrics
        # Before SASL authentication frames are capped at sasl.server.max.receive.size (checked on the size
        # prefix, before any buffer is allocated); the cap is raised once the client has logged in.
        # No buffer allocated at a large frame's size prefix (FrameDecoder.direct_at): memory follows what a client
        # sent, not what it announced (tests/integration/test_hostile_input.py).
        self.decoder = FrameDecoder(max_request_size if auth is None else auth.sec.max_receive_size, direct_at=None)
        self.principal = "User:ANONYMOUS"
        self.on_close = on_close
        self.on_partial = on_partial
        self.recv_view = recv_view if recv_view is not None else memoryview(bytearray(RECV_SIZE))
        self.loop = asyncio.get_running_loop()
        self.task: asyncio.Task[None] | None = None
        self.partial_bytes = 0  # bytes of an incomplete frame held by the decoder
        self.last_active = self.loop.time()
        self._handling = False  # a request is being handled or its response written
        self.evicted = False  # closed by the socket server (idle, memory budget); the task is cancelled
        # Produce requests dispatched without muting, oldest first. Their answers are written as the oldest is
        # answered (`_flush_answered`), or by the writer task `_writer` while one runs (what a write left unsent).
        self._pipeline: deque[Request] = deque()
        self._writer: asyncio.Task[None] | None = None
        self._unsent: memoryview | None = None  # answers the socket did not take at once: the writer sends them
        self._flush_due = False  # a `_flush_answered` is scheduled for the end of this loop turn
        # A request waiting for its answer (a parked Fetch, a coroutine handler's) whose answer is written in the
        # call that gives it (`_write_parked`) while the connection goes back to its socket; no frame read meanwhile
        # is handled before that answer is written (muting as before).
        self._parked: Request | None = None
        self._parked_writer: asyncio.Task[None] | None = None  # writes what `_write_parked` could not write at once
        self._advanced = asyncio.Event()  # set each time answers of pipelined requests were written
        self._muted_until = 0.0  # loop time until which a throttled client's next frame waits (KIP-219)
        self._watch: ReadableWatch | None = None  # plaintext: the socket stays registered between requests

    @property
    def in_flight(self) -> bool:
        """A request is being handled or its response written: never idle."""
        return self._handling or bool(self._pipeline) or self._parked is not None

    @property
    def name(self) -> str:
        return f"{self.peer[0]}:{self.peer[1]}"

    async def run(self) -> None:
        view = self.recv_view
        tls = self.tls
        try:
            if tls is not None:
                await tls.handshake()
                if self.auth is None and not self._certificate_principal(tls):
                    return
            lone = False  # the last read brought one frame
            while True:
                if tls is not None:
                    # recv_into fills `view` with decrypted bytes and returns without awaiting after that,
                    # so the shared receive buffer is decoded before any other connection can use it.
                    n = await tls.recv_into(view)
                else:
                    if self._parked is not None or (lone and self._pipeline):
                        # A client with one request in flight waits for its answer before it sends more (a
                        # follower's fetch, a transactional producer's write): a read now would find nothing
                        # (a system call per exchange), so wait for the socket first.
                        await self._readable()
                    try:
                        n = self.sock.recv_into(view)
                    except BlockingIOError:
                        await self._readable()
                        continue
                if n == 0:
                    await self._wait_pipeline(0)  # a client that half-closed still gets its answers
                    return
                t0 = time.perf_counter()
                self.last_active = self.loop.time()
                self.metrics.bytes_in(n)
                try:
                    frames = self.decoder.feed(view[:n])
                except (FrameTooLarge, InvalidFrame) as exc:
                    log.warning("closing connection from %s: %s", self.name, exc)
                    return
                if self.on_partial is not None and self.decoder.buffered != self.partial_bytes:
                    self.on_partial(self, self.decoder.buffered)
                    if self.evicted:
                        return
                self.metrics.network_busy(time.perf_counter() - t0)
                i, count = 0, len(frames)
                lone = count == 1
                while i < count:
                    self._handling = True
                    if self._parked is not None:  # every earlier answer is written before the next frame is handled
                        await self._wait_pipeline(0)
                    # A lone frame goes the one-at-a-time way whatever it is (a group needs two): no need to ask.
                    run = self._produce_run(frames, i) if i + 1 < count else 0
                    if run > 1:
                        keep, taken = await self._handle_produce_group(frames[i:i + run])
                        i += taken
                    else:
                        keep = await self._handle_frame(frames[i])
                        i += 1
                    self._handling = False
                    self.last_active = self.loop.time()
                    if not keep:
                        await self._wait_pipeline(0)  # the answers before the refused request still go out
                        return
        except (ConnectionError, OSError) as exc:  # ssl.SSLError is an OSError: a failed handshake ends here
            log.debug("connection %s ended: %s", self.name, exc)
        except asyncio.CancelledError:
            pass
        finally:
            if self._writer is not None:
                self._writer.cancel()
            if self._parked_writer is not None:
                self._parked_writer.cancel()
            self._parked = None
            self.close()

    def _readable(self) -> asyncio.Future[None]:
        if self._watch is None:
            self._watch = ReadableWatch(self.loop, self.sock)
        return self._watch.wait()

    def _certificate_principal(self, tls: TlsIO) -> bool:
        """On an SSL listener the client certificate names the principal (as Kafka). False refuses the
        connection: Kafka fails a connection whose subject no ssl.principal.mapping.rules rule maps."""
        try:
            principal = certificate_principal(tls.peer_certificate(), self.mapper)
        except NoMatchingRule as exc:
            log.warning("closing SSL connection from %s on listener %s: ssl.principal.mapping.rules: %s",
                        self.name, self.listener, exc)
            self.metrics.authentication(self.listener, False)
            return False
        self.principal = principal or self.principal
        return True

    def _produce_run(self, frames: list[bytearray], i: int) -> int:
        """How many frames from ``frames[i]`` on are Produce requests of a supported version that may be handled
        together as pipelined ones (at most what the pipeline has room for); 0 on a connection that answers
        one at a time (TLS, a SASL exchange in progress, a throttled client's mute)."""
        auth = self.auth
        if self.tls is not None or self._muted_until or (auth is not None and auth.wants(PRODUCE_KEY)):
            return 0
        room = MAX_PIPELINED_PRODUCES - len(self._pipeline)
        end = min(len(frames), i + room)
        n = i
        while n < end:
            frame = frames[n]
            if len(frame) < 8 or INT16.unpack_from(frame)[0] != PRODUCE_KEY or not _PRODUCE_API.supports(
                    INT16.unpack_from(frame, 2)[0]):
                break
            n += 1
        return n - i

    async def _handle_produce_group(self, frames: list[bytearray]) -> tuple[bool, int]:
        """Pipelined Produce requests that arrived together (``_produce_run``): dispatched as one group, so that
        the handler appends each partition's records from all of them at once (issue #21), then answered in
        order by the writer like any pipelined Produce. Returns (keep the connection, frames taken): a frame
        whose header does not decode, a client that may not pipeline, or an expired SASL session ends the group
        there, and the frame goes the one-at-a-time way."""
        t0 = time.perf_counter()
        auth = self.auth
        if auth is not None and auth.expired(time.monotonic()):
            return await self._handle_frame(frames[0]), 1
        api = _PRODUCE_API
        throttler = self.throttler
        requests: list[Request] = []
        for frame in frames:
            version = INT16.unpack_from(frame, 2)[0]
            try:
                header, pos = decode_request_header(
                    frame, request_header_version(PRODUCE_KEY, api.is_flexible(version), version))
            except DecodeError:
                break
            if throttler is not None and not throttler.pipelining_allowed(self.principal, header.client_id or ""):
                break
            request = Request(header, api, frame, pos, self.peer[0], listener=self.listener, received_at=t0,
                              principal=self.principal)
            request.done = self.loop.create_future()
            requests.append(request)
        if not requests:
            return await self._handle_frame(frames[0]), 1
        self.metrics.network_busy(time.perf_counter() - t0)
        await self.channel.send_group(requests)
        self._pipeline.extend(requests)
        for request in requests:
            self._when_answered(request)
        self._flush_answered()  # the ones answered in the handler's call (acks=1) go now
        await self._wait_pipeline(MAX_PIPELINED_PRODUCES - 1)
        return True, len(requests)

    async def _handle_frame(self, frame: bytearray) -> bool:
        """Dispatch one frame and write its response (a pipelined Produce: hand it to the writer); False closes
        the connection."""
        if self._muted_until:  # a pipelined Produce answer was throttled: nothing more from this client until then
            delay = self._muted_until - self.loop.time()
            self._muted_until = 0.0
            if delay > 0:
                await asyncio.sleep(delay)
        t0 = time.perf_counter()
        auth = self.auth
        pipelined = (self.tls is None and len(frame) >= 2 and INT16.unpack_from(frame)[0] == PRODUCE_KEY
                     and (auth is None or not auth.wants(PRODUCE_KEY)))
        if (self._pipeline or self._writer is not None) and not pipelined:
            await self._wait_pipeline(0)  # muting as before: every earlier answer is written first
        if auth is not None:
            if auth.wants(INT16.unpack_from(frame)[0] if len(frame) >= 2 else -1):
                was = auth.authenticated
                step, reply = await auth.on_frame(frame)
                if reply is not None:
                    await self._send_bytes(reply)
                if step is Step.CLOSE:
                    return False
                if auth.authenticated and not was:
                    self.principal = f"User:{auth.principal}"
                    self.decoder.max_size = self.max_request_size
                    self.metrics.authentication(self.listener, True)
                if step is Step.REPLY:
                    return True
            elif auth.expired(time.monotonic()):
                log.info("closing %s: its SASL session expired without re-authentication "
                         "(connections.max.reauth.ms)", self.name)
                return False
        if len(frame) < 8:
            log.warning("closing connection from %s: request shorter than a header", self.name)
            return False
        api_key, version, correlation_id = _HEADER_START.unpack_from(frame)  # as peek_api reads them
        served = _SERVED.get((api_key, version))
        if served is None:
            served = _served(api_key, version)
        api, header_version = served
        if api is None:
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
            await self._wait_pipeline(0)  # an unsupported Produce version still answers after the earlier ones
            await self._send_bytes(body)
            return True
        try:
            header, pos = decode_request_header_rest(frame, header_version, api_key, version, correlation_id)
        except DecodeError as exc:
            log.warning("closing connection from %s: bad request header: %s", self.name, exc)
            return False
        request = Request(header, api, frame, pos, self.peer[0], listener=self.listener, received_at=t0,
                          principal=self.principal)
        # A client under a produce or request quota sends its Produce requests one at a time, so the mute after a
        # throttled answer (KIP-219) holds its next request back: pipelined, dozens would already be appended.
        if pipelined and self.throttler is not None and not self.throttler.pipelining_allowed(
                self.principal, header.client_id or ""):
            pipelined = False
            await self._wait_pipeline(0)
        request.done = self.loop.create_future()
        self.metrics.network_busy(time.perf_counter() - t0)
        channel = self.channel
        if not channel.try_inline(request):
            await channel.send_request(request)
        if pipelined:
            if (not self._pipeline and self._writer is None and request.done.done()
                    and not request.close_connection):
                # Answered in the handler's own call (acks=1, or an error) with no earlier answer outstanding:
                # written now, as the writer would, without starting a writer task and waiting a loop turn for it.
                await self._write_produce_answers([request])
                return True
            self._pipeline.append(request)
            if request.done.done():  # answered behind an earlier one, or refused (closing the connection)
                self._flush_answered()
            else:
                self._when_answered(request)
            await self._wait_pipeline(MAX_PIPELINED_PRODUCES - 1)
            return True
        if not request.done.done() and self.tls is None and auth is None:
            # Waiting (a parked Fetch, a coroutine handler): its answer is written in the call that gives it,
            # without waking this coroutine for it, which meanwhile waits for the client's next bytes.
            self._parked = request
            request.on_answer = self._write_parked
            return True
        await request.done
        if request.close_connection:
            return False
        resumed = time.perf_counter()
        throttle_ms = 0
        if self.throttler is not None:
            local = request_time(request)
            throttle_ms = self.throttler.throttle(request, local)
        if request.response is not None:
            await self._write_response(request)
        self._observe(api_name(api_key), request, resumed, time.perf_counter())
        if throttle_ms > 0:
            # KIP-219: the response carries throttle_time_ms and went out at once; now the channel is muted (no
            # read from this client) for that long, as Kafka's processors do. A muted connection is never idle.
            await asyncio.sleep(throttle_ms / 1000)
        return True

    async def _wait_pipeline(self, most: int) -> None:
        """Until at most `most` pipelined requests are unanswered (0: and every answer written, a parked
        request's too)."""
        while len(self._pipeline) > most or (not most and (self._writer is not None or self._parked is not None)):
            self._advanced.clear()
            await self._advanced.wait()

    def _write_parked(self, request: Request) -> None:
        """The parked request's answer, written in the call that gives it (``Request.on_answer``: a fetch's
        answer in the purgatory's check, a coroutine handler's as it returns), as ``_handle_frame`` would have
        written it a loop turn later. An answer of small parts only (a follower's fetch of a replication round
        trip: its record regions read into the buffer, as ``_write_parts`` reads them) goes with one ``send``;
        what the socket does not take, and an answer with regions for sendfile, are written by a task. A request
        that must close the connection, or a failed write, ends the connection."""
        if request is not self._parked:
            return
        resumed = time.perf_counter()
        try:
            if request.close_connection:
                raise ConnectionError("the request closes the connection")
            throttle_ms = self.throttler.throttle(request, request_time(request)) if self.throttler is not None else 0
            if request.response is not None:
                out = bytearray()
                external, total = self._encode_response(request, out)
                copied = 0
                if external:
                    whole, copied = self._read_small_regions(out, external, total - len(out))
                    if whole is None:  # a region for sendfile: the task writes the answer as _handle_frame would
                        self._parked_writer = self.loop.create_task(
                            self._finish_parked(request, resumed, throttle_ms, None, out, external))
                        return
                    out = whole
                self.metrics.network_busy(time.perf_counter() - resumed)
                try:
                    sent = self.sock.send(out)
                except (BlockingIOError, InterruptedError):
                    sent = 0
                self.metrics.bytes_out(total, 0)
                if copied:
                    self.metrics.fetch_copied(copied)
                if sent < len(out):
                    self._parked_writer = self.loop.create_task(
                        self._finish_parked(request, resumed, throttle_ms, memoryview(out)[sent:]))
                    return
        except OSError as exc:  # ConnectionError too (an unencodable answer): the connection ends
            self._parked_failed(exc)
            return
        self._parked_written(request, resumed, throttle_ms)

    def _read_small_regions(self, out: bytearray, external: list[tuple[int, Any]], region_bytes: int
                            ) -> tuple[bytearray | None, int]:
        """The whole answer, its file regions read in, when they are all small (``COPY_BELOW``) or together
        less than ``COPY_WHOLE_BELOW`` (``region_bytes``: their sum), and the bytes read; (None, 0) if not."""
        whole = bytearray()
        copied = 0
        limit = _copy_limit(region_bytes)
        for part in assemble(out, external):
            if isinstance(part, (bytes, bytearray, memoryview)):
                whole += part
                continue
            for region in _regions(part):
                length = int(region.length)
                if length >= limit:
                    return None, 0
                data = os.pread(region.fileobj.fileno(), length, region.position)
                if len(data) != length:
                    raise ConnectionError("segment file shorter than the region being sent")
                whole += data
                copied += length
        return whole, copied

    async def _finish_parked(self, request: Request, resumed: float, throttle_ms: int,
                             rest: memoryview | None, out: bytearray | None = None,
                             external: list[tuple[int, Any]] | None = None) -> None:
        try:
            if rest is not None:
                await self.loop.sock_sendall(self.sock, rest)
            elif out is not None and external is not None:
                by_sendfile, copied = await self._write_parts(assemble(out, external))
                self.metrics.bytes_out(len(out) + sum(len(obj) for _, obj in external), by_sendfile)
                if copied:
                    self.metrics.fetch_copied(copied)
        except (ConnectionError, OSError) as exc:
            self._parked_failed(exc)
            return
        finally:
            self._parked_writer = None
        self._parked_written(request, resumed, throttle_ms)

    def _parked_failed(self, exc: OSError) -> None:
        """The parked request's answer could not be written: the connection ends."""
        log.debug("connection %s ended: %s", self.name, exc)
        self._parked = None
        self._advanced.set()
        if self.task is not None:
            self.task.cancel()

    def _parked_written(self, request: Request, resumed: float, throttle_ms: int) -> None:
        self._observe(api_name(request.api_key), request, resumed, time.perf_counter())
        if throttle_ms > 0:  # KIP-219: the client's next frame waits that long (see _handle_frame)
            self._muted_until = max(self._muted_until, self.loop.time() + throttle_ms / 1000)
        self._parked = None
        self.last_active = self.loop.time()
        self._advanced.set()

    def _when_answered(self, request: Request) -> None:
        """A pipelined request still waiting for its answer (acks=all) has it written as it is answered."""
        done = request.done
        if done is not None and not done.done():
            request.on_answer = self._on_pipelined_answer

    def _on_pipelined_answer(self, request: Request) -> None:
        """A pipelined request was answered, in the call that answered it (an acks=all request: the follower
        fetch that moved the high watermark). The oldest request of the line alone is written in this very call
        (one request in flight, as a transactional producer's): no writer task, no loop turn for it. Behind it,
        more answers may come in the same turn (pipelined requests completed by one high-watermark move): they
        are written together at the end of the turn, as one write."""
        pipeline = self._pipeline
        if self._writer is not None or self._flush_due or not pipeline or pipeline[0] is not request:
            return  # the writer, or the flush already due, or the oldest request's answer writes it
        if len(pipeline) == 1:
            self._flush_answered()
        else:
            self._flush_due = True
            self.loop.call_soon(self._flush_answered)

    def _flush_answered(self) -> None:
        """Writes the answers of the answered requests at the head of the line, in order, in one write, unless the
        writer task is at work (it writes them then). What the socket does not take at once, and a request that
        must close the connection, are left to a writer task. A failed write ends the connection."""
        self._flush_due = False
        if self._writer is not None:
            return
        pipeline = self._pipeline
        ready: list[Request] = []
        for request in pipeline:
            if request.close_connection or request.done is None or not request.done.done():
                break
            ready.append(request)
        if ready:
            resumed = time.perf_counter()
            sent = 0
            try:
                out, throttle_ms = self._produce_answers(ready, resumed)
                if out:
                    sent = self.sock.send(out)
            except (BlockingIOError, InterruptedError):
                pass
            except OSError as exc:  # ConnectionError too (an unencodable answer): as the writer task does
                log.debug("connection %s ended: %s", self.name, exc)
                pipeline.clear()
                self._advanced.set()
                if self.task is not None:
                    self.task.cancel()
                return
            for _ in ready:
                pipeline.popleft()
            if sent < len(out):
                self._unsent = memoryview(out)[sent:]
            self._produce_answered(ready, len(out), throttle_ms, resumed)
            self.last_active = self.loop.time()
            self._advanced.set()
        if self._unsent is not None or (pipeline and pipeline[0].close_connection and pipeline[0].done is not None
                                        and pipeline[0].done.done()):
            self._writer = self.loop.create_task(self._write_pipeline())

    async def _write_pipeline(self) -> None:
        """Sends what a write of answers left unsent, then the answers of the answered pipelined requests at the
        head of the line, in order; ends when the oldest request is still waiting (its answer's call writes it,
        ``_on_pipelined_answer``) or none is left. A request that must close the connection (or a failed write)
        ends the connection after the answers before it."""
        pipeline = self._pipeline
        close = False
        try:
            unsent, self._unsent = self._unsent, None
            if unsent is not None:
                await self.loop.sock_sendall(self.sock, unsent)
                self.last_active = self.loop.time()
                self._advanced.set()
            while pipeline:
                head = pipeline[0]
                if head.done is None or not head.done.done():
                    break
                if head.close_connection:
                    close = True
                    break
                # Every answered request at the head of the line goes out in one write (Produce answers never
                # carry file regions). They leave the line only once written, so a request that waits for the
                # line to empty (a non-Produce one) never writes between them.
                ready: list[Request] = []
                for request in pipeline:
                    if request.close_connection or request.done is None or not request.done.done():
                        break
                    ready.append(request)
                await self._write_produce_answers(ready)
                for _ in ready:
                    pipeline.popleft()
                self.last_active = self.loop.time()
                self._advanced.set()
        except (ConnectionError, OSError) as exc:
            log.debug("connection %s ended: %s", self.name, exc)
            close = True
        finally:
            self._writer = None
            self._advanced.set()
        if close:
            # Not answered: the connection ends (the reader may be waiting on the socket, not on us).
            pipeline.clear()
            if self.task is not None:
                self.task.cancel()

    def _produce_answers(self, requests: list[Request], resumed: float) -> tuple[bytearray, int]:
        """The answers of answered Produce requests, in this order, as one buffer, and the longest throttle time
        (KIP-219) among them."""
        out = bytearray()
        throttle_ms = 0
        for request in requests:
            if self.throttler is not None:  # before encoding: it sets the response's throttle_time_ms
                throttle_ms = max(throttle_ms, self.throttler.throttle(request, request_time(request)))
            if request.response is not None:
                self._encode_response(request, out)
        self.metrics.network_busy(time.perf_counter() - resumed)
        return out, throttle_ms

    def _produce_answered(self, requests: list[Request], written: int, throttle_ms: int, resumed: float) -> None:
        if written:
            self.metrics.bytes_out(written, 0)
        if throttle_ms > 0:  # KIP-219, as on the one-at-a-time path: mute the client for that long
            self._muted_until = max(self._muted_until, self.loop.time() + throttle_ms / 1000)
        end = time.perf_counter()
        for request in requests:
            self._observe(PRODUCE_NAME, request, resumed, end)

    async def _write_produce_answers(self, requests: list[Request]) -> None:
        """Writes the answers of answered Produce requests, in this order, in one write (the writer's line, or one
        request answered in its handler's call with nothing outstanding); throttling and metrics as for any
        answer."""
        resumed = time.perf_counter()
        out, throttle_ms = self._produce_answers(requests, resumed)
        if out:
            await self._sendall(out)
        self._produce_answered(requests, len(out), throttle_ms, resumed)

    def _observe(self, api: str, r: Request, resumed: float, end: float) -> None:
        queue, local, remote, response_queue, send = r.split(resumed, end)
        self.metrics.request_done(api, end - r.received_at, queue=queue, local=local, remote=remote,
                                  response_queue=response_queue, send=send)

    def _encode_response(self, request: Request, out: bytearray) -> tuple[list[tuple[int, Any]], int]:
        """Appends the response frame to `out` (its parts sent separately, e.g. file regions, are returned with
        their positions in `out`); returns them and the frame's total size."""
        start = len(out)
        api, version = request.api, request.version
        flexible_header = _FLEXIBLE_RESPONSE_HEADER.get((api.key, version))
        if flexible_header is None:
            flexible_header = _FLEXIBLE_RESPONSE_HEADER[(api.key, version)] = response_header_version(
                api.key, api.is_flexible(version)) >= 1
        # The size (patched below), the correlation id and, in header v1, no tagged fields (encode_response_header).
        out += _SIZE_AND_ID.pack(0, request.header.correlation_id)
        if flexible_header:
            out.append(0)
        external: list[tuple[int, Any]] = []
        body = request.response if request.response is not None else {}
        try:
            if isinstance(body, EncodedBody):
                at = len(out)
                out += body.data
                throttle = body.get("throttle_time_ms", 0)
                if throttle and body.throttle_at is not None:
                    INT32.pack_into(out, at + body.throttle_at, int(throttle))
            else:
                api.response_encoder(version)(out, external, body)
        except Exception:
            log.exception("failed to encode %s v%d response; closing %s", api.name, version, self.name)
            raise ConnectionError("unencodable response") from None
        total = len(out) - start
        if external:
            total += sum(len(obj) for _, obj in external)
        INT32.pack_into(out, start, total - 4)
        return external, total

    async def _write_response(self, request: Request) -> None:
        t0 = time.perf_counter()
        out = bytearray()
        external, total = self._encode_response(request, out)
        self.metrics.network_busy(time.perf_counter() - t0)
        sent_by_sendfile = copied = 0
        tls = self.tls
        if tls is None and external:
            sent_by_sendfile, copied = await self._write_parts(assemble(out, external), total - len(out))
        else:
            for part in assemble(out, external):
                if isinstance(part, (bytes, bytearray, memoryview)):
                    if tls is None:
                        await self._sendall(part)
                    else:
                        await tls.sendall(part)
                else:  # no sendfile through TLS: the record bytes are read and encrypted in user space
                    assert tls is not None
                    for region in _regions(part):
                        await tls.send_file(region.fileobj, region.position, region.length)
                        copied += int(region.length)
        self.metrics.bytes_out(total, sent_by_sendfile)
        if copied:
            self.metrics.fetch_copied(copied)

    async def _write_parts(self, parts: list[Any], region_bytes: int = COPY_WHOLE_BELOW) -> tuple[int, int]:
        """Writes a response's parts on a plaintext socket: file regions of at least ``COPY_BELOW`` bytes with
        sendfile, smaller ones read into the bytes around them, so that a follower's answer over 3,333
        partitions (a ~200-byte region each) is a few writes instead of 6,666 sends and awaits; all of them
        read in when together (``region_bytes``) they are less than ``COPY_WHOLE_BELOW``, one write in all.
        Returns (bytes by sendfile, bytes copied)."""
        by_sendfile = copied = 0
        pending = bytearray()
        limit = _copy_limit(region_bytes)
        for part in parts:
            if isinstance(part, (bytes, bytearray, memoryview)):
                pending += part
                continue
            for region in _regions(part):
                length = int(region.length)
                if length < limit:
                    data = os.pread(region.fileobj.fileno(), length, region.position)
                    if len(data) != length:
                        raise ConnectionError("segment file shorter than the region being sent")
                    pending += data
                    copied += length
                    if len(pending) >= FLUSH_AT:  # an answer of many small regions is not held whole
                        await self._sendall(pending)
                        pending = bytearray()
                    continue
                if pending:
                    await self._sendall(pending)
                    pending = bytearray()
                by_sendfile += await self._sendfile(region)
        if pending:
            await self._sendall(pending)
        return by_sendfile, copied

    async def _sendall(self, data: bytes | bytearray | memoryview) -> None:
        """``sock_sendall`` on the plaintext socket, tried first with one ``send``: an answer that fits in the
        socket buffer (nearly all of them) goes without the loop's coroutine and its bookkeeping."""
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        if sent < len(data):
            await self.loop.sock_sendall(self.sock, memoryview(data)[sent:])

    async def _send_bytes(self, data: bytes | bytearray) -> None:
        if self.tls is None:
            await self._sendall(data)
        else:
            await self.tls.sendall(data)
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
        if self._watch is not None:
            try:
                self._watch.close()
            except (OSError, ValueError):  # the descriptor is gone already
                pass
        try:
            self.sock.close()
        except OSError:
            pass
        self.on_close(self)


class SocketServer:
    """One acceptor per listener; a coroutine per connection feeding the request channel. Enforces the
    connection limits: over-limit connections are closed right after accept, idle ones after
    connections.max.idle.ms, and the largest partial frame goes when their sum exceeds the budget."""

    def __init__(self, listeners: list[tuple[str, str, int]], channel: RequestChannel, max_request_size: int,
                 metrics: NetworkMetrics, send_buffer: int = -1, receive_buffer: int = -1,
                 limits: ConnectionLimits | None = None, security: dict[str, ListenerSecurity] | None = None,
                 credentials: CredentialStore | None = None, throttler: Throttler | None = None) -> None:
        self.listeners = listeners
        self.throttler = throttler
        self.security = security or {}
        self.credentials = credentials
        self._tls_contexts: dict[str, ReloadingContext] = {}
        self.channel = channel
        self.max_request_size = max_request_size
        self.metrics = metrics
        self.send_buffer = send_buffer
        self.receive_buffer = receive_buffer
        self.limits = limits or ConnectionLimits()
        self.bound: dict[str, tuple[str, int]] = {}
        self._sockets: list[socket.socket] = []
        self._acceptors: list[asyncio.Task[None]] = []
        self._reaper: asyncio.Task[None] | None = None
        self.connections: set[Connection] = set()
        self.per_ip: dict[str, int] = {}
        self.partial_bytes = 0  # sum of Connection.partial_bytes
        self._recv_view = memoryview(bytearray(RECV_SIZE))

    async def start(self) -> None:
        for name, sec in self.security.items():
            if sec.tls is not None:
                self._tls_contexts[name] = ReloadingContext(sec.tls)
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
        if self.limits.max_idle_ms >= 0:
            self._reaper = asyncio.create_task(self._reap_idle(), name="idle-connection-reaper")

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
            refused = self._refusal(peer[0])
            if refused is not None:
                # Kafka closes over-limit connections at once; the client sees a closed socket and backs off.
                log.debug("refusing connection from %s:%s: %s reached", peer[0], peer[1], refused)
                # Counted before the close: once the client sees its socket closed, a scrape (served from another
                # thread) must already show the refusal.
                self.metrics.connection_refused(refused)
                sock.close()
                continue
            accept_delay = 0.0
            if self.throttler is not None:
                accept_delay, over_ip_rate = self.throttler.connection_delay(peer[0])
                if over_ip_rate:
                    log.debug("refusing connection from %s:%s: its connection_creation_rate quota is reached",
                              peer[0], peer[1])
                    self.metrics.connection_refused("connection_creation_rate")
                    sock.close()
                    continue
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.send_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer)
            if self.receive_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer)
            ctx = self._tls_contexts.get(name)
            sec = self.security.get(name)
            auth = None
            if sec is not None and sec.sasl:
                auth = SaslAuthenticator(sec, self.credentials, f"{peer[0]}:{peer[1]}",
                                         lambda listener: self.metrics.authentication(listener, False))
            conn = Connection(sock, peer, name, self.channel, self.max_request_size, self.metrics,
                              self._forget, self._recv_view, self._partial_changed,
                              TlsIO(sock, ctx.get()) if ctx is not None else None, auth,
                              sec.principal_mapper if sec is not None else DEFAULT_MAPPER, self.throttler)
            self.connections.add(conn)
            self.per_ip[peer[0]] = self.per_ip.get(peer[0], 0) + 1
            self.metrics.connections(1)
            conn.task = asyncio.create_task(conn.run())
            if accept_delay > 0:  # max.connection.creation.rate: the acceptor waits, as Kafka's does
                await asyncio.sleep(accept_delay)

    def _refusal(self, ip: str) -> str | None:
        if len(self.connections) >= self.limits.max_connections:
            return "max.connections"
        if self.per_ip.get(ip, 0) >= self.limits.limit_for(ip):
            return "max.connections.per.ip"
        return None

    def _partial_changed(self, conn: Connection, held: int) -> None:
        if conn.evicted:
            return
        self.partial_bytes += held - conn.partial_bytes
        conn.partial_bytes = held
        while self.partial_bytes > self.limits.partial_bytes_budget:
            victim = max(self.connections, key=lambda c: c.partial_bytes)
            if victim.partial_bytes <= 0:  # nothing left to shed: the sum is stale, never spin on it
                log.error("partial-frame accounting drifted to %d bytes with no holder; resetting",
                          self.partial_bytes)
                self.partial_bytes = sum(c.partial_bytes for c in self.connections)
                break
            log.warning("closing %s: partial request frames hold %d bytes in all, above "
                        "moldau.socket.partial.requests.max.bytes=%d; it holds the most (%d)", victim.name,
                        self.partial_bytes, self.limits.partial_bytes_budget, victim.partial_bytes)
            self._evict(victim, "partial_request_memory")

    def _evict(self, conn: Connection, reason: str) -> None:
        """Ends `conn`: its partial frame is released now, its socket when its task sees the cancellation (the
        task closes it, so the descriptor is never reused under a reader still registered for it)."""
        if conn.evicted:
            return
        conn.evicted = True
        self.metrics.connection_evicted(reason)
        self.partial_bytes -= conn.partial_bytes
        conn.partial_bytes = 0
        if conn.task is not None:
            conn.task.cancel()

    async def _reap_idle(self) -> None:
        idle_s = self.limits.max_idle_ms / 1000
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(max(idle_s / 4, 0.05), 10.0))
            cutoff = loop.time() - idle_s
            for conn in [c for c in self.connections
                         if not c.in_flight and not c.evicted and c.last_active < cutoff]:
                log.debug("closing %s: idle for more than connections.max.idle.ms", conn.name)
                self._evict(conn, "idle")

    def _forget(self, conn: Connection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            self.partial_bytes -= conn.partial_bytes
            conn.partial_bytes = 0
            ip = conn.peer[0]
            left = self.per_ip.get(ip, 0) - 1
            if left > 0:
                self.per_ip[ip] = left
            else:
                self.per_ip.pop(ip, None)
            self.metrics.connections(-1)

    def stop_accepting(self) -> None:
        for task in self._acceptors:
            task.cancel()
        if self._reaper is not None:
            self._reaper.cancel()
        if self._sockets:
            log.info("stopped accepting connections (%d listening sockets closed)", len(self._sockets))
        for lsock in self._sockets:
            lsock.close()
        self._sockets.clear()

    async def close_all(self) -> None:
        self.stop_accepting()
        await cancel_and_wait([c.task for c in list(self.connections) if c.task is not None])
