"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49), both v0-1, flexible from v1 (KIP-546).

An entity is a list of (entity_type, entity_name) components; entity types are "user", "client-id" and "ip"; a
null name is the entity type's default ("<default>" in ZooKeeper). DescribeClientQuotas filter match types:
0 = exact name, 1 = the default, 2 = any specified name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.schema import Api, F

if TYPE_CHECKING:  # the message shapes are for mypy only
    from moldau.protocol.typed import (
        AlterClientQuotasRequest,
        AlterClientQuotasResponse,
        DescribeClientQuotasRequest,
        DescribeClientQuotasResponse,
    )

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

_ENTITY = [
    F("entity_type", "string"),
    F("entity_name", "string", nullable="0+"),
]

DESCRIBE_CLIENT_QUOTAS: Api[DescribeClientQuotasRequest, DescribeClientQuotasResponse] = Api(
    48, "DescribeClientQuotas", versions=(0, 1), flexible=1,
    request=[
        F("components", [
            F("entity_type", "string"),
            F("match_type", "int8"),
            F("match", "string", nullable="0+"),
        ]),
        F("strict", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("entries", [
            F("entity", _ENTITY),
            F("values", [
                F("key", "string"),
                F("value", "float64"),
            ]),
        ], nullable="0+"),
    ],
)

ALTER_CLIENT_QUOTAS: Api[AlterClientQuotasRequest, AlterClientQuotasResponse] = Api(
    49, "AlterClientQuotas", versions=(0, 1), flexible=1,
    request=[
        F("entries", [
            F("entity", _ENTITY),
            F("ops", [
                F("key", "string"),
                F("value", "float64"),
                F("remove", "bool"),
            ]),
        ]),
        F("validate_only", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("entries", [
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("entity", _ENTITY),
        ]),
    ],
)
