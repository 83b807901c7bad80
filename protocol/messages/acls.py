"""ACL APIs: DescribeAcls (29), CreateAcls (30), DeleteAcls (31), each v0-3, flexible from v2. The pattern
type fields exist from v1 (v0 knows only literal patterns: Kafka's default 3 = LITERAL)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.schema import Api, F

if TYPE_CHECKING:  # the message shapes are for mypy only
    from moldau.protocol.typed import (
        CreateAclsRequest,
        CreateAclsResponse,
        DeleteAclsRequest,
        DeleteAclsResponse,
        DescribeAclsRequest,
        DescribeAclsResponse,
    )

_FILTER = [
    F("resource_type_filter", "int8"),
    F("resource_name_filter", "string", nullable="0+"),
    F("pattern_type_filter", "int8", "1+", default=3),
    F("principal_filter", "string", nullable="0+"),
    F("host_filter", "string", nullable="0+"),
    F("operation", "int8"),
    F("permission_type", "int8"),
]

DESCRIBE_ACLS: Api[DescribeAclsRequest, DescribeAclsResponse] = Api(
    29, "DescribeAcls", versions=(0, 3), flexible=2,
    request=_FILTER,
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("resources", [
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("pattern_type", "int8", "1+", default=3),
            F("acls", [
                F("principal", "string"),
                F("host", "string"),
                F("operation", "int8"),
                F("permission_type", "int8"),
            ]),
        ]),
    ],
)

CREATE_ACLS: Api[CreateAclsRequest, CreateAclsResponse] = Api(
    30, "CreateAcls", versions=(0, 3), flexible=2,
    request=[
        F("creations", [
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("resource_pattern_type", "int8", "1+", default=3),
            F("principal", "string"),
            F("host", "string"),
            F("operation", "int8"),
            F("permission_type", "int8"),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", [
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
        ]),
    ],
)

DELETE_ACLS: Api[DeleteAclsRequest, DeleteAclsResponse] = Api(
    31, "DeleteAcls", versions=(0, 3), flexible=2,
    request=[F("filters", _FILTER)],
    response=[
        F("throttle_time_ms", "int32"),
        F("filter_results", [
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("matching_acls", [
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+"),
                F("resource_type", "int8"),
                F("resource_name", "string"),
                F("pattern_type", "int8", "1+", default=3),
                F("principal", "string"),
                F("host", "string"),
                F("operation", "int8"),
                F("permission_type", "int8"),
            ]),
        ]),
    ],
)
