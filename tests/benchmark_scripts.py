"""Loading benchmark scripts in tests: the scripts import their siblings, as when they run."""
from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@contextlib.contextmanager
def loaded_scripts(*names: str) -> Iterator[dict[str, ModuleType]]:
    """The benchmark scripts `names`, loaded as modules of those names with benchmarks/ on the
    path; both are undone on exit."""
    sys.path.insert(0, str(BENCHMARKS))
    loaded = {}
    try:
        for name in names:
            spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
            assert spec is not None and spec.loader is not None, name
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            loaded[name] = module
        yield loaded
    finally:
        for name in names:
            sys.modules.pop(name, None)
        sys.path.remove(str(BENCHMARKS))
