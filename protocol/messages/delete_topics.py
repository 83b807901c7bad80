"""DeleteTopics (key 20): v0-v6, flexible from v4.

Up to v5 the request names topics in ``topic_names``; v6 replaces it with ``topics`` entries that carry a name or a
topic ID.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.schema import Api, F

if TYPE_CHECKING:  # the message shapes are for mypy only
    from moldau.protocol.typed import DeleteTopicsRequest, DeleteTopicsResponse

DELETE_TOPICS: Api[DeleteTopicsRequest, DeleteTopicsResponse] = Api(
    20, "DeleteTopics", versions=(0, 6), flexible=4,
    request=[
        F("topics", [
            F("name", "string", "6+", nullable="6+", default=None),
            F("topic_id", "uuid", "6+"),
        ], "6+"),
        F("topic_names", "[]string", "0-5"),
        F("timeout_ms", "int32"),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F("responses", [
            F("name", "string", nullable="6+"),
            F("topic_id", "uuid", "6+"),
            F("error_code", "int16"),
            F("error_message", "string", "5+", nullable="5+", default=None),
        ]),
    ],
)
