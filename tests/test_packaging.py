"""The installed distribution: one import name, and no path that only exists in a checkout."""
from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

PACKAGE_FOLDERS = ("ldp", "output", "schemas", "client", "transforms", "pipelines", "runners",
                   "store", "dashboard")


def installed_files(tmp_path) -> list[str]:
    """The distribution's files, looked up away from the checkout (whose build metadata would
    otherwise be found first on the path)."""
    script = ("import importlib.metadata, json; "
              "print(json.dumps([str(f) for f in importlib.metadata.files('ldp-telemetry')]))")
    output = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, check=True,
                            capture_output=True, text=True).stdout
    return json.loads(output)


def test_the_distribution_installs_one_import_name(tmp_path):
    tops = set()
    for name in installed_files(tmp_path):
        first = name.split("/", 1)[0]
        if first.endswith(".dist-info") or first.startswith(("..", "__editable__", "__pycache__")):
            continue  # metadata, the console script, an editable install's finder
        tops.add(first.removesuffix(".py").removesuffix(".pth"))
    assert tops <= {"ldp_telemetry"}, tops


def test_every_folder_is_a_subpackage_of_ldp_telemetry_with_its_schemas():
    for folder in PACKAGE_FOLDERS:
        assert importlib.util.find_spec(f"ldp_telemetry.{folder}") is not None
    schemas = Path(importlib.util.find_spec("ldp_telemetry.schemas").origin).parent
    assert {"report.avsc", "window_estimate.avsc", "dead_letter.avsc"} <= {
        p.name for p in schemas.glob("*.avsc")}
    assert (schemas / "registry.schema.json").is_file()
    client = Path(importlib.util.find_spec("ldp_telemetry.client").origin).parent
    assert (client / "test_vectors.json").is_file()


def test_no_module_walks_up_from_its_file_into_the_checkout():
    walk_up = re.compile(r"__file__\)?[^\n]*(\.parents\[|\.parent\.parent|\.\.|"
                         r"dirname\([^\n]*dirname)")
    offenders = []
    for folder in PACKAGE_FOLDERS:
        package = Path(importlib.util.find_spec(f"ldp_telemetry.{folder}").origin).parent
        for module in package.rglob("*.py"):
            for number, line in enumerate(module.read_text(encoding="utf-8").splitlines(), 1):
                if walk_up.search(line):
                    offenders.append(f"{module.name}:{number}: {line.strip()}")
    assert offenders == []
