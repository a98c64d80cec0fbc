"""Every view of a live run adds up, and they agree (issue 28, item 2): read = accepted +
dead-lettered and accepted = Σ latest-pane n + too late, in the summary, status.json, the
dead-letter files, `ldp show`'s records, the store and the dashboard (folder and store).

Two real live runs (in process, BundleBasedDirectRunner) over one folder: the first ends with the
watermark past window 0; the second finds a too-late file, a re-delivered file, a file with
repeated ids and an undecodable one.
"""
from __future__ import annotations

import io
import json
import re
import shutil

import numpy as np

from ldp_telemetry.dashboard.payload import unpack
from ldp_telemetry.dashboard.source import FolderSource, StoreSource
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.output.coverage import (CUT_BY_RUN_END, NOT_PARTIAL, RunInputs,
                                           read_inputs)
from ldp_telemetry.output.layout import STATUS
from ldp_telemetry.output.reader import latest_panes, read_estimates
from ldp_telemetry.pipelines.counters import accepted as accepted_of
from ldp_telemetry.pipelines.follower import WatermarkPolicy
from ldp_telemetry.pipelines.job import EstimateJob, LiveConfig
from ldp_telemetry.pipelines.live import run_live
from ldp_telemetry.store import open_store
from tests.pipelines.test_follow import METRIC, MINUTE, REGISTRY, T0, write


def live(inbox, output, store):
    job = EstimateJob(REGISTRY, (), str(output), WindowSpec(MINUTE, MINUTE), store)
    printed = io.StringIO()
    counters = run_live(job, LiveConfig("directory", str(inbox), WatermarkPolicy(0, None),
                                        poll_s=0.05, stop_when_idle_s=1.0, until_s=300),
                        [], out=printed)
    return counters, printed.getvalue()


def test_summary_status_dead_letters_show_store_and_dashboard_agree(tmp_path, hard_deadline):
    hard_deadline(600)
    inbox, output = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    url = f"sqlite:///{tmp_path / 'store.db'}"
    write(inbox, "w0.avro", [T0 + 1000 + i for i in range(40)], seed=1)
    write(inbox, "w3.avro", [T0 + 3 * MINUTE + i for i in range(30)], seed=2)
    live(inbox, output, url)

    write(inbox, "w0-late.avro", [T0 + 5] * 7, seed=3)  # window 0 closed: too late
    shutil.copy(inbox / "w3.avro", inbox / "w3-retry.avro")  # re-delivered
    write(inbox, "w2.avro", [T0 + 2 * MINUTE + 1] * 20, seed=4, ids=np.repeat(np.arange(5), 4))
    (inbox / "junk.avro").write_bytes(b"not avro")
    counters, printed = live(inbox, output, url)

    # the summary adds up
    read, accepted, dead = (int(x) for x in re.search(
        r"records read: (\d+), accepted: (\d+), dead-lettered: (\d+)", printed).groups())
    assert (read, accepted, dead) == (40 + 30 + 7 + 30 + 20 + 1, 40 + 30 + 7 + 5, 30 + 15 + 1)
    assert read == accepted + dead
    assert "duplicate=45" in printed and "undecodable=1" in printed
    assert "too late (dropped): 7" in printed
    # status.json says the same (the store sinks' own counters, store_*, are the summary's)
    status = json.loads((output / STATUS).read_text())["counters"]
    assert status == {k: v for k, v in counters.items()
                      if k not in ("windows_finalized", "panes_written")
                      and not k.startswith("store_")}
    assert counters["store_panes_failed"] == 0 and counters["store_panes_written"] > 0
    assert accepted_of(status) == accepted
    # accepted = Σ latest-pane n + too late, in the pane files and in `ldp show`'s records
    panes = {(e["window_start"], e["window_end"]): e["n"]
             for e in latest_panes(str(output)).values()}
    shown = {(r.window_start, r.window_end): r.n for r in read_estimates(str(output))}
    assert shown == panes and sum(panes.values()) + 7 == accepted
    # the dead-letter files, per reason
    letters: dict[str, int] = {}
    for path in (output / "dead_letters").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            letter = json.loads(line)
            letters[letter["reason"]] = letters.get(letter["reason"], 0) + letter["records"]
    assert letters == {"duplicate": 45, "undecodable": 1}
    # the store: windows, and rejects per reason (too late included, per slice)
    with open_store(url) as store:
        stored = {(r["window_start"], r["window_end"]): r["n"] for r in store.windows(METRIC)}
        per_window = store.rejects(METRIC)
        unattributed = store.unattributed_rejects()
    assert stored == panes
    assert per_window == {(T0, T0 + MINUTE): {"too_late": 7}}
    assert unattributed == {("", "duplicate"): 45, ("", "undecodable"): 1}
    # what the run read (output/coverage.py), kept across its restart: the valid reports'
    # event-time range and the watermark it stopped at (the latest slice's start: no idle
    # advance), in the folder and the store
    inputs = read_inputs(str(output))
    assert inputs == RunInputs({METRIC: (T0 + 5, T0 + 3 * MINUTE + 29)}, T0 + 3 * MINUTE)
    with open_store(url) as store:
        recorded = store._query("SELECT metric, first_event_ms, last_event_ms, watermark_ms "
                                "FROM ldp_run_inputs")
    assert recorded == [(METRIC, T0 + 5, T0 + 3 * MINUTE + 29, T0 + 3 * MINUTE)]
    # the dashboard, from the folder and from the store
    folder, from_store = FolderSource(str(output)), StoreSource(url)
    try:
        for source in (folder, from_store):
            _, views = source.windows(METRIC)
            assert {(v["window_start"], v["window_end"]): v["n"] for v in views} == panes
            late = {v["window_start"]: v["rejects"].get("too_late", 0) for v in views}
            assert late["2024-03-01T00:00:00Z"] == 7 and sum(late.values()) == 7
            assert source.unattributed_rejects() == unattributed
            # the window the run stopped inside (its watermark short of its end) is partial
            assert [row["partial"] for row in unpack(source.payload(METRIC, 3))] == \
                [NOT_PARTIAL, NOT_PARTIAL, CUT_BY_RUN_END]
    finally:
        folder.close()
        from_store.close()
