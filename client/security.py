"""Client-side TLS and SASL with librdkafka's property names (``security.protocol``, ``sasl.mechanism``,
``sasl.username``, ``sasl.password``, ``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``,
``ssl.key.password``, ``ssl.endpoint.identification.algorithm``).

``ClientSecurity`` is what a :class:`~moldau.connection.BrokerConnection` needs: an ``SSLContext`` for SSL and
SASL_SSL, and the SASL login it performs (SaslHandshake v1, then SaslAuthenticate) right after ApiVersions.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from moldau.errors import ConfigError, KafkaError
from moldau.protocol.errors import ErrorCode
from moldau.protocol.scram import MECHANISMS, ScramClient, ScramError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

# (send token) -> server token; raises KafkaError when the broker refuses.
Exchange = Callable[[bytes], Awaitable[bytes]]


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    check_hostname: bool = True
    mechanism: str | None = None
    username: str = ""
    password: str = ""

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def server_hostname(self, host: str) -> str | None:
        return host if self.ssl_context is not None else None

    async def login(self, exchange: Exchange) -> None:
        """Runs the SASL exchange; raises KafkaError(SASL_AUTHENTICATION_FAILED) when it fails."""
        mech = str(self.mechanism)
        if mech == "PLAIN":
            await exchange(b"\0" + self.username.encode() + b"\0" + self.password.encode())
            return
        client = ScramClient(mech, self.username, self.password)
        try:
            server_first = await exchange(client.first())
            server_final = await exchange(client.final(server_first))
            client.verify(server_final)
        except ScramError as exc:
            raise KafkaError(ErrorCode.SASL_AUTHENTICATION_FAILED, f"SCRAM: {exc}") from None


def _ssl_context(values: Mapping[str, Any]) -> tuple[ssl.SSLContext, bool]:
    ctx = ssl.create_default_context(cafile=values.get("ssl.ca.location") or None)
    verify_host = str(values.get("ssl.endpoint.identification.algorithm") or "none").lower() == "https"
    ctx.check_hostname = verify_host
    cert = values.get("ssl.certificate.location")
    if cert:
        try:
            ctx.load_cert_chain(cert, values.get("ssl.key.location") or None, values.get("ssl.key.password"))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError("ssl.certificate.location", f"cannot load: {exc}") from None
    return ctx, verify_host


def security_from_config(values: Mapping[str, Any]) -> ClientSecurity:
    """Validates the security keys of a client config (a ConfigError names the key) and builds the settings."""
    protocol = str(values.get("security.protocol") or "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise ConfigError("security.protocol", f"must be one of {', '.join(PROTOCOLS)}")
    ctx, verify_host = None, True
    if protocol.endswith("SSL"):
        try:
            ctx, verify_host = _ssl_context(values)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError("ssl.ca.location", f"cannot load: {exc}") from None
    if not protocol.startswith("SASL_"):
        return ClientSecurity(protocol, ctx, verify_host)
    mech = str(values.get("sasl.mechanism") or "").upper()
    if mech not in SASL_MECHANISMS:
        raise ConfigError("sasl.mechanism", f"must be one of {', '.join(SASL_MECHANISMS)}")
    user, password = values.get("sasl.username"), values.get("sasl.password")
    if not user or password is None:
        raise ConfigError("sasl.username" if not user else "sasl.password", f"is required for {mech}")
    assert mech == "PLAIN" or mech in MECHANISMS
    return ClientSecurity(protocol, ctx, verify_host, mech, str(user), str(password))
