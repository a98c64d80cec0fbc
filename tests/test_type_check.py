"""The type check's configuration (`[tool.mypy]` of pyproject.toml) against the installed package.

CI runs `python -m mypy` itself (after the lint); these tests keep its configuration honest: it
checks exactly the Beam-free core packages, each of them ships its `py.typed` marker (without
it mypy cannot check the installed package, and importers would not see its annotations), and
every module its overrides name exists, so that a module renamed or removed leaves no stale
exception behind.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 (mypy itself depends on tomli there)
    import tomli as tomllib

REPO_ROOT = Path(__file__).resolve().parents[1]
ROOT = "ldp_telemetry"
#: The packages the issue puts under the type check: the Beam-free core and its contract.
CHECKED = ("ldp", "output", "schemas", "client")


def mypy_config() -> dict:
    with open(REPO_ROOT / "pyproject.toml", "rb") as handle:
        return tomllib.load(handle)["tool"]["mypy"]


def test_the_type_check_covers_the_beam_free_core():
    assert sorted(mypy_config()["packages"]) == sorted(f"{ROOT}.{name}" for name in CHECKED)


def test_the_checked_packages_ship_py_typed():
    for name in CHECKED:
        spec = importlib.util.find_spec(f"{ROOT}.{name}")
        assert spec is not None and spec.origin is not None, f"{ROOT}.{name} is not installed"
        marker = Path(spec.origin).parent / "py.typed"
        assert marker.is_file(), f"{marker} is missing: add it to package_data in setup.py"


def test_every_module_an_override_names_exists():
    missing = []
    for override in mypy_config().get("overrides", []):
        modules = override["module"]
        for module in [modules] if isinstance(modules, str) else modules:
            if module.endswith(".*"):
                module = module[:-2]
            if module.split(".")[0] != ROOT:
                continue  # a third-party module (scipy, lz4): not ours to check
            if importlib.util.find_spec(module) is None:
                missing.append(module)
    assert missing == [], f"pyproject.toml's [tool.mypy] overrides name no such module: {missing}"


def test_unfinished_modules_are_listed_by_name():
    """A module whose own errors are not reported is listed by name, never by a wildcard: the
    list shrinks module by module as annotations are completed."""
    for override in mypy_config().get("overrides", []):
        if override.get("ignore_errors"):
            modules = override["module"]
            assert isinstance(modules, list)
            assert not [module for module in modules if "*" in module]
