"""Throwaway TLS material for development and tests: a CA and a broker certificate for 127.0.0.1/localhost,
made with the ``openssl`` CLI (no Python crypto package needed). Not for production keys."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


@dataclass(frozen=True)
class Certs:
    ca: Path  # CA certificate (clients' ssl.ca.location, brokers' ssl.truststore.location)
    broker_pem: Path  # broker certificate + key (ssl.keystore.location)
    other_ca: Path  # a CA that did not sign the broker's certificate (for negative tests)


def _openssl(*args: str, cwd: Path) -> None:
    exe = shutil.which("openssl")
    if exe is None:
        raise RuntimeError("the openssl command is needed to generate TLS certificates")
    subprocess.run([exe, *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _ca(d: Path, name: str, days: int) -> None:
    _openssl("req", "-x509", *EC, "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", str(days),
             "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)


def make_certs(d: Path, days: int = 2) -> Certs:
    d.mkdir(parents=True, exist_ok=True)
    _ca(d, "ca", days)
    _ca(d, "other-ca", days)
    _openssl("req", *EC, "-keyout", "broker.key", "-out", "broker.csr", "-subj", "/CN=localhost", cwd=d)
    (d / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                               "keyUsage=critical,digitalSignature,keyEncipherment\n"
                               "extendedKeyUsage=serverAuth,clientAuth\n")
    _openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "broker.crt", "-days", str(days), "-extfile", "ext.cnf", cwd=d)
    pem = d / "broker.pem"
    pem.write_text((d / "broker.crt").read_text() + (d / "broker.key").read_text())
    pem.chmod(0o600)
    return Certs(d / "ca.pem", pem, d / "other-ca.pem")
