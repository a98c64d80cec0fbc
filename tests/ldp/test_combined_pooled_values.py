"""benchmarks/combined_pooled_values.py: the band of a combination of two pooled-hash versions,
value by value under the pool they share; windows whose combination has no band are counted as
declared, not checked; the report renders both."""
from __future__ import annotations

import json

import numpy as np

from ldp_telemetry.ldp.engine.finalize import WindowResult
from ldp_telemetry.ldp.estimation.combine import combine_versions
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate


def test_the_benchmark_follows_each_value_of_the_combination(tmp_path):
    """One row per (data set, pair, ε, n) whose windows mostly have a band, with the declared
    windows counted; a cell whose windows mostly have none (CMS then FLH at ε = 4 with 10⁶
    reports: the collision share is far past 0.05) is listed as declared; bad sizes, windows
    and ε fail at start (exit 2)."""
    from tests.benchmark_scripts import loaded_scripts
    with loaded_scripts("combined_pooled_values", "report", "coverage_summary") as scripts:
        main = scripts["combined_pooled_values"].main
        arguments = ["--datasets", "zipf", "--windows", "4", "--datasets-dir", str(tmp_path)]
        assert main([*arguments, "--epsilons", "1", "4", "--sizes", "2000", "1000000",
                     "--pairs", "cms+flh", "--json", str(tmp_path / "c.json")]) == 0
        for bad in (["--sizes", "1"], ["--windows", "0"], ["--epsilons", "0"]):
            assert main([*arguments, *bad]) == 2, bad
        document = json.loads((tmp_path / "c.json").read_text())
        results = document["results"]
        table = scripts["report"].combined_pooled_values(
            {**results, "parameters": document["parameters"]})
        [row] = scripts["coverage_summary"].combined_pooled_rows(results)
    measured = {(r["epsilon"], r["n"]) for r in results["rows"]}
    declared = {(c["epsilon"], c["n"]): c["declared_windows"] for c in results["declared"]}
    assert (1.0, 2000) in measured and declared.get((4.0, 1_000_000)) == 4
    assert measured.isdisjoint(declared) and len(measured) + len(declared) == 4
    for r in results["rows"]:
        assert r["values"] == 64 and r["protocol"] == "cms+flh" and r["sampler"] == "exact+client"
        assert 2 * (4 - r["declared_windows"]) >= 4
    assert "| CMS+FLH | zipf | 4 |" in table and "declared (4)" in table
    assert row["pairs"] == 64 * len(measured) and row["declared"] == 64 * len(declared)
    for r in results["rows"]:
        coverages = np.array(r["coverages"].split(), dtype=float)
        assert coverages.size == 64 and r["all_values"] == round(float(coverages.mean()), 4)


def test_the_versions_share_one_pool_and_their_combination_carries_the_shared_part():
    """The two versions the benchmark makes hash one root, so their combination's variance has
    the shared collision part (combine_versions' shared_variance > 0), and its band is declared
    exactly where combine's pool rule says (band_reason names the combination)."""
    from tests.benchmark_scripts import loaded_scripts
    with loaded_scripts("combined_pooled_values") as scripts:
        configs = scripts["combined_pooled_values"].versions("cms", "hcms", 4.0, 64)
    assert [c.protocol.name for c in configs] == ["cms", "hcms"]
    rng = np.random.default_rng(3)
    f = rng.dirichlet(np.full(64, 0.3))
    for n, banded in ((2_000, True), (2_000_000, False)):
        parts = []
        for config in configs:
            counts = rng.multinomial(n // 2, f)
            noise = config.protocol.noise(n // 2)
            support = noise.n * (noise.q_star + (noise.p_star - noise.q_star) * counts / (n // 2))
            unbiased = unbiased_estimate(support, noise)
            parts.append((config, WindowResult(n // 2, unbiased, np.zeros(64), unbiased,
                                               noise.for_window(unbiased))))
        combined = combine_versions(parts)
        assert combined is not None and combined.shared_variance > 0.0
        assert (combined.band_reason is None) is banded, n
        if not banded:
            assert "combined:" in combined.band_reason
