"""TLS and SASL listeners with real clients: confluent-kafka, kafka-python, aiokafka and kcat produce and consume
over SSL, SASL_PLAINTEXT (PLAIN, SCRAM-SHA-512) and SASL_SSL; wrong passwords and unknown CAs are refused."""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .clients import ck_consume, kp_consume, kp_produce, make_records
from .harness import BrokerProcess, wait_until
from .secure import USERS, Certs, client_settings, make_certs, secured_broker

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CASES = [("SSL", None), ("SASL_PLAINTEXT", "PLAIN"), ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
         ("SASL_SSL", "SCRAM-SHA-512"), ("SASL_SSL", "PLAIN")]
IDS = [f"{p}-{m}" if m else p for p, m in CASES]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[dict[str, BrokerProcess]]:
    started: dict[str, BrokerProcess] = {}
    try:
        for proto in ("SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            started[proto] = secured_broker(tmp_path_factory.mktemp(proto.lower()), proto, certs)
        yield started
    finally:
        for b in started.values():
            try:
                b.stop()
            finally:
                b.kill()


def kp_settings(proto: str, certs: Certs, mech: str | None, password: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"security_protocol": proto}
    if proto.endswith("SSL"):
        conf["ssl_cafile"] = str(certs.ca)
    if mech:
        conf.update(sasl_mechanism=mech, sasl_plain_username="alice",
                    sasl_plain_password=password or USERS["alice"])
    return conf


def values(n: int, tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() * (1 + i % 7) for i in range(n)]


@pytest.mark.parametrize(("proto", "mech"), CASES, ids=IDS)
def test_confluent_kafka(brokers: dict[str, BrokerProcess], certs: Certs, topic: str, proto: str,
                         mech: str | None) -> None:
    from confluent_kafka import Producer

    b = brokers[proto]
    conf = {"bootstrap.servers": b.bootstrap, **client_settings(proto, certs, mech)}
    producer = Producer({**conf, "linger.ms": 5})
    sent = values(50, "ck")
    for v in sent:
        producer.produce(topic, value=v, partition=0)
    assert producer.flush(30) == 0
    got = ck_consume(b.bootstrap, topic, len(sent), start_offset=0, **conf)
    assert [m.value() for m in got] == sent


@pytest.mark.parametrize(("proto", "mech"), CASES, ids=IDS)
def test_kafka_python(brokers: dict[str, BrokerProcess], certs: Certs, topic: str, proto: str,
                      mech: str | None) -> None:
    b = brokers[proto]
    records = make_records(30, "kp", with_nulls=False)
    conf = kp_settings(proto, certs, mech)
    assert kp_produce(b.bootstrap, topic, records, **conf) == list(range(30))
    got = kp_consume(b.bootstrap, topic, 30, **conf)
    assert [r.value for r in got] == [r.value for r in records]


@pytest.mark.parametrize(("proto", "mech"), CASES, ids=IDS)
def test_aiokafka(brokers: dict[str, BrokerProcess], certs: Certs, topic: str, proto: str, mech: str | None) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.helpers import create_ssl_context

    b = brokers[proto]
    conf: dict[str, Any] = {"security_protocol": proto}
    if proto.endswith("SSL"):
        conf["ssl_context"] = create_ssl_context(cafile=str(certs.ca))
    if mech:
        conf.update(sasl_mechanism=mech, sasl_plain_username="bob", sasl_plain_password=USERS["bob"])
    sent = values(40, "aio")

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=b.bootstrap, **conf)
        await producer.start()
        try:
            for v in sent:
                await producer.send(topic, v, partition=0)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=b.bootstrap, auto_offset_reset="earliest", **conf)
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            out: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(out) < len(sent) and time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=500)
                out += [r.value for recs in batch.values() for r in recs]
            return out
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == sent


def kcat(*args: str, stdin: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    exe = shutil.which("kcat")
    assert exe, "kcat is not installed"
    proc = subprocess.run([exe, *args], input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
                          capture_output=True, timeout=60)
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:].decode(errors="replace")
    return proc


def kcat_x(proto: str, certs: Certs, mech: str | None, **kw: Any) -> list[str]:
    conf = client_settings(proto, certs, mech, **kw)
    if "sasl.mechanism" in conf:  # librdkafka 2.0's name; sasl.mechanism is an alias kcat also accepts
        conf["sasl.mechanisms"] = conf.pop("sasl.mechanism")
    return [a for k, v in conf.items() for a in ("-X", f"{k}={v}")]


@pytest.mark.parametrize(("proto", "mech"), CASES, ids=IDS)
def test_kcat(brokers: dict[str, BrokerProcess], certs: Certs, topic: str, proto: str, mech: str | None) -> None:
    b = brokers[proto]
    x = kcat_x(proto, certs, mech)
    lines = [f"line {i} {'x' * (i % 13)}" for i in range(25)]
    kcat("-b", b.bootstrap, *x, "-P", "-t", topic, "-p", "0", stdin="\n".join(lines).encode() + b"\n")
    out = kcat("-b", b.bootstrap, *x, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-c", str(len(lines)),
               "-e", "-q").stdout
    assert out.decode().splitlines() == lines


def failed_auth_count(b: BrokerProcess) -> float:
    total = 0.0
    for line in b.fetch_metrics().splitlines():
        if line.startswith("moldau_failed_authentication_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-512"])
def test_wrong_password_is_refused(brokers: dict[str, BrokerProcess], certs: Certs, topic: str, mech: str) -> None:
    from kafka.errors import KafkaError

    b = brokers["SASL_SSL"]
    before = failed_auth_count(b)
    proc = kcat("-b", b.bootstrap, *kcat_x("SASL_SSL", certs, mech, password="wrong"), "-L", "-m", "5",
                check=False)
    assert proc.returncode != 0
    assert b"uthentication" in proc.stderr, proc.stderr[-2000:]
    from kafka import KafkaProducer

    t0 = time.monotonic()
    with pytest.raises(KafkaError) as refused:  # kafka-python probes the broker's version in its constructor
        KafkaProducer(bootstrap_servers=b.bootstrap, **kp_settings("SASL_SSL", certs, mech, password="wrong"),
                      bootstrap_timeout_ms=5000, max_block_ms=5000).close(timeout=5)
    print(f"kafka-python refused in {time.monotonic() - t0:.1f}s: {refused.value!r}")
    wait_until(lambda: failed_auth_count(b) >= before + 2, 10, "failed logins counted")


def test_client_without_the_ca_fails_the_handshake(brokers: dict[str, BrokerProcess], certs: Certs) -> None:
    b = brokers["SSL"]
    ctx = ssl.create_default_context(cafile=str(certs.other_ca))
    with socket.create_connection(("127.0.0.1", b.port), timeout=10) as raw:
        with pytest.raises(ssl.SSLCertVerificationError):
            ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    proc = kcat("-b", b.bootstrap, "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={certs.other_ca}",
                "-L", "-m", "5", check=False)
    assert proc.returncode != 0 and b"certificate verify failed" in proc.stderr, proc.stderr[-2000:]
    # The broker is unharmed: a client with the right CA still gets metadata.
    ok = ssl.create_default_context(cafile=str(certs.ca))
    with socket.create_connection(("127.0.0.1", b.port), timeout=10) as raw:
        with ok.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            assert tls.version() in ("TLSv1.2", "TLSv1.3")


def test_fetch_over_tls_counts_copied_bytes(brokers: dict[str, BrokerProcess], certs: Certs, topic: str) -> None:
    b = brokers["SSL"]

    def copied() -> float:
        for line in b.fetch_metrics().splitlines():
            if line.startswith("moldau_fetch_copied_bytes_total "):
                return float(line.split()[1])
        return 0.0

    before = copied()
    payload = [b"z" * 10_000] * 20
    conf = kp_settings("SSL", certs, None)
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=b.bootstrap, **conf)
    for v in payload:
        producer.send(topic, v, partition=0)
    producer.flush(30)
    producer.close()
    got = kp_consume(b.bootstrap, topic, len(payload), **conf)
    assert [r.value for r in got] == payload
    assert copied() - before >= 200_000



@pytest.mark.parametrize(("proto", "mech"), CASES, ids=IDS)
def test_moldau_client(brokers: dict[str, BrokerProcess], certs: Certs, topic: str, proto: str,
                       mech: str | None) -> None:
    """Moldau's own client library with librdkafka's property names."""
    from moldau import Consumer, Producer, TopicPartition

    b = brokers[proto]
    conf = {"bootstrap.servers": b.bootstrap, **client_settings(proto, certs, mech)}
    with Producer({**conf, "linger.ms": 1}) as producer:
        for i in range(30):
            producer.produce(topic, b"m%d" % i, partition=0)
        producer.flush(30)
    with Consumer({**conf, "auto.offset.reset": "earliest", "enable.auto.commit": False}) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        got: list[bytes | None] = []
        deadline = time.monotonic() + 30
        while len(got) < 30:
            assert time.monotonic() < deadline, f"only {len(got)} records"
            got += [r.value for r in consumer.poll(timeout_ms=500)]
    assert got == [b"m%d" % i for i in range(30)]


def test_moldau_client_wrong_password_and_bad_settings(brokers: dict[str, BrokerProcess], certs: Certs) -> None:
    from moldau import AdminClient, ConfigError

    b = brokers["SASL_SSL"]
    with pytest.raises(ConfigError) as info:
        AdminClient({"bootstrap.servers": b.bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"})
    assert info.value.key == "sasl.mechanism"
    conf = {"bootstrap.servers": b.bootstrap, "socket.connection.setup.timeout.ms": 3000,
            **client_settings("SASL_SSL", certs, "SCRAM-SHA-256", password="wrong")}
    with pytest.raises(Exception, match="(?i)authentication|no broker|connect"):
        with AdminClient(conf) as admin:
            admin.list_topics()


def test_user_scram_credentials_apis(brokers: dict[str, BrokerProcess], certs: Certs, topic: str) -> None:
    """AlterUserScramCredentials/DescribeUserScramCredentials through confluent-kafka's admin client; the new
    user logs in at once, and is refused once deleted."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    b = brokers["SASL_PLAINTEXT"]
    admin = AdminClient({"bootstrap.servers": b.bootstrap, **client_settings("SASL_PLAINTEXT", certs, "PLAIN")})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)
    for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion("carol", info, b"carol-pw")]).values():
        f.result(timeout=20)
    described = {u: f.result(timeout=20) for u, f in admin.describe_user_scram_credentials(["carol"]).items()}
    assert [(i.mechanism, i.iterations) for i in described["carol"].scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 8192)]

    def produce_as_carol() -> list[Any]:
        errors: list[Any] = []
        p = Producer({"bootstrap.servers": b.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                      "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "carol", "sasl.password": "carol-pw",
                      "message.timeout.ms": 6000, "error_cb": errors.append})
        p.produce(topic, b"from carol", partition=0, on_delivery=lambda err, _msg: errors.append(err))
        p.flush(15)
        return errors

    assert produce_as_carol() == [None]
    deletion = UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)
    for f in admin.alter_user_scram_credentials([deletion]).values():
        f.result(timeout=20)
    errors = produce_as_carol()  # carol can no longer log in
    assert errors[-1] is not None and any("uthentication" in str(e) for e in errors), errors


def test_hostile_bytes_on_tls_listeners(brokers: dict[str, BrokerProcess], certs: Certs, topic: str) -> None:
    """Plaintext garbage on a TLS port fails the handshake; inside TLS, a 100 MB frame size before SASL login
    closes the connection; both brokers keep serving."""
    import struct

    from .harness import RawConnection

    with RawConnection(brokers["SSL"].port) as c:
        c.send(b"\x00\x00\x00\x10" + b"not a tls record" * 64)
        c.wait_closed(10)
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    for _ in range(5):
        with socket.create_connection(("127.0.0.1", brokers["SASL_SSL"].port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(struct.pack(">i", 100 * 1024 * 1024) + b"\0" * 4096)
                tls.settimeout(10)
                try:
                    assert tls.recv(1) == b""
                except (ConnectionResetError, ssl.SSLError):
                    pass  # closed: what we want
    for proto, mech in (("SSL", None), ("SASL_SSL", "PLAIN")):
        conf = kp_settings(proto, certs, mech)
        assert kp_produce(brokers[proto].bootstrap, topic, make_records(2, "after", with_nulls=False), **conf)


def test_certificate_reload_without_restart(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Replacing the keystore file changes the certificate new connections get; the broker keeps running."""
    import os
    import shutil as sh

    first = make_certs(tmp_path_factory.mktemp("first"))
    second = make_certs(tmp_path_factory.mktemp("second"))
    live = tmp_path_factory.mktemp("live") / "broker.pem"
    sh.copy(first.broker_pem, live)
    b = secured_broker(tmp_path_factory.mktemp("reload"), "SSL", first, **{"ssl.keystore.location": str(live)})
    try:
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE

        def served() -> bytes:
            with socket.create_connection(("127.0.0.1", b.port), timeout=10) as raw:
                with ctx.wrap_socket(raw) as tls:
                    der = tls.getpeercert(binary_form=True)
                    assert der is not None
                    return der

        def der_of(certs: Certs) -> bytes:
            return ssl.PEM_cert_to_DER_cert((certs.broker_pem.parent / "broker.crt").read_text())

        assert served() == der_of(first)
        tmp = live.with_suffix(".new")
        sh.copy(second.broker_pem, tmp)
        os.replace(tmp, live)
        wait_until(lambda: served() == der_of(second), 20, "the new certificate served")
        # A file that does not load is logged and the current certificate kept.
        tmp.write_text("-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n")
        os.replace(tmp, live)
        wait_until(lambda: served() == der_of(second) and "do not load" in b.stderr_text(), 20,
                   "the broken file noticed")
        assert served() == der_of(second) and b.is_running()
    finally:
        b.stop()


def test_moldau_configs_manages_scram_users(brokers: dict[str, BrokerProcess], certs: Certs, topic: str,
                                            tmp_path: Path) -> None:
    """moldau-configs --entity-type users over SASL_SSL (the admin's own login from --command-config); the new
    user logs in with SCRAM-SHA-512."""
    import sys

    from confluent_kafka import Producer

    b = brokers["SASL_SSL"]
    props = tmp_path / "admin.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in client_settings("SASL_SSL", certs, "PLAIN").items()))

    def configs(*args: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "moldau.tools.configs", "--bootstrap-server", b.bootstrap,
                               "--command-config", str(props), *args], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    out = configs("--alter", "--entity-type", "users", "--entity-name", "dave", "--add-config",
                  "SCRAM-SHA-512=[iterations=8192,password=dave-pw],SCRAM-SHA-256=[password=dave-pw]")
    assert "Completed updating config for user dave." in out
    assert configs("--describe", "--entity-type", "users", "--entity-name", "dave").strip() == (
        "SCRAM credential configs for user-principal 'dave' are SCRAM-SHA-256=iterations=4096, "
        "SCRAM-SHA-512=iterations=8192")
    errors: list[Any] = []
    p = Producer({"bootstrap.servers": b.bootstrap, "security.protocol": "SASL_SSL", "ssl.ca.location": str(certs.ca),
                  "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "dave", "sasl.password": "dave-pw"})
    p.produce(topic, b"from dave", partition=0, on_delivery=lambda err, _m: errors.append(err))
    p.flush(30)
    assert errors == [None]
    configs("--alter", "--entity-type", "users", "--entity-name", "dave", "--delete-config", "SCRAM-SHA-512")
    assert "SCRAM-SHA-512" not in configs("--describe", "--entity-type", "users", "--entity-name", "dave")
