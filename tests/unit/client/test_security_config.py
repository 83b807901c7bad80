"""Client security settings by librdkafka's names: validation names the key; the SASL login drives SCRAM."""

from __future__ import annotations

import asyncio

import pytest

from moldau.config import ClientConfig
from moldau.errors import ConfigError, KafkaError
from moldau.protocol import scram
from moldau.protocol.scram import ScramServer


def cfg(**kw: str) -> ClientConfig:
    return ClientConfig({"bootstrap.servers": "127.0.0.1:9092", **kw})


def test_plaintext_by_default() -> None:
    sec = cfg().security
    assert sec.protocol == "PLAINTEXT" and sec.ssl_context is None and not sec.sasl


def test_sasl_ssl_settings_and_alias() -> None:
    sec = ClientConfig({"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
                        "sasl.username": "alice", "sasl.password": "pw"}).security
    assert sec.sasl and sec.mechanism == "SCRAM-SHA-512" and sec.ssl_context is not None and sec.check_hostname
    assert not cfg(**{"security.protocol": "SSL",
                      "ssl.endpoint.identification.algorithm": "none"}).security.check_hostname


@pytest.mark.parametrize(("props", "key"), [
    ({"security.protocol": "KERBEROS"}, "security.protocol"),
    ({"security.protocol": "SASL_PLAINTEXT"}, "sasl.mechanism"),  # librdkafka's default GSSAPI: unsupported
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.username"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u"}, "sasl.password"),
    ({"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"}, "ssl.ca.location"),
])
def test_bad_settings_name_the_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        cfg(**props)
    assert info.value.key == key


@pytest.mark.parametrize("password", ["pw", "wrong"])
def test_scram_login_against_the_broker_side_state_machine(password: str) -> None:
    sec = ClientConfig({"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "u", "sasl.password": password}).security
    server = ScramServer("SCRAM-SHA-256")
    cred = scram.make_credential("SCRAM-SHA-256", "pw")

    async def exchange(token: bytes) -> bytes:
        if not server.username:
            server.parse_client_first(token)
            return server.server_first(cred)
        try:
            return server.verify_client_final(token)
        except scram.ScramError as exc:
            raise KafkaError(58, str(exc)) from None

    if password == "pw":
        asyncio.run(sec.login(exchange))
    else:
        with pytest.raises(KafkaError):
            asyncio.run(sec.login(exchange))
