"""Strict encoding: a key no version of the struct declares is a typo and raises, naming API, version and key.

Keys declared in other versions are accepted and ignored (clients build one dict for every version they speak);
keys left out take the field's Kafka default, as in Kafka's generated message classes, where every field has one.
"""

from __future__ import annotations

import pytest

from moldau.protocol.api import REGISTRY, ApiKey
from moldau.protocol.messages.group import HEARTBEAT
from moldau.protocol.messages.produce import PRODUCE
from moldau.protocol.schema import UnknownFieldError


def test_misspelled_top_level_response_key_raises_naming_api_version_and_key() -> None:
    with pytest.raises(UnknownFieldError) as info:
        HEARTBEAT.encode_response(3, {"throttle_time_ms": 0, "eror_code": 27})
    text = str(info.value)
    assert "Heartbeat response v3" in text and "'eror_code'" in text


def test_misspelled_nested_key_names_its_path() -> None:
    body = {"responses": [{"name": "t", "partition_responses": [{"index": 0, "eror_code": 6}]}]}
    with pytest.raises(UnknownFieldError, match=r"Produce response v7 responses\[\]\.partition_responses\[\]"):
        PRODUCE.encode_response(7, body)


def test_misspelled_request_key_raises_for_clients_too() -> None:
    with pytest.raises(UnknownFieldError, match="Heartbeat request v0.*'genration_id'"):
        HEARTBEAT.encode_request(0, {"group_id": "g", "genration_id": 1, "member_id": "m"})


def test_keys_from_other_versions_are_accepted_and_ignored() -> None:
    # group_instance_id exists from v3 and throttle_time_ms from v1: a v0 encode ignores both.
    body = {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": "i"}
    assert HEARTBEAT.encode_request(0, body) == HEARTBEAT.encode_request(0, {k: body[k] for k in list(body)[:3]})
    assert HEARTBEAT.encode_response(0, {"throttle_time_ms": 5, "error_code": 27}) == b"\x00\x1b"
    nested = {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 3, "log_start_offset": 0, "error_message": None}]}]}
    PRODUCE.encode_response(2, nested)


def test_missing_keys_take_kafka_defaults() -> None:
    assert HEARTBEAT.encode_response(1, {}) == b"\x00\x00\x00\x00\x00\x00"


def test_every_registered_encoder_rejects_an_unknown_top_level_key() -> None:
    for api in REGISTRY.values():
        for version in (api.versions[0], api.versions[1]):
            for encode in (api.encode_request, api.encode_response):
                with pytest.raises(UnknownFieldError, match="no_such_field"):
                    encode(version, {"no_such_field": 1})
    assert ApiKey.PRODUCE in REGISTRY
