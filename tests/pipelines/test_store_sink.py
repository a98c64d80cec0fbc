"""`ldp run --store`: the batch job writes the same windows as its files, and dead letters per
window, into the estimate store."""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from ldp_telemetry.ldp.base.times import ms_from_iso
from ldp_telemetry.ldp.config.registry import load_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.output.bands import value_bands
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.cli import main
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.schemas.codec import write_reports
from ldp_telemetry.store import open_store
from ldp_telemetry.store.records import UNATTRIBUTED_MS
from tests.json_lines import job_json_lines

HOUR = 3_600_000
T0 = 1_709_251_200_000  # 2024-03-01T00:00:00Z
REGISTRY_DOC = {"metrics": [
    {"name": "s.grr", "protocol": "grr", "epsilon": 2.0, "domain": {"labels": list("abcd")}},
    {"name": "s.olh", "protocol": "olh", "epsilon": 2.0, "domain": {"size": 5}},
]}


def write_input(folder: Path):
    """Two metrics over three hours; s.grr also has 7 reports with values outside its domain at
    known hours, and one file is not Avro at all."""
    (folder / "registry.json").write_text(json.dumps(REGISTRY_DOC))
    registry = load_registry(folder / "registry.json")
    rng = np.random.default_rng(12)
    files = []
    for config in registry.metrics:
        n = 900
        times = T0 + rng.integers(0, 3 * HOUR, n)
        columns = config.protocol.perturb(rng.integers(0, config.d, n), rng)
        path = folder / f"{config.name}.avro"
        write_reports(str(path), config.name, config.protocol, np.arange(n), times, columns)
        files.append(str(path))
    bad_times = T0 + np.array([10, 20, 30, HOUR + 5, HOUR + 6, 2 * HOUR + 1, 2 * HOUR + 2])
    grr = registry["s.grr"].protocol
    path = folder / "bad.avro"
    write_reports(str(path), "s.grr", grr, np.arange(7), bad_times,
                  {"value": np.full(7, 99, dtype=np.int64)})
    files.append(str(path))
    junk = folder / "junk.avro"
    junk.write_text("not avro\n")
    files.append(str(junk))
    return registry, sorted(files)


def test_the_store_holds_the_jobs_windows_and_its_dead_letters_per_window(tmp_path):
    registry, files = write_input(tmp_path)
    url = f"sqlite:///{tmp_path}/store.db"
    job = EstimateJob(registry, tuple(files), str(tmp_path / "out"), WindowSpec(HOUR, HOUR),
                      store=url)
    run_job(job, ["--runner=FnApiRunner"], out=io.StringIO())

    estimates = job_json_lines(tmp_path / "out", "estimates")
    with open_store(url) as store:
        assert store.metrics() == ["s.grr", "s.olh"]
        stored = [window for metric in store.metrics() for window in store.windows(metric)]
        for window in stored:
            assert window.pop("late_reports") == 0  # one ON_TIME pane each
            window.pop("pane_seq")
            # the band of the unbiased estimate, whatever the post-processing (output.bands)
            lower, upper = value_bands(window)
            assert window.pop("lower95") == pytest.approx(lower)
            assert window.pop("upper95") == pytest.approx(upper)
        key = lambda r: (r["metric"], r["window_start"])  # noqa: E731
        assert sorted(stored, key=key) == sorted(estimates, key=key)
        hours = [(T0 + k * HOUR, T0 + (k + 1) * HOUR) for k in range(3)]
        assert store.rejects("s.grr") == {hours[0]: {"invalid_payload": 3},
                                          hours[1]: {"invalid_payload": 2},
                                          hours[2]: {"invalid_payload": 2}}
        assert store.rejects("s.olh") == {}
        assert store.unattributed_rejects() == {("", "undecodable"): 1}
        rows = store._query("SELECT COUNT(*) FROM ldp_rejects WHERE slice_start_ms = ?",
                            (UNATTRIBUTED_MS,))
        assert rows == [(1,)]
    assert ms_from_iso(estimates[0]["window_start"]) % HOUR == 0


def test_ldp_run_takes_a_store_url_and_refuses_a_bad_one_before_reading(tmp_path, capsys):
    registry, files = write_input(tmp_path)
    db = tmp_path / "cli.db"
    common = ["run", "--registry", str(tmp_path / "registry.json"), "--input",
              str(tmp_path / "s.*.avro"), "--output", str(tmp_path / "cli-out"),
              "--window", "3600"]
    assert main(common + ["--store", f"sqlite:///{db}"]) == 2  # no such store yet
    assert "--create-store creates it" in capsys.readouterr().err and not db.exists()
    assert main(common + ["--store", f"sqlite:///{db}", "--create-store"]) == 0
    with open_store(f"sqlite:///{db}") as store:
        assert len(store.windows("s.grr")) == 3
    assert main(common + ["--store", "mysql://nowhere/db"]) == 2
    assert ("ldp run: error: --store: unknown store URL scheme 'mysql'; known: bigquery, "
            "postgres, postgresql, sqlite") in capsys.readouterr().err
