"""A SASL listener before authentication: only ApiVersions and the SASL requests are served. A 100 MB frame
size, a Produce request and garbage bytes each close only that connection, with bounded memory; failed logins
are answered late (connection.failed.authentication.delay.ms) and counted; the v0 handshake's raw tokens work."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator

import pytest

from moldau.protocol.api import REGISTRY, ApiKey
from moldau.protocol.scram import ScramClient

from .clients import kp_consume, kp_produce, make_records
from .harness import BrokerProcess, RawConnection, frame, request_header_v1
from .secure import USERS, make_certs, secured_broker

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DELAY_MS = 300


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    certs = make_certs(tmp_path_factory.mktemp("certs"))
    b = secured_broker(tmp_path_factory.mktemp("sasl"), "SASL_PLAINTEXT", certs,
                       **{"connection.failed.authentication.delay.ms": str(DELAY_MS)})
    try:
        yield b
    finally:
        try:
            b.stop()
        finally:
            b.kill()


SCRAM = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "alice",
         "sasl_plain_password": USERS["alice"]}


def healthy(b: BrokerProcess, topic: str) -> None:
    assert b.is_running(), b.stderr_tail()
    offsets = kp_produce(b.bootstrap, topic, make_records(3, "ok", with_nulls=False), **SCRAM)
    got = kp_consume(b.bootstrap, topic, 3, start_offset=offsets[0], **SCRAM)
    assert len(got) == 3


def request(conn: RawConnection, key: int, version: int, body: dict[str, object], cid: int = 1) -> None:
    api = REGISTRY[key]
    header = request_header_v1(key, version, cid)
    if api.is_flexible(version) and key != ApiKey.API_VERSIONS:
        header += b"\0"  # request header v2: no tagged fields
    conn.send(frame(header + api.encode_request(version, body)))


def response(conn: RawConnection, key: int, version: int) -> dict[str, object]:
    data = conn.recv_frame()
    pos = 4 + (1 if REGISTRY[key].is_flexible(version) and key != ApiKey.API_VERSIONS else 0)
    body, _ = REGISTRY[key].response_decoder(version)(memoryview(data), pos)
    return body


def metric(b: BrokerProcess, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in b.fetch_metrics().splitlines()
               if line.startswith(name + "{") or line.startswith(name + " "))


def test_huge_frame_size_closes_before_allocation(broker: BrokerProcess, topic: str) -> None:
    rss_before = broker.rss_bytes()
    conns = [RawConnection(broker.port) for _ in range(20)]
    try:
        for c in conns:
            c.send(struct.pack(">i", 100 * 1024 * 1024) + b"\0" * 1000)
        for c in conns:
            c.wait_closed(10)
    finally:
        for c in conns:
            c.close()
    assert broker.rss_bytes() - rss_before < 30 * 1024 * 1024
    # Just above sasl.server.max.receive.size is refused too; the limit is Kafka's 524288 bytes.
    with RawConnection(broker.port) as c:
        c.send(struct.pack(">i", 524288 + 1))
        c.wait_closed(10)
    healthy(broker, topic)


@pytest.mark.parametrize("api", [ApiKey.PRODUCE, ApiKey.METADATA, ApiKey.FETCH])
def test_requests_before_authentication_close_the_connection(broker: BrokerProcess, topic: str,
                                                             api: int) -> None:
    body = {ApiKey.PRODUCE: {"transactional_id": None, "acks": 1, "timeout_ms": 1000, "topic_data": []},
            ApiKey.METADATA: {"topics": None},
            ApiKey.FETCH: {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "topics": []}}[api]
    with RawConnection(broker.port) as c:
        request(c, api, 4, body)
        assert c.wait_closed(10) == b""  # closed without an answer
    healthy(broker, topic)


@pytest.mark.parametrize("garbage", [b"\xde\xad\xbe\xef" * 64, frame(b"\x7f\x7f\x00\x01garbage-here"),
                                     frame(b"\x00")])
def test_garbage_closes_the_connection(broker: BrokerProcess, topic: str, garbage: bytes) -> None:
    with RawConnection(broker.port) as c:
        c.send(garbage)
        c.wait_closed(10)
    healthy(broker, topic)


def test_api_versions_then_v1_scram_login(broker: BrokerProcess) -> None:
    with RawConnection(broker.port) as c:
        request(c, ApiKey.API_VERSIONS, 0, {})
        keys = {k["api_key"] for k in response(c, ApiKey.API_VERSIONS, 0)["api_keys"]}  # type: ignore[union-attr]
        assert {ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE} <= keys
        request(c, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})
        hs = response(c, ApiKey.SASL_HANDSHAKE, 1)
        assert hs["error_code"] == 0 and "SCRAM-SHA-256" in hs["mechanisms"]  # type: ignore[operator]
        client = ScramClient("SCRAM-SHA-256", "bob", USERS["bob"])
        request(c, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client.first()})
        first = response(c, ApiKey.SASL_AUTHENTICATE, 2)
        request(c, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client.final(first["auth_bytes"])})  # type: ignore[arg-type]
        final = response(c, ApiKey.SASL_AUTHENTICATE, 2)
        assert final["error_code"] == 0
        client.verify(final["auth_bytes"])  # type: ignore[arg-type]
        request(c, ApiKey.METADATA, 4, {"topics": None, "allow_auto_topic_creation": False})
        assert response(c, ApiKey.METADATA, 4)["brokers"]
        # A second handshake on an authenticated connection is out of place (Kafka: ILLEGAL_SASL_STATE).
        request(c, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert response(c, ApiKey.SASL_HANDSHAKE, 1)["error_code"] == 34


def test_v0_handshake_with_raw_plain_token(broker: BrokerProcess) -> None:
    with RawConnection(broker.port) as c:
        request(c, ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})
        assert response(c, ApiKey.SASL_HANDSHAKE, 0)["error_code"] == 0
        c.send(frame(b"\0alice\0" + USERS["alice"].encode()))
        assert c.recv_frame() == b""  # success: an empty token
        request(c, ApiKey.METADATA, 4, {"topics": None, "allow_auto_topic_creation": False})
        assert response(c, ApiKey.METADATA, 4)["brokers"]


@pytest.mark.parametrize("version", [0, 1])
def test_failed_login_is_delayed_counted_and_closed(broker: BrokerProcess, version: int) -> None:
    before = metric(broker, "moldau_failed_authentication_total")
    with RawConnection(broker.port) as c:
        request(c, ApiKey.SASL_HANDSHAKE, version, {"mechanism": "PLAIN"})
        assert response(c, ApiKey.SASL_HANDSHAKE, version)["error_code"] == 0
        token = b"\0alice\0not-the-password"
        t0 = time.monotonic()
        if version == 0:
            c.send(frame(token))
        else:
            request(c, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": token})
            answer = response(c, ApiKey.SASL_AUTHENTICATE, 1)
            assert answer["error_code"] == 58  # SASL_AUTHENTICATION_FAILED
        c.wait_closed(10)
        assert time.monotonic() - t0 >= DELAY_MS / 1000 * 0.9
    assert metric(broker, "moldau_failed_authentication_total") == before + 1


def test_unknown_mechanism_is_refused(broker: BrokerProcess) -> None:
    with RawConnection(broker.port) as c:
        request(c, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})
        hs = response(c, ApiKey.SASL_HANDSHAKE, 1)
        assert hs["error_code"] == 33 and hs["mechanisms"] == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        c.wait_closed(10)




REAUTH_MS = 3000  # long enough that a loaded machine fits a login round well inside one session


@pytest.fixture(scope="module")
def reauth_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    certs = make_certs(tmp_path_factory.mktemp("certs-reauth"))
    b = secured_broker(tmp_path_factory.mktemp("reauth"), "SASL_PLAINTEXT", certs,
                       **{"connections.max.reauth.ms": str(REAUTH_MS)})
    try:
        yield b
    finally:
        try:
            b.stop()
        finally:
            b.kill()


def scram_login(c: RawConnection, user: str, cid: int = 1) -> dict[str, object]:
    request(c, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"}, cid)
    assert response(c, ApiKey.SASL_HANDSHAKE, 1)["error_code"] == 0
    client = ScramClient("SCRAM-SHA-256", user, USERS[user])
    request(c, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": client.first()}, cid)
    first = response(c, ApiKey.SASL_AUTHENTICATE, 1)
    request(c, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": client.final(first["auth_bytes"])}, cid)  # type: ignore[arg-type]
    return response(c, ApiKey.SASL_AUTHENTICATE, 1)


def metadata_ok(c: RawConnection) -> bool:
    try:
        request(c, ApiKey.METADATA, 4, {"topics": [], "allow_auto_topic_creation": False})
        return bool(response(c, ApiKey.METADATA, 4)["brokers"])
    except (ConnectionError, OSError):
        return False


def test_session_expires_without_reauthentication(reauth_broker: BrokerProcess) -> None:
    with RawConnection(reauth_broker.port) as c:
        t0 = time.monotonic()
        final = scram_login(c, "alice")
        assert final["error_code"] == 0 and final["session_lifetime_ms"] == REAUTH_MS
        deadline = t0 + 15
        while metadata_ok(c):  # served until the session ends, then the next request closes the connection
            assert time.monotonic() < deadline, "session never expired"
            time.sleep(0.1)
        assert time.monotonic() - t0 >= REAUTH_MS / 1000 * 0.9


def test_reauthentication_extends_the_session(reauth_broker: BrokerProcess) -> None:
    with RawConnection(reauth_broker.port) as c:
        assert scram_login(c, "alice")["error_code"] == 0
        t0 = time.monotonic()
        for _ in range(3):  # re-authenticate three times, each before the session ends
            assert metadata_ok(c)
            assert scram_login(c, "alice")["error_code"] == 0
        assert metadata_ok(c)
        assert time.monotonic() - t0 < 3 * REAUTH_MS / 1000  # (each round is far quicker than a session)
        # Re-authenticating as somebody else is refused and closes the connection (KIP-368).
        request(c, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert response(c, ApiKey.SASL_HANDSHAKE, 1)["error_code"] == 0
        request(c, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0bob\0" + USERS["bob"].encode()})
        assert response(c, ApiKey.SASL_AUTHENTICATE, 1)["error_code"] == 58
        c.wait_closed(10)


def test_librdkafka_reauthenticates(reauth_broker: BrokerProcess, topic: str) -> None:
    """confluent-kafka (librdkafka >= 2.2 implements KIP-368) keeps producing across several session lifetimes."""
    from confluent_kafka import Producer

    before = metric(reauth_broker, "moldau_successful_authentication_total")
    expired_before = reauth_broker.stderr_text().count("SASL session expired")
    errors: list[object] = []
    p = Producer({"bootstrap.servers": reauth_broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": USERS["alice"],
                  "linger.ms": 0})
    delivered: list[object] = []
    t0 = time.monotonic()
    i = 0
    while time.monotonic() - t0 < 3.5 * REAUTH_MS / 1000:
        p.produce(topic, b"v%d" % i, partition=0, on_delivery=lambda err, _m: (errors if err else delivered)
                  .append(err))
        p.poll(0.2)
        i += 1
    assert p.flush(20) == 0
    assert not errors and len(delivered) == i
    # The producer's connection(s) logged in again, and no connection had to be closed for an expired session.
    assert metric(reauth_broker, "moldau_successful_authentication_total") - before >= 3
    assert reauth_broker.stderr_text().count("SASL session expired") == expired_before
