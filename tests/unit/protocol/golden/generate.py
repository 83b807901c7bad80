"""Generate the golden-byte cases in this directory (one JSON file per case).

Where the bytes come from -- never from Moldau's own codec:

* kafka-python 3.0's message classes (``kafka.protocol.producer``, ``.consumer``, ``.metadata``, ``.admin``):
  kafka-python builds them at import time from its bundled copy of Kafka's JSON message definitions and encodes
  with its own codec. Every case is encoded with them.
* kafka-python's hand-written ``kafka.protocol.old`` Struct classes and aiokafka 0.14's ``aiokafka.protocol``
  Struct classes: every non-flexible version either library declares is encoded with them as well, and the
  generator stops unless all encodings are byte-identical (the ``sources`` list of a case names them all).
* Hand-built bytes: the cases in ``hand_built.py`` are written field by field with ``struct.pack`` following the
  protocol guide (https://kafka.apache.org/protocol.html) -- compact strings/arrays as unsigned varint length + 1,
  a tagged-field section after every flexible struct -- one request and one response per API at a flexible
  version, since those versions have only one library encoder. The generator also checks them against
  kafka-python.

Each case stores the message body (no header, no size prefix) as ``hex`` and the decoded value as ``body``: the
fields present in that version, keyed by snake_case names; bytes and UUIDs are written as ``{"$hex": "..."}``.
Fields absent from ``body`` (other versions' fields, unset tagged fields) take their declared defaults.

Run from the repository root: ``.venv/bin/python tests/unit/protocol/golden/generate.py``
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiokafka
import kafka
from kafka.protocol import admin, consumer, metadata, producer

sys.path.insert(0, str(Path(__file__).resolve().parent))
import acl_cases  # noqa: E402
import config_cases  # noqa: E402
import consumer_group_cases  # noqa: E402
import group_cases  # noqa: E402
import inter_broker_cases  # noqa: E402
import partition_admin_cases  # noqa: E402
import quota_cases  # noqa: E402
import security_cases  # noqa: E402
import txn_cases  # noqa: E402
import txn_log_cases  # noqa: E402
from hand_built import BATCH, HAND_BUILT, MIN_INT32, TOPIC_ID, ZERO_ID, Value  # noqa: E402

HERE = Path(__file__).resolve().parent


# ------------------------------------------------------------------ sample messages (Kafka wire order)
# Each sample holds every field of every version we advertise; ``project`` keeps the fields of one version.

SAMPLES: dict[tuple[str, str], Value] = {
    ("produce", "request"): {
        "transactional_id": None, "acks": -1, "timeout_ms": 30000,
        "topic_data": [{"name": "orders", "partition_data": [{"index": 0, "records": BATCH}]}],
    },
    ("produce", "response"): {
        "responses": [{"name": "orders", "partition_responses": [
            {"index": 0, "error_code": 0, "base_offset": 42, "log_append_time_ms": -1, "log_start_offset": 0,
             "record_errors": [], "error_message": None},
            {"index": 2, "error_code": 87, "base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1,
             "record_errors": [{"batch_index": 1, "batch_index_error_message": "bad key"}],
             "error_message": "invalid record"},
        ]}],
        "throttle_time_ms": 0,
    },
    ("fetch", "request"): {
        "replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800, "isolation_level": 1,
        "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": "orders", "partitions": [
            {"partition": 0, "current_leader_epoch": 5, "fetch_offset": 100, "last_fetched_epoch": 4,
             "log_start_offset": -1, "partition_max_bytes": 1048576},
            {"partition": 1, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": 1048576},
        ]}],
        "forgotten_topics_data": [{"topic": "old", "partitions": [1, 2]}],
        "rack_id": "rack-a",
    },
    ("fetch", "response"): {
        "throttle_time_ms": 0, "error_code": 0, "session_id": 0,
        "responses": [{"topic": "orders", "partitions": [
            {"partition_index": 0, "error_code": 0, "high_watermark": 120, "last_stable_offset": 120,
             "log_start_offset": 0, "aborted_transactions": [{"producer_id": 7, "first_offset": 101}],
             "preferred_read_replica": -1, "records": BATCH},
            {"partition_index": 1, "error_code": 1, "high_watermark": -1, "last_stable_offset": -1,
             "log_start_offset": -1, "aborted_transactions": None, "preferred_read_replica": -1, "records": None},
        ]}],
    },
    ("list_offsets", "request"): {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": "orders", "partitions": [
            {"partition_index": 0, "current_leader_epoch": 5, "timestamp": -1, "max_num_offsets": 1},
            {"partition_index": 1, "current_leader_epoch": -1, "timestamp": 1_700_000_000_000,
             "max_num_offsets": 1},
        ]}],
    },
    ("list_offsets", "response"): {
        "throttle_time_ms": 0,
        "topics": [{"name": "orders", "partitions": [
            {"partition_index": 0, "error_code": 0, "old_style_offsets": [120], "timestamp": -1, "offset": 120,
             "leader_epoch": 5},
            {"partition_index": 1, "error_code": 3, "old_style_offsets": [], "timestamp": -1, "offset": -1,
             "leader_epoch": -1},
        ]}],
    },
    ("metadata", "request"): {
        "topics": [{"topic_id": ZERO_ID, "name": "orders"}, {"topic_id": ZERO_ID, "name": "payments"}],
        "allow_auto_topic_creation": False, "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": True,
    },
    ("metadata", "response"): {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": 1, "host": "broker1.example", "port": 9092, "rack": "rack-a"},
                    {"node_id": 2, "host": "broker2.example", "port": 9093, "rack": None}],
        "cluster_id": "moldau-cluster", "controller_id": 1,
        "topics": [{"error_code": 0, "name": "orders", "topic_id": TOPIC_ID, "is_internal": False, "partitions": [
            {"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": 3, "replica_nodes": [1, 2],
             "isr_nodes": [1, 2], "offline_replicas": []},
            {"error_code": 9, "partition_index": 1, "leader_id": 2, "leader_epoch": 0, "replica_nodes": [2, 1],
             "isr_nodes": [2], "offline_replicas": [1]},
        ], "topic_authorized_operations": MIN_INT32}],
        "cluster_authorized_operations": MIN_INT32,
    },
    ("api_versions", "request"): {"client_software_name": "moldau-tests", "client_software_version": "0.1.0"},
    ("api_versions", "response"): {
        "error_code": 0,
        "api_keys": [{"api_key": 0, "min_version": 0, "max_version": 9},
                     {"api_key": 1, "min_version": 4, "max_version": 12},
                     {"api_key": 18, "min_version": 0, "max_version": 3}],
        "throttle_time_ms": 0,
    },
    ("create_topics", "request"): {
        "topics": [
            {"name": "orders", "num_partitions": 3, "replication_factor": 2, "assignments": [],
             "configs": [{"name": "cleanup.policy", "value": "compact"}, {"name": "retention.ms", "value": None}]},
            {"name": "manual", "num_partitions": -1, "replication_factor": -1,
             "assignments": [{"partition_index": 0, "broker_ids": [1, 2]},
                             {"partition_index": 1, "broker_ids": [2, 1]}],
             "configs": []},
        ],
        "timeout_ms": 30000, "validate_only": False,
    },
    ("create_topics", "response"): {
        "throttle_time_ms": 0,
        "topics": [
            {"name": "orders", "topic_id": TOPIC_ID, "error_code": 0, "error_message": None, "num_partitions": 3,
             "replication_factor": 2,
             "configs": [{"name": "cleanup.policy", "value": "compact", "read_only": False, "config_source": 1,
                          "is_sensitive": False}]},
            {"name": "manual", "topic_id": ZERO_ID, "error_code": 36,
             "error_message": "Topic 'manual' already exists.", "num_partitions": -1, "replication_factor": -1,
             "configs": None},
        ],
    },
    ("delete_topics", "request"): {
        "topics": [{"name": "orders", "topic_id": ZERO_ID}, {"name": None, "topic_id": TOPIC_ID}],
        "topic_names": ["orders", "payments"], "timeout_ms": 30000,
    },
    ("delete_topics", "response"): {
        "throttle_time_ms": 0,
        "responses": [
            {"name": "orders", "topic_id": TOPIC_ID, "error_code": 0, "error_message": None},
            {"name": "missing", "topic_id": ZERO_ID, "error_code": 3,
             "error_message": "This server does not host this topic-partition."},
        ],
    },
    ("init_producer_id", "request"): {
        "transactional_id": None, "transaction_timeout_ms": 2147483647, "producer_id": -1, "producer_epoch": -1,
    },
    ("init_producer_id", "response"): {
        "throttle_time_ms": 0, "error_code": 0, "producer_id": 4000, "producer_epoch": 0,
    },
}

# Extra cases (_001, ...) from the same encoders: nulls and values the main samples do not exercise.
VARIANTS: list[tuple[str, str, int, Value]] = [
    ("produce", "request", 3, {"transactional_id": "txn-1", "acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": "orders", "partition_data": [{"index": 0, "records": BATCH}, {"index": 1, "records": None}]}]}),
    ("metadata", "request", 0, {"topics": []}),
    ("metadata", "request", 1, {"topics": None}),
    ("metadata", "request", 4, {"topics": None, "allow_auto_topic_creation": True}),
    ("fetch", "request", 4, {**SAMPLES[("fetch", "request")], "topics": [], "isolation_level": 0}),
    ("init_producer_id", "request", 0, {"transactional_id": "txn-1", "transaction_timeout_ms": 60000}),
]


# ------------------------------------------------------------------ the APIs and their encoders

class ApiInfo:
    def __init__(self, key: int, versions: range, new: tuple[Any, Any], old: tuple[str, str, str] | None,
                 aio: tuple[str, str, str] | None) -> None:
        self.key = key
        self.versions = versions
        self.new = {"request": new[0], "response": new[1]}
        self.old = old  # (module, request class prefix, response class prefix)
        self.aio = aio


APIS: dict[str, ApiInfo] = {
    "produce": ApiInfo(0, range(0, 10), (producer.ProduceRequest, producer.ProduceResponse),
                       ("produce", "ProduceRequest", "ProduceResponse"),
                       ("produce", "ProduceRequest", "ProduceResponse")),
    "fetch": ApiInfo(1, range(4, 13), (consumer.FetchRequest, consumer.FetchResponse),
                     ("fetch", "FetchRequest", "FetchResponse"), ("fetch", "FetchRequest", "FetchResponse")),
    "list_offsets": ApiInfo(2, range(0, 9), (consumer.ListOffsetsRequest, consumer.ListOffsetsResponse),
                            ("list_offsets", "ListOffsetsRequest", "ListOffsetsResponse"),
                            ("offset", "OffsetRequest", "OffsetResponse")),
    "metadata": ApiInfo(3, range(0, 13), (metadata.MetadataRequest, metadata.MetadataResponse),
                        ("metadata", "MetadataRequest", "MetadataResponse"),
                        ("metadata", "MetadataRequest", "MetadataResponse")),
    "api_versions": ApiInfo(18, range(0, 4), (metadata.ApiVersionsRequest, metadata.ApiVersionsResponse),
                            ("api_versions", "ApiVersionsRequest", "ApiVersionsResponse"),
                            ("admin", "ApiVersionRequest", "ApiVersionResponse")),
    "create_topics": ApiInfo(19, range(0, 8), (admin.CreateTopicsRequest, admin.CreateTopicsResponse),
                             ("admin", "CreateTopicsRequest", "CreateTopicsResponse"),
                             ("admin", "CreateTopicsRequest", "CreateTopicsResponse")),
    "delete_topics": ApiInfo(20, range(0, 7), (admin.DeleteTopicsRequest, admin.DeleteTopicsResponse),
                             ("admin", "DeleteTopicsRequest", "DeleteTopicsResponse"),
                             ("admin", "DeleteTopicsRequest", "DeleteTopicsResponse")),
    "init_producer_id": ApiInfo(22, range(0, 5),
                                (producer.InitProducerIdRequest, producer.InitProducerIdResponse),
                                ("init_producer_id", "InitProducerIdRequest", "InitProducerIdResponse"),
                                ("transaction", "InitProducerIdRequest", "InitProducerIdResponse")),
}


# kafka-python renames Metadata's authorized-operations fields and types them as sets of bit numbers.
RENAMED = {"topic_authorized_operations": "authorized_operations",
           "cluster_authorized_operations": "authorized_operations"}

# The inter-broker APIs (see inter_broker_cases.py: kafka-python's codec over Kafka's own definitions).
SAMPLES.update(inter_broker_cases.SAMPLES)
VARIANTS += inter_broker_cases.VARIANTS
HAND_BUILT = HAND_BUILT + inter_broker_cases.HAND_BUILT
APIS.update({name: ApiInfo(*spec) for name, spec in inter_broker_cases.API_SPECS.items()})
RENAMED.update(inter_broker_cases.RENAMED)

# The group and offset APIs (see group_cases.py).
SAMPLES.update(group_cases.SAMPLES)
VARIANTS += group_cases.VARIANTS
HAND_BUILT = HAND_BUILT + group_cases.HAND_BUILT
APIS.update({name: ApiInfo(*spec) for name, spec in group_cases.API_SPECS.items()})
RENAMED.update(group_cases.RENAMED)

# The partition and record admin APIs (see partition_admin_cases.py).
SAMPLES.update(partition_admin_cases.SAMPLES)
VARIANTS += partition_admin_cases.VARIANTS
HAND_BUILT = HAND_BUILT + partition_admin_cases.HAND_BUILT
APIS.update({name: ApiInfo(*spec) for name, spec in partition_admin_cases.API_SPECS.items()})
RENAMED.update(partition_admin_cases.RENAMED)

# The config APIs (see config_cases.py).
SAMPLES.update(config_cases.SAMPLES)
VARIANTS += config_cases.VARIANTS
HAND_BUILT = HAND_BUILT + config_cases.HAND_BUILT
APIS.update({name: ApiInfo(*spec) for name, spec in config_cases.API_SPECS.items()})
RENAMED.update(config_cases.RENAMED)
# The SASL and SCRAM-user APIs (see security_cases.py).
SAMPLES.update(security_cases.SAMPLES)
VARIANTS += security_cases.VARIANTS
HAND_BUILT = HAND_BUILT + security_cases.HAND_BUILT
APIS.update({name: ApiInfo(*spec) for name, spec in security_cases.API_SPECS.items()})
RENAMED.update(security_cases.RENAMED)
# The ACL APIs (see acl_cases.py).
SAMPLES.update(acl_cases.SAMPLES)
VARIANTS += acl_cases.VARIANTS
HAND_BUILT = HAND_BUILT + acl_cases.HAND_BUILT
APIS.update({name: ApiInfo(*spec) for name, spec in acl_cases.API_SPECS.items()})
RENAMED.update(acl_cases.RENAMED)
# The transaction APIs (see txn_cases.py).
SAMPLES.update(txn_cases.SAMPLES)
VARIANTS += txn_cases.VARIANTS
HAND_BUILT = HAND_BUILT + txn_cases.HAND_BUILT
APIS.update({name: ApiInfo(*spec) for name, spec in txn_cases.API_SPECS.items()})
RENAMED.update(txn_cases.RENAMED)
# The partition side of transactions (see txn_log_cases.py).
SAMPLES.update(txn_log_cases.SAMPLES)
VARIANTS += txn_log_cases.VARIANTS
HAND_BUILT = HAND_BUILT + txn_log_cases.HAND_BUILT
APIS.update({name: ApiInfo(*spec) for name, spec in txn_log_cases.API_SPECS.items()})
RENAMED.update(txn_log_cases.RENAMED)
# The client quota APIs (see quota_cases.py).
SAMPLES.update(quota_cases.SAMPLES)
VARIANTS += quota_cases.VARIANTS
HAND_BUILT = HAND_BUILT + quota_cases.HAND_BUILT
APIS.update({name: ApiInfo(*spec) for name, spec in quota_cases.API_SPECS.items()})
RENAMED.update(quota_cases.RENAMED)


def bit_set(v: int) -> set[int]:
    return {bit for bit in range(32) if (v & 0xFFFFFFFF) >> bit & 1}


def kp_field(fields: dict[str, Any], name: str) -> Any:
    return fields[name] if name in fields else fields[RENAMED[name]]


def project(fields: dict[str, Any], sample: Value, version: int, path: str) -> Value:
    """The fields of ``sample`` present in ``version``, by kafka-python's reading of Kafka's definitions."""
    out: Value = {}
    for kp_name, field in fields.items():
        names = [n for n in sample if n == kp_name or RENAMED.get(n) == kp_name] or [kp_name]
        name = names[0]
        if not field.for_version_q(version):
            continue
        if name not in sample:
            if field.tagged_field_q(version):
                continue  # unset tagged field
            raise KeyError(f"sample lacks {path}.{name} (v{version})")
        value = sample[name]
        if value is not None and field.is_struct_array():
            value = [project(field.fields, item, version, f"{path}.{name}") for item in value]
        elif value is not None and field.is_struct():
            value = project(field.fields, value, version, f"{path}.{name}")
        out[name] = value
    extra = {n for n in sample if n not in fields and RENAMED.get(n) not in fields}
    if extra:
        raise KeyError(f"{path}: unknown fields {extra}")
    return out


def build_new(fields: dict[str, Any], value: Value, factory: Callable[..., Any]) -> Any:
    kwargs = {}
    for name, v in value.items():
        field = kp_field(fields, name)
        if v is not None and field.is_struct_array():
            v = [build_new(field.fields, item, field.data_class) for item in v]
        elif v is not None and field.is_struct():
            v = build_new(field.fields, v, field.data_class)
        elif getattr(getattr(field, "_type", None), "__name__", "") == "BitField":
            v = bit_set(v)
        kwargs[field.name] = v
    return factory(**kwargs)


def encode_new(cls: Any, version: int, value: Value) -> bytes:
    message = build_new(cls._struct.fields, value, functools.partial(cls, version=version))
    return bytes(message.encode())


def positional(schema: Any, value: Any) -> Any:
    """Dicts (in wire order) to tuples for the Struct-style classes, following their ``Schema``.

    A struct of one field and that field alone are the same bytes; some hand-written classes declare an array of
    such structs as an array of the field (Metadata v0-v8 request topics as an array of strings).
    """
    if isinstance(value, dict):
        if not hasattr(schema, "names"):
            (only,) = value.values()
            return positional(schema, only)
        if len(schema.fields) != len(value):
            raise AssertionError(f"{list(schema.names)} does not match {list(value)}")
        return tuple(positional(t, v) for t, v in zip(schema.fields, value.values()))
    if isinstance(value, list):
        return [positional(schema.array_of, v) for v in value]
    if getattr(schema, "__name__", "") == "BitField":
        return bit_set(value)
    return value


# Struct classes that are wrong and unused by their own library; they are left out of the cross-check.
KNOWN_BAD = {
    # current_leader_epoch declared as Int64 instead of Int32; aiokafka never sends ListOffsets v4/v5.
    "aiokafka.protocol.offset.OffsetRequest_v4", "aiokafka.protocol.offset.OffsetRequest_v5",
}


def struct_sources(api: ApiInfo, kind: str, version: int) -> list[tuple[str, Any]]:
    """The hand-written Struct classes of kafka-python (old) and aiokafka for this version, if any."""
    found = []
    for package, names in (("kafka.protocol.old", api.old), ("aiokafka.protocol", api.aio)):
        if names is None:
            continue
        module, req, resp = names
        mod = importlib.import_module(f"{package}.{module}")
        name = f"{req if kind == 'request' else resp}_v{version}"
        cls = getattr(mod, name, None)
        if cls is not None and f"{package}.{module}.{name}" not in KNOWN_BAD:
            found.append((f"{package}.{module}.{name}", cls))
    return found


def encode_all(api: ApiInfo, kind: str, version: int, value: Value) -> tuple[bytes, list[str]]:
    new_cls = api.new[kind]
    data = encode_new(new_cls, version, value)
    sources = [getattr(new_cls, "golden_source", None)
               or f"kafka-python {kafka.__version__} {new_cls.__module__}.{new_cls.__name__}"]
    if not new_cls.flexible_version_q(version):
        for label, cls in struct_sources(api, kind, version):
            other = bytes(cls(*positional(cls.SCHEMA, value)).encode())
            if other != data:
                raise AssertionError(f"{label} disagrees with kafka-python:\n{other.hex()}\n{data.hex()}")
            sources.append(label if label.startswith("kafka") else f"aiokafka {aiokafka.__version__} {label}")
    return data, sources


def to_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_json(v) for v in value]
    if isinstance(value, uuid.UUID):
        return {"$hex": value.bytes.hex()}
    if isinstance(value, (bytes, bytearray)):
        return {"$hex": bytes(value).hex()}
    return value


def write_case(name: str, api: ApiInfo, kind: str, version: int, sources: list[str], data: bytes,
               value: Value) -> None:
    case = {"name": name, "api_key": api.key, "api_version": version, "kind": kind, "sources": sources,
            "hex": data.hex(), "body": to_json(value)}
    (HERE / f"{name}.json").write_text(json.dumps(case, indent=1) + "\n")


def main() -> int:
    for old in HERE.glob("*.json"):
        old.unlink()
    count = 0
    serial: dict[str, int] = {}

    def next_name(api_name: str, kind: str, version: int) -> str:
        stem = f"{api_name}_{kind}_v{version}"
        serial[stem] = serial.get(stem, -1) + 1
        return f"{stem}_{serial[stem]:03d}"

    for api_name, api in APIS.items():
        for kind in ("request", "response"):
            fields = api.new[kind]._struct.fields
            for version in api.versions:
                value = project(fields, SAMPLES[(api_name, kind)], version, api_name)
                data, sources = encode_all(api, kind, version, value)
                write_case(next_name(api_name, kind, version), api, kind, version, sources, data, value)
                count += 1
    for api_name, kind, version, sample in VARIANTS:
        api = APIS[api_name]
        value = project(api.new[kind]._struct.fields, sample, version, api_name)
        data, sources = encode_all(api, kind, version, value)
        write_case(next_name(api_name, kind, version), api, kind, version, sources, data, value)
        count += 1
    for api_name, kind, version, make in HAND_BUILT:
        api = APIS[api_name]
        value, data = make()
        if project(api.new[kind]._struct.fields, value, version, api_name) != value:
            raise AssertionError(f"{make.__name__}: value has fields outside v{version}")
        library, sources = encode_all(api, kind, version, value)
        if library != data:
            raise AssertionError(f"{make.__name__} disagrees with kafka-python:\n{data.hex()}\n{library.hex()}")
        write_case(next_name(api_name, kind, version), api, kind, version,
                   [f"hand-built: {make.__module__}.py {make.__name__}"] + sources, data, value)
        count += 1
    for api_name, key, kind, version, make in consumer_group_cases.CASES:  # hand-built only (no library has them)
        value, data = make()
        case = {"name": next_name(api_name, kind, version), "api_key": key, "api_version": version, "kind": kind,
                "sources": [f"hand-built: consumer_group_cases.py {make.__name__}"], "hex": data.hex(),
                "body": to_json(value)}
        (HERE / f"{case['name']}.json").write_text(json.dumps(case, indent=1) + "\n")
        count += 1
    print(f"wrote {count} cases to {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
