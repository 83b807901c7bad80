"""Throwaway TLS material and secured brokers for the security tests.

`make_certs` (moldau.broker.security.certs) creates a CA and a broker certificate for 127.0.0.1/localhost with
the openssl CLI (the test environment has no `cryptography` package); `secured_broker` starts a standalone
broker with one listener of the given security protocol, PLAIN users from a JAAS entry and SCRAM users written
by moldau-scram before start-up.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from moldau.broker.security.certs import Certs, make_certs

from .harness import REPO_ROOT, BrokerProcess

__all__ = ["Certs", "make_certs", "USERS", "PLAIN_JAAS", "add_scram_users", "secured_broker", "client_settings"]

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
              + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")


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
