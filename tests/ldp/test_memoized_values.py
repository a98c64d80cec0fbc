"""benchmarks/memoized_values.py: the record's value bands of a memoized oracle, value by value,
through its client or its composed channel, with LOLOHA's g where asked; the report renders
them and the coverage summary counts their (cell, value) pairs."""
from __future__ import annotations

import json

import numpy as np
import pytest

from ldp_telemetry.ldp.protocols.memoized import loloha_g


def test_the_benchmark_checks_every_value_of_every_window(tmp_path):
    """One row per (data set, oracle, ε, n) with every value's coverage over the windows; a cell
    whose records have no value bands (too few expected supports) is listed as declared, not
    measured; windows of at least --channel-from reports come from the composed channel;
    LOLOHA's g is the one `loloha_g` gives; a pure or unknown oracle, a g rule without memoized
    local hashing and a bad window count or lifetime factor fail at start (exit 2)."""
    from tests.benchmark_scripts import loaded_scripts
    with loaded_scripts("memoized_values", "report", "coverage_summary") as scripts:
        main = scripts["memoized_values"].main
        arguments = ["--datasets", "zipf", "--epsilons", "1", "--windows", "4",
                     "--datasets-dir", str(tmp_path)]
        assert main([*arguments, "--protocols", "memoized-olh", "memoized-grr", "--sizes",
                     "50", "2000", "--channel-from", "2000", "--g-rule", "loloha", "--json",
                     str(tmp_path / "v.json")]) == 0
        for bad in (["--protocols", "olh"], ["--protocols", "memoized-hr"],
                    ["--protocols", "memoized-grr", "--g-rule", "loloha"],
                    ["--protocols", "memoized-olh", "--windows", "0"],
                    ["--protocols", "memoized-olh", "--lifetime-factor", "1"],
                    ["--protocols", "memoized-olh", "--epsilons", "0"]):
            assert main([*arguments, *bad]) == 2, bad
        with pytest.raises(SystemExit) as stopped:
            main([*arguments, "--g-rule", "other"])
        assert stopped.value.code == 2
        document = json.loads((tmp_path / "v.json").read_text())
        results = document["results"]
        table = scripts["report"].memoized_values({**results,
                                                   "parameters": document["parameters"]})
        [row] = scripts["coverage_summary"].memoized_value_rows(results)
    rows = {(r["protocol"], r["n"]): r for r in results["rows"]}
    # memoized GRR over 64 values at n = 50 expects fewer than 4 supports of a value: declared
    assert set(rows) == {("memoized-olh", 50), ("memoized-olh", 2000), ("memoized-grr", 2000)}
    assert results["declared"] == [{"dataset": "zipf", "protocol": "memoized-grr",
                                    "epsilon": 1.0, "n": 50}]
    assert {key: r["sampler"] for key, r in rows.items()} == {
        ("memoized-olh", 50): "client", ("memoized-olh", 2000): "channel",
        ("memoized-grr", 2000): "channel"}
    olh = rows[("memoized-olh", 2000)]
    assert (olh["g"], olh["g_rule"]) == (loloha_g(2.0, 1.0, 2 * 4 + 2), "loloha")
    assert "g" not in rows[("memoized-grr", 2000)]
    for r in rows.values():
        coverages = np.array(r["coverages"].split(), dtype=float)
        assert coverages.size == r["values"] == 64
        assert np.all(np.isin(coverages, [0.0, 0.25, 0.5, 0.75, 1.0]))  # 4 windows
        assert r["all_values"] == pytest.approx(coverages.mean(), abs=1e-4)
    assert "| MEMOIZED-OLH | zipf | 1 |" in table and "declared" in table
    assert "drawn from the composed channel" in table
    assert row["pairs"] == 3 * 64 and row["declared"] == 64
    assert "MEMOIZED-OLH (LOLOHA's g)" in row["note"]
