"""Every name the package imports from one of its own modules comes from where it is published.

`from ldp_telemetry.a.b import name` must find `name` defined in `a.b` (a function, class or
assignment at module level), or published there on purpose: `a.b` is a package (its
``__init__`` is a facade), lists `name` in ``__all__``, or imports it on a line marked
``# noqa: F401`` (a re-export kept for compatibility, e.g. names Beam pickles under a module they
moved out of). A name that merely happens to be imported by `a.b` is not published there: when
`a.b` stops using it, the import breaks far away. Moving modules with scripts leaves such
imports behind (a constant taken from the Beam module that imports it from the engine, a
function from the protocol module that imports it from its channel).

Checked on the installed sources, at module level and inside functions, with `ast`.
"""
from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from pathlib import Path

ROOT = "ldp_telemetry"


@dataclass(frozen=True)
class Published:
    """What one module publishes: its own names, or every name when it is a package."""

    package: bool
    names: frozenset[str]


def published(path: Path) -> Published:
    """The names a module defines, lists in ``__all__`` or re-exports with ``# noqa: F401``."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    names: set[str] = set()

    def top_level(nodes):
        for node in nodes:
            if isinstance(node, (ast.If, ast.Try)):
                yield from top_level(node.body)
                yield from top_level(getattr(node, "orelse", []))
                yield from top_level(getattr(node, "finalbody", []))
                for handler in getattr(node, "handlers", []):
                    yield from top_level(handler.body)
            else:
                yield node

    for node in top_level(ast.parse(source).body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(name.id for target in targets for name in ast.walk(target)
                         if isinstance(name, ast.Name))
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                names.update(ast.literal_eval(node.value))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            statement = lines[node.lineno - 1:node.end_lineno]
            if any("noqa: F401" in line for line in statement):
                names.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
    return Published(path.name == "__init__.py", frozenset(names))


def module_path(root: Path, module: str) -> Path | None:
    """The source of the dotted `module` under the folder `root` laid out as `ldp_telemetry`."""
    parts = module.split(".")[1:]
    folder = root.joinpath(*parts)
    if (folder / "__init__.py").is_file():
        return folder / "__init__.py"
    file = folder.with_suffix(".py") if parts else None
    return file if file is not None and file.is_file() else None


def misplaced_imports(root: Path, scanned: Path | None = None) -> list[str]:
    """`file:line: module.name` for every import, in the files under `scanned` (default: `root`),
    of a name its module under `root` does not publish."""
    scanned = root if scanned is None else scanned
    cache: dict[Path, Published] = {}
    found = []
    for path in sorted(scanned.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                    and node.module.split(".")[0] == ROOT):
                continue
            source = module_path(root, node.module)
            if source is None:
                found.append(f"{path.relative_to(scanned)}:{node.lineno}: no module "
                             f"{node.module}")
                continue
            if source not in cache:
                cache[source] = published(source)
            if cache[source].package:
                continue
            for alias in node.names:
                if (alias.name not in cache[source].names
                        and module_path(root, f"{node.module}.{alias.name}") is None):
                    found.append(f"{path.relative_to(scanned)}:{node.lineno}: "
                                 f"{node.module}.{alias.name}")
    return found


def installed_roots() -> list[Path]:
    spec = importlib.util.find_spec(ROOT)
    assert spec is not None and spec.submodule_search_locations, "ldp_telemetry is not installed"
    return [Path(location) for location in spec.submodule_search_locations]


def test_the_package_imports_each_name_from_where_it_is_published():
    """The installed package, and the tests and benchmarks of the checkout beside it."""
    roots = installed_roots()
    assert sum(1 for root in roots for _ in root.rglob("*.py")) > 100
    checkout = Path(__file__).resolve().parent.parent
    others = [folder for folder in (checkout / "tests", checkout / "benchmarks") if folder.is_dir()]
    found = [line for root in roots for scanned in [root, *others]
             for line in misplaced_imports(root, scanned)]
    assert not found, "names imported from a module that does not publish them:\n" + "\n".join(
        found)


def test_the_check_finds_a_name_a_module_only_imports(tmp_path):
    files = {
        "ldp/__init__.py": "",
        "ldp/engine/__init__.py": "from ldp_telemetry.ldp.engine.counting import DUPLICATES\n",
        "ldp/engine/counting.py": "import math\nDUPLICATES = 'duplicates'\n\ndef f():\n    pass\n",
        "ldp/engine/facade.py": ("from ldp_telemetry.ldp.engine.counting import f\n"
                                 "__all__ = ['f']\n"),
        "transforms/__init__.py": "",
        "transforms/count.py": ("from ldp_telemetry.ldp.engine.counting import (  # noqa: F401\n"
                                "    DUPLICATES)\nfrom ldp_telemetry.ldp.engine.counting import f\n"
                                "f()\n"),
        "transforms/dedupe.py": "from ldp_telemetry.ldp.engine.counting import DUPLICATES, f\n",
        "pipelines/__init__.py": "",
        "pipelines/graph.py": (
            "from ldp_telemetry.transforms.count import DUPLICATES, f\n"  # f: only imported
            "from ldp_telemetry.ldp.engine import DUPLICATES, counting\n"  # a package: a facade
            "from ldp_telemetry.ldp.engine.facade import f\n"  # in __all__
            "def g():\n"
            "    from ldp_telemetry.transforms.dedupe import DUPLICATES\n"  # inside a function
            "    from ldp_telemetry.ldp.engine.counting import math\n"
            "    from ldp_telemetry.ldp.gone import x\n"),
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert misplaced_imports(tmp_path) == [
        "pipelines/graph.py:1: ldp_telemetry.transforms.count.f",
        "pipelines/graph.py:5: ldp_telemetry.transforms.dedupe.DUPLICATES",
        "pipelines/graph.py:6: ldp_telemetry.ldp.engine.counting.math",
        "pipelines/graph.py:7: no module ldp_telemetry.ldp.gone",
    ]
