"""Check our message declarations against Apache Kafka's JSON message definitions.

The definitions are reference data kept next to the repository (``../shared/reference/kafka-message-schemas``);
the module is skipped where they are absent. For every registered API and every version we support, the fields
present in that version must match Kafka's, recursively and in wire order: snake_case name, type, nullability,
tag number and tagged versions, and any default Kafka declares. The flexible version and the supported range are
checked too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from moldau.protocol import schema
from moldau.protocol.api import REGISTRY
from moldau.protocol.schema import Api, F, in_range

REFERENCE = Path(__file__).resolve().parents[3] / ".." / "shared" / "reference" / "kafka-message-schemas"

if not REFERENCE.is_dir():
    pytest.skip(f"Kafka message definitions not found at {REFERENCE}", allow_module_level=True)

KafkaField = dict[str, Any]


def strip_comments(text: str) -> str:
    """Remove // comments outside JSON strings (strings may contain URLs with '//')."""
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(strip_comments((REFERENCE / f"{name}.json").read_text()))
    common = {s["name"]: s["fields"] for s in data.get("commonStructs", [])}
    if common:
        _resolve_common(data["fields"], common)
    return data


def _resolve_common(fields: list[KafkaField], common: dict[str, list[KafkaField]]) -> None:
    for f in fields:
        struct_name = f["type"][2:] if f["type"].startswith("[]") else f["type"]
        if "fields" not in f and struct_name in common:
            f["fields"] = common[struct_name]
        if "fields" in f:
            _resolve_common(f["fields"], common)


def snake(name: str) -> str:
    name = name.replace("KRaft", "Kraft")  # isKRaftController -> is_kraft_controller, one word as Kafka says it
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


def kafka_kind(f: KafkaField) -> tuple[str, str]:
    """(kind, primitive type or element type) for a Kafka field, in our vocabulary."""
    t = f["type"]
    if t.startswith("[]"):
        elem = t[2:]
        return ("struct_array", "") if elem[:1].isupper() else ("array", elem)
    if t[:1].isupper():
        return ("struct", "")
    return ("primitive", t)


def our_kind(f: F) -> tuple[str, str]:
    kind = f.kind()
    if kind == "array":
        return kind, str(f.type)[2:]
    if kind == "primitive":
        return kind, str(f.type)
    return kind, ""


def parse_default(raw: Any, type_name: str) -> Any:
    if raw == "null":
        return None
    if type_name == "bool":
        return raw in (True, "true")
    if type_name in ("string",):
        return raw
    if isinstance(raw, int):
        return raw
    return int(raw, 0)


def compare_fields(kfields: list[KafkaField], ours: list[F], version: int, flexible: bool,
                   path: str) -> list[str]:
    """Differences between Kafka's and our field lists as present in ``version``."""
    problems: list[str] = []
    kpresent = [f for f in kfields if in_range(version, f.get("versions"))]
    opresent = [f for f in ours if in_range(version, f.versions)]
    knames = [snake(f["name"]) for f in kpresent]
    onames = [f.name for f in opresent]
    if knames != onames:
        return [f"{path}: fields {onames} != Kafka's {knames}"]
    for kf, of in zip(kpresent, opresent):
        where = f"{path}.{of.name}"
        kkind, okind = kafka_kind(kf), our_kind(of)
        if kkind != okind:
            problems.append(f"{where}: type {okind} != Kafka's {kkind} ({kf['type']})")
            continue
        knull = in_range(version, kf.get("nullableVersions"))
        onull = of.nullable is not None and in_range(version, of.nullable)
        if knull != onull:
            problems.append(f"{where}: nullable {onull} != Kafka's {knull}")
        ktagged = flexible and "tag" in kf and in_range(version, kf.get("taggedVersions"))
        otagged = flexible and of.tag is not None and in_range(version, of.tagged)
        if ktagged != otagged:
            problems.append(f"{where}: tagged {otagged} != Kafka's {ktagged}")
        if kf.get("tag") != of.tag:
            problems.append(f"{where}: tag {of.tag} != Kafka's {kf.get('tag')}")
        if "default" in kf:
            expected = parse_default(kf["default"], kkind[1])
            actual = of.default_for(version)
            if actual != expected or type(actual) is not type(expected):
                problems.append(f"{where}: default {actual!r} != Kafka's {expected!r}")
        elif of.default is not schema._MISSING:
            problems.append(f"{where}: declares default {of.default!r}; Kafka declares none")
        if kkind[0] in ("struct", "struct_array"):
            problems += compare_fields(kf.get("fields", []), of.subfields(), version, flexible, where)
    return problems


def cases() -> list[tuple[Api, int, str]]:
    return [(api, v, direction) for api in REGISTRY.values()
            for v in range(api.versions[0], api.versions[1] + 1) for direction in ("request", "response")]


@pytest.mark.parametrize("api", list(REGISTRY.values()), ids=lambda a: a.name)
def test_api_header(api: Api) -> None:
    for direction in ("Request", "Response"):
        data = load(api.name + direction)
        assert data["apiKey"] == api.key
        lo, hi = schema.parse_versions(data["validVersions"])
        assert lo <= api.versions[0] <= api.versions[1] <= hi, f"{api.name}: {api.versions} outside {lo}-{hi}"
        flex_lo, flex_hi = schema.parse_versions(data["flexibleVersions"])
        for v in range(api.versions[0], api.versions[1] + 1):
            assert api.is_flexible(v) == (flex_lo <= v <= flex_hi), f"{api.name}{direction} v{v} flexibility"


@pytest.mark.parametrize(("api", "version", "direction"), cases(),
                         ids=lambda x: x.name if isinstance(x, Api) else str(x))
def test_fields_match_kafka(api: Api, version: int, direction: str) -> None:
    data = load(api.name + direction.capitalize())
    ours = api.request if direction == "request" else api.response
    problems = compare_fields(data["fields"], ours, version, api.is_flexible(version),
                              f"{api.name}{direction.capitalize()}v{version}")
    assert not problems, "\n".join(problems)


def test_declarations_have_no_fields_outside_supported_versions() -> None:
    """A field that exists in none of the supported versions is dead weight (and untested)."""
    def walk(fields: list[F], lo: int, hi: int, path: str) -> list[str]:
        dead: list[str] = []
        for f in fields:
            if not any(in_range(v, f.versions) for v in range(lo, hi + 1)):
                dead.append(f"{path}.{f.name}")
            elif f.kind() in ("struct", "struct_array"):
                dead += walk(f.subfields(), lo, hi, f"{path}.{f.name}")
        return dead

    dead = [d for api in REGISTRY.values() for side, fields in (("req", api.request), ("resp", api.response))
            for d in walk(fields, *api.versions, f"{api.name}.{side}")]
    assert not dead


def test_snake_case() -> None:
    assert snake("ThrottleTimeMs") == "throttle_time_ms"
    assert snake("timeoutMs") == "timeout_ms"
    assert snake("ZkMigrationReady") == "zk_migration_ready"
    assert snake("ClusterId") == "cluster_id"
    assert snake("isKRaftController") == "is_kraft_controller"
    assert snake("V0Host") == "v0_host"
    assert strip_comments('// c\n{"a": "http://x"} // t\n') == '\n{"a": "http://x"} \n'
