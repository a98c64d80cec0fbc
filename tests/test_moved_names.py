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
