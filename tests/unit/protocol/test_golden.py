"""Golden-byte tests: bytes from independent encoders (see golden/generate.py) against our codec.

Each case decodes the golden bytes with our decoder and compares the result with the expected value (defaults
filled in for fields the version lacks and unset tagged fields), then encodes the value and compares with the
golden bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from moldau.protocol.api import REGISTRY, api_name
from moldau.protocol.schema import Api, F, in_range

GOLDEN = Path(__file__).resolve().parent / "golden"
CASES = sorted(GOLDEN.glob("*.json"))


def from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$hex"}:
            return bytes.fromhex(value["$hex"])
        return {k: from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_json(v) for v in value]
    return value


def fill_defaults(fields: list[F], version: int, value: dict[str, Any]) -> dict[str, Any]:
    """The value our decoder should produce: every declared field, defaults where ``value`` has none."""
    out: dict[str, Any] = {}
    for f in fields:
        if f.name not in value:
            out[f.name] = f.default_for(version)
            continue
        v = value[f.name]
        if v is not None and in_range(version, f.versions):
            if f.kind() == "struct_array":
                v = [fill_defaults(f.subfields(), version, item) for item in v]
            elif f.kind() == "struct":
                v = fill_defaults(f.subfields(), version, v)
        out[f.name] = v
    unknown = set(value) - {f.name for f in fields}
    assert not unknown, f"golden value has fields we do not declare: {unknown}"
    return out


def plain(value: Any) -> Any:
    """memoryviews (records fields) to bytes, so comparisons and diffs read naturally."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, memoryview):
        return value.tobytes()
    return value


def load(path: Path) -> tuple[dict[str, Any], Api, int, bool]:
    case = json.loads(path.read_text())
    api = REGISTRY[case["api_key"]]
    return case, api, case["api_version"], case["kind"] == "request"


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_decode_golden(path: Path) -> None:
    case, api, version, is_request = load(path)
    data = bytes.fromhex(case["hex"])
    fields = api.request if is_request else api.response
    decoder = api.request_decoder(version) if is_request else api.response_decoder(version)
    decoded, end = decoder(memoryview(data), 0)
    assert end == len(data), "decoder did not consume the whole message"
    assert plain(decoded) == fill_defaults(fields, version, from_json(case["body"]))


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_encode_golden(path: Path) -> None:
    case, api, version, is_request = load(path)
    data = bytes.fromhex(case["hex"])
    fields = api.request if is_request else api.response
    encode = api.encode_request if is_request else api.encode_response
    body = from_json(case["body"])
    assert encode(version, fill_defaults(fields, version, body)).hex() == data.hex()
    assert encode(version, body).hex() == data.hex(), "encoder did not fill defaults like the decoder"


def test_every_advertised_version_has_golden_cases() -> None:
    """An API with golden cases has a request and a response case for every version it advertises."""
    names = {p.stem for p in CASES}
    covered = {json.loads(p.read_text())["api_key"] for p in CASES}
    assert covered, "no golden cases"
    missing = [f"{api_name(key)}_{kind}_v{v}_000" for key in sorted(covered) for api in [REGISTRY[key]]
               for v in range(api.versions[0], api.versions[1] + 1) for kind in ("request", "response")
               if f"{api_name(key)}_{kind}_v{v}_000" not in names]
    assert not missing, "run golden/generate.py (or extend it) for: " + ", ".join(missing)


def test_registered_apis_without_golden_cases() -> None:
    covered = {json.loads(p.read_text())["api_key"] for p in CASES}
    others = sorted(api_name(k) for k in REGISTRY if k not in covered)
    if others:
        pytest.skip("no golden/ cases (tested elsewhere or not yet): " + ", ".join(others))


def test_case_files_are_consistent() -> None:
    for path in CASES:
        case = json.loads(path.read_text())
        assert case["name"] == path.stem
        api = REGISTRY[case["api_key"]]
        assert path.stem.startswith(f"{api_name(api.key)}_{case['kind']}_v{case['api_version']}_")
        assert api.supports(case["api_version"]), f"{path.stem}: version not advertised"
        assert case["sources"] and not any("moldau" in s.lower() for s in case["sources"])
