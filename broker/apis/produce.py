"""Produce: validate acks, append each partition's batches, answer (or stay silent for acks=0)."""

from __future__ import annotations

from typing import Any

from broker.request_channel import Request
from protocol.errors import ErrorCode


def handle_produce(ctx: Any, request: Request, body: dict[str, Any]) -> dict[str, Any] | None:
    acks = body["acks"]
    valid_acks = acks in (-1, 0, 1)
    responses = []
    failed = False
    for t in body["topic_data"]:
        name = t["name"]
        partitions = []
        for p in t["partition_data"]:
            if not valid_acks:
                partitions.append({"index": p["index"], "error_code": ErrorCode.INVALID_REQUIRED_ACKS,
                                   "base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1})
                failed = True
                continue
            r = ctx.replica_manager.append(name, p["index"], p["records"], acks)
            failed = failed or r.error != ErrorCode.NONE
            partitions.append({"index": p["index"], "error_code": r.error, "base_offset": r.base_offset,
                               "log_append_time_ms": r.log_append_time, "log_start_offset": r.log_start_offset,
                               "error_message": r.message})
        responses.append({"name": name, "partition_responses": partitions})
    if acks == 0:
        # No response for acks=0; on failure Kafka closes the connection so the client notices.
        if failed:
            request.close_connection = True
        return None
    return {"responses": responses, "throttle_time_ms": 0}
