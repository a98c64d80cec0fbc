"""A window is partial from facts its run recorded (output/coverage.py), on both stores and in
an output folder: a complete last window with fewer reports is not partial, a window cut by the
run's end (its watermark) or by its inputs' last report is; a real batch job records its inputs'
range in the store and its output folder."""
from __future__ import annotations

import json

from ldp_telemetry.dashboard.source import FolderSource, StoreSource
from ldp_telemetry.ldp.base.times import iso_from_ms, ms_from_iso
from ldp_telemetry.output.coverage import (AFTER_INPUTS, BEFORE_INPUTS, CUT_BY_RUN_END,
                                           NOT_PARTIAL, OPEN, RunInputs, write_inputs)
from ldp_telemetry.output.layout import shard_name
from ldp_telemetry.store import open_store

from tests.dashboard.test_dashboard_server import unpacked
from tests.store.test_sql_store import postgres_url, record, store_url  # noqa: F401

START = 1_709_251_200_000
HOUR = 3_600_000


def hourly(metric: str, count: int, n_last: int, timing_last: str = "ON_TIME") -> list[dict]:
    return [record(metric=metric, start=iso_from_ms(START + k * HOUR),
                   end=iso_from_ms(START + (k + 1) * HOUR),
                   n=5000 if k < count - 1 else n_last,
                   timing="ON_TIME" if k < count - 1 else timing_last)
            for k in range(count)]


def partials(source, metric: str) -> list[int]:
    return [row["partial"] for row in unpacked(source.payload(metric, 3))]


def test_partial_windows_come_from_the_runs_facts_in_a_store(store_url):  # noqa: F811
    with open_store(store_url) as store:
        # a batch run whose inputs cover its 6 windows whole: the last has fewer reports
        batch = store.begin_run("batch", ["a.avro"], "/a").seq
        store.write_panes(hourly("complete", 6, n_last=3000), run=batch)
        store.record_inputs(batch, RunInputs({"complete": (START + 1, START + 6 * HOUR - 2)}))
        # a live run stopped 10 minutes into its 4th window; its inputs' range reaches past it
        live = store.begin_run("live", ["/in"], "/b").seq
        store.write_panes(hourly("stopped", 4, n_last=5000), run=live)
        store.record_inputs(live, RunInputs({"stopped": (START, START + 4 * HOUR - 5)},
                                            watermark_ms=START + 3 * HOUR + 600_000))
        # inputs that end 20 minutes into the last window and start 30 into the first
        cut = store.begin_run("batch", ["c.avro"], "/c").seq
        store.write_panes(hourly("cut", 3, n_last=1700), run=cut)
        store.record_inputs(cut, RunInputs({"cut": (START + 1_800_000,
                                                    START + 2 * HOUR + 1_200_000)}))
        # no facts (a store written without runs): nothing is guessed from a small n
        store.write_panes(hourly("unknown", 3, n_last=10))
        # an open window of a running live run
        store.write_panes(hourly("running", 2, n_last=200, timing_last="EARLY"))
    source = StoreSource(store_url)
    try:
        assert partials(source, "complete") == [NOT_PARTIAL] * 6
        assert partials(source, "stopped") == [NOT_PARTIAL] * 3 + [CUT_BY_RUN_END]
        assert partials(source, "cut") == [BEFORE_INPUTS, NOT_PARTIAL, AFTER_INPUTS]
        assert partials(source, "unknown") == [NOT_PARTIAL] * 3
        assert partials(source, "running") == [NOT_PARTIAL, OPEN]
        payload = source.payload("stopped", 3)
        assert payload["partials"][CUT_BY_RUN_END].startswith("cut by the run's end")
    finally:
        source.close()


def test_a_resumed_run_widens_its_recorded_range(tmp_path):
    with open_store(f"sqlite:///{tmp_path}/s.db") as store:
        run = store.begin_run("live", ["/in"], "/out").seq
        store.record_inputs(run, RunInputs({"m": (100, 200)}, watermark_ms=150))
        store.record_inputs(run, RunInputs({"m": (150, 400)}, watermark_ms=390))
        rows = store._query("SELECT first_event_ms, last_event_ms, watermark_ms "
                            "FROM ldp_run_inputs WHERE run_seq = ?", (run,))
    assert rows == [(100, 400, 390)]


def test_an_output_folder_flags_from_its_inputs_file(tmp_path):
    records = hourly("m", 4, n_last=2500)
    path = tmp_path / shard_name("estimates", 0, 1, ".jsonl")
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    source = FolderSource(str(tmp_path))
    assert partials(source, "m") == [NOT_PARTIAL] * 4  # no inputs recorded
    write_inputs(str(tmp_path), RunInputs({"m": (START, START + 4 * HOUR - 1)}))
    assert partials(source, "m") == [NOT_PARTIAL] * 4  # complete, fewer reports in the last
    write_inputs(str(tmp_path), RunInputs({"m": (START, START + 3 * HOUR + 60_000)}))
    assert partials(source, "m") == [NOT_PARTIAL] * 3 + [AFTER_INPUTS]


def test_a_batch_job_records_its_inputs_range_in_the_store_and_folder(demo_run):
    """The demo job (January 2013, weeks from Monday 31 December): its first week starts before
    the first flight and its last ends after the last one; the weeks between are whole."""
    with open_store(demo_run["store"], create=False) as store:
        rows = store._query("SELECT metric, first_event_ms, last_event_ms, watermark_ms "
                            "FROM ldp_run_inputs ORDER BY metric")
    assert [row[0] for row in rows] == ["flight.carrier", "flight.dest"]
    for _, first, last, watermark in rows:
        assert ms_from_iso("2013-01-01T00:00:00Z") <= first < ms_from_iso("2013-01-02T00:00:00Z")
        assert ms_from_iso("2013-01-31T00:00:00Z") <= last < ms_from_iso("2013-02-01T00:00:00Z")
        assert watermark is None
    folder = json.loads((demo_run["output"] / "inputs.json").read_text(encoding="utf-8"))
    assert {m: tuple(r) for m, r in folder["ranges"].items()} == \
        {row[0]: (row[1], row[2]) for row in rows}
    for source in (StoreSource(demo_run["store"]), FolderSource(str(demo_run["output"]))):
        try:
            found = partials(source, "flight.dest")
        finally:
            source.close()
        assert found[0] == BEFORE_INPUTS and found[-1] == AFTER_INPUTS
        assert set(found[1:-1]) == {NOT_PARTIAL}
