"""Client quota administration for ``AdminClient`` (KIP-546): DescribeClientQuotas and AlterClientQuotas.

An entity is a mapping of entity type (``"user"``, ``"client-id"``, ``"ip"``) to a name, None standing for that
type's default: ``{"user": "alice", "client-id": None}`` is alice's default client. Values are floats
(``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``, ``controller_mutation_rate``,
``connection_creation_rate``); an op of None removes the key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from moldau.cluster import Cluster
from moldau.errors import KafkaError
from moldau.protocol.messages.quotas import (  # noqa: F401  (re-exported for filters)
    ALTER_CLIENT_QUOTAS,
    DESCRIBE_CLIENT_QUOTAS,
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
)

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import AlterClientQuotasRequest

QuotaEntity = dict[str, str | None]


class QuotasAdmin:
    """Mixed into ``AdminClient`` (client/admin.py), which provides ``_cluster``."""

    _cluster: Cluster

    async def describe_client_quotas(self, components: Sequence[tuple[str, int, str | None]] = (),
                                     strict: bool = False, broker_id: int | None = None
                                     ) -> list[tuple[QuotaEntity, dict[str, float]]]:
        """The quota entities matching every filter component (entity type, MATCH_EXACT | MATCH_DEFAULT |
        MATCH_SPECIFIED, name), with their values; ``strict``: entities with no other entity types.
        ``broker_id`` asks that broker (any broker answers from the cluster's store)."""
        conn = (await self._cluster.any_connection() if broker_id is None
                else await self._cluster.connection(broker_id))
        response = await conn.send(DESCRIBE_CLIENT_QUOTAS, {
            "components": [{"entity_type": t, "match_type": m, "match": n} for t, m, n in components],
            "strict": strict})
        if response["error_code"]:
            raise KafkaError(response["error_code"], response["error_message"])
        return [({e["entity_type"]: e["entity_name"] for e in entry["entity"]},
                 {v["key"]: v["value"] for v in entry["values"]}) for entry in response["entries"] or []]

    async def alter_client_quotas(self, entries: Iterable[tuple[Mapping[str, str | None], Mapping[str, float | None]]],
                                  validate_only: bool = False, raise_errors: bool = True) -> list[KafkaError | None]:
        """Set (a value) or remove (None) quota keys of each entity; per entry its error (raised by default)."""
        body: AlterClientQuotasRequest = {"entries": [{"entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
                             "ops": [{"key": k, "value": 0.0 if v is None else float(v), "remove": v is None}
                                     for k, v in ops.items()]} for entity, ops in entries],
                "validate_only": validate_only}
        conn = await self._cluster.any_connection()
        response = await conn.send(ALTER_CLIENT_QUOTAS, body)
        out: list[KafkaError | None] = [KafkaError(r["error_code"], r["error_message"]) if r["error_code"] else None
                                        for r in response["entries"]]
        if raise_errors:
            for error in out:
                if error is not None:
                    raise error
        return out
