"""Names moved in 0.3 that Beam pickles stay importable from their old modules for one release.

A running streaming job holds accumulators (SupportStatistic, VersionStatistic), state (IdSet)
and elements (ReportBatch, DeadLetter, Reason) pickled under the modules they lived in; an
updated job must unpickle them. Each check pickles a current object, rewrites its module name to
the old one, and unpickles it.
"""
from __future__ import annotations

import pickle
from enum import Enum

import numpy as np
import pytest

from ldp_telemetry.ldp.engine import batches, counting, reasons

MOVED = [
    (counting, "ldp_telemetry.transforms.count", "IdSet",
     lambda: counting.IdSet([np.array([1, 5, 9], dtype=np.int64)])),
    (counting, "ldp_telemetry.transforms.count", "SupportStatistic",
     lambda: counting.SupportStatistic("m", {1: counting.VersionStatistic(3, np.arange(4))}, 2,
                                       (7, 8))),
    (counting, "ldp_telemetry.transforms.count", "VersionStatistic",
     lambda: counting.VersionStatistic(3, np.arange(4))),
    (batches, "ldp_telemetry.schemas.batches", "ReportBatch",
     lambda: batches.ReportBatch("m", 0, {"value": np.arange(3)}, 2)),
    (batches, "ldp_telemetry.schemas.batches", "DeadLetter",
     lambda: batches.DeadLetter("file.avro", reasons.Reason.DUPLICATE, "detail", records=2)),
    (reasons, "ldp_telemetry.output.reasons", "Reason", lambda: reasons.Reason.DUPLICATE),
]


def state(obj):
    """A comparable form of an object's contents (numpy arrays as dtype and values)."""
    if isinstance(obj, np.ndarray):
        return ("array", obj.dtype.str, obj.tolist())
    if isinstance(obj, (list, tuple)):
        return [state(item) for item in obj]
    if isinstance(obj, dict):
        return sorted((repr(key), state(value)) for key, value in obj.items())
    if isinstance(obj, Enum) or not hasattr(obj, "__slots__") and not hasattr(obj, "__dict__"):
        return obj
    names = getattr(type(obj), "__slots__", None) or sorted(vars(obj))
    return type(obj).__name__, [(name, state(getattr(obj, name))) for name in names]


@pytest.mark.parametrize(("new", "old", "name", "make"), MOVED,
                         ids=[f"{old}.{name}" for _, old, name, _ in MOVED])
def test_a_pickle_made_under_the_old_module_name_still_loads(new, old, name, make):
    made = make()
    data = pickle.dumps(made, protocol=2)  # protocol 2 names classes as "module\nname\n" text
    assert f"{new.__name__}\n{name}\n".encode() in data
    loaded = pickle.loads(data.replace(f"{new.__name__}\n".encode(), f"{old}\n".encode()))
    assert type(loaded) is type(made)
    assert state(loaded) == state(made)


# -- every class a running job holds resolves under the name it had before 0.3 ----------------

#: The modules moved in 0.3, by new name: the name an older job pickled their classes under.
#: The three modules outside `ldp` stay as re-exports; the modules moved inside `ldp` left no
#: module behind, so no class of theirs may be in what a job holds between steps.
_LDP_MOVES = {
    "base": ("errors", "registration", "times", "validation"),
    "config": ("budget", "fingerprint", "memoize", "planner", "registry", "windows"),
    "engine": ("finalize",),
    "estimation": ("admm", "binning", "combine", "distances", "em", "estimators", "histograms",
                   "numeric_queries", "postprocess", "queries", "uncertainty", "wiener"),
    "integrity": ("attacks",),
    "protocols": ("bytesums", "channels", "hashing"),
}
OLD_MODULE = {
    "ldp_telemetry.ldp.engine.counting": "ldp_telemetry.transforms.count",
    "ldp_telemetry.ldp.engine.batches": "ldp_telemetry.schemas.batches",
    "ldp_telemetry.ldp.engine.reasons": "ldp_telemetry.output.reasons",
    "ldp_telemetry.ldp.engine.window": "ldp_telemetry.ldp.integrity.window",
    "ldp_telemetry.ldp.protocols.noise": "ldp_telemetry.ldp.estimation",
    **{f"ldp_telemetry.ldp.{part}.{name}": f"ldp_telemetry.ldp.{name}"
       for part, names in _LDP_MOVES.items() for name in names},
}
FREQUENCY_ENTRIES = [("grr", 10), ("oue", 13), ("sue", 10), ("rue", 10), ("olh", 40),
                     ("blh", 40), ("rlh", 40), ("hr", 16), ("ss", 20), ("rws", 20)]
NUMERIC_ENTRIES = ["sw", "sw-discrete", "cfo-grr", "cfo-olh", "hh", "sr", "pm"]


def held_by_a_job():
    """What a job holds between its steps and in its state, for every protocol: the report
    batches, the dedupe step's IdSet, each slice's and window's SupportStatistic (with the
    integrity sample), the duplicate dead letters, and the compact window-estimate records."""
    from ldp_telemetry.ldp.config.registry import parse_registry
    from ldp_telemetry.transforms.count import MergeSupportFn
    from ldp_telemetry.transforms.estimate_windows import FinalizeEstimatesFn

    registry = parse_registry({"metrics": [
        *({"name": name, "protocol": name, "epsilon": 1.0, "domain": {"size": d}}
          for name, d in FREQUENCY_ENTRIES),
        *({"name": name, "protocol": name, "epsilon": 1.0,
           "domain": {"low": 0, "high": 1, "buckets": 16}} for name in NUMERIC_ENTRIES)]})
    finalize = FinalizeEstimatesFn(registry)
    finalize.setup()
    rng = np.random.default_rng(11)
    held = []
    for name in [name for name, _ in FREQUENCY_ENTRIES] + NUMERIC_ENTRIES:
        config = registry[name]
        values = (rng.integers(0, config.d, 400) if name in dict(FREQUENCY_ENTRIES)
                  else rng.random(400))
        columns = config.protocol.perturb(values, rng)
        columns[batches.REPORT_ID] = np.concatenate([np.arange(390), np.arange(10)])
        batch = batches.ReportBatch(name, 0, columns, config.version)
        ids = counting.IdSet()
        ids.add_new(columns[batches.REPORT_ID])
        statistic = counting.count_slice(registry, [batch])
        window = MergeSupportFn().add_input(MergeSupportFn().create_accumulator(), statistic)
        records = finalize._records(name, window, 0, 60_000,
                                    {"timing": "ON_TIME", "index": 0, "is_last": True})
        held += [batch, ids, statistic, window, counting.duplicate_letter(statistic, 0, 60_000),
                 *records]
    return held


def pickled_classes(obj) -> set[tuple[str, str]]:
    """(module, name) of every class or function a protocol-2 pickle of `obj` names."""
    import pickletools
    return {tuple(arg.split(" ", 1)) for op, arg, _ in pickletools.genops(pickle.dumps(obj, 2))
            if op.name == "GLOBAL"}


def test_every_class_a_job_holds_resolves_under_its_name_before_the_move():
    import importlib
    held = held_by_a_job()
    names = set().union(*(pickled_classes(obj) for obj in held))
    ours = {(module, name) for module, name in names if module.startswith("ldp_telemetry.")}
    assert ("ldp_telemetry.ldp.engine.counting", "SupportStatistic") in ours
    assert ("ldp_telemetry.ldp.integrity.sample", "ReportSample") in ours  # the samples are in
    unresolved = []
    for module, name in sorted(ours):
        old = OLD_MODULE.get(module, module)
        try:
            resolved = getattr(importlib.import_module(old), name)
        except (ImportError, AttributeError):
            unresolved.append(f"{old}.{name} (now {module}.{name})")
            continue
        assert resolved is getattr(importlib.import_module(module), name)
    assert not unresolved, "pickled by a running job, gone from the module it had: " + ", ".join(
        unresolved)
