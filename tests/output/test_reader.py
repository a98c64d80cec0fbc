"""The one reader of both output layouts: a batch run's shards, a live run's pane log, and a
follower that reads only what was appended (the dashboard's folder source)."""
from __future__ import annotations

import json

import pytest

from ldp_telemetry.ldp.base.errors import ConfigError, InputError
from ldp_telemetry.output.estimate import EstimateRecord, record_problem
from ldp_telemetry.output.layout import PANE_LOG, TOO_LATE_LOG, WindowKey
from ldp_telemetry.output.reader import latest_panes, read_estimates, read_pane_log, select_window
from ldp_telemetry.output.tail import OutputTail

T0 = 1_709_251_200_000  # 2024-03-01T00:00:00Z
HOUR = 3_600_000


def record(metric="m", start="2024-03-01T00:00:00Z", end="2024-03-01T01:00:00Z", n=10,
           index=0, timing="ON_TIME") -> dict:
    return {"metric": metric, "window_start": start, "window_end": end, "n": n,
            "protocol": "grr", "epsilon": 1.0, "labels": ["a", "b"], "estimate": [0.6, 0.4],
            "std_error": [0.1, 0.1], "unbiased_estimate": [0.6, 0.4],
            "postprocess": {"method": "norm", "params": {}},
            "pane": {"timing": timing, "index": index, "is_last": False}}


def write_pane(folder, rec: dict, relative: str | None = None) -> None:
    relative = relative or f"panes/{rec['metric']}-{rec['window_start'][11:13]}-" \
                           f"{rec['pane']['index']}.json"
    path = folder / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec))
    entry = {k: rec[k] for k in ("metric", "window_start", "window_end", "pane", "n")}
    with open(folder / PANE_LOG, "a", encoding="utf-8") as log:
        log.write(json.dumps({**entry, "path": relative}) + "\n")


def test_batch_shards_are_read_sorted_and_filtered(tmp_path):
    later = record(start="2024-03-01T01:00:00Z", end="2024-03-01T02:00:00Z", n=20)
    sub_second = record(start="2024-03-01T00:00:00.500Z", end="2024-03-01T01:00:00.500Z", n=15)
    (tmp_path / "estimates-00000-of-00002.jsonl").write_text(
        json.dumps(later) + "\n\n" + json.dumps(record(metric="z")) + "\n")
    (tmp_path / "estimates-00001-of-00002.jsonl").write_text(
        json.dumps(sub_second) + "\n" + json.dumps(record()) + "\n")
    assert [(r.metric, r.n) for r in read_estimates(str(tmp_path))] == \
        [("m", 10), ("m", 15), ("m", 20), ("z", 10)]  # by time, not by text
    assert [r.n for r in read_estimates(str(tmp_path), "z")] == [10]


def test_a_live_run_is_read_as_the_latest_pane_of_each_window(tmp_path):
    write_pane(tmp_path, record(n=5, index=0, timing="EARLY"))
    write_pane(tmp_path, record(n=30, index=2, timing="LATE"))
    write_pane(tmp_path, record(n=20, index=1, timing="ON_TIME"))
    write_pane(tmp_path, record(start="2024-03-01T01:00:00Z", end="2024-03-01T02:00:00Z"))
    with open(tmp_path / PANE_LOG, "a", encoding="utf-8") as log:
        log.write('{"metric": "m", "window_st')  # torn by a crash: ignored
    assert [e["n"] for e in read_pane_log(str(tmp_path))] == [5, 30, 20, 10]
    assert {key: entry["n"] for key, entry in latest_panes(str(tmp_path)).items()} == {
        WindowKey("m", T0, T0 + HOUR): 30, WindowKey("m", T0 + HOUR, T0 + 2 * HOUR): 10}
    assert [(r.n, r.pane.index) for r in read_estimates(str(tmp_path))] == \
        [(30, 2), (10, 0)]


def test_problems_in_the_output_are_input_errors_naming_the_place(tmp_path):
    with pytest.raises(InputError, match="no estimates-\\*.jsonl files") as caught:
        read_estimates(str(tmp_path))
    assert caught.value.field == "output"
    write_pane(tmp_path, record(), relative="../outside.json")
    with pytest.raises(InputError, match="names no pane file inside"):
        read_estimates(str(tmp_path))
    (tmp_path / PANE_LOG).write_text(json.dumps({"metric": "m"}) + "\n")
    with pytest.raises(InputError, match=f"{PANE_LOG} line 1: not a pane-log entry: field "
                                         "'window_start' is missing"):
        read_estimates(str(tmp_path))
    write_pane(tmp_path / "x", {**record(), "epsilon": "one"})
    with pytest.raises(InputError, match="json: not a window estimate: field 'epsilon' is "
                                         "missing or not a number"):
        read_estimates(str(tmp_path / "x"))


@pytest.mark.parametrize("change, problem", [
    ({"n": True}, "field 'n' is missing or not a int"),
    # a count of reports: never negative (bands of nan), never beyond the job's int64
    ({"n": -5}, "field 'n' must be an integer in [0, 9223372036854775807]"),
    ({"n": 2 ** 63}, "field 'n' must be an integer in [0, 9223372036854775807]"),
    ({"epsilon": False}, "field 'epsilon' is missing or not a number"),
    ({"window_start": "yesterday"}, "field 'window_start' is not an ISO-8601 time"),
    ({"p_star": "0.7"}, "field 'p_star' must be null or a number"),
    ({"estimate": [0.5, True]}, "field 'estimate' must hold 2 numbers"),
    ({"unbiased_estimate": [0.5]}, "field 'unbiased_estimate' must be null or hold 2 numbers"),
    # a pooled-hash Wiener record's f~ error without f~: its bands would be centred on the
    # filtered estimate
    ({"unbiased_std_error": [0.1, 0.1], "unbiased_estimate": None},
     "field 'unbiased_std_error' needs 'unbiased_estimate', the estimate it is f~'s of"),
    ({"pane": {"index": True}}, "field 'pane' has no integer 'index'"),
    # any record's, not a numeric one's only: a reader turns it into a tuple
    ({"level_reports": 5}, "field 'level_reports' must be null or a list of non-negative "
                           "integers summing to n"),
    ({"level_reports": ["ab"]}, "field 'level_reports' must be null or a list of non-negative "
                                "integers summing to n"),
])
def test_a_record_problem_is_named(change, problem):
    assert record_problem({**record(), **change}) == problem
    assert record_problem({**record(), "p_star": 0.7, "q_star": None}) is None


def test_a_window_is_chosen_by_start_or_index_and_a_miss_names_the_field():
    records = [EstimateRecord.from_json(r) for r in (
        record(), record(start="2024-03-01T01:00:00Z", end="2024-03-01T02:00:00Z", n=20))]
    assert select_window(records, "m", "2024-03-01T01:00:00").n == 20  # naive: UTC
    assert select_window(records, "m", "-1").n == 20
    for metric, window, field in (("x", "0", "metric"), ("m", "5", "window"),
                                  ("m", "yesterday", "window")):
        with pytest.raises(ConfigError) as caught:
            select_window(records, metric, window)
        assert caught.value.field == field and "--" not in str(caught.value)


def test_a_follower_reads_only_complete_new_lines_and_skips_what_is_not_a_record(tmp_path):
    tail = OutputTail(str(tmp_path), max_line_bytes=2000)
    assert tail.read().estimates == [] and not tail.found
    shard = tmp_path / "estimates-live.jsonl"
    late = json.dumps(record(n=15, index=1, timing="LATE"))
    shard.write_text(json.dumps(record()) + "\n" + "[1, 2]\n" + "{not json\n"
                     + json.dumps({**record(), "labels": ["x"] * 500}) + "\n"  # too long
                     + "[" * 1500 + "\n" + late[:20])  # nested too deeply
    assert [r.n for r in tail.read().estimates] == [10] and tail.found
    with open(shard, "a", encoding="utf-8") as handle:
        handle.write(late[20:] + "\n")
    assert [r.n for r in tail.read().estimates] == [15]
    assert tail.read().estimates == []
    write_pane(tmp_path, record(n=40, timing="EARLY"))
    with open(tmp_path / PANE_LOG, "a", encoding="utf-8") as log:  # hostile or broken lines
        log.write(json.dumps({"path": "../../../etc/passwd"}) + "\n")
        log.write(json.dumps({"path": "panes/missing.json"}) + "\n")
    (tmp_path / "dead_letters").mkdir()
    (tmp_path / "dead_letters" / "r.avro.jsonl").write_text('{"reason": "undecodable"}\n7\n')
    (tmp_path / TOO_LATE_LOG).write_text(
        json.dumps({"metric": "m", "window_start": "2024-03-01T00:00:00Z",
                    "window_end": "2024-03-01T01:00:00Z", "too_late": 3}) + "\n"
        + json.dumps({"metric": "m", "window_start": "never", "window_end": "x",
                      "too_late": 9}) + "\n")
    appended = tail.read()
    assert [r.n for r in appended.estimates] == [40]
    assert appended.dead_letters == [{"reason": "undecodable"}]
    assert appended.too_late == [(WindowKey("m", T0, T0 + HOUR), 3)]


NUMERIC = {"bucket_edges": [0.0, 1.0, 2.0], "labels": [], "std_error": None,
           "unbiased_estimate": None, "quantiles": {"0.5": 1.0},
           "quantile_std_errors": {"0.5": 0.1}, "bands": {"0.5": {"lower": 0.9, "upper": 1.1}},
           "band_reasons": {"0.5": "why"}, "band_methods": {"mean": "exact-variance"}}


@pytest.mark.parametrize("change, problem", [
    ({"bands": {"0.5": [0.9, 1.1]}},
     "field 'bands' maps '0.5' to something not null or {\"lower\": number, \"upper\": number}"),
    ({"bands": {"mean": {"lower": "0.9", "upper": 1.1}}},
     "field 'bands' maps 'mean' to something not null or {\"lower\": number, \"upper\": number}"),
    ({"quantiles": {"0.5": "1"}}, "field 'quantiles' maps '0.5' to something not a number or "
                                  "null"),
    ({"quantile_std_errors": {"0.5": [1]}}, "field 'quantile_std_errors' maps '0.5' to "
                                            "something not a number or null"),
    ({"band_reasons": {"0.5\x1b[2J": 5}}, "field 'band_reasons' maps '0.5\\x1b[2J' to "
                                          "something not a string"),
    ({"band_methods": {"mean": None}}, "field 'band_methods' maps 'mean' to something not a "
                                       "string"),
])
def test_a_numeric_records_statistics_are_checked_entry_by_entry(change, problem):
    """Every reader (`ldp show`, `ldp query`, the store, the dashboard) reads a numeric
    record's per-statistic maps: an entry of the wrong shape read from a file is a named
    problem, not a TypeError or ValueError deep in a reader."""
    numeric = {**record(), **NUMERIC}
    assert record_problem(numeric) is None
    assert record_problem({**numeric, "bands": {"0.5": None}, "quantiles": {"0.5": None}}) \
        is None
    assert record_problem({**numeric, **change}) == problem
