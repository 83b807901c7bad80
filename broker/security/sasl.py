"""The SASL server side of one connection (Kafka's SaslServerAuthenticator), run by the network layer before
any request reaches a handler.

Before authentication a connection may send ApiVersions, SaslHandshake and then either SaslAuthenticate
requests (handshake v1) or raw length-prefixed SASL tokens (handshake v0). Anything else closes it. A failed
login is answered after ``connection.failed.authentication.delay.ms`` and then the connection is closed.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Callable
from enum import Enum
from typing import Any

from moldau.broker.security.credentials import CredentialStore
from moldau.broker.security.listener_config import ListenerSecurity
from moldau.protocol.api import REGISTRY, ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.header import (
    API_VERSIONS_KEY,
    decode_request_header,
    encode_response_header,
    peek_api,
    request_header_version,
    response_header_version,
)
from moldau.protocol.scram import MECHANISMS, ScramError, ScramServer
from moldau.protocol.types import INT32, DecodeError

log = logging.getLogger("moldau.security")


class AuthFailed(Exception):
    """Wrong credentials or a broken exchange: answered (after the delay), then the connection closes."""


class Step(Enum):
    PASS = 1  # an ApiVersions request: the normal path answers it
    REPLY = 2  # send `reply`, keep the connection
    CLOSE = 3  # send `reply` if any (after the failure delay), then close


class SaslAuthenticator:
    def __init__(self, sec: ListenerSecurity, store: CredentialStore | None, peer: str,
                 on_failure: Callable[[str], None]) -> None:
        self.sec = sec
        self.store = store
        self.peer = peer
        self.on_failure = on_failure
        self.principal: str | None = None  # the established principal (kept across re-authentication)
        self._mechanism: str | None = None
        self._raw = False  # handshake v0: the next frames are bare SASL tokens
        self._scram: ScramServer | None = None
        self._exchange = False  # a (re-)authentication is under way
        self._new_principal: str | None = None
        self._lifetime = False  # the client learnt the session lifetime (SaslAuthenticate v1+), so can re-auth
        self.expires_at: float | None = None  # connections.max.reauth.ms (KIP-368): loop time the session ends

    @property
    def authenticated(self) -> bool:
        return self.principal is not None and not self._exchange

    def wants(self, api_key: int) -> bool:
        """Whether this frame is the authenticator's: anything before login, everything during an exchange, and
        a SaslHandshake that starts a re-authentication when sessions expire."""
        return (self.principal is None or self._exchange
                or (self.sec.reauth_ms > 0 and api_key == ApiKey.SASL_HANDSHAKE))

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at

    async def on_frame(self, frame: bytearray) -> tuple[Step, bytes | None]:
        if self._raw:
            return await self._raw_token(bytes(frame))
        try:
            api_key, version, _ = peek_api(frame)
        except DecodeError:
            return Step.CLOSE, None
        if api_key == API_VERSIONS_KEY:
            return Step.PASS, None
        api = REGISTRY.get(api_key)
        if api is None or not api.supports(version) or (
                api_key != ApiKey.SASL_HANDSHAKE and (api_key != ApiKey.SASL_AUTHENTICATE or self._mechanism is None)):
            log.info("closing %s: %s before SASL authentication", self.peer,
                     api.name if api is not None else f"api key {api_key}")
            return Step.CLOSE, None
        try:
            header, pos = decode_request_header(frame, request_header_version(api_key, api.is_flexible(version),
                                                                              version))
            body, _ = api.request_decoder(version)(memoryview(frame), pos)
        except DecodeError as exc:
            log.info("closing %s: malformed %s: %s", self.peer, api.name, exc)
            return Step.CLOSE, None

        def reply(response: dict[str, Any]) -> bytes:
            out = bytearray(4)
            encode_response_header(out, header.correlation_id, response_header_version(api_key,
                                                                                        api.is_flexible(version)))
            api.response_encoder(version)(out, [], response)
            INT32.pack_into(out, 0, len(out) - 4)
            return bytes(out)

        if api_key == ApiKey.SASL_HANDSHAKE:
            return self._handshake(body["mechanism"], version, reply)
        try:
            token = await self._token(bytes(body["auth_bytes"]))
        except AuthFailed as exc:
            await self._fail(str(exc))
            return Step.CLOSE, reply({"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED,
                                      "error_message": f"Authentication failed: {exc}", "auth_bytes": b""})
        lifetime = 0
        if not self._exchange and self.sec.reauth_ms > 0:  # just completed: tell v1+ clients when to re-auth
            lifetime = self.sec.reauth_ms
            self._lifetime = version >= 1
        return Step.REPLY, reply({"error_code": ErrorCode.NONE, "error_message": None, "auth_bytes": token,
                                  "session_lifetime_ms": lifetime})

    def _handshake(self, mechanism: str, version: int,
                   reply: Callable[[dict[str, Any]], bytes]) -> tuple[Step, bytes | None]:
        enabled = self.sec.mechanisms
        if self._exchange:
            return Step.CLOSE, reply({"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": enabled})
        self._exchange = True
        self._new_principal = None
        if mechanism not in enabled:
            log.info("closing %s: SASL mechanism %s is not enabled", self.peer, mechanism)
            return Step.CLOSE, reply({"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled})
        self._mechanism = mechanism
        self._raw = version == 0
        self._scram = ScramServer(mechanism) if mechanism in MECHANISMS else None
        return Step.REPLY, reply({"error_code": ErrorCode.NONE, "mechanisms": enabled})

    async def _raw_token(self, token: bytes) -> tuple[Step, bytes | None]:
        try:
            response = await self._token(token)
        except AuthFailed as exc:
            await self._fail(str(exc))
            return Step.CLOSE, None  # v0 has no error frame: the client sees the connection close
        if not self._exchange:
            self._raw = False
        return Step.REPLY, INT32.pack(len(response)) + response

    async def _token(self, token: bytes) -> bytes:
        if self._mechanism == "PLAIN":
            self._plain(token)
            return b""
        scram = self._scram
        if scram is None:
            raise AuthFailed("no SASL mechanism negotiated")
        try:
            if not scram.username:
                user = scram.parse_client_first(token)
                creds = await self.store.credentials(user) if self.store is not None else {}
                return scram.server_first(creds.get(str(self._mechanism)))
            final = scram.verify_client_final(token)
        except ScramError as exc:
            raise AuthFailed(str(exc)) from None
        self._established(scram.username)
        return final

    def _plain(self, token: bytes) -> None:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthFailed("invalid PLAIN token")
        try:
            authzid, user, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            raise AuthFailed("invalid PLAIN token") from None
        if authzid and authzid != user:
            raise AuthFailed("authorization id must match the user name")
        expected = self.sec.plain_users.get(user)
        # compare_digest against a dummy for unknown users too, so timing does not reveal who exists
        if not hmac.compare_digest((expected or "\0unknown").encode(), password.encode()) or expected is None:
            raise AuthFailed("invalid username or password")
        self._established(user)

    def _established(self, user: str) -> None:
        if self.principal is not None and user != self.principal:
            # KIP-368: a re-authentication may not change who the connection is.
            raise AuthFailed(f"re-authentication as {user} on a connection of {self.principal}")
        self.principal = user
        self._exchange = False
        self._mechanism = None
        if self.sec.reauth_ms > 0:
            import time

            self.expires_at = time.monotonic() + self.sec.reauth_ms / 1000

    async def _fail(self, reason: str) -> None:
        log.info("authentication of %s on %s failed: %s", self.peer, self.sec.name, reason)
        self.on_failure(self.sec.name)
        if self.sec.failed_auth_delay_ms > 0:
            await asyncio.sleep(self.sec.failed_auth_delay_ms / 1000)
