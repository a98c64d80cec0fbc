"""The streaming pane sink without a pipeline: one file per pane, the log, latest.json, index
offsets after a restart, suppressed windows, and torn log tails."""
from __future__ import annotations

import json
import os

from ldp_telemetry.ldp.base.times import ms_from_iso
from ldp_telemetry.output.estimate import EstimateRecord, Pane
from ldp_telemetry.output.layout import PANE_LOG, WindowKey, pane_path
from ldp_telemetry.output.reader import latest_panes, read_pane_log, truncate_torn_tail
from ldp_telemetry.transforms.panes import WritePanesFn

T0 = 1_709_251_200_000  # 2024-03-01T00:00:00Z
HOUR = 3_600_000


def record(index, timing="EARLY", n=10, start="2024-03-01T00:00:00Z", metric="m/x"):
    return EstimateRecord(metric=metric, start_ms=ms_from_iso(start), end_ms=T0 + HOUR, n=n,
                          protocol="oue", epsilon=1.0, estimate=[0.5, 0.5],
                          std_error=[0.1, 0.1], labels=["a", "b"],
                          pane=Pane(timing, index, False))


def test_each_pane_is_a_file_listed_in_the_log_and_latest_only_moves_forward(tmp_path):
    sink = WritePanesFn(str(tmp_path))
    for index, timing, n in ((0, "EARLY", 10), (2, "LATE", 30), (1, "ON_TIME", 20)):
        assert list(sink.process(record(index, timing, n)))
    log = read_pane_log(str(tmp_path))
    assert [(e["pane"]["index"], e["n"]) for e in log] == [(0, 10), (2, 30), (1, 20)]
    for entry in log:
        assert json.loads((tmp_path / entry["path"]).read_text())["n"] == entry["n"]
    assert log[0]["path"] == ("panes/metric=m%2Fx/date=2024-03-01/20240301T000000Z--"
                              "20240301T010000Z/pane-00000-EARLY.json")
    folder = tmp_path / os.path.dirname(log[0]["path"])
    assert json.loads((folder / "latest.json").read_text())["n"] == 30  # index 2, not 1
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no temporary left
    assert latest_panes(str(tmp_path))[WindowKey("m/x", T0, T0 + HOUR)]["n"] == 30


def test_a_restart_continues_indices_and_suppresses_complete_windows(tmp_path):
    key = WindowKey("m/x", T0, T0 + HOUR)
    other = WindowKey("m/x", T0 + 2 * HOUR, T0 + HOUR)
    sink = WritePanesFn(str(tmp_path), index_offsets={key: 3}, suppressed=frozenset({other}))
    [written] = sink.process(record(0, "ON_TIME", 50))
    assert written.pane.index == 3
    assert list(sink.process(record(0, start="2024-03-01T02:00:00Z"))) == []
    assert [e["pane"]["index"] for e in read_pane_log(str(tmp_path))] == [3]
    assert pane_path(written).endswith("pane-00003-ON_TIME.json")


def test_a_torn_last_line_is_cut(tmp_path):
    entry = {"metric": "m", "window_start": "2024-03-01T00:00:00Z",
             "window_end": "2024-03-01T01:00:00Z", "n": 1, "path": "panes/p.json",
             "pane": {"timing": "ON_TIME", "index": 0, "is_last": False}}
    log = tmp_path / PANE_LOG
    log.write_text(json.dumps(entry) + '\n{"b": ')
    assert read_pane_log(str(tmp_path)) == [entry]
    truncate_torn_tail(str(log))
    assert log.read_text() == json.dumps(entry) + "\n"
