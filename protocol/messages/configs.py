"""DescribeConfigs (key 32, v0-4, flexible from v4), AlterConfigs (key 33, v0-2, flexible from v2) and
IncrementalAlterConfigs (key 44, v0-1, flexible from v1).

Resource types (Kafka's ConfigResource.Type): 2 = topic, 4 = broker (name "" = the cluster-wide default), 8 =
broker logger. Config sources (DescribeConfigs v1+): 1 DYNAMIC_TOPIC_CONFIG, 2 DYNAMIC_BROKER_CONFIG,
3 DYNAMIC_DEFAULT_BROKER_CONFIG, 4 STATIC_BROKER_CONFIG, 5 DEFAULT_CONFIG. IncrementalAlterConfigs operations:
0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.schema import Api, F

if TYPE_CHECKING:  # the message shapes are for mypy only
    from moldau.protocol.typed import (
        AlterConfigsRequest,
        AlterConfigsResponse,
        DescribeConfigsRequest,
        DescribeConfigsResponse,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
    )

RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER = 2, 4, 8
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3

DESCRIBE_CONFIGS: Api[DescribeConfigsRequest, DescribeConfigsResponse] = Api(
    32, "DescribeConfigs", versions=(0, 4), flexible=4,
    request=[
        F("resources", [
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configuration_keys", "[]string", nullable="0+"),
        ]),
        F("include_synonyms", "bool", "1+"),
        F("include_documentation", "bool", "3+"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", [
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configs", [
                F("name", "string"),
                F("value", "string", nullable="0+"),
                F("read_only", "bool"),
                F("is_default", "bool", "0"),
                F("config_source", "int8", "1+", default=-1),
                F("is_sensitive", "bool"),
                F("synonyms", [
                    F("name", "string", "1+"),
                    F("value", "string", "1+", nullable="0+"),
                    F("source", "int8", "1+"),
                ], "1+"),
                F("config_type", "int8", "3+"),
                F("documentation", "string", "3+", nullable="0+"),
            ]),
        ]),
    ],
)

ALTER_CONFIGS: Api[AlterConfigsRequest, AlterConfigsResponse] = Api(
    33, "AlterConfigs", versions=(0, 2), flexible=2,
    request=[
        F("resources", [
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configs", [
                F("name", "string"),
                F("value", "string", nullable="0+"),
            ]),
        ]),
        F("validate_only", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("responses", [
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("resource_type", "int8"),
            F("resource_name", "string"),
        ]),
    ],
)

INCREMENTAL_ALTER_CONFIGS: Api[IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse] = Api(
    44, "IncrementalAlterConfigs", versions=(0, 1), flexible=1,
    request=[
        F("resources", [
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configs", [
                F("name", "string"),
                F("config_operation", "int8"),
                F("value", "string", nullable="0+"),
            ]),
        ]),
        F("validate_only", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("responses", [
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("resource_type", "int8"),
            F("resource_name", "string"),
        ]),
    ],
)
