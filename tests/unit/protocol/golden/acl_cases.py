"""Golden cases of the ACL APIs (DescribeAcls, CreateAcls, DeleteAcls), merged into generate.py. Encoders:
kafka-python 3.0's message classes, cross-checked against kafka-python's and aiokafka's hand-written classes for
the non-flexible versions they declare.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hand_built import Value
from kafka.protocol.admin import acl

API_SPECS: dict[str, tuple[int, range, tuple[Any, Any], tuple[str, str, str] | None,
                           tuple[str, str, str] | None]] = {
    "describe_acls": (29, range(0, 4), (acl.DescribeAclsRequest, acl.DescribeAclsResponse),
                      ("admin", "DescribeAclsRequest", "DescribeAclsResponse"),
                      ("admin", "DescribeAclsRequest", "DescribeAclsResponse")),
    "create_acls": (30, range(0, 4), (acl.CreateAclsRequest, acl.CreateAclsResponse),
                    ("admin", "CreateAclsRequest", "CreateAclsResponse"),
                    ("admin", "CreateAclsRequest", "CreateAclsResponse")),
    "delete_acls": (31, range(0, 4), (acl.DeleteAclsRequest, acl.DeleteAclsResponse),
                    ("admin", "DeleteAclsRequest", "DeleteAclsResponse"),
                    ("admin", "DeleteAclsRequest", "DeleteAclsResponse")),
}

RENAMED: dict[str, str] = {}

_FILTER = {"resource_type_filter": 2, "resource_name_filter": "logs-", "pattern_type_filter": 4,
           "principal_filter": "User:alice", "host_filter": None, "operation": 3, "permission_type": 3}

SAMPLES: dict[tuple[str, str], Value] = {
    ("describe_acls", "request"): dict(_FILTER),
    ("describe_acls", "response"): {
        "throttle_time_ms": 0, "error_code": 0, "error_message": None, "resources": [
            {"resource_type": 2, "resource_name": "orders", "pattern_type": 3, "acls": [
                {"principal": "User:alice", "host": "*", "operation": 4, "permission_type": 3},
                {"principal": "User:bob", "host": "10.0.0.1", "operation": 3, "permission_type": 2}]},
            {"resource_type": 4, "resource_name": "kafka-cluster", "pattern_type": 3, "acls": [
                {"principal": "User:admin", "host": "*", "operation": 2, "permission_type": 3}]}]},
    ("create_acls", "request"): {"creations": [
        {"resource_type": 2, "resource_name": "orders", "resource_pattern_type": 3, "principal": "User:alice",
         "host": "*", "operation": 4, "permission_type": 3},
        {"resource_type": 3, "resource_name": "app", "resource_pattern_type": 3, "principal": "User:bob",
         "host": "*", "operation": 3, "permission_type": 3}]},
    ("create_acls", "response"): {"throttle_time_ms": 0, "results": [
        {"error_code": 0, "error_message": None},
        {"error_code": 42, "error_message": "the pattern type must be LITERAL or PREFIXED"}]},
    ("delete_acls", "request"): {"filters": [dict(_FILTER), {
        "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
        "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}]},
    ("delete_acls", "response"): {"throttle_time_ms": 0, "filter_results": [
        {"error_code": 0, "error_message": None, "matching_acls": [
            {"error_code": 0, "error_message": None, "resource_type": 2, "resource_name": "orders",
             "pattern_type": 3, "principal": "User:alice", "host": "*", "operation": 4, "permission_type": 3}]},
        {"error_code": 31, "error_message": "Not authorized", "matching_acls": []}]},
}

# Version 0 knows literal patterns only (its pattern fields do not exist; Kafka's default is LITERAL).
VARIANTS: list[tuple[str, str, int, Value]] = [
    ("describe_acls", "request", 0, {"resource_type_filter": 2, "resource_name_filter": None,
                                     "principal_filter": None, "host_filter": None, "operation": 1,
                                     "permission_type": 1}),
]

HAND_BUILT: list[tuple[str, str, int, Callable[[], tuple[Value, bytes]]]] = []
