"""The launcher's ``--security sasl_ssl``: a throwaway CA and broker certificate, SCRAM-SHA-512 users in
ZooKeeper (``admin`` for clients, ``broker`` for inter-broker traffic, random passwords), the broker settings
for one SASL_SSL listener per broker with ACLs on (both users are super users; others need ACLs, made with
moldau-acls), and a librdkafka-style client properties file."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path

from moldau.broker.security.certs import Certs, make_certs
from moldau.broker.security.credentials import ZkCredentialStore
from moldau.broker.security.scram_tool import alter_user

MECHANISM = "SCRAM-SHA-512"


class SecureSetup:
    def __init__(self, data: Path) -> None:
        self.dir = data / "security"
        self.certs: Certs = make_certs(self.dir, days=30)
        self.passwords = {"admin": secrets.token_urlsafe(12), "broker": secrets.token_urlsafe(12)}
        self.client_properties = self.dir / "client.properties"
        self.client_properties.write_text(
            "security.protocol=SASL_SSL\n"
            f"sasl.mechanisms={MECHANISM}\n"
            "sasl.username=admin\n"
            f"sasl.password={self.passwords['admin']}\n"
            f"ssl.ca.location={self.certs.ca}\n")
        self.client_properties.chmod(0o600)

    def create_users(self, zookeeper_connect: str) -> None:
        from moldau.broker.controller.zk import ZkClient

        async def run() -> None:
            zk = ZkClient(zookeeper_connect, 18000, 15000)
            await zk.start()
            try:
                store = ZkCredentialStore(zk)
                for user, password in self.passwords.items():
                    await alter_user(store, user, {MECHANISM: (password, 4096)})
            finally:
                await zk.close()

        asyncio.run(run())

    def broker_overrides(self, port: int) -> dict[str, str]:
        jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
                f'password="{self.passwords["broker"]}";')
        return {
            "listeners": f"SASL_SSL://127.0.0.1:{port}",
            "security.inter.broker.protocol": "SASL_SSL",
            "sasl.enabled.mechanisms": MECHANISM,
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": jaas,
            "ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM",
            "ssl.keystore.location": str(self.certs.broker_pem),
            "ssl.truststore.location": str(self.certs.ca),
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin;User:broker",
        }

    def usage(self, bootstrap: str) -> str:
        return (f"Security: SASL_SSL with {MECHANISM}; client settings in {self.client_properties}\n"
                f"  (user admin, password {self.passwords['admin']}, CA {self.certs.ca})\n"
                f"  kcat -F {self.client_properties} -b {bootstrap} -L\n"
                f"  ACLs are on (admin and broker are super users): moldau-acls --bootstrap-server {bootstrap} "
                f"--command-config {self.client_properties} --list\n")
