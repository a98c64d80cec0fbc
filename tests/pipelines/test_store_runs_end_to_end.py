"""`ldp run --store` twice into one store: the later run's windows and rejects replace the
earlier run's whole, and each run is a row of ldp_runs with its inputs."""
from __future__ import annotations

import json

import numpy as np

from ldp_telemetry.ldp.config.registry import load_registry
from ldp_telemetry.pipelines.cli import main
from ldp_telemetry.schemas.codec import write_reports
from ldp_telemetry.store import open_store

HOUR = 3_600_000
T0 = 1_709_251_200_000  # 2024-03-01T00:00:00Z
REGISTRY = {"metrics": [{"name": "r.grr", "protocol": "grr", "epsilon": 2.0,
                         "domain": {"labels": list("abcd")}}]}


def reports(folder, name, n, value, duplicates, seed):
    """n reports of one value over two hours, `duplicates` of them repeating earlier ids (in the
    same slice: duplicates are found per slice)."""
    registry = load_registry(folder / "registry.json")
    protocol = registry["r.grr"].protocol
    rng = np.random.default_rng(seed)
    ids = np.arange(n)
    ids[n - duplicates:] = ids[:duplicates]
    times = T0 + rng.integers(0, 2 * HOUR, n)
    times[n - duplicates:] = times[:duplicates]
    path = folder / name
    write_reports(str(path), "r.grr", protocol, ids, times,
                  protocol.perturb(np.full(n, value), rng))
    return str(path)


def test_the_later_batch_run_wins_every_window_and_its_rejects(tmp_path, capsys):
    (tmp_path / "registry.json").write_text(json.dumps(REGISTRY))
    a = reports(tmp_path, "a.avro", 8_000, 0, 40, seed=1)
    b = reports(tmp_path, "b.avro", 2_000, 3, 0, seed=2)
    url = f"sqlite:///{tmp_path}/store.db"
    for path, output in ((a, "out-a"), (b, "out-b")):
        assert main(["run", "--registry", str(tmp_path / "registry.json"), "--input", path,
                     "--output", str(tmp_path / output), "--window", "3600", "--store", url,
                     "--create-store"]) == 0
        if path == a:
            with open_store(url) as store:
                assert sum(w["n"] for w in store.windows("r.grr")) == 8_000 - 40
                assert store.unattributed_rejects() == {("", "duplicate"): 40}
    capsys.readouterr()
    with open_store(url) as store:
        windows = store.windows("r.grr")
        assert len(windows) == 2 and sum(w["n"] for w in windows) == 2_000
        for window in windows:  # run B's top value, not A's
            assert int(np.argmax(window["estimate"])) == 3
        assert store.rejects("r.grr") == {}
        # rejects that belong to no window are kept per run (the latest run that had any)
        assert store._query("SELECT run_seq FROM ldp_rejects") == [(store.runs()[0]["run_seq"],)]
        runs = store.runs()
    assert [(run["kind"], run["inputs"], run["status"]) for run in runs] == [
        ("batch", [a], "finished"), ("batch", [b], "finished")]
    assert runs[1]["output"] == str(tmp_path / "out-b")
