"""The package root `moldau` (client/__init__.py) loads the client library lazily (PEP 562): importing the broker,
protocol or storage does not import the producer, consumer, admin client or their background loop."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# A fresh interpreter per check (this one has imported everything already): a process, so the unit tier's
# process guard (tests/unit/conftest.py) needs the mark; it starts no broker and takes well under a second.
pytestmark = pytest.mark.integration

CLIENT_MODULES = sorted({f"moldau.{p.stem}" for p in (ROOT / "client").glob("*.py") if p.stem != "__init__"}
                        | {"moldau.tools", "moldau.spark"})
# The broker's inter-broker links (replica fetchers, controller channel) ride the client's connection layer (and
# share its way of stopping tasks, moldau.tasks).
CONNECTION_LAYER = {"moldau.connection", "moldau.errors", "moldau.security", "moldau.tasks"}


def client_modules_after(code: str) -> list[str]:
    probe = (f"{code}\nimport json, sys\n"
             f"print(json.dumps(sorted(m for m in sys.modules if m in {CLIENT_MODULES!r} "
             "or m.startswith(('moldau.tools.', 'moldau.spark.')))))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         check=True).stdout
    return list(json.loads(out.splitlines()[-1]))


def test_protocol_and_storage_import_no_client_module() -> None:
    assert client_modules_after("import moldau, moldau.protocol.types, moldau.protocol.api, moldau.storage.log") == []


def test_the_broker_imports_only_the_connection_layer() -> None:
    assert set(client_modules_after("import moldau.broker.server")) <= CONNECTION_LAYER


def test_the_public_names_still_load_on_first_use() -> None:
    loaded = client_modules_after(
        "import moldau.sync_admin\n"  # either blocking module may be imported first (no import cycle)
        "import moldau\n"
        "from moldau import Producer, TopicPartition\n"
        "import moldau.sync, moldau.consumer\n"
        "assert Producer is moldau.sync.Producer and TopicPartition is moldau.consumer.TopicPartition\n"
        "assert set(moldau.__all__) <= set(dir(moldau))\n"
        "try:\n    moldau.NoSuchName\nexcept AttributeError:\n    pass\nelse:\n    raise SystemExit('no error')")
    assert "moldau.sync" in loaded and "moldau.producer" in loaded
