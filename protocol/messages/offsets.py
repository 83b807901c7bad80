"""Committed offsets: OffsetCommit, OffsetFetch and OffsetDelete.

OffsetCommit v2-v8 and OffsetFetch v1-v8: the v0/v1 commit and v0 fetch forms were ZooKeeper-backed in Kafka (and
are gone from Kafka 4.0); no client we serve needs them. v9 of both belongs to the KIP-848 consumer protocol:
OffsetCommit v9 is v8 whose generation field carries the member epoch (STALE_MEMBER_EPOCH, GROUP_ID_NOT_FOUND);
OffsetFetch v9 adds the member id and epoch. OffsetFetch v8 batches several groups in one request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.schema import Api, F

if TYPE_CHECKING:  # the message shapes are for mypy only
    from moldau.protocol.typed import (
        OffsetCommitRequest,
        OffsetCommitResponse,
        OffsetDeleteRequest,
        OffsetDeleteResponse,
        OffsetFetchRequest,
        OffsetFetchResponse,
    )

OFFSET_COMMIT: Api[OffsetCommitRequest, OffsetCommitResponse] = Api(
    8, "OffsetCommit", versions=(2, 9), flexible=8,
    request=[
        F("group_id", "string"),
        F("generation_id_or_member_epoch", "int32", "1+", default=-1),
        F("member_id", "string", "1+"),
        F("group_instance_id", "string", "7+", nullable="7+", default=None),
        F("retention_time_ms", "int64", "2-4", default=-1),
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("committed_offset", "int64"),
                F("committed_leader_epoch", "int32", "6+", default=-1),
                F("committed_metadata", "string", nullable="0+"),
            ]),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32", "3+"),
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("error_code", "int16"),
            ]),
        ]),
    ],
)

OFFSET_FETCH: Api[OffsetFetchRequest, OffsetFetchResponse] = Api(
    9, "OffsetFetch", versions=(1, 9), flexible=6,
    request=[
        F("group_id", "string", "0-7"),
        F("topics", [
            F("name", "string", "0-7"),
            F("partition_indexes", "[]int32", "0-7"),
        ], "0-7", nullable="2-7"),
        F("groups", [
            F("group_id", "string", "8+"),
            F("member_id", "string", "9+", nullable="9+", default=None),
            F("member_epoch", "int32", "9+", default=-1),
            F("topics", [
                F("name", "string", "8+"),
                F("partition_indexes", "[]int32", "8+"),
            ], "8+", nullable="8+"),
        ], "8+"),
        F("require_stable", "bool", "7+", default=False),
    ],
    response=[
        F("throttle_time_ms", "int32", "3+"),
        F("topics", [
            F("name", "string", "0-7"),
            F("partitions", [
                F("partition_index", "int32", "0-7"),
                F("committed_offset", "int64", "0-7"),
                F("committed_leader_epoch", "int32", "5-7", default=-1),
                F("metadata", "string", "0-7", nullable="0-7"),
                F("error_code", "int16", "0-7"),
            ], "0-7"),
        ], "0-7"),
        F("error_code", "int16", "2-7", default=0),
        F("groups", [
            F("group_id", "string", "8+"),
            F("topics", [
                F("name", "string", "8+"),
                F("partitions", [
                    F("partition_index", "int32", "8+"),
                    F("committed_offset", "int64", "8+"),
                    F("committed_leader_epoch", "int32", "8+", default=-1),
                    F("metadata", "string", "8+", nullable="8+"),
                    F("error_code", "int16", "8+"),
                ], "8+"),
            ], "8+"),
            F("error_code", "int16", "8+", default=0),
        ], "8+"),
    ],
)

OFFSET_DELETE: Api[OffsetDeleteRequest, OffsetDeleteResponse] = Api(
    47, "OffsetDelete", versions=(0, 0), flexible=None,
    request=[
        F("group_id", "string"),
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
            ]),
        ]),
    ],
    response=[
        F("error_code", "int16"),
        F("throttle_time_ms", "int32"),
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("error_code", "int16"),
            ]),
        ]),
    ],
)
