"""The `moldau` import package maps the repository's fixed folders; the package list must cover every folder."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = {"moldau": "client", "moldau.broker": "broker", "moldau.protocol": "protocol", "moldau.storage": "storage",
         "moldau.testing": "testing"}


def _pyproject() -> dict:
    with open(REPO / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def test_package_dir_maps_the_five_folders_under_moldau() -> None:
    dirs = dict(_pyproject()["tool"]["setuptools"]["package-dir"])
    assert dirs.pop("") == "spark_plugin"  # the root of the one top-level module, below
    assert dirs == ROOTS


def test_the_only_top_level_module_is_pysparks_entry_point() -> None:
    # PySpark registers the DefaultSource of top-level `pyspark_*` modules; nothing else generic ships.
    assert _pyproject()["tool"]["setuptools"]["py-modules"] == ["pyspark_moldau"]
    assert sorted(p.name for p in (REPO / "spark_plugin").glob("*.py")) == ["pyspark_moldau.py"]


def test_every_folder_with_an_init_is_a_listed_package_and_nothing_else_is() -> None:
    found = set()
    for package, folder in ROOTS.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder)
            found.add(".".join([package, *rel.parts]))
    # moldau.broker etc. are also found as subfolders of nothing: client/ holds no broker/ folder.
    assert set(_pyproject()["tool"]["setuptools"]["packages"]) == found


def test_entry_points_name_moldau_modules() -> None:
    scripts = _pyproject()["project"]["scripts"]
    assert scripts and all(target.startswith("moldau.") for target in scripts.values())
