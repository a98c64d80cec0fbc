"""benchmarks/pooled_values.py: each value's coverage across windows of one fixed pool, for the
record's band of a pooled-hash oracle and the band with the pool's bias removed."""
from __future__ import annotations

import json

import numpy as np

from tests.benchmark_scripts import loaded_scripts


def test_the_script_measures_each_value_across_windows_and_fails_bad_flags_at_start(tmp_path):
    with loaded_scripts("pooled_values", "report", "coverage_summary") as scripts:
        script = scripts["pooled_values"]
        arguments = ["--datasets", "zipf", "--epsilons", "2", "--sizes", "1000", "--windows",
                     "4", "--datasets-dir", str(tmp_path)]
        for band, pool in (("record", None), ("corrected", "131")):
            path = tmp_path / f"{band}.json"
            extra = ["--band", band] + ([] if pool is None else ["--pool", pool])
            assert script.main([*arguments, *extra, "--json", str(path)]) == 0
            results = json.loads(path.read_text())["results"]
            rows = results["rows"]
            assert {r["protocol"] for r in rows} == {"cms", "hcms", "flh"}
            assert {(r["band"], r["pool"]) for r in rows} == {
                (band, "default" if pool is None else int(pool))}
            assert all(r["values"] == 64 and 0 <= r["lowest"] <= r["all_values"] <= 1
                       for r in rows)
            assert set(results["summary"]) == {"cms", "hcms", "flh"}
            section = scripts["report"].pooled_values(
                dict(results, parameters=json.loads(path.read_text())["parameters"]))
            assert "| CMS | zipf | 2 | 64 |" in section
        for bad in (["--protocols", "grr"], ["--windows", "0"], ["--sizes", "0"],
                    ["--pool", "-1"]):
            assert script.main([*arguments, *bad]) == 2, bad


def test_a_value_whose_band_always_misses_counts_below_by_two():
    with loaded_scripts("pooled_values", "coverage_summary") as scripts:
        coverage = np.array([0.95] * 9 + [0.10])
        mass = np.array([0.05] * 9 + [0.55])
        row = scripts["pooled_values"].cell_row("zipf", "cms", 1.0, 1000, 100, coverage, mass,
                                                "exact", 0.0)
        assert row["below_by_two"] == 1 and row["below_by_two_mass"] == 0.55
        assert row["lowest"] == 0.1 and row["lowest_frequency"] == 0.55
        # chance puts 0.28 of 10 values there (sd 0.52): one is within it, three are not
        assert not scripts["pooled_values"].excess(row)
        assert scripts["pooled_values"].excess(dict(row, below_by_two=3))


def test_the_shipped_band_follows_the_records_rule_window_by_window(tmp_path):
    """--band shipped: at 1,000 reports HCMS and FLH windows have the record's band (CMS's are
    past the pool-bias share already on this concentrated Zipf data); at 10⁵ (past it for all
    three) CMS and HCMS windows have the pool-corrected band and
    FLH's none, a cell without a band is `declared` (no coverage), and the summary's per-value
    row counts one pair per (cell, value) with a band and the declared cells' values apart."""
    with loaded_scripts("pooled_values", "report", "coverage_summary") as scripts:
        path = tmp_path / "shipped.json"
        assert scripts["pooled_values"].main([
            "--datasets", "zipf", "--epsilons", "4", "--sizes", "1000", "100000", "--windows",
            "3", "--datasets-dir", str(tmp_path), "--band", "shipped", "--pool", "231",
            "--json", str(path)]) == 0
        document = json.loads(path.read_text())
        rows = {(r["protocol"], r["n"]): r for r in document["results"]["rows"]}
        for name in ("hcms", "flh"):
            assert rows[name, 1000]["methods"] == {"exact-variance": 3}
        assert rows["cms", 1000]["methods"] == {"pool-corrected": 3}
        assert all(sum(rows[name, 1000]["held"].values()) == 64 for name in ("cms", "hcms"))
        assert rows["cms", 100000]["methods"] == {"pool-corrected": 3}
        assert rows["hcms", 100000]["methods"] == {"pool-corrected": 3}
        assert rows["flh", 100000]["methods"] == {"none": 3}
        assert rows["flh", 100000]["declared"] and rows["flh", 100000]["windows"] == 0
        assert document["results"]["summary"]["flh"]["declared_cells"] == 1
        section = scripts["report"].pooled_values(
            dict(document["results"], parameters=document["parameters"]))
        assert "declared" in section and " c |" in section
        [row] = scripts["coverage_summary"].pooled_value_rows(document["results"])
        assert row["pairs"] == 5 * 64 and row["declared"] == 64
        assert row["family"].endswith("value by value under one pool")


def test_fixed_queries_are_followed_over_the_windows_by_their_band(tmp_path):
    """--queries K: K sets and K ranges per cell, each window's answer checked with the band
    of its kind — below the pool-bias share the one `ldp query` gives, past it the f~ band and
    the sum of g — counted per query over the windows of that kind; the report's section and
    the summary's rows read them; --queries needs --band shipped."""
    with loaded_scripts("pooled_values", "report", "coverage_summary") as scripts:
        script = scripts["pooled_values"]
        path = tmp_path / "queries.json"
        arguments = ["--datasets", "zipf", "--protocols", "hcms", "--epsilons", "4", "--sizes",
                     "1000", "100000", "--windows", "3", "--datasets-dir", str(tmp_path)]
        assert script.main([*arguments, "--band", "shipped", "--queries", "2",
                            "--json", str(path)]) == 0
        document = json.loads(path.read_text())
        rows = {r["n"]: r for r in document["results"]["rows"]}
        assert rows[1000]["corrected_windows"] == 0 and rows[100000]["corrected_windows"] == 3
        assert sum(rows[1000]["query_exact_held"].values()) == 4
        assert rows[1000]["query_corrected_held"] == {"0": 4}
        assert sum(rows[100000]["query_corrected_held"].values()) == 4
        assert rows[100000]["query_exact_held"] == {"0": 4}
        section = scripts["report"].pooled_values(
            dict(document["results"], parameters=document["parameters"]))
        assert "sum of g" in section
        shipped, plain = scripts["coverage_summary"].pooled_query_rows(document["results"])
        assert (shipped["pairs"], shipped["declared"]) == (8, 0)
        assert plain["pairs"] == 4
        for bad in (["--queries", "2"], ["--band", "shipped", "--queries", "-1"]):
            assert script.main([*arguments, *bad]) == 2, bad
        assert script.fixed_queries(50, 3, np.random.default_rng(0)).sum(axis=1)[:3].tolist() \
            == [5.0, 5.0, 5.0]
