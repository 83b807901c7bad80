"""SCRAM user administration for ``AdminClient`` (KIP-554): AlterUserScramCredentials and
DescribeUserScramCredentials. The client salts and hashes the password (PBKDF2, as Kafka's admin client does),
so the password itself never reaches the broker."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from moldau.cluster import Cluster
from moldau.errors import KafkaError
from moldau.protocol.messages.sasl import ALTER_USER_SCRAM_CREDENTIALS, DESCRIBE_USER_SCRAM_CREDENTIALS
from moldau.protocol.scram import MECHANISM_CODES, MECHANISMS, salted_password

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        AlterUserScramCredentialsRequestDeletions,
        AlterUserScramCredentialsRequestUpsertions,
        DescribeUserScramCredentialsRequestUsers,
    )

_NAMES = {code: name for name, code in MECHANISM_CODES.items()}


class ScramAdmin:
    """Mixed into ``AdminClient`` (client/admin.py), which provides ``_cluster``."""

    _cluster: Cluster

    async def alter_user_scram_credentials(
            self, upsertions: Sequence[tuple[str, str, str, int]] = (),
            deletions: Sequence[tuple[str, str]] = ()) -> dict[str, KafkaError | None]:
        """Upsert (user, mechanism, password, iterations) and delete (user, mechanism); per user its error."""
        ups: list[AlterUserScramCredentialsRequestUpsertions] = []
        for user, mech, password, iterations in upsertions:
            if mech not in MECHANISMS:
                raise ValueError(f"unknown SCRAM mechanism {mech} (one of {', '.join(MECHANISMS)})")
            salt = os.urandom(32)
            ups.append({"name": user, "mechanism": MECHANISM_CODES[mech], "iterations": iterations, "salt": salt,
                        "salted_password": salted_password(MECHANISMS[mech], password, salt, iterations)})
        dels: list[AlterUserScramCredentialsRequestDeletions] = [{"name": u, "mechanism": MECHANISM_CODES[m]} for u, m in deletions]
        conn = await self._cluster.any_connection()
        response = await conn.send(ALTER_USER_SCRAM_CREDENTIALS, {"deletions": dels, "upsertions": ups})
        return {r["user"]: KafkaError(r["error_code"], r["error_message"]) if r["error_code"] else None
                for r in response["results"]}

    async def describe_user_scram_credentials(self, users: Iterable[str] | None = None) \
            -> dict[str, list[tuple[str, int]] | KafkaError]:
        """Per user its (mechanism, iterations) list, or the error (RESOURCE_NOT_FOUND for an unknown user)."""
        wanted: list[DescribeUserScramCredentialsRequestUsers] | None = \
            None if users is None else [{"name": u} for u in users]
        conn = await self._cluster.any_connection()
        response = await conn.send(DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": wanted})
        if response["error_code"]:
            raise KafkaError(response["error_code"], response["error_message"])
        out: dict[str, list[tuple[str, int]] | KafkaError] = {}
        for r in response["results"]:
            out[r["user"]] = (KafkaError(r["error_code"], r["error_message"]) if r["error_code"] else
                              [(_NAMES.get(c["mechanism"], str(c["mechanism"])), c["iterations"])
                               for c in r["credential_infos"]])
        return out
