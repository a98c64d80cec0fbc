"""The server's cost of each frequency oracle: a model fitted to measured aggregation times.

Two costs are modelled per protocol, as functions of the domain size d at the measured ε:

    counting    seconds per report of `accumulate` (the step every report pays), and
    finalize    seconds per window of `support_counts` (paid once per window, whatever n),

each as t(d) = a + b·s^c + e·s² with s = min(d, D), a, b, e >= 0, c in [0, MAX_EXPONENT] and a
saturation D (a power of two, or none): a fixed cost, a power of d, and a quadratic term for the
block overheads that grow with d (RWS's seeded shuffle runs on fewer reports per block as d
grows), until the protocol stops growing with d (CMS's m stops at 1024 buckets). It is fitted
(`fit`) to the measurements of benchmarks/aggregation_cost.py by least squares on relative
errors. Beyond the largest measured d it extrapolates; a saturation found inside the measured
range is then a guess that the cost stays flat. The fitted
constants ship with the package in `aggregation_cost.json` beside this module, written by that
script from its own results file (benchmarks/results/aggregation_cost.json); the model is never
edited by hand. `reports_per_second` is 1/counting: the rate one core keeps up with, what
`"protocol": "auto"` weighs against a metric's `aggregation_rate`. A protocol the file does not
measure has no modelled rate (None).
"""
from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any
from pathlib import Path

import numpy as np

#: The fitted model shipped with the package.
MODEL_PATH = Path(__file__).with_name("aggregation_cost.json")
#: The model file's format version.
MODEL_FORMAT = 1
#: The exponents c tried by `fit`: 0, 0.02, ..., MAX_EXPONENT.
MAX_EXPONENT = 1.5
_EXPONENTS = np.round(np.arange(0.0, MAX_EXPONENT + 1e-9, 0.02), 2)
#: The saturations D tried by `fit` besides none: 2^1, ..., 2^MAX_SATURATION_BITS.
MAX_SATURATION_BITS = 24
#: The two modelled costs: the measurement's field of each.
COSTS = ("count_seconds_per_report", "finalize_seconds")


@dataclass(frozen=True)
class CostCurve:
    """t(d) = a + b·s^c + e·s² seconds, s = min(d, saturation) (no saturation: None)."""

    a: float
    b: float
    c: float
    e: float = 0.0
    saturation: int | None = None

    def __call__(self, d: int) -> float:
        size = float(d if self.saturation is None else min(d, self.saturation))
        return float(self.a + self.b * size ** self.c + self.e * size ** 2)

    def as_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "c": self.c, "e": self.e,
                "saturation": self.saturation}


#: The subsets of the curve's three terms (1, s^c, s²) a fit tries: a, b, e >= 0 is met by
#: the unconstrained least squares of one of them.
_TERMS = tuple(t for size in (1, 2, 3) for t in itertools.combinations(range(3), size))


def fit_curve(points: Iterable[tuple[int, float]]) -> CostCurve:
    """The curve a + b·s^c + e·s², s = min(d, D), a, b, e >= 0, with the least sum of squared
    relative errors over (d, seconds) points (seconds > 0): c searched over the grid _EXPONENTS,
    D over none and the powers of two up to 2^MAX_SATURATION_BITS strictly between the
    smallest and the largest d; ties go to no saturation, then to the larger D."""
    ds, ts = (np.asarray(v, dtype=np.float64) for v in zip(*points, strict=True))
    if not (ts > 0).all():
        raise ValueError("cost measurements must be positive seconds")
    best = None
    # a D at or above the largest d is no saturation, at or below the smallest a constant
    saturations = [1 << bits for bits in range(MAX_SATURATION_BITS, 0, -1)
                   if ds.min() < 1 << bits < ds.max()]
    for saturation in (None, *saturations):
        sizes = ds if saturation is None else np.minimum(ds, saturation)
        for c in _EXPONENTS:
            # relative residuals t_fit/t - 1: linear least squares in (a, b, e) on rows / t
            design = np.column_stack([1.0 / ts, sizes ** c / ts, sizes ** 2 / ts])
            for columns in _TERMS:
                coefficients, *_ = np.linalg.lstsq(design[:, columns], np.ones_like(ts),
                                                   rcond=None)
                if (coefficients < 0).any():
                    continue
                full = np.zeros(3)
                full[list(columns)] = coefficients
                error = float(np.sum((design @ full - 1.0) ** 2))
                if best is None or error < best[0] * (1 - 1e-9):
                    best = (error, CostCurve(float(full[0]), float(full[1]), float(c),
                                             float(full[2]), saturation))
    assert best is not None  # the one-column fits of positive times are never negative
    return best[1]


def fit(measurements: Iterable[Mapping], epsilon: float) -> dict:
    """The model document (the content of MODEL_PATH) fitted to benchmark measurements at
    privacy level `epsilon`: rows with `protocol`, `d` and the COSTS fields."""
    by_protocol: dict[str, list[Mapping]] = {}
    for row in measurements:
        by_protocol.setdefault(row["protocol"], []).append(row)
    protocols: dict[str, dict[str, Any]] = {}
    for name, rows in by_protocol.items():
        protocols[name] = {cost: fit_curve((row["d"], row[cost]) for row in rows).as_dict()
                           for cost in COSTS}
        protocols[name]["domains"] = sorted(row["d"] for row in rows)
    return {"format": MODEL_FORMAT, "epsilon": epsilon, "protocols": protocols}


@dataclass(frozen=True)
class CostModel:
    """The fitted curves by protocol name, and the ε and domains they were measured at."""

    epsilon: float
    counting: Mapping[str, CostCurve]
    finalize: Mapping[str, CostCurve]
    domains: Mapping[str, tuple[int, ...]]

    def seconds_per_report(self, protocol: str, d: int) -> float | None:
        curve = self.counting.get(protocol)
        return None if curve is None else curve(d)

    def reports_per_second(self, protocol: str, d: int) -> float | None:
        """Reports one core counts per second at domain size d; None when unmeasured."""
        seconds = self.seconds_per_report(protocol, d)
        return None if seconds is None else 1.0 / seconds if seconds > 0 else math.inf

    def finalize_seconds(self, protocol: str, d: int) -> float | None:
        """Seconds of one window's support counts at domain size d; None when unmeasured."""
        curve = self.finalize.get(protocol)
        return None if curve is None else curve(d)


def model_from_document(document: Mapping) -> CostModel:
    """A CostModel from a model document (MODEL_PATH's content, or `fit`'s with `epsilon`)."""
    if document.get("format") != MODEL_FORMAT:
        raise ValueError(f"cost model format {document.get('format')!r}, expected {MODEL_FORMAT}")
    protocols = document["protocols"]
    return CostModel(
        float(document["epsilon"]),
        {name: CostCurve(**p["count_seconds_per_report"]) for name, p in protocols.items()},
        {name: CostCurve(**p["finalize_seconds"]) for name, p in protocols.items()},
        {name: tuple(p["domains"]) for name, p in protocols.items()})


@cache
def cost_model() -> CostModel:
    """The model shipped with the package (MODEL_PATH)."""
    return model_from_document(json.loads(MODEL_PATH.read_text(encoding="utf-8")))


#: Largest aggregation rate a registry or `ldp plan` may require, in reports per second per core.
MAX_AGGREGATION_RATE = 1e12


def aggregation_rate_problem(value: object) -> str | None:
    """Why `value` is not a usable aggregation rate (a phrase), or None when it is: a number in
    (0, MAX_AGGREGATION_RATE] reports per second per core."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not 0 < value <= MAX_AGGREGATION_RATE:
        return (f"must be a number of reports per second per core in (0, "
                f"{MAX_AGGREGATION_RATE:g}] (MAX_AGGREGATION_RATE), got {value!r}")
    return None


def sketch_costs(model: CostModel, protocol: Any) -> tuple[float | None, float | None]:
    """(reports per second per core, seconds of one window's support counts) of a pooled-hash
    oracle (ldp_telemetry.ldp.protocols.hash_pool) at its own k and m; (None, None) when the
    model does not measure it.

    The model measures the default k0 and m0; their costs are scaled by the terms that carry k
    and m: finalize by k/k0 (k·d hashes per window), CMS's counting by m/m0 (m bits unpacked
    and summed per report). HCMS and FLH count a report in O(1), whatever k and m. A scaling
    of measured figures, not a measurement: read it as an order of magnitude far from k0, m0.
    """
    name, d = protocol.name, protocol.d
    seconds, finalize = model.seconds_per_report(name, d), model.finalize_seconds(name, d)
    if seconds is None or finalize is None:
        return None, None
    if name == "cms":
        seconds *= protocol.m / protocol.default_m()
    finalize *= protocol.k / protocol.default_k()
    return (1.0 / seconds if seconds > 0 else math.inf), finalize
