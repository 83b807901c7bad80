"""Golden cases of the client quota APIs (DescribeClientQuotas, AlterClientQuotas), merged into generate.py.

The library encoder is kafka-python 3.0's message classes (``kafka.protocol.admin.client_quotas``); neither
kafka-python's old Struct classes nor aiokafka declare these APIs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hand_built import Value
from kafka.protocol.admin import client_quotas

API_SPECS: dict[str, tuple[int, range, tuple[Any, Any], tuple[str, str, str] | None,
                           tuple[str, str, str] | None]] = {
    "describe_client_quotas": (48, range(0, 2), (client_quotas.DescribeClientQuotasRequest,
                                                 client_quotas.DescribeClientQuotasResponse), None, None),
    "alter_client_quotas": (49, range(0, 2), (client_quotas.AlterClientQuotasRequest,
                                              client_quotas.AlterClientQuotasResponse), None, None),
}

RENAMED: dict[str, str] = {}

_ENTITY: list[Value] = [{"entity_type": "user", "entity_name": "alice"},
                        {"entity_type": "client-id", "entity_name": None}]

SAMPLES: dict[tuple[str, str], Value] = {
    ("describe_client_quotas", "request"): {
        "components": [{"entity_type": "user", "match_type": 0, "match": "alice"},
                       {"entity_type": "client-id", "match_type": 1, "match": None}],
        "strict": True,
    },
    ("describe_client_quotas", "response"): {
        "throttle_time_ms": 0, "error_code": 0, "error_message": None,
        "entries": [{"entity": _ENTITY, "values": [{"key": "producer_byte_rate", "value": 1048576.0},
                                                   {"key": "request_percentage", "value": 12.5}]}],
    },
    ("alter_client_quotas", "request"): {
        "entries": [{"entity": _ENTITY, "ops": [{"key": "producer_byte_rate", "value": 1048576.0, "remove": False},
                                                {"key": "consumer_byte_rate", "value": 0.0, "remove": True}]}],
        "validate_only": False,
    },
    ("alter_client_quotas", "response"): {
        "throttle_time_ms": 0,
        "entries": [{"error_code": 0, "error_message": None, "entity": _ENTITY},
                    {"error_code": 42, "error_message": "Invalid configuration key retention.ms",
                     "entity": [{"entity_type": "client-id", "entity_name": "app"}]}],
    },
}

VARIANTS: list[tuple[str, str, int, Value]] = [
    ("describe_client_quotas", "response", 0, {
        "throttle_time_ms": 0, "error_code": 42, "error_message": "Unknown match type 7", "entries": None}),
]

HAND_BUILT: list[tuple[str, str, int, Callable[[], tuple[Value, bytes]]]] = []
