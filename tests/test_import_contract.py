"""The import contract: the layers of `ldp_telemetry`, checked on the installed sources.

    pipelines, runners        the `ldp` command, jobs, runner profiles (Beam)
    transforms                Beam PTransforms and DoFns
    store, dashboard          Beam-free: the SQL estimate store, the dashboard
    client                    the device's encoder and report files (no Beam, no scipy)
    schemas                   Avro schemas and the codec (no Beam)
    output                    the Beam-free output contract
    ldp                       the Beam-free core, itself in sub-packages, top to bottom:
        ldp.engine                report batches, reasons, counting, one window in process
        ldp.config                the registry, windows, budget, planner, fingerprints
        ldp.estimation, ldp.integrity   estimators, post-processing, queries; integrity tests
        ldp.protocols             the protocols, their noise model, channels and hashing
        ldp.base                  errors, validation, times, named catalogs

Rules, by folder (a module moved within a folder keeps its rules; a new folder must be placed in
LAYERS before anything in it passes):

* ``layers``: a module imports only modules of its own layer or of the layers below it, at
  module level or inside a function (``ldp`` thus imports no other folder, and ``store`` and
  ``dashboard`` never import ``transforms``, ``pipelines`` or ``runners``).
* ``beam-free``: ``ldp``, ``output``, ``schemas``, ``client``, ``store`` and ``dashboard`` never
  import ``apache_beam`` at module level, and inside a function only in LAZY_BEAM (remote paths of
  the atomic writer).
* ``sub-layers``: inside ``ldp`` the same rule holds between its sub-packages (LDP_LAYERS):
  ``ldp.protocols`` never imports ``ldp.estimation``, ``ldp.config`` or ``ldp.engine``, and so on.
* ``no circle``: no chain of imports, even inside functions, leads from a module back to itself.
* ``folder``: every module lies in a folder named in LAYERS, and every module of ``ldp`` but its
  ``__init__`` in a sub-package named in LDP_LAYERS.

import-linter's `lint-imports` reads the namespace package, but it cannot tell an import inside a
function from one at module level, which the ``beam-free`` rule turns on; the checker here parses
each module with `ast`. A second test imports every module of the Beam-free folders in a fresh
interpreter and finds no ``apache_beam`` in `sys.modules`.
"""
from __future__ import annotations

import ast
import graphlib
import importlib.util
import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = "ldp_telemetry"
#: Top to bottom; the folders of one layer may import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("pipelines", "runners"),
    ("transforms",),
    ("store", "dashboard"),
    ("client",),
    ("schemas",),
    ("output",),
    ("ldp",),
)
#: The sub-packages of `ldp`, top to bottom, as LAYERS.
LDP_LAYERS: tuple[tuple[str, ...], ...] = (
    ("engine",),
    ("config",),
    ("estimation", "integrity"),
    ("protocols",),
    ("base",),
)
BEAM = "apache_beam"
BEAM_FREE = ("ldp", "output", "schemas", "client", "store", "dashboard")
#: The modules of Beam-free folders that may import Beam inside a function.
LAZY_BEAM = frozenset({f"{ROOT}.output.atomic"})

LEVEL = {folder: level for level, folders in enumerate(LAYERS) for folder in folders}
LDP_LEVEL = {part: level for level, parts in enumerate(LDP_LAYERS) for part in parts}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # the imported module (`from m import n`: m, or m.n when m is the root or ldp)
    line: int
    lazy: bool  # inside a function (or an `if TYPE_CHECKING:` block): not run on import


@dataclass(frozen=True)
class Violation:
    rule: str
    module: str
    line: int
    detail: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.module}:{self.line}: {self.detail}"


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module a (possibly relative) `from ... import` names."""
    if node.level == 0:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(source: str, module: str, is_package: bool = False) -> list[Import]:
    """Every import statement of a module's source, with whether it runs on import."""
    found: list[Import] = []

    def visit(node: ast.AST, lazy: bool) -> None:
        if isinstance(node, ast.Import):
            found.extend(Import(module, alias.name, node.lineno, lazy) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(node, module, is_package)
            if target in (ROOT, f"{ROOT}.ldp"):  # from ldp_telemetry(.ldp) import output
                found.extend(Import(module, f"{target}.{alias.name}", node.lineno, lazy)
                             for alias in node.names)
            else:
                found.append(Import(module, target, node.lineno, lazy))
        inner = lazy or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            in_type_block = (isinstance(node, ast.If) and _is_type_checking(node.test)
                             and child in node.body)
            visit(child, inner or in_type_block)

    visit(ast.parse(source), False)
    return found


def modules_under(root: Path) -> list[tuple[str, Path, bool]]:
    """(dotted name, path, is a package) of every module under a folder laid out like the
    installed `ldp_telemetry`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        found.append((".".join([ROOT, *parts]), path, is_package))
    return found


def violations(root: Path) -> list[Violation]:
    """Every breach of the contract by the modules under `root` (module docstring)."""
    found = []
    for module, path, is_package in modules_under(root):
        folder = module.split(".")[1] if module.count(".") >= 1 else ""
        if folder not in LEVEL:
            found.append(Violation("folder", module, 1, f"folder {folder!r} is not in the "
                                   f"layers {[list(layer) for layer in LAYERS]}"))
            continue
        part = module.split(".")[2] if folder == "ldp" and module.count(".") >= 2 else None
        if folder == "ldp" and module != f"{ROOT}.ldp" and part not in LDP_LEVEL:
            found.append(Violation("folder", module, 1, f"ldp module {module!r} is in none of the "
                                   f"sub-packages {[list(layer) for layer in LDP_LAYERS]}"))
            continue
        for item in imports_of(path.read_text(encoding="utf-8"), module, is_package):
            top, _, rest = item.target.partition(".")
            if top == ROOT and rest and part is not None and rest.split(".")[0] == "ldp":
                other_part = rest.split(".")[1] if rest.count(".") >= 1 else ""
                if LDP_LEVEL.get(other_part, -1) < LDP_LEVEL[part]:
                    allowed = [p for p, level in LDP_LEVEL.items() if level >= LDP_LEVEL[part]]
                    found.append(Violation(
                        "sub-layers", module, item.line,
                        f"imports {item.target}{' (inside a function)' if item.lazy else ''}: "
                        f"ldp.{part} may import only ldp.{', ldp.'.join(allowed)}"))
            elif top == ROOT and rest:
                other = rest.split(".")[0]
                if LEVEL.get(other, -1) < LEVEL[folder]:
                    allowed = [f for f, level in LEVEL.items() if level >= LEVEL[folder]]
                    found.append(Violation(
                        "layers", module, item.line,
                        f"imports {item.target}{' (inside a function)' if item.lazy else ''}: "
                        f"{folder} may import only {', '.join(allowed)}"))
            elif top == BEAM and folder in BEAM_FREE:
                if not item.lazy:
                    found.append(Violation("beam-free", module, item.line,
                                           f"imports {item.target} at module level: {folder} "
                                           f"is Beam-free"))
                elif module not in LAZY_BEAM:
                    found.append(Violation("beam-free", module, item.line,
                                           f"imports {item.target} inside a function: only "
                                           f"{', '.join(sorted(LAZY_BEAM))} may, for remote "
                                           f"paths"))
    return found


def installed_roots() -> list[Path]:
    spec = importlib.util.find_spec(ROOT)
    assert spec is not None and spec.submodule_search_locations, "ldp_telemetry is not installed"
    return [Path(location) for location in spec.submodule_search_locations]


def test_the_installed_package_keeps_the_contract():
    found = [violation for root in installed_roots() for violation in violations(root)]
    assert not found, "import contract broken:\n" + "\n".join(map(str, found))


def module_graph(roots: list[Path]) -> dict[str, set[str]]:
    """module -> the package modules it imports, at module level or inside a function
    (`from package import name` counts as importing the module `package.name` when one
    exists)."""
    found = {module: (path, is_package) for root in roots
             for module, path, is_package in modules_under(root)}
    graph: dict[str, set[str]] = {module: set() for module in found}
    for module, (path, is_package) in found.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, module, is_package)
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in found else base
                           for alias in node.names]
            else:
                continue
            for target in targets:
                while target and target not in found:  # `import a.b.c` names a.b.c's module
                    target = target.rpartition(".")[0]
                if target and target != module:
                    graph[module].add(target)
    return graph


def test_the_installed_package_has_no_import_circle():
    """No chain of imports, even inside functions, leads from a module back to itself."""
    graph = module_graph(installed_roots())
    assert len(graph) > 100
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as circle:
        raise AssertionError(f"import circle: {' -> '.join(circle.args[1])}") from None


def test_the_circle_check_finds_a_circle_through_a_function(tmp_path):
    for name, text in {"ldp/__init__.py": "", "ldp/protocols/__init__.py": "",
                       "ldp/protocols/a.py": "from ldp_telemetry.ldp.protocols import b\n",
                       "ldp/protocols/b.py": ("def f():\n"
                                              "    from ldp_telemetry.ldp.protocols.a import x\n")
                       }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = module_graph([tmp_path])
    assert graph[f"{ROOT}.ldp.protocols.a"] == {f"{ROOT}.ldp.protocols.b"}
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter(graph).prepare()


def test_the_beam_free_folders_import_without_beam(tmp_path):
    """Importing every module of the Beam-free folders loads no apache_beam module, directly or
    through any other package."""
    script = textwrap.dedent(f"""
        import importlib, json, pkgutil, sys
        names = []
        for folder in {list(BEAM_FREE)!r}:
            package = importlib.import_module("{ROOT}." + folder)
            names.append(package.__name__)
            for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
                importlib.import_module(info.name)
                names.append(info.name)
        print(json.dumps({{"modules": names,
                          "beam": sorted(m for m in sys.modules if m.split(".")[0] == "{BEAM}")}}))
        """)
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, check=True)
    result = json.loads(done.stdout)
    assert len(result["modules"]) > len(BEAM_FREE)
    assert result["beam"] == [], result["beam"][:5]


# -- the checker fails on a violation ---------------------------------------------------------

SYNTHETIC = {
    "ldp/__init__.py": "",
    "ldp/stray.py": "",
    "ldp/base/__init__.py": "",
    "ldp/base/maths.py": "import numpy\nfrom ldp_telemetry.ldp.base import errors\n",
    "ldp/base/upward.py": "from ldp_telemetry.output import layout\n",
    "ldp/base/beam.py": "def f():\n    import apache_beam\n",
    "ldp/protocols/__init__.py": "from ldp_telemetry.ldp.base import maths\n",
    "ldp/protocols/up.py": "def f():\n    from ldp_telemetry.ldp.config import registry\n",
    "ldp/estimation/__init__.py": "from ldp_telemetry.ldp.integrity import sample\n",
    "ldp/integrity/__init__.py": "from ldp_telemetry.ldp.estimation import em\n",
    "ldp/engine/__init__.py": "from ldp_telemetry.ldp import config\n",
    "ldp/config/__init__.py": "from ldp_telemetry.ldp.engine import counting\n",
    "output/__init__.py": "",
    "output/atomic.py": "def remote():\n    from apache_beam.io.filesystems import FileSystems\n",
    "output/eager.py": "import apache_beam as beam\n",
    "schemas/__init__.py": "from ldp_telemetry import output\n",
    "schemas/typing_only.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                               "    import apache_beam\n"),
    "store/__init__.py": "",
    "store/relative.py": "from ..pipelines import cli\nfrom . import sibling\n",
    "store/lazy.py": "class Sink:\n    def open(self):\n        import apache_beam\n",
    "store/guarded.py": "try:\n    import apache_beam\nexcept ImportError:\n    pass\n",
    "dashboard/__init__.py": "from ldp_telemetry.store import relative\n",
    "dashboard/up.py": "def f():\n    from ldp_telemetry.transforms import count\n",
    "transforms/__init__.py": "import apache_beam\nfrom ldp_telemetry.store import relative\n",
    "pipelines/__init__.py": "from ldp_telemetry.runners import direct\n",
    "runners/__init__.py": "from ldp_telemetry.pipelines import cli\n",
    "misc/__init__.py": "",
}


def test_the_checker_names_each_broken_rule(tmp_path):
    for name, text in SYNTHETIC.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = {(v.rule, v.module.removeprefix(f"{ROOT}."), v.line) for v in violations(tmp_path)}
    assert found == {
        ("layers", "ldp.base.upward", 1),    # ldp imports nothing above it
        ("beam-free", "ldp.base.beam", 2),   # not even inside a function
        ("folder", "ldp.stray", 1),          # an ldp module outside the sub-packages
        ("sub-layers", "ldp.protocols.up", 2),  # protocols never import config
        ("sub-layers", "ldp.config", 1),     # nor config the engine
        ("beam-free", "output.eager", 1),    # output: no Beam at module level
        ("beam-free", "store.lazy", 3),      # lazy Beam only in output.atomic
        ("beam-free", "store.guarded", 2),   # a try block runs on import
        ("beam-free", "schemas.typing_only", 3),  # not run, but still a Beam import
        ("layers", "store.relative", 1),     # store never imports pipelines (relative import)
        ("layers", "dashboard.up", 2),       # nor transforms, even inside a function
        ("folder", "misc", 1),               # a folder outside the layers
    }
    messages = {str(v) for v in violations(tmp_path)}
    assert ("[layers] ldp_telemetry.store.relative:1: imports ldp_telemetry.pipelines: store "
            "may import only store, dashboard, client, schemas, output, ldp") in messages
    assert ("[sub-layers] ldp_telemetry.ldp.protocols.up:2: imports "
            "ldp_telemetry.ldp.config (inside a function): ldp.protocols may import only "
            "ldp.protocols, ldp.base") in messages
