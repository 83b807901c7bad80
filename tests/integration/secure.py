"""Throwaway TLS material and secured brokers for the security tests.

`make_certs` creates a CA and a broker certificate for 127.0.0.1/localhost with the openssl CLI (the test
environment has no `cryptography` package); `secured_broker` starts a standalone broker with one listener of the
given security protocol, PLAIN users from a JAAS entry and SCRAM users written by moldau-scram before start-up.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .harness import REPO_ROOT, BrokerProcess

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
              + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")


@dataclass(frozen=True)
class Certs:
    ca: Path  # CA certificate (the clients' ssl.ca.location)
    broker_pem: Path  # broker certificate + key (ssl.keystore.location)
    other_ca: Path  # a CA that did not sign the broker's certificate


def _openssl(*args: str, cwd: Path) -> None:
    exe = shutil.which("openssl")
    assert exe, "the openssl CLI is needed to generate test certificates"
    subprocess.run([exe, *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _ca(d: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN={name}",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             cwd=d)


def make_certs(d: Path) -> Certs:
    d.mkdir(parents=True, exist_ok=True)
    _ca(d, "ca")
    _ca(d, "other-ca")
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
             "broker.key", "-out", "broker.csr", "-subj", "/CN=localhost", cwd=d)
    (d / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                               "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n")
    _openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "broker.crt", "-days", "2", "-extfile", "ext.cnf", cwd=d)
    (d / "broker.pem").write_text((d / "broker.crt").read_text() + (d / "broker.key").read_text())
    return Certs(d / "ca.pem", d / "broker.pem", d / "other-ca.pem")


def add_scram_users(log_dir: Path) -> None:
    """SCRAM-SHA-256 and -512 credentials for every user, written with the moldau-scram tool."""
    log_dir.mkdir(parents=True, exist_ok=True)
    for user, password in USERS.items():
        subprocess.run(
            [sys.executable, "-m", "moldau.broker.security.scram_tool", "--log-dir", str(log_dir), "--alter",
             "--entity-type", "users", "--entity-name", user, "--add-config",
             f"SCRAM-SHA-256=[password={password}],SCRAM-SHA-512=[iterations=8192,password={password}]"],
            cwd=REPO_ROOT, check=True, capture_output=True, timeout=60)


def secured_broker(workdir: Path, protocol: str, certs: Certs, **extra: str) -> BrokerProcess:
    broker = BrokerProcess(workdir)
    overrides = {
        "listeners": f"{protocol}://127.0.0.1:{broker.port}",
        "security.inter.broker.protocol": protocol,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.truststore.type": "PEM",
        "ssl.keystore.location": str(certs.broker_pem),
        **extra,
    }
    broker.overrides.update(overrides)
    add_scram_users(broker.log_dir)
    return broker.start()


def client_settings(protocol: str, certs: Certs, mechanism: str | None, user: str = "alice",
                    password: str | None = None) -> dict[str, str]:
    """librdkafka property names (confluent-kafka, kcat -X)."""
    conf = {"security.protocol": protocol}
    if protocol.endswith("SSL"):
        conf["ssl.ca.location"] = str(certs.ca)
    if mechanism is not None:
        conf.update({"sasl.mechanism": mechanism, "sasl.username": user,
                     "sasl.password": password if password is not None else USERS[user]})
    return conf
