"""ssl.principal.mapping.rules (KIP-371) on a real broker: an SSL listener with ssl.client.auth=required whose
per-listener rules map ``CN=alice,O=Moldau`` to ``alice``; an ACL for ``User:alice`` lets confluent-kafka
produce with alice's certificate, and a certificate no rule maps is refused (with the reason in the log)."""

from __future__ import annotations

from pathlib import Path

import pytest

from moldau.broker.security.certs import make_certs

from .harness import BrokerProcess, wait_until
from .test_acls import client_cert, mtls_acl_broker, produce

pytestmark = [pytest.mark.integration]

# Commas inside the regexes are part of the rules; the second maps the broker's own certificate (CN=localhost,
# also the admin client's here) to a super user.
RULES = "RULE:^CN=(alice|bob),O=Moldau$/$1/L, RULE:^CN=localhost$/admin/"


def failed_authentications(broker: BrokerProcess) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in broker.fetch_metrics().splitlines()
               if line.startswith("moldau_failed_authentication_total{"))


def test_mapped_certificate_principal_and_refused_certificate(tmp_path: Path) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    certs = make_certs(tmp_path / "certs")
    alice_pem = client_cert(tmp_path / "certs", "alice")
    mallory_pem = client_cert(tmp_path / "certs", "mallory")
    broker = mtls_acl_broker(tmp_path, certs, {
        # The global DEFAULT would let every certificate in under its subject: the per-listener rules win.
        "ssl.principal.mapping.rules": "DEFAULT", "listener.name.ssl.ssl.principal.mapping.rules": RULES,
        "super.users": "User:admin"})
    broker.start()
    try:
        def conf(pem: Path) -> dict[str, str]:
            return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SSL",
                    "ssl.ca.location": str(certs.ca), "ssl.certificate.location": str(pem),
                    "ssl.key.location": str(pem)}

        admin = AdminClient(conf(certs.broker_pem))  # CN=localhost -> User:admin, a super user
        for f in admin.create_topics([NewTopic("mapped", 1, 1), NewTopic("mapped-closed", 1, 1)]).values():
            f.result(30)
        for f in admin.create_acls([AclBinding(ResourceType.TOPIC, "mapped", ResourcePatternType.LITERAL,
                                               "User:alice", "*", AclOperation.WRITE,
                                               AclPermissionType.ALLOW)]).values():
            assert f.result(30) is None
        # Only the mapped name holds the ACL, so a delivered record shows alice's principal is User:alice.
        assert all(err is None for err, _ in produce(conf(alice_pem), "mapped", n=2))
        denied = produce(conf(alice_pem), "mapped-closed", n=1)
        assert denied[0][0] is not None and denied[0][0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

        # CN=mallory,O=Moldau matches no rule: the broker closes the connection after the TLS handshake.
        mallory = AdminClient({**conf(mallory_pem), "reconnect.backoff.max.ms": "1000"})
        with pytest.raises(KafkaException):
            mallory.list_topics(timeout=5)
        wait_until(lambda: "no rule matches 'CN=mallory,O=Moldau'" in broker.stderr_text(), 30,
                   "the refusal logged with the certificate subject")
        assert "ssl.principal.mapping.rules" in broker.stderr_text()
        wait_until(lambda: failed_authentications(broker) >= 1, 30, "the refusal counted as a failed authentication")
    finally:
        broker.kill()
