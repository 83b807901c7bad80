"""Golden cases of the config APIs (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs), merged into
generate.py.

The library encoders are kafka-python 3.0's message classes, cross-checked (non-flexible versions) against
kafka-python's hand-written ``kafka.protocol.old`` classes and aiokafka's Struct classes where they exist.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hand_built import Value
from kafka.protocol.admin import configs

API_SPECS: dict[str, tuple[int, range, tuple[Any, Any], tuple[str, str, str] | None,
                           tuple[str, str, str] | None]] = {
    "describe_configs": (32, range(0, 5), (configs.DescribeConfigsRequest, configs.DescribeConfigsResponse),
                         ("admin", "DescribeConfigsRequest", "DescribeConfigsResponse"),
                         ("admin", "DescribeConfigsRequest", "DescribeConfigsResponse")),
    "alter_configs": (33, range(0, 3), (configs.AlterConfigsRequest, configs.AlterConfigsResponse),
                      ("admin", "AlterConfigsRequest", "AlterConfigsResponse"),
                      ("admin", "AlterConfigsRequest", "AlterConfigsResponse")),
    "incremental_alter_configs": (44, range(0, 2), (configs.IncrementalAlterConfigsRequest,
                                                    configs.IncrementalAlterConfigsResponse), None, None),
}

RENAMED: dict[str, str] = {}

_ALTER_RESPONSE: Value = {
    "throttle_time_ms": 0,
    "responses": [
        {"error_code": 0, "error_message": None, "resource_type": 2, "resource_name": "orders"},
        {"error_code": 40, "error_message": "Unknown topic config name: retention.msx", "resource_type": 4,
         "resource_name": "1"},
    ],
}

SAMPLES: dict[tuple[str, str], Value] = {
    ("describe_configs", "request"): {
        "resources": [
            {"resource_type": 2, "resource_name": "orders", "configuration_keys": None},
            {"resource_type": 4, "resource_name": "1", "configuration_keys": ["log.retention.ms", "num.io.threads"]},
        ],
        "include_synonyms": True, "include_documentation": True,
    },
    ("describe_configs", "response"): {
        "throttle_time_ms": 0,
        "results": [
            {"error_code": 0, "error_message": None, "resource_type": 2, "resource_name": "orders", "configs": [
                {"name": "retention.ms", "value": "3600000", "read_only": False, "is_default": False,
                 "config_source": 1, "is_sensitive": False,
                 "synonyms": [{"name": "retention.ms", "value": "3600000", "source": 1},
                              {"name": "log.retention.hours", "value": "168", "source": 5}],
                 "config_type": 5, "documentation": "Time to keep a segment."},
                {"name": "ssl.key.password", "value": None, "read_only": True, "is_default": True,
                 "config_source": 5, "is_sensitive": True, "synonyms": [], "config_type": 9,
                 "documentation": None},
            ]},
            {"error_code": 3, "error_message": "Topic missing does not exist", "resource_type": 2,
             "resource_name": "missing", "configs": []},
        ],
    },
    ("alter_configs", "request"): {
        "resources": [
            {"resource_type": 2, "resource_name": "orders",
             "configs": [{"name": "retention.ms", "value": "3600000"}, {"name": "cleanup.policy", "value": None}]},
            {"resource_type": 4, "resource_name": "", "configs": []},
        ],
        "validate_only": True,
    },
    ("alter_configs", "response"): _ALTER_RESPONSE,
    ("incremental_alter_configs", "request"): {
        "resources": [
            {"resource_type": 2, "resource_name": "orders", "configs": [
                {"name": "retention.ms", "config_operation": 0, "value": "3600000"},
                {"name": "segment.bytes", "config_operation": 1, "value": None},
                {"name": "cleanup.policy", "config_operation": 2, "value": "compact"}]},
        ],
        "validate_only": False,
    },
    ("incremental_alter_configs", "response"): _ALTER_RESPONSE,
}

VARIANTS: list[tuple[str, str, int, Value]] = [
    ("describe_configs", "request", 0, {"resources": [
        {"resource_type": 4, "resource_name": "", "configuration_keys": []}]}),
]

HAND_BUILT: list[tuple[str, str, int, Callable[[], tuple[Value, bytes]]]] = []
