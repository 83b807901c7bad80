"""ApiVersions: the version ranges we support (the same table network.py uses for the v0 error answer)."""

from __future__ import annotations

from typing import Any

from moldau.broker.network import supported_api_versions
from moldau.broker.request_channel import Request
from moldau.protocol.errors import ErrorCode


def handle_api_versions(ctx: Any, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    return {"error_code": ErrorCode.NONE, "api_keys": supported_api_versions(), "throttle_time_ms": 0}
