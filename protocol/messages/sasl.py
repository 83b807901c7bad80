"""SASL and SCRAM-credential APIs: SaslHandshake (17, v0-1), SaslAuthenticate (36, v0-2, flexible from v2),
DescribeUserScramCredentials (50, v0) and AlterUserScramCredentials (51, v0), both flexible.

A v0 handshake is followed by raw SASL tokens (each a 4-byte length and the token, no Kafka header); v1 wraps
every token in a SaslAuthenticate request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.schema import Api, F

if TYPE_CHECKING:  # the message shapes are for mypy only
    from moldau.protocol.typed import (
        AlterUserScramCredentialsRequest,
        AlterUserScramCredentialsResponse,
        DescribeUserScramCredentialsRequest,
        DescribeUserScramCredentialsResponse,
        SaslAuthenticateRequest,
        SaslAuthenticateResponse,
        SaslHandshakeRequest,
        SaslHandshakeResponse,
    )

SASL_HANDSHAKE: Api[SaslHandshakeRequest, SaslHandshakeResponse] = Api(
    17, "SaslHandshake", versions=(0, 1), flexible=None,
    request=[F("mechanism", "string")],
    response=[
        F("error_code", "int16"),
        F("mechanisms", "[]string"),
    ],
)

SASL_AUTHENTICATE: Api[SaslAuthenticateRequest, SaslAuthenticateResponse] = Api(
    36, "SaslAuthenticate", versions=(0, 2), flexible=2,
    request=[F("auth_bytes", "bytes")],
    response=[
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("auth_bytes", "bytes"),
        F("session_lifetime_ms", "int64", "1+", default=0),
    ],
)

DESCRIBE_USER_SCRAM_CREDENTIALS: Api[DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse] = Api(
    50, "DescribeUserScramCredentials", versions=(0, 0), flexible=0,
    request=[F("users", [F("name", "string")], nullable="0+")],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("results", [
            F("user", "string"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("credential_infos", [
                F("mechanism", "int8"),
                F("iterations", "int32"),
            ]),
        ]),
    ],
)

ALTER_USER_SCRAM_CREDENTIALS: Api[AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse] = Api(
    51, "AlterUserScramCredentials", versions=(0, 0), flexible=0,
    request=[
        F("deletions", [
            F("name", "string"),
            F("mechanism", "int8"),
        ]),
        F("upsertions", [
            F("name", "string"),
            F("mechanism", "int8"),
            F("iterations", "int32"),
            F("salt", "bytes"),
            F("salted_password", "bytes"),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", [
            F("user", "string"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
        ]),
    ],
)
