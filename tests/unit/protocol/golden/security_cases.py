"""Golden cases of the SASL and SCRAM-user APIs (SaslHandshake, SaslAuthenticate, DescribeUserScramCredentials,
AlterUserScramCredentials), merged into generate.py. Encoders: kafka-python 3.0's message classes, cross-checked
against kafka-python's hand-written ``kafka.protocol.old`` classes where they exist (SaslHandshake,
SaslAuthenticate v0-v1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hand_built import Value
from kafka.protocol import sasl
from kafka.protocol.admin import users

API_SPECS: dict[str, tuple[int, range, tuple[Any, Any], tuple[str, str, str] | None,
                           tuple[str, str, str] | None]] = {
    "sasl_handshake": (17, range(0, 2), (sasl.SaslHandshakeRequest, sasl.SaslHandshakeResponse),
                       ("sasl_handshake", "SaslHandshakeRequest", "SaslHandshakeResponse"), None),
    "sasl_authenticate": (36, range(0, 3), (sasl.SaslAuthenticateRequest, sasl.SaslAuthenticateResponse),
                          ("sasl_authenticate", "SaslAuthenticateRequest", "SaslAuthenticateResponse"), None),
    "describe_user_scram_credentials": (
        50, range(0, 1), (users.DescribeUserScramCredentialsRequest, users.DescribeUserScramCredentialsResponse),
        None, None),
    "alter_user_scram_credentials": (
        51, range(0, 1), (users.AlterUserScramCredentialsRequest, users.AlterUserScramCredentialsResponse),
        None, None),
}

RENAMED: dict[str, str] = {}

SAMPLES: dict[tuple[str, str], Value] = {
    ("sasl_handshake", "request"): {"mechanism": "SCRAM-SHA-512"},
    ("sasl_handshake", "response"): {"error_code": 0, "mechanisms": ["PLAIN", "SCRAM-SHA-512"]},
    ("sasl_authenticate", "request"): {"auth_bytes": b"n,,n=alice,r=abc"},
    ("sasl_authenticate", "response"): {"error_code": 0, "error_message": None, "auth_bytes": b"r=abcdef,s=c2FsdA==,i=4096",
                                        "session_lifetime_ms": 0},
    ("describe_user_scram_credentials", "request"): {"users": [{"name": "alice"}, {"name": "bob"}]},
    ("describe_user_scram_credentials", "response"): {
        "throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": [
            {"user": "alice", "error_code": 0, "error_message": None,
             "credential_infos": [{"mechanism": 1, "iterations": 4096}, {"mechanism": 2, "iterations": 8192}]},
            {"user": "bob", "error_code": 91, "error_message": "no such user", "credential_infos": []}]},
    ("alter_user_scram_credentials", "request"): {
        "deletions": [{"name": "bob", "mechanism": 1}],
        "upsertions": [{"name": "alice", "mechanism": 2, "iterations": 8192, "salt": b"salt",
                        "salted_password": b"\x01" * 64}]},
    ("alter_user_scram_credentials", "response"): {
        "throttle_time_ms": 0, "results": [{"user": "alice", "error_code": 0, "error_message": None},
                                           {"user": "bob", "error_code": 91, "error_message": "not found"}]},
}

VARIANTS: list[tuple[str, str, int, Value]] = [
    ("sasl_authenticate", "response", 1, {"error_code": 58, "error_message": "Authentication failed",
                                          "auth_bytes": b"", "session_lifetime_ms": 0}),
    ("describe_user_scram_credentials", "request", 0, {"users": None}),
]

HAND_BUILT: list[tuple[str, str, int, Callable[[], tuple[Value, bytes]]]] = []
