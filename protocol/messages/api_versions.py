"""ApiVersions (key 18): v0-v3. v3 is flexible in its body; the response header stays v0 (see header.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.schema import Api, F

if TYPE_CHECKING:  # the message shapes are for mypy only
    from moldau.protocol.typed import ApiVersionsRequest, ApiVersionsResponse

API_VERSIONS: Api[ApiVersionsRequest, ApiVersionsResponse] = Api(
    18, "ApiVersions", versions=(0, 3), flexible=3,
    request=[
        F("client_software_name", "string", "3+"),
        F("client_software_version", "string", "3+"),
    ],
    response=[
        F("error_code", "int16"),
        F("api_keys", [
            F("api_key", "int16"),
            F("min_version", "int16"),
            F("max_version", "int16"),
        ]),
        F("throttle_time_ms", "int32", "1+"),
        F("supported_features", [
            F("name", "string"),
            F("min_version", "int16"),
            F("max_version", "int16"),
        ], "3+", tag=0, tagged="3+"),
        F("finalized_features_epoch", "int64", "3+", tag=1, tagged="3+", default=-1),
        F("finalized_features", [
            F("name", "string"),
            F("max_version_level", "int16"),
            F("min_version_level", "int16"),
        ], "3+", tag=2, tagged="3+"),
        F("zk_migration_ready", "bool", "3+", tag=3, tagged="3+"),
    ],
)
