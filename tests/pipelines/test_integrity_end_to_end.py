"""Integrity flags end to end: a poisoned window in a real job is flagged in its record,
in `ldp show`, in the store and in the dashboard's view; honest windows are not."""
from __future__ import annotations

import contextlib
import io
import json

import numpy as np

from ldp_telemetry.dashboard.payload import last_bounds, unpack
from ldp_telemetry.dashboard.source import FolderSource, StoreSource
from ldp_telemetry.ldp.config.registry import load_registry
from ldp_telemetry.ldp.integrity.attacks import fake_reports
from ldp_telemetry.pipelines.cli import main
from ldp_telemetry.schemas.codec import write_reports
from ldp_telemetry.store import open_store
from tests.pipelines.test_estimate_pipeline import HOUR, T0, run

D = 40
TARGETS = [30, 34, 38]


def test_a_poisoned_window_is_flagged_in_the_record_show_the_store_and_the_dashboard(tmp_path):
    """Four hourly OUE windows of 30,000 reports (ε = 1, d = 40, Zipf); the last holds 5%
    maximal-gain fakes promoting 3 values: co-support z about 10 there (threshold 3.3), while an
    honest window is flagged with probability at most alpha = 0.01 (3 of them: < 0.03)."""
    path = tmp_path / "registry.json"
    path.write_text(json.dumps({"metrics": [
        {"name": "w.oue", "protocol": "oue", "epsilon": 1.0, "domain": {"size": D}}]}))
    registry = load_registry(path)
    protocol = registry["w.oue"].protocol
    rng = np.random.default_rng(2121)
    f = 1.0 / np.arange(1, D + 1) ** 1.2
    f /= f.sum()
    files, first_id = [], 0
    for hour in range(4):
        n = 30_000
        fakes = 1500 if hour == 3 else 0
        columns = protocol.perturb(rng.choice(D, size=n - fakes, p=f), rng)
        if fakes:
            fake = fake_reports(protocol, "mga", TARGETS, fakes, rng)
            columns = {k: np.concatenate([columns[k], fake[k]]) for k in columns}
        times = T0 + hour * HOUR + rng.integers(0, HOUR, n)
        file = tmp_path / f"reports-{hour}.avro"
        write_reports(str(file), "w.oue", protocol, np.arange(first_id, first_id + n), times,
                      columns)
        first_id += n
        files.append(file)
    out = tmp_path / "out"
    _, _, estimates, _ = run(registry, files, out, HOUR)

    by_hour = sorted(estimates, key=lambda r: r["window_start"])
    assert [r["integrity"]["flagged"] for r in by_hour] == [False, False, False, True]
    assert {"30", "34", "38"} <= set(by_hour[-1]["integrity"]["implicated"])

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["show", "--output", str(out), "--windows", "4"]) == 0
    text = printed.getvalue()
    assert text.count("integrity: FLAGGED") == 1 and "co_support" in text

    url = f"sqlite:///{tmp_path / 'store.db'}"
    with open_store(url) as store:
        store.write_panes(estimates)
        flags = store.integrity_flags("w.oue")
    assert [flag["window_start"] for flag in flags] == [by_hour[-1]["window_start"]]
    assert {"30", "34", "38"} <= set(flags[0]["implicated"])

    for source in (FolderSource(str(out)), StoreSource(url)):
        _, views = source.windows("w.oue")
        payload = source.payload("w.oue", 5)  # the page's rows carry the same flags
        window = source.window("w.oue", *last_bounds(payload))
        source.close()
        marked = [v["window_start"] for v in views if v["integrity_flag"]]
        assert marked == [by_hour[-1]["window_start"]]
        assert [bool(row["integrity"]) for row in unpack(payload)] == [False, False, False, True]
        assert window["integrity_flag"] == views[-1]["integrity_flag"]
