"""Hostile settings and input files: each reproduces a failure of the adversarial probe (issue
"hostile and extreme input", failures 5 to 11) and checks the message or result that replaces it.

CLI cases run `ldp` in a subprocess, as a user would, and check the exit code, that the message
names the file (and row or field), and that no Python traceback is printed.
"""
from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from apache_beam.transforms import window as beam_window
from apache_beam.utils.timestamp import Timestamp

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.graph import build_pipeline
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.schemas.codec import write_reports
from ldp_telemetry.transforms.windows import beam_window_fn
from tests.json_lines import job_json_lines

T0_S = 1_709_251_200  # 2024-03-01T00:00:00Z
GRR = {"name": "m", "protocol": "grr", "epsilon": 1.0, "domain": {"labels": ["a", "b", "c"]}}


def ldp(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ldp_telemetry.pipelines.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=600)


def refused(result, *fragments):
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def write_registry(path: Path, *metrics) -> Path:
    path.write_text(json.dumps({"metrics": list(metrics) or [GRR]}))
    return path


# -- failure 7: thousands of metrics share one counting step -----------------------------------

def step_names(registry, tmp_path, windows):
    import apache_beam as beam
    pipeline = beam.Pipeline()
    build_pipeline(pipeline, EstimateJob(registry, ("x.avro",), str(tmp_path), windows))
    return {t.unique_name for t in pipeline.to_runner_api().components.transforms.values()}


def test_the_graph_does_not_grow_with_the_number_of_metrics(tmp_path):
    one = parse_registry({"metrics": [GRR]})
    many = parse_registry({"metrics": [{**GRR, "name": f"m{i}"} for i in range(5_000)]})
    for windows in (WindowSpec(3_600_000, 3_600_000), WindowSpec(7_200_000, 3_600_000)):
        assert step_names(one, tmp_path, windows) == step_names(many, tmp_path, windows)


def test_a_thousand_metrics_run_to_a_summary_line(tmp_path):
    """Failure 7: 1,000 metrics crashed (RecursionError in metric consolidation) after the work."""
    registry = parse_registry({"metrics": [{**GRR, "name": f"m{i:04d}"} for i in range(1_000)]})
    rng = np.random.default_rng(7)
    files = []
    for i, config in enumerate(registry.metrics):
        times = T0_S * 1000 + rng.integers(0, 3_600_000, 3)
        path = tmp_path / f"r{i}.avro"
        write_reports(str(path), config.name, config.protocol, np.arange(3), times,
                      config.protocol.perturb(rng.integers(0, 3, 3), rng))
        files.append(str(path))
    printed = io.StringIO()
    run_job(EstimateJob(registry, tuple(files), str(tmp_path / "out"),
                        WindowSpec(3_600_000, 3_600_000)), [], out=printed)
    assert printed.getvalue().strip() == ("records read: 3000, accepted: 3000, dead-lettered: 0 "
                                          "(none), windows: 1000")
    assert len(job_json_lines(tmp_path / "out", "estimates")) == 1000


# -- failure 5: windows are assembled from slices, and window / period is bounded --------------

@pytest.mark.parametrize("size, period, offset", [(7, 7, 0), (6, 2, 0), (6, 4, 1), (10, 3, 5),
                                                  (3600, 60, 17), (5, 1, -3)])
def test_slices_go_to_exactly_the_windows_beam_assigns(size, period, offset):
    spec = WindowSpec(size, period, offset_ms=offset)
    beam_fn = beam_window_fn(spec)
    for slice_start in range(-50 * spec.slice_ms + spec.slice_offset_ms, 50 * spec.slice_ms,
                             spec.slice_ms):
        # Every instant of the slice lies in the same windows; Beam assigns its first one.
        context = beam_window.WindowFn.AssignContext(Timestamp(micros=slice_start * 1000))
        expected = sorted(w.start.micros // 1000 for w in beam_fn.assign(context))
        assert list(spec.window_starts(slice_start)) == expected
        assert len(expected) <= spec.windows_per_slice


@pytest.mark.parametrize("flags, message", [
    (["--window", "3600", "--period", "1"], "--window / --period must be at most 1000"),
    (["--window", "3e11"], "--window must be at most 7258118400 s"),
    (["--window", "1e20"], "--window must be at most 7258118400 s"),
    (["--window", "0.0001"], "--window must be at least 0.001 s"),
    (["--window", "60", "--window-offset", "1e20"], "--window-offset must be at most"),
    (["--window", "60", "--allowed-lateness", "1e15"], "--allowed-lateness must be in"),
])
def test_window_settings_out_of_range_are_refused_at_start(tmp_path, flags, message):
    """Failures 5 and 8: `--window 3600 --period 1` did not finish; 3e11 failed in finalize
    after the job, 1e20 in Beam's translation."""
    registry = write_registry(tmp_path / "registry.json")
    (tmp_path / "r.avro").write_bytes(b"")
    result = ldp("run", "--registry", registry, "--input", tmp_path / "r.avro",
                 "--output", tmp_path / "out", *flags)
    refused(result, message)
    assert not (tmp_path / "out").exists()


# -- failure 6: domain size and accumulator memory are checked at load -------------------------

def test_a_domain_of_a_billion_values_is_refused_at_load():
    with pytest.raises(RegistryError, match=r"metric 'huge': field 'domain.size' must be at "
                                            r"most 16,777,216 .*7.45 GiB"):
        parse_registry({"metrics": [{**GRR, "name": "huge", "protocol": "oue",
                                     "domain": {"size": 10 ** 9}}]})


def test_accumulators_beyond_the_memory_budget_are_refused_with_what_fits(tmp_path):
    registry = write_registry(tmp_path / "registry.json", {
        "name": "big", "protocol": "oue", "epsilon": 1.0, "domain": {"size": 10 ** 6}})
    (tmp_path / "r.avro").write_bytes(b"")
    result = ldp("run", "--registry", registry, "--input", tmp_path / "r.avro", "--output",
                 tmp_path / "out", "--window", "3600", "--period", "60", "--memory-budget", "513")
    # Accumulators: 8 MB per statistic x (1 + 60 windows per slice) = 465 MiB; one window being
    # finalized and written: 160 B x 10^6 = 153 MiB; dead letters (65,536 + 4,096) x 3,200 B =
    # 212.5 MiB. 513 MiB leave 147 MiB for the accumulators: 19 statistics, one slice's and 18
    # windows'.
    refused(result, "--memory-budget of 513 MB is too small: the job needs 830 MB: "
                    "the accumulators 465 MB",
            "one window being finalized and written 153 MB (the largest, 'big') and the dead "
            "letters 212 MB",
            "'big' 465 + 153 MB (d=1,000,000, oue)",
            "at most 18 windows per report fit (window / period; now 60)")


def test_one_window_beyond_the_memory_budget_is_refused_with_the_domain_that_fits(tmp_path):
    registry = write_registry(tmp_path / "registry.json", {
        "name": "big", "protocol": "oue", "epsilon": 1.0, "domain": {"size": 2 ** 24}})
    (tmp_path / "r.avro").write_bytes(b"")
    result = ldp("run", "--registry", registry, "--input", tmp_path / "r.avro", "--output",
                 tmp_path / "out", "--window", "3600", "--memory-budget", "1237")
    # Fixed windows: one statistic (8 B per value) and one window being finalized and written
    # (160 B per value): 168 B x 2^24 = 2,688 MiB, plus the dead letters' 212.5 MiB > 1,237 MiB;
    # (1,237 - 212.5) MiB / 168 B = 6,394,441 values fit.
    refused(result, "--memory-budget of 1,237 MB is too small: the job needs 2,900 MB",
            "one window being finalized and written 2,560 MB",
            "'big' fits with a domain of at most 6,394,441 values", "raise the memory budget")


def test_a_window_that_fits_but_not_with_the_store_is_refused_with_the_store(tmp_path):
    from ldp_telemetry.ldp.config.registry import parse_registry
    from ldp_telemetry.ldp.config.windows import WindowSpec
    from ldp_telemetry.pipelines.memory import check_memory_budget
    metric = {"name": "big", "protocol": "oue", "epsilon": 1.0, "domain": {"size": 10 ** 6}}
    check_memory_budget(parse_registry({"metrics": [metric]}), WindowSpec.from_seconds(3600),
                        380)  # without a store: 168 B x 10^6 = 160 MiB + 212.5 MiB fit
    registry = write_registry(tmp_path / "registry.json", metric)
    (tmp_path / "r.avro").write_bytes(b"")
    result = ldp("run", "--registry", registry, "--input", tmp_path / "r.avro", "--output",
                 tmp_path / "out", "--window", "3600", "--memory-budget", "513",
                 "--store", f"sqlite:///{tmp_path / 'store.db'}", "--create-store")
    # With it: the statistic 8 B, the window 160 B and its stored form 320 B per value (465 MiB),
    # plus 2^18 waiting plain values x 200 B (50 MiB), plus the dead letters (212.5 MiB);
    # (513 MiB - 212.5 MiB - 50 MiB) / 488 B = 538,254.
    refused(result, "the job needs 728 MB",
            "one window being finalized and written and stored 508 MB",
            "'big' fits with a domain of at most 538,254 values")
    assert not (tmp_path / "store.db").exists()


# -- failure 8: every setting is validated before the first report is read --------------------

def test_a_post_processing_parameter_beyond_its_limit_is_a_registry_error(tmp_path):
    """Power's exponent 1e308 overflowed the probe; it is now refused by its limit
    (MAX_POWER_EXPONENT), before any report is read, naming the field and the range."""
    registry = write_registry(tmp_path / "registry.json",
                              {**GRR, "name": "pw", "postprocess": {"method": "power",
                                                                    "exponent": 1e308}})
    (tmp_path / "r.avro").write_bytes(b"")
    result = ldp("run", "--registry", registry, "--input", tmp_path / "r.avro",
                 "--output", tmp_path / "out", "--window", "60")
    refused(result, "metric 'pw': field 'postprocess", "[0, 10]")


def test_an_output_folder_that_cannot_be_written_is_refused_at_start(tmp_path):
    registry = write_registry(tmp_path / "registry.json")
    (tmp_path / "r.avro").write_bytes(b"")
    (tmp_path / "a-file").write_text("")
    result = ldp("run", "--registry", registry, "--input", tmp_path / "r.avro",
                 "--output", tmp_path / "a-file" / "out", "--window", "60")
    refused(result, f"--output '{tmp_path / 'a-file' / 'out'}' cannot be written")


def test_an_absent_output_folder_is_created(tmp_path):
    registry = write_registry(tmp_path / "registry.json")
    values = tmp_path / "v.csv"
    values.write_text(f"t,v\n{T0_S},a\n")
    assert ldp("simulate", "--registry", registry, "--metric", "m", "--input", values,
               "--value-column", "v", "--time-column", "t", "--out", tmp_path / "in"
               ).returncode == 0
    result = ldp("run", "--registry", registry, "--input", tmp_path / "in" / "*.avro",
                 "--output", tmp_path / "deep" / "er" / "out", "--window", "60")
    assert result.returncode == 0, result.stderr
    assert job_json_lines(tmp_path / "deep" / "er" / "out", "estimates")


# -- failure 9: messages, not tracebacks, for malformed input files ---------------------------

def simulate_args(registry, values, out):
    return ["simulate", "--registry", registry, "--metric", "m", "--input", values,
            "--value-column", "v", "--time-column", "t", "--out", out]


def test_a_deeply_nested_registry_is_a_message(tmp_path):
    registry = tmp_path / "registry.json"
    registry.write_text("[" * 200_000 + "]" * 200_000)
    values = tmp_path / "v.csv"
    values.write_text(f"t,v\n{T0_S},a\n")
    refused(ldp(*simulate_args(registry, values, tmp_path / "out")),
            f"registry {registry} is nested too deeply")
    refused(ldp("run", "--registry", registry, "--input", values, "--output", tmp_path / "o",
                "--window", "60"), f"registry {registry} is nested too deeply")


def test_a_registry_that_is_not_utf8_is_a_message(tmp_path):
    registry = tmp_path / "registry.json"
    registry.write_bytes(json.dumps({"metrics": [GRR]}).encode("utf-8").replace(b'"a"', b'"\xe9"'))
    values = tmp_path / "v.csv"
    values.write_text(f"t,v\n{T0_S},a\n")
    refused(ldp(*simulate_args(registry, values, tmp_path / "out")),
            f"registry {registry} is not UTF-8 text: byte 0xe9 at offset")


def gz_csv(rows: int) -> bytes:
    text = "t,v\n" + "".join(f"{T0_S + i},{'abc'[i % 3]}\n" for i in range(rows))
    return gzip.compress(text.encode(), mtime=0)


@pytest.mark.parametrize("damage, message", [
    (lambda data: data[: len(data) // 2], "the gzip data is truncated or corrupt after line"),
    (lambda data: data[:40] + bytes(b ^ 0x5A for b in data[40:60]) + data[60:],
     "the gzip data is truncated or corrupt after line"),
    (lambda data: data[:-5], "the gzip data is truncated or corrupt after line"),
    (lambda data: b"\x1f\x8b\x09" + data[3:], "the gzip data is truncated or corrupt after line"),
])
def test_a_truncated_or_corrupt_csv_gz_is_a_message(tmp_path, damage, message):
    registry = write_registry(tmp_path / "registry.json")
    values = tmp_path / "v.csv.gz"
    values.write_bytes(damage(gz_csv(20_000)))
    refused(ldp(*simulate_args(registry, values, tmp_path / "out")), str(values), message)


def test_a_csv_that_is_not_utf8_names_its_line(tmp_path):
    registry = write_registry(tmp_path / "registry.json")
    values = tmp_path / "v.csv"
    values.write_bytes(f"t,v\n{T0_S},a\n{T0_S + 1},\xe9\n".encode("latin-1"))
    refused(ldp(*simulate_args(registry, values, tmp_path / "out")),
            f"{values} line 3: not UTF-8 text (byte 0xe9 at column 12")


@pytest.mark.parametrize("line, message", [
    (b"[" * 100_000 + b"]" * 100_000, "line 2: nested too deeply"),
    (b'{"metric": "\xff"}', "line 2: not UTF-8 text"),
    (b'{"metric": "m"', "line 2: not valid JSON"),
    (b'{"metric": "m"}', "line 2: not a window estimate: field 'window_start' is missing"),
    (b"[1, 2]", "line 2: not a window estimate: a JSON list, not an object"),
], ids=["nested", "not-utf8", "not-json", "missing-field", "not-an-object"])
def test_show_and_query_name_the_file_and_line_of_a_malformed_estimate(tmp_path, line, message):
    good = {"metric": "m", "window_start": "2024-03-01T00:00:00Z",
            "window_end": "2024-03-01T01:00:00Z", "n": 10, "protocol": "grr", "epsilon": 1.0,
            "labels": ["a", "b"], "estimate": [0.5, 0.5], "std_error": [0.1, 0.1],
            "unbiased_estimate": [0.5, 0.5], "postprocess": {"method": "norm", "params": {}},
            "pane": {"timing": "ON_TIME", "index": 0, "is_last": False}}
    out = tmp_path / "out"
    out.mkdir()
    path = out / "estimates-00000-of-00001.jsonl"
    path.write_bytes(json.dumps(good).encode() + b"\n" + line + b"\n")
    refused(ldp("show", "--output", out), f"{path} {message}")
    refused(ldp("query", "--output", out, "--metric", "m", "--window", "0", "--top", "1"),
            f"{path} {message}")


# -- failure 10: simulate never touches another metric's files ---------------------------------

@pytest.mark.parametrize("mine, theirs", [("a_b", "a/b"), ("x", "x-y"), ("a/b", "a_b"),
                                          ("x-y", "x")])
def test_simulate_overwrite_removes_exactly_its_own_metric_files(tmp_path, mine, theirs):
    registry = write_registry(tmp_path / "registry.json", {**GRR, "name": mine},
                              {**GRR, "name": theirs})
    values = tmp_path / "v.csv"
    values.write_text(f"t,v\n{T0_S},a\n{T0_S + 1},b\n")
    out = tmp_path / "out"

    def simulate(metric, *extra):
        return ldp("simulate", "--registry", registry, "--metric", metric, "--input", values,
                   "--value-column", "v", "--time-column", "t", "--out", out, *extra)

    assert simulate(theirs, "--reports-per-file", "1").returncode == 0
    theirs_files = sorted(p.name for p in out.iterdir())
    assert len(theirs_files) == 2
    assert simulate(mine).returncode == 0  # their files are not "an earlier run" of mine
    mine_files = sorted(set(p.name for p in out.iterdir()) - set(theirs_files))
    assert len(mine_files) == 1
    refused(simulate(mine), f"already holds 1 report file(s) of metric {mine!r}")
    assert simulate(mine, "--overwrite").returncode == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(theirs_files + mine_files)


# -- failure 11: duplicate report ids, and event times before a declared date -------------------

def test_a_repeated_report_id_is_counted_once_and_dead_lettered(tmp_path):
    registry = parse_registry({"metrics": [GRR, {**GRR, "name": "other"}]})
    protocol = registry["m"].protocol
    rng = np.random.default_rng(11)
    hour = 3_600_000
    times = T0_S * 1000 + rng.integers(0, hour, 100)
    columns = protocol.perturb(rng.integers(0, 3, 100), rng)
    ids = np.arange(100)
    ids[10:15] = ids[:5]                                  # 5 repeats inside the file
    write_reports(str(tmp_path / "one.avro"), "m", protocol, ids, times, columns)
    # The same 100 reports sent again in another file: all repeats, counted once.
    write_reports(str(tmp_path / "again.avro"), "m", protocol, ids, times, columns)
    # The same ids in the next window, and for another metric: not repeats.
    write_reports(str(tmp_path / "next.avro"), "m", protocol, ids[:20], times[:20] + hour,
                  {k: v[:20] for k, v in columns.items()})
    write_reports(str(tmp_path / "other.avro"), "other", protocol, ids[:20], times[:20],
                  {k: v[:20] for k, v in columns.items()})
    printed = io.StringIO()
    files = tuple(str(p) for p in sorted(tmp_path.glob("*.avro")))
    run_job(EstimateJob(registry, files, str(tmp_path / "out"), WindowSpec(hour, hour)), [],
            out=printed)
    assert printed.getvalue().strip() == (
        "records read: 240, accepted: 125, dead-lettered: 115 (duplicate=115), windows: 3")
    # Each 20-report file repeats 5 of its own ids (ids[10:15] == ids[:5]).
    estimates = {(r["metric"], r["window_start"]): r["n"]
                 for r in job_json_lines(tmp_path / "out", "estimates")}
    assert estimates == {("m", "2024-03-01T00:00:00Z"): 95, ("m", "2024-03-01T01:00:00Z"): 15,
                         ("other", "2024-03-01T00:00:00Z"): 15}
    letters = {r["source"]: r for r in job_json_lines(tmp_path / "out", "dead_letters")}
    assert {r["reason"] for r in letters.values()} == {"duplicate"}
    first = letters["metric 'm', slice [2024-03-01T00:00:00Z, 2024-03-01T01:00:00Z)"]
    assert first["records"] == 105 and "105 report(s) repeat a report id" in first["detail"]
    assert sum(r["records"] for r in letters.values()) == 115


def test_event_times_before_not_before_are_dead_letters(tmp_path):
    """Seconds written where milliseconds are expected land in January 1970."""
    registry = parse_registry({"metrics": [{**GRR, "not_before": "2020-01-01"}]})
    protocol = registry["m"].protocol
    rng = np.random.default_rng(3)
    times = np.array([T0_S * 1000] * 6 + [T0_S] * 4)     # four in seconds
    write_reports(str(tmp_path / "r.avro"), "m", protocol, np.arange(10), times,
                  protocol.perturb(rng.integers(0, 3, 10), rng))
    printed = io.StringIO()
    run_job(EstimateJob(registry, (str(tmp_path / "r.avro"),), str(tmp_path / "out"),
                        WindowSpec(3_600_000, 3_600_000)), [], out=printed)
    assert printed.getvalue().strip() == ("records read: 10, accepted: 6, dead-lettered: 4 "
                                          "(before_not_before=4), windows: 1")
    letters = job_json_lines(tmp_path / "out", "dead_letters")
    assert {r["reason"] for r in letters} == {"before_not_before"} and len(letters) == 4
    assert "before the metric's not_before (2020-01-01)" in letters[0]["detail"]


@pytest.mark.parametrize("value, message", [
    ("yesterday", "ISO-8601 date"), (20200101, "ISO-8601"),
    ("1900-01-01", "lie in [1970-01-01T00:00:00Z, 2200-01-01T00:00:00Z)")])
def test_a_bad_not_before_is_a_registry_error(value, message):
    with pytest.raises(RegistryError, match=r"metric 'm': field 'not_before' must .*" +
                       message.replace("[", r"\[").replace(")", r"\)")):
        parse_registry({"metrics": [{**GRR, "not_before": value}]})
