"""SCRAM against the test vectors of RFC 5802 (SHA-1, driven through the generic code) and RFC 7677."""

from __future__ import annotations

import base64

import pytest

from moldau.protocol import scram
from moldau.protocol.scram import ScramClient, ScramCredential, ScramError, ScramServer

RFC7677 = {
    "nonce": "rOprNGfwEbeRWgbNEkqO",
    "server_nonce": "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    "salt": "W22ZaJ0SNY7soEsUEjb6gQ==",
    "client_final": "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    "server_final": "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
}


def test_rfc7677_client_side() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677["nonce"])
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = f"r={RFC7677['nonce']}{RFC7677['server_nonce']},s={RFC7677['salt']},i=4096".encode()
    assert client.final(server_first).decode() == RFC7677["client_final"]
    client.verify(RFC7677["server_final"].encode())
    with pytest.raises(ScramError):
        client.verify(b"v=AAAA")


def test_rfc7677_server_side() -> None:
    cred = scram.make_credential("SCRAM-SHA-256", "pencil", 4096, base64.b64decode(RFC7677["salt"]))
    server = ScramServer("SCRAM-SHA-256", nonce=RFC7677["server_nonce"])
    assert server.parse_client_first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO") == "user"
    server.server_first(cred)
    assert server.verify_client_final(RFC7677["client_final"].encode()).decode() == RFC7677["server_final"]


def test_rfc5802_sha1_vector_through_the_generic_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(scram.MECHANISMS, "SCRAM-SHA-1", "sha1")
    client = ScramClient("SCRAM-SHA-1", "user", "pencil", nonce="fyko+d2lbbFgONRv9qkxdawL")
    final = client.final(b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096")
    assert final == b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
    client.verify(b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_round_trip_and_wrong_password(mechanism: str) -> None:
    cred = scram.make_credential(mechanism, "s3cret", 4096)
    for password, ok in (("s3cret", True), ("wrong", False)):
        client, server = ScramClient(mechanism, "al,i=ce", password), ScramServer(mechanism)
        assert server.parse_client_first(client.first()) == "al,i=ce"
        final = client.final(server.server_first(cred))
        if ok:
            client.verify(server.verify_client_final(final))
        else:
            with pytest.raises(ScramError, match="authentication failed"):
                server.verify_client_final(final)


def test_unknown_user_fails_only_at_the_proof() -> None:
    client, server = ScramClient("SCRAM-SHA-512", "nobody", "x"), ScramServer("SCRAM-SHA-512")
    server.parse_client_first(client.first())
    final = client.final(server.server_first(None))
    with pytest.raises(ScramError):
        server.verify_client_final(final)


@pytest.mark.parametrize("first", [b"", b"garbage", b"p=tls-unique,,n=u,r=x", b"n,,r=abc", b"\xff\xfe"])
def test_malformed_client_first(first: bytes) -> None:
    with pytest.raises(ScramError):
        ScramServer("SCRAM-SHA-256").parse_client_first(first)


def test_tampered_nonce_is_refused() -> None:
    cred = scram.make_credential("SCRAM-SHA-256", "pw")
    client, server = ScramClient("SCRAM-SHA-256", "u", "pw"), ScramServer("SCRAM-SHA-256")
    server.parse_client_first(client.first())
    final = client.final(server.server_first(cred)).replace(b"r=", b"r=X", 1)
    with pytest.raises(ScramError, match="nonce"):
        server.verify_client_final(final)


def test_kafka_credential_format_round_trips() -> None:
    cred = scram.make_credential("SCRAM-SHA-512", "pw", 8192, b"salty")
    text = cred.to_kafka()
    assert text.startswith("salt=c2FsdHk=,stored_key=") and text.endswith(",iterations=8192")
    assert ScramCredential.from_kafka(text) == cred
    with pytest.raises(ValueError):
        ScramCredential.from_kafka("salt=abc")


def _legacy_librdkafka_final(password: str, client_nonce: str, server_first: bytes, prefix: str) -> bytes:
    """A client-final message built the way librdkafka < 2.6.1 builds it: r=<prefix><server nonce>."""
    import hashlib
    import hmac

    attrs = dict(p.split("=", 1) for p in server_first.decode().split(","))
    salted = scram.salted_password("sha256", password, base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored = hashlib.sha256(client_key).digest()
    without = f"c=biws,r={prefix}{attrs['r']}"
    auth = f"n=u,r={client_nonce},{server_first.decode()},{without}".encode()
    proof = bytes(a ^ b for a, b in zip(client_key, hmac.new(stored, auth, "sha256").digest(), strict=True))
    return f"{without},p={base64.b64encode(proof).decode()}".encode()


@pytest.mark.parametrize(("prefix", "ok"), [("", True), ("cnonce", True), ("other", False), ("cn", False)])
def test_librdkafka_doubled_client_nonce_is_tolerated_exactly(prefix: str, ok: bool) -> None:
    """librdkafka < 2.6.1 (kcat 1.7) sends r=<client nonce><server's full nonce>; only that form is tolerated."""
    server = ScramServer("SCRAM-SHA-256")
    server.parse_client_first(b"n,,n=u,r=cnonce")
    first = server.server_first(scram.make_credential("SCRAM-SHA-256", "pw"))
    final = _legacy_librdkafka_final("pw", "cnonce", first, prefix)
    if ok:
        assert server.verify_client_final(final).startswith(b"v=")
    else:
        with pytest.raises(ScramError, match="nonce"):
            server.verify_client_final(final)
