"""Layering: protocol imports none of our other packages; client imports neither broker nor storage; storage
imports neither broker nor the client. Read from the source (no import side effects), so it runs in milliseconds."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


# folder -> the only moldau packages it may import (protocol: itself; storage: itself and protocol)
ALLOWED = {"protocol": ("moldau.protocol",), "storage": ("moldau.storage", "moldau.protocol")}
# folder -> moldau packages it must not import (client/ is the root package `moldau` itself)
FORBIDDEN = {"client": ("moldau.broker", "moldau.storage")}


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _under(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def _violations(folder: str) -> list[str]:
    bad = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for name in _imports(path):
            if name != "moldau" and not name.startswith("moldau."):
                continue
            if (folder in ALLOWED and not _under(name, ALLOWED[folder])) or \
                    (folder in FORBIDDEN and _under(name, FORBIDDEN[folder])):
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    return bad


@pytest.mark.parametrize("folder", ["protocol", "storage", "client"])
def test_layering(folder: str) -> None:
    bad = _violations(folder)
    assert not bad, "\n".join(bad)


def _type_aliases_of(path: Path, shape: str) -> list[str]:
    """Module-level names bound to the type expression ``shape`` (e.g. ``TP = tuple[str, int]``)."""
    found = []
    for node in ast.parse(path.read_text(), str(path)).body:
        target, value = (node.targets[0], node.value) if isinstance(node, ast.Assign) else \
            (node.target, node.value) if isinstance(node, ast.AnnAssign) else (None, None)
        if isinstance(target, ast.Name) and value is not None and ast.unparse(value) == shape:
            found.append(f"{path.relative_to(ROOT)}: {target.id}")
    return found


def test_one_topic_partition_type() -> None:
    """(topic, partition) is moldau.protocol.types.TopicPartition everywhere, not a local alias per module."""
    found = [a for folder in ("protocol", "storage", "broker", "client")
             for path in sorted((ROOT / folder).rglob("*.py")) for a in _type_aliases_of(path, "tuple[str, int]")]
    assert found == ["protocol/types.py: TopicPartition"]


def test_one_clock_protocol() -> None:
    """Wall-clock time is read through moldau.storage.config.Clock alone (no second Protocol with time_ms)."""
    found = []
    for folder in ("protocol", "storage", "broker", "client"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ClassDef) and any(ast.unparse(b) == "Protocol" for b in node.bases) and \
                        any(isinstance(f, ast.FunctionDef) and f.name == "time_ms" for f in node.body):
                    found.append(f"{path.relative_to(ROOT)}: {node.name}")
    assert found == ["storage/config.py: Clock"]
