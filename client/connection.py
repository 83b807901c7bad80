"""One asyncio connection to a Kafka-protocol broker: framing, pipelining and version negotiation.

The broker's inter-broker traffic (controller requests, replica fetchers) and the client library ride on this.

* Requests are pipelined: ``send()`` writes the frame at once and awaits a future; any number may be in flight.
  Kafka brokers answer in request order, so responses are matched to the oldest pending correlation id; a
  response for any other id means the stream is broken and the connection is closed.
* A request that times out fails with :class:`RequestTimeoutError` but the connection stays open: the late
  response, when it comes, is read and dropped, which keeps the in-order matching intact.
* Any connection-level failure (peer closed, reset, malformed framing) fails every pending request with a
  ``ConnectionError`` subclass and leaves the connection closed; make a new one to reconnect.
* Records fields of decoded responses are ``memoryview`` slices of that response's own frame (every frame is a
  separate ``bytes`` object), so they stay valid as long as the caller keeps them.

It is an :class:`asyncio.BufferedProtocol` (no reader task, no threads): the transport reads into a buffer of the
connection's own, which feeds the frame decoder, and complete frames complete futures directly. Once the size prefix
of a large answer (>= ``protocol.frame.DIRECT_AT``: a fetch answer of megabytes) is in, the rest of it is read
straight into that answer's own buffer (``FrameDecoder.rest``), not gathered and sliced out of the decoder's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from moldau.errors import (
    ConnectFailedError,
    ConnectionLostError,
    CorruptResponseError,
    KafkaConnectionError,
    KafkaError,
    NotConnectedError,
    ProtocolViolationError,
    RequestTimeoutError,
    UnsupportedVersionError,
)
from moldau.protocol.api import REGISTRY, ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.frame import FrameDecoder, FrameTooLarge, InvalidFrame
from moldau.protocol.header import (
    RequestHeader,
    decode_response_header,
    encode_request_header,
    request_header_version,
    response_header_version,
)
from moldau.protocol.messages.api_versions import API_VERSIONS
from moldau.protocol.messages.sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE
from moldau.protocol.schema import Api, P, Req, Resp, Sendable
from moldau.protocol.types import INT16, INT32, DecodeError
from moldau.security import ClientSecurity

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import ApiVersionsRequest, SaslAuthenticateRequest, SaslHandshakeRequest

log = logging.getLogger("moldau.client.connection")

CLIENT_SOFTWARE_NAME = "moldau"
CLIENT_SOFTWARE_VERSION = "0.1.0"
MAX_CORRELATION_ID = 0x7FFFFFFF
_BYTES_LIKE = (bytes, bytearray, memoryview)


# A decoded response before it is handed back as its API's response TypedDict.
_Body = dict[str, Any]


@dataclass(slots=True)
class _Pending:
    api: Api[Any, Any]
    version: int
    future: asyncio.Future[_Body]
    deadline: float = 0.0  # loop time after which it fails with RequestTimeoutError (0: the caller bounds it)
    timeout_ms: int = 0


RECV_SIZE = 256 * 1024  # the connection's read buffer, for everything but the rest of a large answer


class _Protocol(asyncio.BufferedProtocol):
    """Forwards transport events to the connection (keeps the callbacks off the public class)."""

    def __init__(self, conn: BrokerConnection) -> None:
        self._conn = conn
        self._recv: memoryview | None = None  # allocated at the first read
        self._direct = False  # the last get_buffer gave the rest of a large answer (FrameDecoder.rest)

    def get_buffer(self, sizehint: int) -> memoryview:
        rest = self._conn._decoder.rest()
        self._direct = rest is not None
        if rest is not None:
            return rest
        if self._recv is None:
            self._recv = memoryview(bytearray(RECV_SIZE))
        return self._recv

    def buffer_updated(self, nbytes: int) -> None:
        if self._direct:
            self._direct = False
            self._conn._on_filled(nbytes)
        elif self._recv is not None:
            self._conn._on_data(self._recv[:nbytes])

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self._conn._on_lost(exc)

    def pause_writing(self) -> None:
        self._conn._write_paused = True

    def resume_writing(self) -> None:
        self._conn._on_resume_writing()


class BrokerConnection:
    """An asyncio connection to one broker. Use ``await connect()`` first, ``await close()`` at the end.

    ``async with BrokerConnection(host, port) as conn:`` connects and closes around a block.
    """

    def __init__(self, host: str, port: int, *, client_id: str = "moldau", request_timeout_ms: int = 30000,
                 max_frame_bytes: int = 100 * 1024 * 1024, security: ClientSecurity | None = None) -> None:
        self.host = host
        self.security = security
        self.port = port
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.max_frame_bytes = max_frame_bytes
        self._transport: asyncio.Transport | None = None
        self._decoder = FrameDecoder(max_frame_bytes)
        self._pending: dict[int, _Pending] = {}  # insertion order == send order
        self._next_correlation_id = 0
        self._api_versions: dict[int, tuple[int, int]] = {}
        # (api key, version) -> the size prefix (to be patched) and request header with correlation id 0.
        self._header_prefixes: dict[tuple[int, int], bytes] = {}
        self._handshake_done = False
        self._closed = False
        self._close_reason: KafkaConnectionError | None = None
        self._lost: asyncio.Future[None] | None = None
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self.late_responses = 0  # responses that arrived after their request timed out or was cancelled
        # KIP-219: a response's throttle_time_ms (a broker quota) holds the next request to this broker back.
        self.throttled_until = 0.0  # loop time
        # Requests held back by a throttle time leave the wait in the order they came (asyncio.Lock is FIFO): timers
        # with the same deadline may fire in any order, and an idempotent producer's batches must go out in order.
        self._throttle_gate = asyncio.Lock()
        self.throttle_time_ms_total = 0
        # One timer for the time-outs of every pending request, due at the earliest deadline (requests are answered
        # in order, so it seldom moves): an asyncio.timeout() per request cost ~16 us of each request (a timer
        # handle made and cancelled, the Timeout object's steps), on every replica fetch and marker request.
        self._deadline_timer: asyncio.TimerHandle | None = None
        self._deadline_at = 0.0

    def __repr__(self) -> str:
        state = "closed" if self._closed else "connected" if self.connected else "new"
        return f"<BrokerConnection {self.host}:{self.port} {state}>"

    async def __aenter__(self) -> BrokerConnection:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ state
    @property
    def connected(self) -> bool:
        """True once the TCP connection is up and the ApiVersions handshake is done, until it closes."""
        return self._handshake_done and not self._closed

    @property
    def closed(self) -> bool:
        """True after ``close()`` or once the connection failed; a closed connection is never reused."""
        return self._closed

    @property
    def api_versions(self) -> dict[int, tuple[int, int]]:
        """The peer's supported (min, max) version per API key, as learned from ApiVersions."""
        return dict(self._api_versions)

    @property
    def in_flight(self) -> int:
        """Requests written and not yet answered (including timed-out ones whose late answer is awaited)."""
        return len(self._pending)

    # ------------------------------------------------------------------ connect / close
    async def connect(self, timeout_s: float = 10.0) -> None:
        """Opens the TCP connection and learns the peer's API versions (ApiVersions v3, else what it offers).

        Raises :class:`ConnectFailedError` (a ``ConnectionError``) when either step fails or times out.
        """
        if self._closed:
            raise NotConnectedError(f"{self.host}:{self.port}: connection already closed; make a new one")
        if self._transport is not None:
            raise RuntimeError("connect() called twice")
        loop = asyncio.get_running_loop()
        self._lost = loop.create_future()
        where = f"{self.host}:{self.port}"
        error: ConnectFailedError | None = None
        try:
            async with asyncio.timeout(timeout_s):
                sec = self.security
                if sec is not None and sec.ssl_context is not None:
                    transport, _ = await loop.create_connection(
                        lambda: _Protocol(self), self.host, self.port, ssl=sec.ssl_context,
                        server_hostname=self.host if sec.check_hostname else "")
                else:
                    transport, _ = await loop.create_connection(lambda: _Protocol(self), self.host, self.port)
                self._transport = transport
                await self._handshake()
                if sec is not None and sec.sasl:
                    await self._sasl_login(sec)
        except asyncio.CancelledError:  # e.g. a parallel bootstrap attempt that another one beat
            self._fail(NotConnectedError(f"{where}: connect cancelled"))
            raise
        except TimeoutError:
            error = ConnectFailedError(f"{where}: connect timed out after {timeout_s}s")
        except (OSError, KafkaError, UnsupportedVersionError, CorruptResponseError) as exc:
            # OSError covers refused/unreachable and our ConnectionError subclasses (lost during handshake)
            error = ConnectFailedError(f"{where}: {exc}")
            error.__cause__ = exc
        if error is not None:
            await self._abort(error)
            raise error
        self._handshake_done = True
        log.debug("connected to %s:%d; %d APIs", self.host, self.port, len(self._api_versions))

    async def _handshake(self) -> None:
        version = API_VERSIONS.versions[1]
        body: ApiVersionsRequest = {"client_software_name": CLIENT_SOFTWARE_NAME,
                                    "client_software_version": CLIENT_SOFTWARE_VERSION}
        response = await self._request(API_VERSIONS, body, version, timeout_ms=None)
        if response["error_code"] == ErrorCode.UNSUPPORTED_VERSION:
            # The peer answered in the v0 layout; retry with the highest version it says it knows (else v0).
            offered = {k["api_key"]: k["max_version"] for k in response["api_keys"]}
            version = max(0, min(offered.get(API_VERSIONS.key, 0), version - 1))
            response = await self._request(API_VERSIONS, body, version, timeout_ms=None)
        if response["error_code"] != ErrorCode.NONE:
            raise KafkaError(response["error_code"], "ApiVersions failed")
        self._api_versions = {k["api_key"]: (k["min_version"], k["max_version"]) for k in response["api_keys"]}

    async def _sasl_login(self, sec: ClientSecurity) -> None:
        """SaslHandshake v1 and SaslAuthenticate (v1+ answer errors in-band), before any other request."""
        handshake: SaslHandshakeRequest = {"mechanism": str(sec.mechanism)}  # set whenever SASL is (config)
        hs = await self._request(SASL_HANDSHAKE, handshake, 1, timeout_ms=None)
        if hs["error_code"] != ErrorCode.NONE:
            raise KafkaError(hs["error_code"], f"SASL mechanism {sec.mechanism} refused; the broker offers "
                             f"{', '.join(hs['mechanisms'])}")
        version = self.version_for(SASL_AUTHENTICATE)

        async def exchange(token: bytes) -> bytes:
            auth: SaslAuthenticateRequest = {"auth_bytes": token}
            r = await self._request(SASL_AUTHENTICATE, auth, version, timeout_ms=None)
            if r["error_code"] != ErrorCode.NONE:
                raise KafkaError(r["error_code"], r["error_message"])
            return bytes(r["auth_bytes"])

        await sec.login(exchange)

    async def close(self) -> None:
        """Closes the connection; pending requests fail with :class:`NotConnectedError`. Idempotent."""
        await self._abort(NotConnectedError(f"{self.host}:{self.port}: connection closed"))

    async def _abort(self, reason: KafkaConnectionError) -> None:
        self._fail(reason)
        if self._transport is not None and self._lost is not None and not self._lost.done():
            try:
                async with asyncio.timeout(1.0):  # not wait_for: see moldau.tasks
                    await asyncio.shield(self._lost)
            except TimeoutError:  # the transport never reported its end: it was aborted anyway
                pass

    def _fail(self, reason: KafkaConnectionError) -> None:
        """Marks the connection closed, fails every pending request and drain waiter, closes the transport."""
        if not self._closed:
            self._closed = True
            self._close_reason = reason
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None
        pending, self._pending = self._pending, {}
        for p in pending.values():
            if not p.future.done():
                p.future.set_exception(reason)
        waiters, self._drain_waiters = self._drain_waiters, []
        for w in waiters:
            if not w.done():
                w.set_exception(reason)
        if self._transport is not None and not self._transport.is_closing():
            self._transport.abort()  # pending requests are failed anyway; do not linger on unsent data

    # ------------------------------------------------------------------ versions
    def version_for(self, api: Api[Req, Resp], max_version: int | None = None) -> int:
        """The highest version of ``api`` that both sides support (capped at ``max_version``)."""
        theirs = self._api_versions.get(api.key)
        if theirs is None:
            raise UnsupportedVersionError(f"{self.host}:{self.port} does not offer {api.name}")
        lo = max(api.versions[0], theirs[0])
        hi = min(api.versions[1], theirs[1])
        if max_version is not None:
            hi = min(hi, max_version)
        if hi < lo:
            raise UnsupportedVersionError(
                f"{api.name}: no common version (ours {api.versions[0]}-{api.versions[1]}, "
                f"peer {theirs[0]}-{theirs[1]}, cap {max_version})")
        return hi

    # ------------------------------------------------------------------ requests
    def send(self, api: Sendable[P, Resp], *args: P.args, **kwargs: P.kwargs) -> Awaitable[Resp]:
        """``send(api, body, version=None)``: sends one request; awaiting it gives the decoded response body (a
        dict keyed by snake_case field names).

        Typed by ``api`` (an ``Api[XRequest, XResponse]`` of protocol/messages): ``send(PRODUCE, body)`` takes a
        ``ProduceRequest`` and gives a ``ProduceResponse`` (the TypedDicts of protocol/typed.py), so another
        API's request, a misspelt or missing field, or reading a field the response lacks is a mypy error.

        ``version`` defaults to :meth:`version_for`; an explicit version must be one we support, and is sent
        even if the peer did not advertise it. Error codes inside the response are the caller's to check.
        Raises :class:`RequestTimeoutError`, a ``ConnectionError`` subclass, :class:`CorruptResponseError`
        or :class:`UnsupportedVersionError`.
        """
        # The decoder fills every declared field, which is what the response TypedDict describes.
        return cast("Awaitable[Resp]", self._send(cast("Api[Any, Any]", api), *args, **kwargs))

    # body and version are typed by send()'s ParamSpec; here they only pass through to the encoder.
    async def _send(self, api: Api[Any, Any], body: Any, version: Any = None) -> _Body:
        self._check_usable()
        if version is None:
            version = self.version_for(api)
        await self._honour_throttle()
        return await self._request(api, body, version, timeout_ms=self.request_timeout_ms)

    def send_now(self, api: Api[Req, Resp], body: Req, version: int) -> asyncio.Future[Resp]:
        """``send(api, body, version)`` written in this very call, its answer the returned future: for a caller
        that sends one request after another on a connection it keeps (the broker's replica fetchers, one Fetch
        per replication round trip), without the coroutines ``send`` runs through on every request. A
        connection that is throttled or whose writes are paused goes the way ``send`` goes. Raises
        ``NotConnectedError`` / ``UnsupportedVersionError`` at once, rather than when awaited."""
        self._check_usable()
        loop = asyncio.get_running_loop()
        if self._write_paused or self._throttle_gate.locked() or (
                self.throttled_until and self.throttled_until > loop.time()):
            return cast("asyncio.Future[Resp]", asyncio.ensure_future(self._send(api, body, version)))
        future: asyncio.Future[Resp] = loop.create_future()
        correlation_id = self._write_request(api, body, version, cast("asyncio.Future[_Body]", future))
        self._watch_deadline(correlation_id, self.request_timeout_ms)
        return future

    def send_no_response(self, api: Sendable[P, Resp], *args: P.args, **kwargs: P.kwargs) -> Awaitable[None]:
        """``send_no_response(api, body, version=None)``: sends a request the peer will not answer (Produce with
        acks=0); awaiting it returns once the bytes are queued. Typed by ``api`` as :meth:`send` is."""
        return self._send_no_response(cast("Api[Any, Any]", api), *args, **kwargs)

    async def _send_no_response(self, api: Api[Any, Any], body: Any, version: Any = None) -> None:
        self._check_usable()
        if version is None:
            version = self.version_for(api)
        await self._honour_throttle()
        self._write_request(api, body, version, None)
        await self._drain()

    async def _honour_throttle(self) -> None:
        """Wait out the throttle time the broker last asked for (Kafka's clients do the same since KIP-219)."""
        gate = self._throttle_gate
        if gate.locked() or self.throttled_until > asyncio.get_running_loop().time():
            async with gate:  # behind every request already waiting, even once the throttle time is over
                wait = self.throttled_until - asyncio.get_running_loop().time()
                if wait > 0:
                    await asyncio.sleep(wait)
            self._check_usable()

    def _check_usable(self) -> None:
        if self._closed:
            raise NotConnectedError(f"{self.host}:{self.port}: connection is closed ({self._close_reason})")
        if not self._handshake_done:
            raise NotConnectedError(f"{self.host}:{self.port}: not connected; call connect() first")

    async def _request(self, api: Api[Req, Resp], body: Req, version: int, timeout_ms: int | None) -> Resp:
        # The future holds the decoded dict: every declared field, which is what the response TypedDict describes.
        future: asyncio.Future[Resp] = asyncio.get_running_loop().create_future()
        correlation_id = self._write_request(api, body, version, cast("asyncio.Future[_Body]", future))
        if timeout_ms is None:
            await self._drain()
            return await future
        if not self._write_paused:  # nothing to wait for before the answer: the connection's deadline timer
            self._watch_deadline(correlation_id, timeout_ms)
            return await future
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                await self._drain()
                return await future
        except TimeoutError:
            if future.done() and not future.cancelled():  # completed in the same loop iteration as the timeout
                return future.result()
            raise RequestTimeoutError(
                f"{api.name} v{version} (correlation id {correlation_id}) to {self.host}:{self.port} "
                f"got no response within {timeout_ms} ms") from None

    def _write_request(self, api: Api[Req, Resp], body: Req, version: int,
                       future: asyncio.Future[_Body] | None) -> int:
        """Encodes and writes one framed request; registers ``future`` (if any) under its correlation id."""
        if not api.supports(version):
            raise UnsupportedVersionError(f"{api.name} v{version} is not supported by this client "
                                          f"({api.versions[0]}-{api.versions[1]})")
        if self._transport is None or self._closed:
            raise NotConnectedError(f"{self.host}:{self.port}: connection is closed")
        correlation_id = self._allocate_correlation_id()
        prefix = self._header_prefixes.get((api.key, version))
        if prefix is None:
            encoded = bytearray(4)
            encode_request_header(encoded, RequestHeader(api.key, version, 0, self.client_id),
                                  request_header_version(api.key, api.is_flexible(version), version))
            prefix = self._header_prefixes[(api.key, version)] = bytes(encoded)
        # The size prefix and the header as encoded for this (API, version) once; only the correlation id differs.
        out = bytearray(prefix)
        INT32.pack_into(out, 8, correlation_id)
        external: list[tuple[int, Any]] = []
        api.request_encoder(version)(out, external, body)
        parts = _parts(out, external) if external else None
        INT32.pack_into(out, 0, (len(out) if parts is None else sum(len(p) for p in parts)) - 4)
        if future is not None:
            self._pending[correlation_id] = _Pending(api, version, future)
        if parts is None:
            self._transport.write(out)
        else:
            self._transport.writelines(parts)
        return correlation_id

    def _watch_deadline(self, correlation_id: int, timeout_ms: int) -> None:
        pending = self._pending.get(correlation_id)
        if pending is None:
            return
        loop = asyncio.get_running_loop()
        pending.deadline, pending.timeout_ms = loop.time() + timeout_ms / 1000, timeout_ms
        if self._deadline_timer is None or pending.deadline < self._deadline_at:
            if self._deadline_timer is not None:
                self._deadline_timer.cancel()
            self._deadline_at = pending.deadline
            self._deadline_timer = loop.call_at(pending.deadline, self._expire)

    def _expire(self) -> None:
        """The deadline timer: fails the requests whose time is up (their late answers are dropped when they come,
        as for a cancelled request), then waits for the next deadline."""
        self._deadline_timer = None
        loop = asyncio.get_running_loop()
        now = loop.time() + 0.001  # a timer may fire a hair early
        following = 0.0
        for correlation_id, p in self._pending.items():
            if not p.deadline or p.future.done():
                continue
            if p.deadline <= now:
                p.future.set_exception(RequestTimeoutError(
                    f"{p.api.name} v{p.version} (correlation id {correlation_id}) to {self.host}:{self.port} "
                    f"got no response within {p.timeout_ms} ms"))
            elif not following or p.deadline < following:
                following = p.deadline
        if following:
            self._deadline_at = following
            self._deadline_timer = loop.call_at(following, self._expire)

    def _allocate_correlation_id(self) -> int:
        while True:
            cid = self._next_correlation_id
            self._next_correlation_id = 0 if cid >= MAX_CORRELATION_ID else cid + 1
            if cid not in self._pending:  # only possible after 2**31 requests with one still pending
                return cid

    async def _drain(self) -> None:
        if not self._write_paused:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._drain_waiters.append(waiter)
        await waiter

    # ------------------------------------------------------------------ transport callbacks
    def _on_resume_writing(self) -> None:
        self._write_paused = False
        waiters, self._drain_waiters = self._drain_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    def _on_lost(self, exc: Exception | None) -> None:
        detail = f": {exc}" if exc else ""
        self._fail(ConnectionLostError(f"{self.host}:{self.port}: connection lost{detail}"))
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(None)

    def _on_data(self, data: bytes | memoryview) -> None:
        """Bytes read into the connection's buffer (copied by the decoder before the next read)."""
        if self._closed:
            return
        try:
            frames = self._decoder.feed(data)
        except (FrameTooLarge, InvalidFrame) as exc:
            self._fail(ProtocolViolationError(f"{self.host}:{self.port}: {exc}"))
            return
        for frame in frames:
            if not self._on_frame(frame):
                return

    def _on_filled(self, n: int) -> None:
        """``n`` bytes read straight into the large answer being received."""
        if self._closed:
            return
        for frame in self._decoder.filled(n):
            self._on_frame(frame)

    def _on_frame(self, frame: bytes | bytearray) -> bool:
        """Matches one response frame with the oldest pending request. False: the connection was failed."""
        if len(frame) < 4:
            self._fail(ProtocolViolationError(f"{self.host}:{self.port}: {len(frame)}-byte response frame"))
            return False
        correlation_id = INT32.unpack_from(frame, 0)[0]
        expected = next(iter(self._pending), None)
        if correlation_id != expected:
            self._fail(ProtocolViolationError(
                f"{self.host}:{self.port}: response for correlation id {correlation_id}, expected {expected}"))
            return False
        pending = self._pending.pop(correlation_id)
        if pending.future.done():  # timed out or cancelled: drop the late answer
            self.late_responses += 1
            return True
        try:
            response = _decode_response(pending.api, pending.version, memoryview(frame))
            throttle_ms = response.get("throttle_time_ms")
            if throttle_ms:
                self.throttle_time_ms_total += int(throttle_ms)
                self.throttled_until = max(self.throttled_until,
                                           asyncio.get_running_loop().time() + int(throttle_ms) / 1000)
            pending.future.set_result(response)
        except UnsupportedVersionError as exc:
            pending.future.set_exception(exc)
        except DecodeError as exc:
            pending.future.set_exception(CorruptResponseError(
                f"{pending.api.name} v{pending.version} response from {self.host}:{self.port}: {exc}"))
        return True


def _parts(out: bytearray, external: list[tuple[int, Any]]) -> list[Any]:
    """The request as buffers to write; external (non-bytes) records values must offer ``read()``."""
    if not external:
        return [out]
    parts: list[Any] = []
    start = 0
    for at, obj in external:
        parts.append(memoryview(out)[start:at])
        if not hasattr(obj, "read"):
            raise TypeError(f"records value of type {type(obj).__name__} is neither bytes-like nor readable")
        data = obj.read()
        if len(data) != len(obj):
            raise ValueError(f"records value read {len(data)} bytes, declared {len(obj)}")
        parts.append(data)
        start = at
    parts.append(memoryview(out)[start:])
    return parts


# (api key, version) -> its response header version, asked once per pair rather than per answer.
_RESPONSE_HEADERS: dict[tuple[int, int], int] = {}


def _decode_response(api: Api[Req, Resp], version: int, frame: memoryview) -> _Body:
    header_version = _RESPONSE_HEADERS.get((api.key, version))
    if header_version is None:
        header_version = _RESPONSE_HEADERS[(api.key, version)] = response_header_version(
            api.key, api.is_flexible(version))
    if len(frame) > 4 and (header_version == 0 or frame[4] == 0):
        pos = 4 if header_version == 0 else 5  # the correlation id (checked by the caller), no tagged fields
    else:
        _, pos = decode_response_header(frame, header_version)
    if api.key == ApiKey.API_VERSIONS and version > 0 and len(frame) >= pos + 2 and \
            INT16.unpack_from(frame, pos)[0] == ErrorCode.UNSUPPORTED_VERSION:
        # KIP-511: a peer that does not know our ApiVersions version answers in the v0 layout.
        version = 0
    try:
        body, _ = api.response_decoder(version)(frame, pos)
    except DecodeError:
        if len(frame) == 6 and INT16.unpack_from(frame, 4)[0] == ErrorCode.UNSUPPORTED_VERSION:
            # A broker that does not serve this (key, version) answers with the bare error code after a v0
            # header, whatever the version's own layout.
            raise UnsupportedVersionError(f"peer rejected {api.name} v{version}: UNSUPPORTED_VERSION") from None
        raise
    return body


def api_for(key: int) -> Api[Any, Any]:
    """The registered :class:`Api` for a key (``ApiKey`` members work too)."""
    return REGISTRY[int(key)]
