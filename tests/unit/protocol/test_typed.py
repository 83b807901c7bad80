"""moldau.protocol.typed is generated from the declarations: it must be current and match what the codec does."""

from __future__ import annotations

from typing import Any

import pytest

from moldau.protocol import gen_typed, typed
from moldau.protocol.api import REGISTRY
from moldau.protocol.schema import Api


def test_checked_in_module_is_current() -> None:
    # A declaration changed without `python -m moldau.protocol.gen_typed` fails here (and so in CI).
    assert gen_typed.TARGET.read_text(encoding="utf-8") == gen_typed.render(), \
        "protocol/typed.py is stale: run python -m moldau.protocol.gen_typed"


def test_check_mode_reports_a_stale_module(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = tmp_path / "typed.py"
    stale.write_text(gen_typed.render().replace("error_code: int", "eror_code: int", 1), encoding="utf-8")
    monkeypatch.setattr(gen_typed, "TARGET", stale)
    assert gen_typed.main(["--check"]) == 1
    monkeypatch.setattr(gen_typed, "TARGET", gen_typed.TARGET.with_name("missing.py"))
    assert gen_typed.main(["--check"]) == 1


def test_every_api_declaration_is_typed_by_its_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    # The annotation `PRODUCE: Api[ProduceRequest, ProduceResponse]` is what types send() and the route table;
    # a new API declared without it (or with another API's shapes) fails --check.
    assert gen_typed.annotation_problems() == []
    from moldau.protocol.messages import fetch

    monkeypatch.setitem(fetch.__annotations__, "FETCH", "Api[ProduceRequest, ProduceResponse]")
    assert gen_typed.annotation_problems() == [
        "moldau.protocol.messages.fetch.FETCH must be annotated `FETCH: Api[FetchRequest, FetchResponse] = Api(...)`"]
    assert gen_typed.main(["--check"]) == 1


def _keys(cls: Any) -> set[str]:
    return set(cls.__required_keys__) | set(cls.__optional_keys__)


@pytest.mark.parametrize("api", sorted(REGISTRY.values(), key=lambda a: a.key), ids=lambda a: a.name)
def test_typed_keys_are_the_decoded_keys_in_every_version(api: Api) -> None:
    request, response = getattr(typed, f"{api.name}Request"), getattr(typed, f"{api.name}Response")
    for version in range(api.versions[0], api.versions[1] + 1):
        for cls, enc, dec in ((request, api.request_encoder, api.request_decoder),
                              (response, api.response_encoder, api.response_decoder)):
            buf = bytearray()
            enc(version)(buf, [], {})
            decoded, _ = dec(version)(bytes(buf), 0)
            assert set(decoded) == _keys(cls), (cls.__name__, version)


def test_required_keys_follow_the_rule() -> None:
    # Heartbeat: error_code is in every version without a default; throttle_time_ms only from v1.
    assert typed.HeartbeatResponse.__required_keys__ == {"error_code"}
    assert typed.HeartbeatResponse.__optional_keys__ == {"throttle_time_ms"}
    # Declared defaults (leader_epoch -1) and versioned fields (offline_replicas v5+) may be left out.
    part = typed.MetadataResponseTopicsPartitions
    assert {"error_code", "partition_index", "leader_id", "replica_nodes", "isr_nodes"} == part.__required_keys__
    assert {"leader_epoch", "offline_replicas"} == part.__optional_keys__
    # Entries of a versioned array are required relative to the versions the array exists in.
    assert "node_id" in typed.FindCoordinatorResponseCoordinators.__required_keys__


def test_mypy_rejects_a_misspelled_or_missing_field(tmp_path: Any) -> None:
    # The point of the module: a typo in a response is a type error. Checked on a copy of it, with an empty mypy
    # config (no package paths needed), so this test sees exactly the generated shapes.
    from mypy import api as mypy_api

    (tmp_path / "shapes.py").write_text(gen_typed.render(), encoding="utf-8")
    (tmp_path / "handler.py").write_text(
        "from shapes import HeartbeatResponse, MetadataResponseTopicsPartitions\n\n\n"
        "def ok() -> HeartbeatResponse:\n    return {'throttle_time_ms': 0, 'error_code': 27}\n\n\n"
        "def typo() -> HeartbeatResponse:\n    return {'throttle_time_ms': 0, 'eror_code': 27}\n\n\n"
        "def missing() -> MetadataResponseTopicsPartitions:\n"
        "    return {'error_code': 0, 'partition_index': 0, 'leader_id': 1, 'replica_nodes': [1]}\n",
        encoding="utf-8")
    (tmp_path / "mypy.ini").write_text("[mypy]\n", encoding="utf-8")
    out, err, status = mypy_api.run([str(tmp_path / "handler.py"), "--config-file", str(tmp_path / "mypy.ini"),
                                     "--cache-dir", str(tmp_path / "cache"), "--no-error-summary"])
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert status == 1, out + err
    assert any(':9: error: Extra key "eror_code"' in e for e in errors), out
    assert any(':13: error: Missing key "isr_nodes"' in e for e in errors), out
    assert not any(":5: error" in e for e in errors), out
