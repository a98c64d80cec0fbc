"""benchmarks/pooled_sets.py: `ldp query`'s set and range bands of a pooled-hash window whose
values keep their bands, the same queries followed over the windows of one pool; windows whose
answers have no band are counted as declared, not checked; the report renders both."""
from __future__ import annotations

import json

import numpy as np


def test_the_benchmark_follows_the_same_sets_and_ranges_over_the_windows(tmp_path):
    """One row per (data set, oracle, ε, n) with each of its 2 × --queries answers' coverage
    over the banded windows; a cell past the pool-bias share in most windows (FLH at ε = 4 with
    10⁶ reports) is listed as declared; the queries are drawn once per cell (the same in every
    window: a pure or unknown oracle, a bad query count, window count or ε fail at start, exit
    2)."""
    from tests.benchmark_scripts import loaded_scripts
    with loaded_scripts("pooled_sets", "report", "coverage_summary") as scripts:
        main = scripts["pooled_sets"].main
        arguments = ["--datasets", "zipf", "--windows", "4", "--datasets-dir", str(tmp_path)]
        assert main([*arguments, "--protocols", "flh", "--epsilons", "1", "4", "--sizes",
                     "2000", "1000000", "--queries", "3", "--json",
                     str(tmp_path / "s.json")]) == 0
        for bad in (["--protocols", "olh"], ["--queries", "0"], ["--queries", "101"],
                    ["--windows", "0"], ["--epsilons", "0"]):
            assert main([*arguments, *bad]) == 2, bad
        document = json.loads((tmp_path / "s.json").read_text())
        results = document["results"]
        table = scripts["report"].pooled_sets({**results, "parameters": document["parameters"]})
        [row] = scripts["coverage_summary"].pooled_set_rows(results)
    measured = {(r["epsilon"], r["n"]) for r in results["rows"]}
    declared = {(c["epsilon"], c["n"]): c["declared_windows"] for c in results["declared"]}
    assert (1.0, 2000) in measured and declared.get((4.0, 1_000_000)) == 4
    for r in results["rows"]:
        coverages = np.array(r["coverages"].split(), dtype=float)
        assert coverages.size == r["queries"] == 6 and r["windows"] == 4 - r["declared_windows"]
        assert r["all_queries"] == round(float(coverages.mean()), 4)
    assert "| FLH | zipf | 1 |" in table and "declared (4)" in table
    assert row["pairs"] == 6 * len(measured) and row["declared"] == 6 * len(declared)
