"""ApiVersions: the version ranges of exactly the APIs the broker serves (see ``moldau.broker.apis.ADVERTISED``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from moldau.broker.request_channel import Request
from moldau.protocol.api import REGISTRY
from moldau.protocol.errors import ErrorCode

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        ApiVersionsRequest,
        ApiVersionsResponse,
        ApiVersionsResponseApiKeys,
    )


def api_versions_table(served: Iterable[int]) -> list[ApiVersionsResponseApiKeys]:
    """The ``api_keys`` of an ApiVersions answer for the served API keys (each must be declared)."""
    return [{"api_key": api.key, "min_version": api.versions[0], "max_version": api.versions[1]}
            for api in sorted((REGISTRY[k] for k in served), key=lambda a: a.key)]


def handle_api_versions(api_keys: list[ApiVersionsResponseApiKeys], request: Request, body: ApiVersionsRequest
                        ) -> ApiVersionsResponse:
    return {"error_code": ErrorCode.NONE, "api_keys": api_keys, "throttle_time_ms": 0}
