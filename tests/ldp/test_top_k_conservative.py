"""Top-k answers have no 95% band: the band they were given is conservative, and is given beside
under its own name (WindowEstimate.top_k, frequency_bands.TOP_K_CONSERVATIVE_REASON), its
figures those of the committed results (benchmarks/coverage_summary.py)."""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from ldp_telemetry.ldp.estimation.estimators import EstimatorSpec
from ldp_telemetry.ldp.estimation.frequency_bands import (TOP_K_CONSERVATIVE_COVERAGE,
                                                          top_k_bands,
                                                          top_k_conservative_reason,
                                                          top_k_filtered_bands,
                                                          top_k_rank_conditional_bands)
from ldp_telemetry.ldp.estimation.postprocess import PostprocessSpec
from ldp_telemetry.ldp.estimation.queries import WindowEstimate
from ldp_telemetry.ldp.estimation.uncertainty import CONSERVATIVE_LABEL
from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.ldp.protocols.memoized import make_memoized_protocol
from tests.benchmark_scripts import loaded_scripts

F = np.array([0.4, 0.2, 0.15, 0.1, 0.08, 0.04, 0.02, 0.01])


def window(protocol, n: int, f: np.ndarray = F, seed: int = 5) -> WindowEstimate:
    """A Norm-Sub window of n reports drawn around f with the protocol's exact variance."""
    variance = np.maximum(protocol.noise(n).variance(f), 1e-12)
    unbiased = f + np.random.default_rng(seed).normal(0, np.sqrt(variance))
    return WindowEstimate.from_unbiased(protocol, n, unbiased, PostprocessSpec("norm-sub", ()),
                                        labels=[str(i) for i in range(f.size)], metric="m")


def wiener_window() -> WindowEstimate:
    """DW after OUE over 48 values, 10⁶ reports, then base: a measured Wiener top-k band."""
    protocol = make_protocol("oue", 1.0, 48)
    f = np.random.default_rng(4).dirichlet(np.full(48, 0.3))
    n = 1_000_000
    unbiased = f + np.random.default_rng(5).normal(0, np.sqrt(protocol.noise(n).variance(f)))
    return replace(WindowEstimate.from_unbiased(protocol, n, unbiased, "base"),
                   estimator=EstimatorSpec("dw", ()))


def expected(w: WindowEstimate, k: int) -> tuple[str, str, tuple[np.ndarray, np.ndarray]]:
    """(family, method, bands) the window's top-k answers were given as their 95% band before:
    the functions WindowEstimate.top_k calls, on the same window."""
    if w._fit is not None:
        return "wiener", "rank-conditional-union", top_k_filtered_bands(
            w.unbiased, w.noise, w.protocol, w._filter_fit, w._postprocessor, k)
    if w.protocol.name in ("cms", "hcms", "flh") or getattr(w.protocol, "memoized", False):
        return "union", "bias-corrected-bootstrap", top_k_bands(w.unbiased, w.noise,
                                                                 w._postprocessor, k)
    return "pure", "rank-conditional-union", top_k_rank_conditional_bands(
        w.unbiased, w.noise, w.protocol, w._postprocessor, k)


@pytest.mark.parametrize("make", [
    lambda: window(make_protocol("oue", 1.0, F.size), 10_000),
    lambda: window(make_protocol("grr", 2.0, F.size), 5_000),
    lambda: window(make_protocol("cms", 1.0, F.size), 20_000),
    lambda: window(make_memoized_protocol("oue", 1.0, F.size, 2.0), 5_000),
    wiener_window], ids=["oue", "grr", "cms", "memoized-oue", "dw-oue"])
def test_a_banded_top_k_answer_has_no_95_band_and_gives_its_band_as_conservative(make):
    """Pure, pooled-hash, memoized and Wiener windows: every answer has band_method none, no
    lower95/upper95, the family's conservative reason, and conservative_lower/upper equal to
    the band function's output bit for bit, conservative_method its old method name."""
    w = make()
    answers = w.top_k(3)
    family, method, (lower, upper) = expected(w, 3)
    assert [(a.band_method, a.lower95, a.upper95) for a in answers] == [("none", None, None)] * 3
    assert [a.band_reason for a in answers] == [top_k_conservative_reason(family)] * 3
    assert [a.conservative_method for a in answers] == [method] * 3
    assert [(a.conservative_lower, a.conservative_upper) for a in answers] == [
        (float(low), float(high)) for low, high in zip(lower, upper, strict=True)]
    as_json = json.loads(json.dumps(answers[0].as_dict()))
    assert (as_json["conservative_lower"], as_json["conservative_upper"],
            as_json["conservative_method"], as_json["lower95"]) == (
        float(lower[0]), float(upper[0]), method, None)


@pytest.mark.parametrize("make, said", [
    (lambda: window(make_protocol("cms", 4.0, F.size), 1_000_000), "cms at ε = 4"),
    (lambda: window(make_protocol("oue", 8.0, F.size), 100_000), "measured for ε 0.5–4"),
    (lambda: replace(window(make_protocol("oue", 1.0, F.size), 10_000),
                     estimator=EstimatorSpec("smooth", ())), "smooth"),
    (lambda: window(make_protocol("grr", 0.5, 400), 1_000, np.full(400, 1 / 400)),
     "expects n·q*")], ids=["declared-cell", "outside-grid", "wiener-declared", "few"])
def test_a_declared_top_k_answer_has_no_band_of_either_kind(make, said):
    """Declared answers (top_k_declared, wiener_top_k_declared, too few supports) and ranks
    beyond those measured keep no band of either kind, their reason unchanged."""
    answers = make().top_k(12)
    assert all((a.band_method, a.lower95, a.upper95, a.conservative_lower, a.conservative_upper,
                a.conservative_method) == ("none", None, None, None, None, None)
               for a in answers), answers
    assert all(not a.band_reason.startswith("no calibrated 95% band") for a in answers)
    assert said in answers[0].band_reason, answers[0].band_reason
    ranked = window(make_protocol("oue", 1.0, 24), 10_000, np.linspace(1.0, 0.1, 24) / 13.2)
    beyond = ranked.top_k(12)[10:]
    assert all(a.conservative_lower is None and a.band_reason.startswith("no band for the value "
                                                                           "ranked")
               for a in beyond)


def _summary_pairs() -> dict[str, list[tuple[float, int]]]:
    """Each family's (coverage, windows) pairs of the committed results, as the coverage
    summary counts them."""
    with loaded_scripts("coverage_summary") as scripts:
        summary = scripts["coverage_summary"]
        pairs: dict[str, list[tuple[float, int]]] = {}
        tally = summary.tally

        def keeping(family, band, found, *rest, **named):
            pairs[family] = found
            return tally(family, band, found, *rest, **named)
        summary.tally = keeping
        try:
            rows = summary.summary()
        finally:
            summary.tally = tally
    return {"rows": rows, **pairs}  # type: ignore[dict-item]


def test_the_summary_labels_the_top_k_rows_conservative_and_declares_their_95_band():
    """The rows of the top-k bands `ldp query` computes read CONSERVATIVE_LABEL, the rows
    measured and not used keep theirs, and a DECLARED row says top-k answers have no 95% band,
    the conservative one given instead; the conservative reason's figures are those rows'."""
    found = _summary_pairs()
    bands = {row["family"]: row["band"] for row in found["rows"]}
    for family in ("top-k answers, per rank", "top-k answers, per rank, union alone",
                   "top-k answers, per rank, pooled and memoized",
                   "top-k answers, per rank, memoized oracles at ε∞ = 1.25 ε1 and 5 ε1",
                   "Wiener top-k answers, per rank"):
        assert bands[family] == CONSERVATIVE_LABEL, family
    assert bands["top-k answers, per rank, conditional alone"] == "(measured, not used)"
    declared = [row for row in found["rows"]
                if row["band"] == "none" and row["family"].startswith("top-k answers")]
    assert len(declared) == 1 and "conservative band is given instead" in declared[0]["note"]
    families = {"pure": ["top-k answers, per rank"],
                "union": ["top-k answers, per rank, pooled and memoized",
                          "top-k answers, per rank, memoized oracles at ε∞ = 1.25 ε1 and 5 ε1"],
                "wiener": ["Wiener top-k answers, per rank"]}
    for key, names in families.items():
        pairs = [pair for name in names for pair in found[name]]
        coverages = [c for c, _ in pairs]
        lowest, highest, above, triples, _ = TOP_K_CONSERVATIVE_COVERAGE[key]
        assert (round(min(coverages), 3), round(max(coverages), 3)) == (lowest, highest), key
        assert (sum(c > 0.995 for c in coverages), len(pairs)) == (above, triples), key
