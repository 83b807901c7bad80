"""TLS for listeners: an ``ssl.SSLContext`` from PEM files, and TLS over the broker's raw non-blocking sockets.

The network layer drives sockets itself (so plaintext fetches can use sendfile), so TLS is done with
``ssl.SSLObject`` over two ``MemoryBIO``s: ciphertext is moved between the socket and the BIOs by this class,
the plaintext path is untouched. TLS connections cannot use sendfile; file regions are read and written through
the TLS layer in chunks (counted as copied fetch bytes by the caller).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
from typing import Any

from moldau.broker.security.listener_config import TlsSettings
from moldau.broker.security.principal_mapping import DEFAULT_MAPPER, PrincipalMapper
from moldau.broker.socket_wait import wait_readable

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
CHUNK = 64 * 1024
log = logging.getLogger("moldau.security")


def server_context(tls: TlsSettings) -> ssl.SSLContext:
    """The server context of one listener; raises ssl.SSLError/OSError for unreadable files."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = sorted(_VERSIONS[v] for v in tls.enabled_protocols)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    ctx.load_cert_chain(tls.keystore_location, password=tls.key_password)
    if tls.truststore_location:
        ctx.load_verify_locations(cafile=tls.truststore_location)
    ctx.verify_mode = _CLIENT_AUTH[tls.client_auth]
    if tls.cipher_suites:
        ctx.set_ciphers(":".join(tls.cipher_suites))
    return ctx


class ReloadingContext:
    """A listener's server context that follows its PEM files: at most once per `check_s`, on a new connection,
    the files' mtimes and sizes are compared, and a changed keystore or truststore is loaded for the connections
    that follow (open ones keep their session). A file that does not load is logged and the old context kept."""

    def __init__(self, tls: TlsSettings, check_s: float = 1.0, clock: Any = None) -> None:
        import time

        self.tls = tls
        self.check_s = check_s
        self.clock = clock or time.monotonic
        self.context = server_context(tls)
        self._stamp = self._files_stamp()
        self._checked = self.clock()

    def _files_stamp(self) -> tuple[tuple[float, int], ...]:
        out = []
        for path in (self.tls.keystore_location, self.tls.truststore_location):
            if path:
                try:
                    st = os.stat(path)
                    out.append((st.st_mtime, st.st_size))
                except OSError:
                    out.append((-1.0, -1))
        return tuple(out)

    def get(self) -> ssl.SSLContext:
        now = self.clock()
        if now - self._checked >= self.check_s:
            self._checked = now
            stamp = self._files_stamp()
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    self.context = server_context(self.tls)
                    log.info("reloaded TLS key material from %s", self.tls.keystore_location)
                except (OSError, ssl.SSLError) as exc:
                    log.error("TLS files changed but do not load (%s); keeping the previous certificate", exc)
        return self.context


class TlsIO:
    """TLS on one non-blocking socket, for a single reader and a single writer coroutine."""

    def __init__(self, sock: socket.socket, ctx: ssl.SSLContext) -> None:
        self.sock = sock
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self.loop = asyncio.get_running_loop()

    async def handshake(self) -> None:
        while True:
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._flush()
                if not await self._fill():
                    raise ConnectionError("peer closed during the TLS handshake") from None
        await self._flush()

    def peer_certificate(self) -> dict[str, Any] | None:
        return self.obj.getpeercert()

    async def recv_into(self, view: memoryview) -> int:
        """Plaintext bytes into `view`; 0 at end of stream."""
        while True:
            try:
                return int(self.obj.read(len(view), view))  # with a buffer, read() returns a count
            except ssl.SSLWantReadError:
                await self._flush()  # TLS 1.3 may owe the peer records (session tickets, key updates)
                if not await self._fill():
                    return 0
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return 0

    async def sendall(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        for start in range(0, len(view), CHUNK):
            self.obj.write(view[start:start + CHUNK])
            await self._flush()

    async def send_file(self, fileobj: Any, position: int, length: int) -> None:
        """Read a file region and write it through TLS; the segment may not shrink under us."""
        fd = fileobj.fileno()
        end = position + length
        while position < end:
            chunk = os.pread(fd, min(CHUNK, end - position), position)
            if not chunk:
                raise ConnectionError("segment file shorter than the region being sent")
            self.obj.write(chunk)
            await self._flush()
            position += len(chunk)

    async def _flush(self) -> None:
        if self.outgoing.pending:
            await self.loop.sock_sendall(self.sock, self.outgoing.read())

    async def _fill(self) -> bool:
        """Move ciphertext from the socket to the TLS object; False at end of stream."""
        while True:
            try:
                data = self.sock.recv(CHUNK)
            except BlockingIOError:
                await self._readable()
                continue
            if not data:
                self.incoming.write_eof()
                return False
            self.incoming.write(data)
            return True

    async def _readable(self) -> None:
        await wait_readable(self.loop, self.sock)


# Python's long attribute names -> the RFC 2253 keywords Java's X500Principal.getName() writes.
_RDN_KEYWORDS = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU", "localityName": "L",
                 "stateOrProvinceName": "ST", "countryName": "C", "streetAddress": "STREET",
                 "domainComponent": "DC", "userId": "UID"}


def _rfc2253_value(value: str) -> str:
    out = "".join("\\" + ch if ch in ',+"\\<>;' else ch for ch in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def certificate_dn(cert: dict[str, Any] | None) -> str | None:
    """The client certificate's subject as an RFC 2253 name, most specific RDN first
    (``CN=alice,OU=eng,O=Example``, as Java's X500Principal writes it), or None without a client certificate."""
    if not cert or not cert.get("subject"):
        return None
    rdns = ["+".join(f"{_RDN_KEYWORDS.get(k, k)}={_rfc2253_value(v)}" for k, v in rdn)
            for rdn in reversed(cert["subject"])]
    return ",".join(rdns)


def certificate_principal(cert: dict[str, Any] | None, mapper: PrincipalMapper = DEFAULT_MAPPER) -> str | None:
    """Kafka's SSL principal: ``User:`` + the subject's name under ssl.principal.mapping.rules (by default the
    subject itself), or None without a client certificate. Raises NoMatchingRule when no rule matches."""
    dn = certificate_dn(cert)
    return None if dn is None else "User:" + mapper.name(dn)
