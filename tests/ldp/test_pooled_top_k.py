"""Top-k bands of the pooled-hash and memoized oracles: benchmarks/pooled_top_k.py measures the
band `ldp query --top` gives them (the union of the bootstrap and the score band), and the cells
where a rank of theirs fell more than two standard errors below 0.95 are declared without a band
(frequency_bands.TOP_K_UNCALIBRATED, keyed by `top_k_oracle`)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from ldp_telemetry.ldp.estimation.frequency_bands import (MEMOIZED_KEY, top_k_bands,
                                                          top_k_oracle)
from ldp_telemetry.ldp.estimation.postprocess import METHODS, PostprocessSpec
from ldp_telemetry.ldp.estimation.queries import WindowEstimate
from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.ldp.protocols.memoized import make_memoized_protocol
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate

F = np.array([0.3, 0.2, 0.15, 0.1, 0.08, 0.06, 0.04, 0.03, 0.02, 0.01, 0.01, 0.0])


def lifetime(key: str, epsilon: float) -> float | None:
    """ε∞ = 2 ε1 for a memoized oracle's key (the ratio every seed measured), None otherwise."""
    return 2.0 * epsilon if key.startswith(MEMOIZED_KEY) else None


def window(protocol, n: int, seed: int = 5) -> np.ndarray:
    """An unbiased estimate of F from n reports through the protocol's client."""
    rng = np.random.default_rng(seed)
    values = rng.choice(F.size, size=n, p=F)
    statistic = protocol.new_statistic()
    protocol.accumulate(statistic, protocol.perturb(values, rng))
    return unbiased_estimate(protocol.support_counts(statistic), protocol.noise(n))


def test_the_oracle_key_tells_a_memoized_oracle_from_its_one_stage_member():
    """A memoized oracle's registry name is its one-stage member's; its top-k key is prefixed."""
    assert top_k_oracle(make_protocol("grr", 1.0, 8)) == "grr"
    assert top_k_oracle(make_protocol("cms", 1.0, 8)) == "cms"
    assert top_k_oracle(make_memoized_protocol("grr", 1.0, 8, 2.0)) == f"{MEMOIZED_KEY}grr"
    # memoized local hashing with LOLOHA's g: another g, another channel, measured apart
    assert top_k_oracle(make_memoized_protocol("olh", 1.0, 8, 2.0, "loloha")) == (
        f"{MEMOIZED_KEY}olh-loloha")
    assert top_k_oracle(make_memoized_protocol("olh", 1.0, 8, 2.0, "report")) == (
        f"{MEMOIZED_KEY}olh")
    # RLH with LOLOHA's g is OLH with it (they differ only in the g they choose)
    assert top_k_oracle(make_memoized_protocol("rlh", 1.0, 256, 2.0, "loloha")) == (
        f"{MEMOIZED_KEY}olh-loloha")
    # keyed by the channel: over 8 values RLH's own g at ε1 = 1 is LOLOHA's (3), and over 256
    # at ε∞ = 4 ε1 = 8 OLH's is (8 at ε1 = 2)
    assert top_k_oracle(make_memoized_protocol("rlh", 1.0, 8, 2.0, "loloha")) == (
        f"{MEMOIZED_KEY}rlh")
    assert top_k_oracle(make_memoized_protocol("olh", 2.0, 256, 8.0, "loloha")) == (
        f"{MEMOIZED_KEY}olh")
    assert top_k_oracle(make_memoized_protocol("rlh", 1.0, 8, 2.0)) == f"{MEMOIZED_KEY}rlh"


def test_the_benchmark_measures_the_band_ldp_query_gives(tmp_path):
    """The benchmark's band of a pooled-hash or memoized window is `ldp query --top`'s
    (WindowEstimate.top_k: the window's noise with the collision term, R = 40); the script
    writes one row per (cell, method) with each rank's coverage, the report renders them and the
    coverage summary counts their triples; --confirm measures only the cells with a failing
    triple in a results file; a pure one-stage oracle, a bad window count, size, ε or lifetime
    factor or an unreadable --confirm file fail at start (exit 2)."""
    from tests.benchmark_scripts import loaded_scripts
    n = 3_000
    for protocol in (make_protocol("flh", 1.0, F.size),
                     make_memoized_protocol("oue", 1.0, F.size, 2.0)):
        unbiased = window(protocol, n)
        noise = protocol.noise(n).for_window(unbiased)
        lower, upper = top_k_bands(unbiased, noise,
                                   lambda u, noise=noise: METHODS["norm-sub"].run(u, noise), 5)
        answers = WindowEstimate.from_unbiased(protocol, n, unbiased,
                                               PostprocessSpec("norm-sub", ())).top_k(5)
        assert [a.conservative_method for a in answers] == ["bias-corrected-bootstrap"] * 5
        assert [(a.band_method, a.lower95, a.upper95) for a in answers] == [
            ("none", None, None)] * 5
        assert [(a.conservative_lower, a.conservative_upper) for a in answers] == list(
            zip(lower, upper, strict=True))
    with loaded_scripts("pooled_top_k", "report", "coverage_summary") as scripts:
        arguments = ["--datasets", "zipf", "--epsilons", "1", "--sizes", "1000", "--windows",
                     "3", "--methods", "base", "norm-sub", "--datasets-dir", str(tmp_path)]
        assert scripts["pooled_top_k"].main(
            [*arguments, "--protocols", "cms", "memoized-grr", "--json",
             str(tmp_path / "p.json")]) == 0
        for bad in (["--protocols", "grr"], ["--protocols", "memoized-hr"],
                    ["--protocols", "cms", "--windows", "0"],
                    ["--protocols", "cms", "--lifetime-factor", "1"],
                    ["--protocols", "cms", "--sizes", "0"],
                    ["--protocols", "cms", "--sizes", "100000000"],
                    ["--protocols", "cms", "--epsilons", "0"],
                    ["--protocols", "cms", "--epsilons", "nan"]):
            assert scripts["pooled_top_k"].main([*arguments, *bad]) == 2, bad
        document = json.loads((tmp_path / "p.json").read_text())
        results = document["results"]
        # --confirm: only the cells with a failing triple in a results file, on another seed
        failing = {"dataset": "zipf", "epsilon": 1.0, "n": 1000, "method": "base", "rank": 1,
                   "coverage": 0.33}
        confirmed = {"results": {"rows": [], "summary": {
            "cms": {"failing": [failing]}, "memoized-grr": {"failing": []}}}}
        (tmp_path / "c.json").write_text(json.dumps(confirmed))
        assert scripts["pooled_top_k"].failing_cells(confirmed["results"]) == {
            ("zipf", "cms", 1.0, 1000)}
        assert scripts["pooled_top_k"].main(
            [*arguments, "--protocols", "cms", "memoized-grr", "--seed", "2", "--confirm",
             str(tmp_path / "c.json"), "--json", str(tmp_path / "c2.json")]) == 0
        again = json.loads((tmp_path / "c2.json").read_text())["results"]["rows"]
        assert {(r["protocol"], r["method"]) for r in again} == {("cms", "base"),
                                                                  ("cms", "norm-sub")}
        assert scripts["pooled_top_k"].main(
            [*arguments, "--protocols", "cms", "--confirm", str(tmp_path / "none.json")]) == 2
        table = scripts["report"].top_k_pooled({**results, "parameters": document["parameters"]})
        [row] = scripts["coverage_summary"].pooled_top_k_rows(results)
    rows = results["rows"]
    assert {(r["protocol"], r["oracle"], r["method"]) for r in rows} == {
        ("cms", "cms", "base"), ("cms", "cms", "norm-sub"),
        ("memoized-grr", "memoized-grr", "base"), ("memoized-grr", "memoized-grr", "norm-sub")}
    for r in rows:
        assert len(r["by_rank"].split()) == 10 and r["windows"] == 3
        assert (r["lifetime_epsilon"] == 2.0) is r["protocol"].startswith(MEMOIZED_KEY)
    assert "| CMS | zipf | base | 10 |" in table and "| MEMOIZED-GRR | zipf | norm-sub |" in table
    assert row["pairs"] + row["declared"] == 40 and "CMS, MEMOIZED-GRR" in row["note"]
    assert results["summary"]["cms"]["triples"] == 20


def test_declared_cells_have_no_band_there_and_only_there():
    """top_k_declared: for every oracle key of TOP_K_UNCALIBRATED and every cell of the top-k
    grid, a reason naming the oracle, the cell and the benchmark that measured it exactly where
    the cell is declared, None elsewhere; a pure one-stage oracle (SUE's former declaration
    included) and a memoized oracle's one-stage member are declared nowhere."""
    from ldp_telemetry.ldp.estimation.frequency_bands import (TOP_K_EPSILONS, TOP_K_SIZES,
                                                              TOP_K_UNCALIBRATED,
                                                              top_k_declared)
    assert set(TOP_K_UNCALIBRATED) == {"cms", "hcms", "flh", f"{MEMOIZED_KEY}grr",
                                       f"{MEMOIZED_KEY}oue", f"{MEMOIZED_KEY}olh",
                                       f"{MEMOIZED_KEY}sue", f"{MEMOIZED_KEY}rue",
                                       f"{MEMOIZED_KEY}blh", f"{MEMOIZED_KEY}rlh",
                                       f"{MEMOIZED_KEY}olh-loloha"}
    # memoized RUE's rank 3 at ε = 0.5, n = 10³ (airports, norm-hyb): 0.85, then 0.91 on
    # another seed, 0.88 over both (ε∞ = 2 ε1)
    assert (0.5, 1_000) in TOP_K_UNCALIBRATED[f"{MEMOIZED_KEY}rue"]
    # at n = 10⁶ (seeds 731 and 831, windows from the composed channel): memoized BLH's rank 5
    # of airports and rank 6 of the common words at ε = 0.5 (0.905–0.91 over both seeds), and
    # memoized OLH's rank 2 of the common words at ε = 0.5 (0.915 after norm-sub)
    assert {(0.5, 1_000_000)} <= TOP_K_UNCALIBRATED[f"{MEMOIZED_KEY}blh"]
    assert {(0.5, 1_000_000)} <= TOP_K_UNCALIBRATED[f"{MEMOIZED_KEY}olh"]
    # memoized SUE's rank 2 of airports at ε = 2, n = 10⁶ (0.927 over the 400 windows of its four
    # channel runs at ε∞ = 2, 1.25 and 5 ε1: one channel); memoized GRR's rank 6 of the common
    # words there (0.90 on one run at 1.25 ε1) held 0.932 over its 400; no memoized oracle at
    # ε = 1 or 4 and n = 10⁶
    assert (2.0, 1_000_000) in TOP_K_UNCALIBRATED[f"{MEMOIZED_KEY}sue"]
    assert (2.0, 1_000_000) not in TOP_K_UNCALIBRATED[f"{MEMOIZED_KEY}grr"]
    assert not any((epsilon, 1_000_000) in cells for key, cells in TOP_K_UNCALIBRATED.items()
                   if key.startswith(MEMOIZED_KEY) for epsilon in (1.0, 4.0))
    # every pooled-hash oracle at n = 10⁶ (the collision bias grows against the noise with n)
    assert all((epsilon, 1_000_000) in TOP_K_UNCALIBRATED[name]
               for name in ("cms", "hcms", "flh") for epsilon in TOP_K_EPSILONS)
    for key, cells in TOP_K_UNCALIBRATED.items():
        for epsilon in TOP_K_EPSILONS:
            for n in TOP_K_SIZES:
                for method in ("base", "norm-sub", "norm-hyb", "auto"):
                    reason = top_k_declared(method, epsilon, n, key, lifetime(key, epsilon))
                    if (epsilon, n) in cells:
                        assert reason == (
                            f"no calibrated band for top-k answers of {key} at ε = {epsilon:g}, "
                            f"n = {n:,}: a rank's coverage fell more than two standard errors "
                            "below 0.95 there (benchmarks/pooled_top_k.py)")
                    else:
                        assert reason is None, (key, epsilon, n, method)
    for name in ("grr", "oue", "olh", "sue", "blh", "ss", "rws"):
        assert all(top_k_declared("norm-sub", epsilon, n, name, lifetime(name, epsilon)) is None
                   for epsilon in TOP_K_EPSILONS for n in TOP_K_SIZES), name
    # a window between grid cells takes the nearest cell's declaration
    assert top_k_declared("base", 4.2, 900_000, "cms") is not None


def test_a_pooled_hash_window_between_grid_cells_is_declared_where_a_neighbour_cell_is():
    """A pooled-hash oracle's top-k band fails by a collision bias the pool fixes, which grows
    against the noise with ε and n: a window between grid cells is declared where any grid
    cell bracketing it is (`top_k_declared`), not only the nearest. Measured at n = 3·10⁵,
    which the nearest-cell rule puts in the n = 10⁵ cell (benchmarks/pooled_top_k.py, seed
    331, W = 100): FLH at ε = 0.5 held a rank in 0.86 of windows, FLH at ε = 4 and CMS at ε = 1
    0.90 — cells whose n = 10⁵ neighbour ships a band and whose n = 10⁶ one is declared. On a
    grid point only that cell counts; a memoized oracle keeps the nearest cell."""
    from ldp_telemetry.ldp.estimation.frequency_bands import top_k_declared
    for key, epsilon, n in (("cms", 1.0, 300_000), ("flh", 0.5, 300_000),
                            ("flh", 4.0, 300_000), ("hcms", 0.5, 150_000),
                            ("cms", 1.5, 100_000),  # between ε = 1 (held) and 2 (declared)
                            ("cms", 1.0, 3_000_000)):  # above the grid: the n = 10⁶ cell
        reason = top_k_declared("norm-sub", epsilon, n, key)
        assert reason is not None and f"{key} at ε = {epsilon:g}, n = {n:,}" in reason, (key, n)
    for key, epsilon, n in (("cms", 1.0, 20_000), ("cms", 1.0, 100_000),
                            ("hcms", 0.5, 3_000), ("flh", 0.5, 50_000),
                            (f"{MEMOIZED_KEY}oue", 3.0, 50_000),
                            (f"{MEMOIZED_KEY}grr", 0.5, 5_000)):
        assert top_k_declared("norm-sub", epsilon, n, key, lifetime(key, epsilon)) is None, (
            key, epsilon, n)
    # `ldp query --top` on a CMS window of 3·10⁵ reports at ε = 1 gives no band, and says why
    protocol = make_protocol("cms", 1.0, F.size)
    answers = WindowEstimate.from_unbiased(protocol, 300_000, F,
                                           PostprocessSpec("norm-sub", ())).top_k(3)
    assert [(a.band_method, a.lower95, a.conservative_lower) for a in answers] == [
        ("none", None, None)] * 3
    assert "cms at ε = 1, n = 300,000" in answers[0].band_reason


def test_a_memoized_wiener_record_is_named_by_its_oracle_key_in_the_top_k_reason():
    """A Wiener record of a memoized oracle has no top-k band; the reason names it by its key
    (`top_k_oracle`: "memoized-grr"), not by its one-stage member's registry name ("grr", a
    pure oracle whose Wiener top-k band exists over the domains it was measured over,
    WIENER_TOP_K_DOMAINS)."""
    from ldp_telemetry.ldp.estimation.frequency_bands import (WIENER_TOP_K_DOMAINS,
                                                              wiener_top_k_declared)
    d = WIENER_TOP_K_DOMAINS["dw", "grr", "base"][0][0]  # its first span's smallest d
    memoized = make_memoized_protocol("grr", 1.0, d, 2.0)
    reason = wiener_top_k_declared("dw", False, "base", memoized, 1.0, 10_000)
    assert reason is not None and f"on {MEMOIZED_KEY}grr:" in reason
    assert wiener_top_k_declared("dw", False, "base", make_protocol("grr", 1.0, d), 1.0,
                                 10_000) is None


def test_memoized_windows_from_the_composed_channel_and_with_lolohas_g(tmp_path):
    """--memoized-sampler channel draws a memoized oracle's windows from its composed channel
    (the pooled-hash oracle's stay on their own sampler), seeded apart per oracle; --g-rule
    loloha gives memoized OLH LOLOHA's g (the rows say which); --against counts the triples that
    differ from another run's by more than two standard errors of a difference; a g rule
    without memoized local hashing and an unreadable --against file fail at start (exit 2)."""
    from tests.benchmark_scripts import loaded_scripts

    from ldp_telemetry.ldp.protocols.memoized import loloha_g
    with loaded_scripts("pooled_top_k", "report", "coverage_summary") as scripts:
        main = scripts["pooled_top_k"].main
        arguments = ["--datasets", "zipf", "--epsilons", "1", "--sizes", "1000", "--windows",
                     "3", "--methods", "base", "--datasets-dir", str(tmp_path)]
        assert main([*arguments, "--protocols", "cms", "memoized-olh", "memoized-grr",
                     "--memoized-sampler", "channel", "--g-rule", "loloha", "--json",
                     str(tmp_path / "a.json")]) == 0
        assert main([*arguments, "--protocols", "memoized-olh", "--g-rule", "loloha",
                     "--against", str(tmp_path / "a.json"), "--json",
                     str(tmp_path / "b.json")]) == 0
        for bad in (["--protocols", "memoized-grr", "--g-rule", "loloha"],
                    ["--protocols", "memoized-olh", "--against", str(tmp_path / "none.json")]):
            assert main([*arguments, *bad]) == 2, bad
        for bad in (["--protocols", "memoized-olh", "--g-rule", "other"],
                    ["--protocols", "memoized-olh", "--memoized-sampler", "model"]):
            with pytest.raises(SystemExit) as stopped:  # argparse's choices
                main([*arguments, *bad])
            assert stopped.value.code == 2, bad
        first = json.loads((tmp_path / "a.json").read_text())
        second = json.loads((tmp_path / "b.json").read_text())
        table = scripts["report"].top_k_pooled({**second["results"],
                                                "parameters": second["parameters"]})
        drawn = scripts["report"].memoized_drawn(first["results"]["rows"])
    samplers = {r["protocol"]: r["sampler"] for r in first["results"]["rows"]}
    assert samplers == {"cms": "exact", "memoized-olh": "channel", "memoized-grr": "channel"}
    g = {r["protocol"]: (r.get("g"), r.get("g_rule")) for r in first["results"]["rows"]}
    assert g == {"cms": (None, None), "memoized-grr": (None, None),
                 "memoized-olh": (loloha_g(2.0, 1.0, 2 * 4 + 2), "loloha")}
    assert [r["sampler"] for r in second["results"]["rows"]] == ["client"]
    # the client's windows of memoized OLH against the channel's: its 10 ranks compared
    assert second["results"]["against"]["compared"] == 10
    assert 0 <= second["results"]["against"]["differ_by_two"] <= 10
    assert "10 triples compared" in table
    assert "`memoize.g` loloha: g = memoized-olh zipf ε 1: 3." in table
    assert "drawn from the composed channel" in drawn


def test_agreement_counts_triples_further_apart_than_two_standard_errors():
    """`agreement`: 0.95 against 0.80 over 100 windows each differs by more than two standard
    errors of a difference (0.045 at their pooled mean 0.875), 0.95 against 0.93 does not, and
    1.00 against 1.00 is no difference (the spread is floored at 0.95 · 0.05, not 0)."""
    from tests.benchmark_scripts import loaded_scripts

    def row(by_rank: str) -> dict:
        return {"dataset": "d", "protocol": "p", "oracle": "p", "epsilon": 1.0, "n": 10,
                "method": "base", "windows": 100, "by_rank": by_rank}
    with loaded_scripts("pooled_top_k", "coverage_summary") as scripts:
        found = scripts["pooled_top_k"].agreement([row("0.95 0.95 1")], [row("0.8 0.93 1")])
    assert found["compared"] == 3 and found["differ_by_two"] == 1
    assert found["largest_difference"] == 0.15 and found["differ_by_two_chance"] == 0.1


def test_memoized_top_k_at_a_million_reports_is_declared_where_a_rank_fell():
    """`ldp query --top` on a memoized BLH window at ε = 0.5 with 10⁶ reports, and on a memoized
    OLH one at ε = 0.5 with 5·10⁵ (whose nearest grid cell is n = 10⁶), gives every answer band
    none, the reason naming the oracle key and benchmarks/pooled_top_k.py (a rank fell more than
    two standard errors below 0.95 over the 200 windows of seeds 731 and 831); memoized BLH at
    ε = 1 and memoized OLH at 2·10⁵ reports (the n = 10⁵ cell) keep the union, and the
    one-stage BLH at ε = 0.5, n = 10⁶ the rank-conditional band."""
    f = np.array([0.4, 0.2, 0.15, 0.1, 0.08, 0.04, 0.02, 0.01])

    def top(protocol, n: int) -> list:
        variance = np.maximum(protocol.noise(n).variance(f), 1e-12)
        unbiased = f + np.random.default_rng(7).normal(0, np.sqrt(variance))
        return WindowEstimate.from_unbiased(protocol, n, unbiased,
                                            PostprocessSpec("norm-sub", ())).top_k(3)
    for name, n in (("blh", 1_000_000), ("olh", 500_000)):
        declared = top(make_memoized_protocol(name, 0.5, f.size, 1.0), n)
        assert [(a.band_method, a.lower95, a.upper95, a.conservative_lower)
                for a in declared] == [("none", None, None, None)] * 3
        assert all(f"{MEMOIZED_KEY}{name} at ε = 0.5, n = {n:,}" in a.band_reason
                   and "benchmarks/pooled_top_k.py" in a.band_reason for a in declared)
    for protocol, n in ((make_memoized_protocol("blh", 1.0, f.size, 2.0), 1_000_000),
                        (make_memoized_protocol("olh", 0.5, f.size, 1.0), 200_000)):
        assert [a.conservative_method for a in top(protocol, n)] == ["bias-corrected-bootstrap"] * 3
    assert [a.conservative_method for a in top(make_protocol("blh", 0.5, f.size), 1_000_000)] == [
        "rank-conditional-union"] * 3


def test_the_memoized_declarations_are_the_rule_applied_to_the_committed_measurements():
    """The memoized oracles' cells of TOP_K_UNCALIBRATED are exactly those where a (data set,
    method, rank) triple, pooled over every window the committed results of
    benchmarks/pooled_top_k.py measured for it (top_k_memoized*.json: two or more seeds per
    failing cell; every ratio for a ratio-free channel; a run's rows at several ratios once),
    lies more than two standard errors below 0.95 at the pooled W (`pooled_failing`, what
    `pooled_top_k.py --declarations` prints); LOLOHA's g has its own key. A results file added
    or a declaration edited without the other fails here."""
    from tests.benchmark_scripts import BENCHMARKS, loaded_scripts

    from ldp_telemetry.ldp.estimation.frequency_bands import TOP_K_UNCALIBRATED
    paths = [str(path) for path in sorted((BENCHMARKS / "results").glob("top_k_memoized*.json"))]
    with loaded_scripts("pooled_top_k", "coverage_summary") as scripts:
        rows = scripts["pooled_top_k"].measured_rows(paths)
        found = scripts["pooled_top_k"].pooled_failing(rows)
    assert {row["oracle"] for row in rows} >= {f"{MEMOIZED_KEY}{name}" for name in (
        "grr", "oue", "olh", "sue", "rue", "blh", "rlh")}
    declared = {key: set(cells) for key, cells in TOP_K_UNCALIBRATED.items()
                if key.startswith(MEMOIZED_KEY)}
    assert declared == found


def test_pooled_failing_pools_a_triple_over_every_run_that_measured_it():
    """A triple at 0.88 over 100 windows and 0.95 over another 100 pools to 0.915 over 200,
    more than two standard errors (2 · 0.0154) below 0.95: declared; at 0.90 and 0.95 it pools
    to 0.925: not, though 0.90 alone is more than two standard errors (2 · 0.0218) below over
    its 100 windows; cells are keyed by the rows' oracle key."""
    from tests.benchmark_scripts import loaded_scripts

    def row(oracle: str, by_rank: str, n: int = 10) -> dict:
        return {"oracle": oracle, "dataset": "d", "epsilon": 1.0, "n": n, "method": "base",
                "windows": 100, "by_rank": by_rank}
    with loaded_scripts("pooled_top_k", "coverage_summary") as scripts:
        found = scripts["pooled_top_k"].pooled_failing(
            [row("a", "0.88 1"), row("a", "0.95 1"), row("b", "0.9 1"), row("b", "0.95 1"),
             row("a", "0.96 0.96", n=20)])
    assert found == {"a": {(1.0, 10)}}


def test_memoized_local_hashing_with_lolohas_g_is_declared_by_its_own_key():
    """`ldp query --top` on memoized OLH or RLH with LOLOHA's g at ε = 2 with 10⁵ reports (its
    rank 7 of the common words held 0.895 over 200 windows of two seeds) gives no band and names
    `memoized-olh-loloha`; memoized OLH and RLH with their report g there (their own keys,
    declared nowhere at ε = 2) keep the union."""
    f = np.array([0.4, 0.2, 0.15, 0.1, 0.08, 0.04, 0.02, 0.01])

    def top(protocol, n: int) -> list:
        variance = np.maximum(protocol.noise(n).variance(f), 1e-12)
        unbiased = f + np.random.default_rng(9).normal(0, np.sqrt(variance))
        return WindowEstimate.from_unbiased(protocol, n, unbiased,
                                            PostprocessSpec("norm-hyb", ())).top_k(3)
    for name in ("olh", "rlh"):
        declared = top(make_memoized_protocol(name, 2.0, f.size, 4.0, "loloha"), 100_000)
        assert [(a.band_method, a.conservative_method) for a in declared] == [("none", None)] * 3
        assert f"{MEMOIZED_KEY}olh-loloha at ε = 2, n = 100,000" in declared[0].band_reason
    for name in ("olh", "rlh"):
        report_g = make_memoized_protocol(name, 2.0, f.size, 4.0)
        assert top_k_oracle(report_g) == f"{MEMOIZED_KEY}{name}"
        assert [a.conservative_method for a in top(report_g, 100_000)] == [
            "bias-corrected-bootstrap"] * 3


@pytest.mark.parametrize("protocol_name, lifetime, key, declared", [
    ("olh", 4.0, "olh-loloha", True),  # LOLOHA's g 7 (the report g 8): `memoized-olh-loloha`
    ("rlh", 4.0, "olh-loloha", True),  # the same protocol as OLH with that g
    ("olh", 8.0, "olh", False),        # LOLOHA's g is the report g 8: memoized OLH's channel
    ("olh", 20.0, "olh", False),       # 10 ε1: the same channel, kept (`ratio_free_channel`)
])
def test_a_record_with_lolohas_g_is_keyed_by_its_channel_end_to_end(protocol_name, lifetime,
                                                                    key, declared):
    """`ldp query --top` reads a window record of memoized OLH or RLH whose registry chose
    `memoize.g: "loloha"` (ε1 = 2, n = 10⁵: `memoized-olh-loloha` is declared there and the
    reason names it, memoized OLH is not); the record says which g by its p* and q*
    (queries.record_protocol rebuilds the
    stages from them). The key the record gets is the key of the registry's protocol, and where
    LOLOHA's g equals the report g (ε∞ = 4 ε1) both are memoized OLH's: the composed channel of
    local hashing is GRR_g at ε1 whatever ε∞, so it is the channel measured under that key
    (before the fix the registry's protocol was keyed `memoized-olh-loloha` there and the
    record `memoized-olh`: the pipeline and the query disagreed)."""
    from ldp_telemetry.ldp.config.registry import parse_registry
    from ldp_telemetry.ldp.engine.finalize import finalize_window
    from ldp_telemetry.output.records import window_estimate_record
    d, n = 64, 100_000
    registry = parse_registry({"metrics": [{
        "name": "m", "protocol": protocol_name, "epsilon": 2.0, "domain": {"size": d},
        "memoize": {"lifetime_epsilon": lifetime, "g": "loloha"}}]})
    config = registry["m"]
    p, q = config.protocol.p_star, config.protocol.q_star
    f = np.sort(np.random.default_rng(3).dirichlet(np.ones(d)))[::-1]
    counts = np.round(n * (f * p + (1 - f) * q)).astype(np.int64)  # expected support counts
    record = window_estimate_record(config, finalize_window(config, counts, n),
                                    1_577_836_800_000, 1_577_923_200_000)
    window = WindowEstimate.from_record(record)
    assert window.protocol.g == config.protocol.g
    assert top_k_oracle(window.protocol) == top_k_oracle(config.protocol)
    assert top_k_oracle(config.protocol) == f"{MEMOIZED_KEY}{key}"
    answers = window.top_k(3)
    if declared:
        assert [(a.band_method, a.conservative_method) for a in answers] == [("none", None)] * 3
        assert f"{MEMOIZED_KEY}{key} at ε = 2, n = 100,000" in answers[0].band_reason
    else:
        assert [a.conservative_method for a in answers] == ["bias-corrected-bootstrap"] * 3


def test_agreement_pools_the_other_runs_and_keeps_oracles_apart():
    """`agreement` pools a triple measured by several of the other files (a run and its
    --confirm: 0.80 and 1.00 over 100 windows each are 0.90 over 200, not the last file's
    1.00), and matches triples by the oracle key: memoized OLH with LOLOHA's g is another
    channel than with the report g, though both rows name the protocol memoized-olh (before the
    fix the last row won and the two g's were compared as one)."""
    from tests.benchmark_scripts import loaded_scripts

    def row(by_rank: str, oracle: str = f"{MEMOIZED_KEY}olh") -> dict:
        return {"dataset": "d", "protocol": "memoized-olh", "oracle": oracle, "epsilon": 1.0,
                "n": 10, "method": "base", "windows": 100, "by_rank": by_rank}
    with loaded_scripts("pooled_top_k", "coverage_summary") as scripts:
        agreement = scripts["pooled_top_k"].agreement
        found = agreement([row("0.9")], [row("0.8"), row("1")])
        apart = agreement([row("0.9", f"{MEMOIZED_KEY}olh-loloha")], [row("0.9")])
    assert found["compared"] == 1 and found["largest_difference"] == 0.0
    assert apart["compared"] == 0


def test_a_memoized_top_k_band_follows_the_channel_not_the_oracle_name():
    """`top_k_declared` on a memoized key: a channel that moves with ε∞ (`ratio_free` False:
    memoized RUE, LOLOHA's g) has no band where ε∞ / ε1 lies outside TOP_K_LIFETIME_RANGE (1.25–5,
    the ratios benchmarks/pooled_top_k.py --lifetime-factor measured, ends included), the reason
    naming the key, the ratio, the range and the benchmark; a ratio-free one keeps it at any
    ratio; inside the range, the cell's own declaration as before; a pure or pooled-hash oracle
    has no ratio, and a memoized key without its ε∞ is a caller's error. `ratio_free_channel`
    decides it from the protocol: memoized GRR at 8 ε1 is ratio-free, memoized RUE is not over
    229 values (over 2 its composed channel does not move either: computed, not listed)."""
    from ldp_telemetry.ldp.estimation.frequency_bands import (TOP_K_LIFETIME_RANGE,
                                                              TOP_K_LIFETIME_RATIOS,
                                                              ratio_free_channel,
                                                              top_k_declared,
                                                              top_k_lifetime_declared)
    assert TOP_K_LIFETIME_RANGE == (1.25, 5.0) and 2.0 in TOP_K_LIFETIME_RATIOS
    key = f"{MEMOIZED_KEY}rue"
    for epsilon in (0.5, 1.07, 4.0):
        for ratio in (1.25, 2.0, 4.39 / 1.07, 5.0):
            assert top_k_declared("norm-sub", epsilon, 5_000, key, ratio * epsilon) is None, (
                epsilon, ratio)
    for epsilon, lifetime_epsilon, said in ((1.0, 8.0, "8"), (2.0, 2.2, "1.1"),
                                            (0.5, 0.55, "1.1"), (2.0, 20.0, "10")):
        reason = top_k_declared("norm-sub", epsilon, 5_000, key, lifetime_epsilon)
        assert reason == (f"no band for top-k answers of {key} at ε∞ = {said} ε1: its composed "
                          "channel moves with ε∞, and memoized top-k bands were measured for ε∞ "
                          "from 1.25 ε1 to 5 ε1 (benchmarks/pooled_top_k.py --lifetime-factor)")
        assert top_k_declared("norm-sub", epsilon, 5_000, f"{MEMOIZED_KEY}grr", lifetime_epsilon,
                              ratio_free=True) is None
    # a declared cell keeps its own reason inside the range, and for a ratio-free channel at any
    assert "a rank's coverage fell" in top_k_declared("base", 0.5, 1_000,
                                                      f"{MEMOIZED_KEY}grr", 0.625)
    assert "a rank's coverage fell" in top_k_declared("base", 0.5, 1_000,
                                                      f"{MEMOIZED_KEY}grr", 20.0, True)
    assert top_k_lifetime_declared("oue", 1.0, None) is None
    assert top_k_declared("base", 1.0, 5_000, "cms") is None
    with pytest.raises(ValueError, match="depends on its ε∞"):
        top_k_declared("base", 1.0, 5_000, key)
    assert ratio_free_channel(make_memoized_protocol("grr", 1.0, 229, 8.0))
    assert not ratio_free_channel(make_memoized_protocol("rue", 1.0, 229, 8.0))
    assert ratio_free_channel(make_memoized_protocol("rue", 1.0, 2, 8.0))
    assert ratio_free_channel(make_protocol("oue", 1.0, 229))
    # LOLOHA's g: 3 at ε1 = 1 and ε∞ 1.25–2 ε1, the report g 4 at 5 ε1 and above
    assert not ratio_free_channel(make_memoized_protocol("olh", 1.0, 229, 1.5, "loloha"))
    assert ratio_free_channel(make_memoized_protocol("olh", 1.0, 229, 8.0, "loloha"))


@pytest.mark.parametrize("name, lifetime, band", [
    ("grr", 8.0, True), ("oue", 1.1, True), ("olh", 20.0, True), ("rue", 8.0, False),
    ("rue", 1.1, False), ("rue", 4.0, True)])
def test_ldp_query_top_on_a_memoized_window_at_any_budget_ratio(name, lifetime, band):
    """`ldp query --top` (WindowEstimate.top_k) on a memoized window at ε1 = 1, n = 5,000: a
    ratio-free channel keeps the union at ε∞ = 8 ε1 or 1.1 ε1, memoized RUE only inside
    1.25–5 ε1, with the exact reason outside."""
    f = np.array([0.4, 0.2, 0.15, 0.1, 0.08, 0.04, 0.02, 0.01])
    protocol = make_memoized_protocol(name, 1.0, f.size, lifetime)
    variance = np.maximum(protocol.noise(5_000).variance(f), 1e-12)
    unbiased = f + np.random.default_rng(11).normal(0, np.sqrt(variance))
    answers = WindowEstimate.from_unbiased(protocol, 5_000, unbiased,
                                           PostprocessSpec("norm-sub", ())).top_k(3)
    if band:
        assert [a.conservative_method for a in answers] == ["bias-corrected-bootstrap"] * 3
    else:
        assert {(a.band_method, a.band_reason) for a in answers} == {(
            "none", f"no band for top-k answers of {MEMOIZED_KEY}rue at ε∞ = {lifetime:g} ε1: "
            "its composed channel moves with ε∞, and memoized top-k bands were measured for ε∞ "
            "from 1.25 ε1 to 5 ε1 (benchmarks/pooled_top_k.py --lifetime-factor)")}


def test_pooled_failing_pools_a_ratio_free_triple_over_ratios_and_a_moving_one_apart():
    """Rows of one (data set, key, ε, n, method, rank) at ε∞ = 2 ε1 and 5 ε1: for memoized RUE
    (its channel moves) two triples — 0.91 at one ratio and 0.925 at the other, each within two
    standard errors (2 · 0.0218) of 0.95 over its 100 windows, are not declared, while 0.91 and
    0.92 at one ratio pool to 0.915 over 200 (below 0.95 − 2 · 0.0154: declared); for memoized
    OUE (ratio-free) 0.91 and 0.925 are windows of one channel, 0.9175 over 200: declared."""
    from tests.benchmark_scripts import loaded_scripts

    def row(name: str, by_rank: str, ratio: float, seed: int | None = None) -> dict:
        return {"protocol": f"{MEMOIZED_KEY}{name}", "oracle": f"{MEMOIZED_KEY}{name}",
                "dataset": "airports", "epsilon": 1.0, "n": 10, "method": "base",
                "windows": 100, "by_rank": by_rank, "lifetime_epsilon": ratio,
                "sampler": "client", **({} if seed is None else {"seed": seed})}
    with loaded_scripts("pooled_top_k", "coverage_summary") as scripts:
        failing = scripts["pooled_top_k"].pooled_failing
        assert failing([row("rue", "0.91", 2.0), row("rue", "0.925", 5.0)]) == {}
        assert failing([row("rue", "0.91", 5.0), row("rue", "0.92", 5.0),
                        row("rue", "0.99", 2.0)]) == {f"{MEMOIZED_KEY}rue": {(1.0, 10)}}
        assert failing([row("oue", "0.91", 2.0), row("oue", "0.925", 5.0)]) == {
            f"{MEMOIZED_KEY}oue": {(1.0, 10)}}


def test_a_runs_rows_at_several_ratios_count_once():
    """Rows of one run (the same seed and sampler: measured_rows gives each row its file's
    seed) of a ratio-free channel at several ratios drew the same data windows with the same
    random numbers — from the composed channel, the same windows (seed 1131 at 1.25 ε1 and 5 ε1
    gave memoized SUE and RLH identical rows) — so `_triples` averages their coverage over the
    run's W instead of adding their windows: 0.90 and 0.91 of seed 1 with 0.95 of seed 2 pool
    to 0.9275 over 200 (not declared: the line is 0.919), where three runs would give 0.92 over
    300 (declared: below 0.925)."""
    from tests.benchmark_scripts import loaded_scripts

    def row(by_rank: str, ratio: float, seed: int) -> dict:
        return {"protocol": f"{MEMOIZED_KEY}oue", "oracle": f"{MEMOIZED_KEY}oue",
                "dataset": "airports", "epsilon": 1.0, "n": 10, "method": "base",
                "windows": 100, "by_rank": by_rank, "lifetime_epsilon": ratio,
                "sampler": "channel", "seed": seed}
    rows = [row("0.9", 1.25, 1), row("0.91", 5.0, 1), row("0.95", 2.0, 2)]
    with loaded_scripts("pooled_top_k", "coverage_summary") as scripts:
        script = scripts["pooled_top_k"]
        ((coverage, windows),) = script._triples(rows).values()
        assert (coverage, windows) == (pytest.approx(0.9275), 200)
        assert script.pooled_failing(rows) == {}
        assert script.pooled_failing([row("0.9", 1.25, 1), row("0.91", 5.0, 3),
                                      row("0.95", 2.0, 2)]) == {
            f"{MEMOIZED_KEY}oue": {(1.0, 10)}}


def test_six_composed_channels_are_the_same_at_every_budget_ratio_and_rues_moves():
    """What docs/error-bars.md ("Memoized oracles at other budget ratios") rests on: with one
    report per device the composed p*, q* of memoized GRR, OUE, SUE, OLH, BLH and RLH (report
    g) are those at ε∞ = 2 ε1 at every ratio the registry allows (to a relative 1e-12), while
    memoized RUE's move with the ratio (at ε1 = 4, p* 0.56 at 1.25 ε1, 0.88 at 5 ε1), and so
    does LOLOHA's g (38, 53, 56 at ε1 = 4)."""
    for name in ("grr", "oue", "sue", "olh", "blh", "rlh"):
        for epsilon in (0.5, 1.0, 2.0, 4.0):
            reference = make_memoized_protocol(name, epsilon, 229, 2.0 * epsilon)
            for ratio in (1.01, 1.25, 4.39 / 1.07, 5.0):
                other = make_memoized_protocol(name, epsilon, 229, ratio * epsilon)
                assert (other.p_star, other.q_star) == pytest.approx(
                    (reference.p_star, reference.q_star), rel=1e-12), (name, epsilon, ratio)
    rue = [make_memoized_protocol("rue", 4.0, 229, ratio * 4.0).p_star for ratio in (1.25, 5.0)]
    assert rue == pytest.approx([0.5605, 0.8805], abs=5e-4)
    assert [make_memoized_protocol("olh", 4.0, 229, ratio * 4.0, "loloha").g
            for ratio in (1.25, 2.0, 5.0)] == [38, 53, 56]
