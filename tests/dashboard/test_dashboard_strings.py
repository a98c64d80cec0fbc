"""A string metric's chart over windows is keyed by label: its windows' heavy hitters change from
window to window and their value index is their rank there, not an identity. The top-k strings
of a series, a string found in only some windows, two strings swapping ranks, the bound on the
labels a series ranks, and the store source (SQLite and PostgreSQL) agreeing with the
output-folder source."""
from __future__ import annotations

import contextlib
import json

import pytest

from ldp_telemetry.dashboard.pages import metric_page
from ldp_telemetry.dashboard.payload import unpack
from ldp_telemetry.dashboard.source import FolderSource, StoreSource
from ldp_telemetry.ldp.base.times import iso_from_ms
from ldp_telemetry.store import open_store, reads
from ldp_telemetry.store.records import labels_per_window

from tests.store.test_sql_store import postgres_url, store_url  # noqa: F401

START = 1_709_251_200_000  # 2024-03-01T00:00:00Z
HOUR = 3_600_000
METRIC = "app.name"

#: Heavy hitters per hourly window, best first: "mail" and "maps" swap ranks in window 1,
#: "café" is found only in windows 2 and 3, "chat" only in window 0.
WINDOWS = [
    [("mail", 0.40), ("maps", 0.30), ("chat", 0.05)],
    [("maps", 0.45), ("mail", 0.35)],
    [("mail", 0.50), ("café", 0.20)],
    [("mail", 0.38), ("maps", 0.32), ("café", 0.10)],
]


def string_record(k: int, hitters: list[tuple[str, float]], metric: str = METRIC,
                  length: int = HOUR) -> dict:
    """The k-th window of a string metric as its job wrote it before string records declared
    their values without a band (`output.records.string_estimate_record` now writes `none`):
    its heavy hitters, best first, with standard errors 0.01·(rank+1), stating
    `exact-variance`, which every reader reads as none (`output.bands.value_band_method`)."""
    labels = [label for label, _ in hitters]
    estimate = [value for _, value in hitters]
    return {"metric": metric, "window_start": iso_from_ms(START + k * length),
            "window_end": iso_from_ms(START + (k + 1) * length), "n": 10_000 + k,
            "protocol": "pem", "epsilon": 4.0, "p_star": None, "q_star": None,
            "smallest_resolvable": None,
            "estimator": {"method": "heavy-hitters",
                          "params": {"top": 4, "threshold": 0.0, "width": 0}},
            "postprocess": {"method": "none", "params": {}},
            "labels": labels, "estimate": estimate, "unbiased_estimate": list(estimate),
            "std_error": [0.01 * (r + 1) for r in range(len(labels))],
            "band_method": "exact-variance",
            "heavy_hitters": {"top": 4, "threshold": 0.0, "width": 8,
                              "level_reports": [1000] * 10, "reason": None},
            "pane": {"timing": "ON_TIME", "index": 0, "is_last": True}}


def write_folder(folder, records: list[dict]) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "estimates-00000-of-00001.jsonl", "w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")
    return str(folder)


def write_store(url: str, records: list[dict]) -> None:
    with open_store(url) as store:
        store.write_panes(records)


@contextlib.contextmanager
def both_sources(url: str, tmp_path, records: list[dict]):
    """`records` written to the store at `url` and to an output folder under `tmp_path`: (the
    store's source, the folder's), the store's closed on exit."""
    write_store(url, records)
    folder = FolderSource(write_folder(tmp_path / "out", records))
    store = StoreSource(url)
    try:
        yield store, folder
    finally:
        store.close()


def chart(source, top_k: int) -> tuple[list[dict], list[dict]]:
    """(the series, the unpacked rows) a page of `source` draws for METRIC."""
    payload = source.payload(METRIC, top_k)
    return payload["series"], unpack(payload)


def test_a_string_metric_is_recognised_by_its_protocol():
    assert labels_per_window("pem")
    assert not labels_per_window("grr") and not labels_per_window(None)


def test_lines_are_strings_ranked_by_mean_estimate_with_gaps_where_absent(tmp_path):
    records = [string_record(k, hitters) for k, hitters in enumerate(WINDOWS)]
    source = FolderSource(write_folder(tmp_path / "out", records))
    [series], rows = chart(source, 3)
    # sums over the 4 windows (absent: 0): mail 1.63, maps 1.07, café 0.30, chat 0.05
    assert series["by_label"] and series["indices"] == []
    assert series["labels"] == ["mail", "maps", "café"] and not series["labels_cut"]
    # each row's estimates in the series' label order, whatever the string's rank in the
    # window; None (a gap) where the window's heavy hitters lack the string
    assert [row["top"] for row in rows] == [
        [0.40, 0.30, None], [0.35, 0.45, None], [0.50, None, 0.20], [0.38, 0.32, 0.10]]
    # no band drawn: a heavy hitter has none, whatever the (older) record states
    # (output.bands.value_band_method)
    assert [(row["low"], row["high"]) for row in rows] == [([None] * 3, [None] * 3)] * 4
    # the top 4 brings in "chat", found in window 0 only
    [series], rows = chart(source, 4)
    assert series["labels"][3] == "chat"
    assert [row["top"][3] for row in rows] == [0.05, None, None, None]


def test_ties_are_broken_by_the_label_and_empty_windows_count_zero(tmp_path):
    records = [string_record(0, [("b", 0.2), ("a", 0.2)]), string_record(1, [])]
    source = FolderSource(write_folder(tmp_path / "out", records))
    [series], rows = chart(source, 5)
    assert series["labels"] == ["a", "b"]
    assert [row["top"] for row in rows] == [[0.2, 0.2], [None, None]]


def test_a_labelled_metric_keeps_its_value_indices(tmp_path):
    records = [string_record(k, hitters) for k, hitters in enumerate(WINDOWS)]
    labelled = [dict(r, metric="m.grr", protocol="grr", labels=["x", "y", "z"],
                     estimate=[0.5, 0.3, 0.2], unbiased_estimate=[0.5, 0.3, 0.2],
                     std_error=[0.01] * 3, heavy_hitters=None, band_method=None,
                     p_star=0.6, q_star=0.2, smallest_resolvable=0.01) for r in records]
    for value in labelled:
        del value["heavy_hitters"], value["band_method"]
    source = FolderSource(write_folder(tmp_path / "out", labelled))
    payload = source.payload("m.grr", 2)
    [series] = payload["series"]
    assert not series["by_label"] and series["indices"] == [0, 1]
    assert series["labels"] == ["x", "y"]
    assert [row["top"] for row in unpack(payload)] == [[0.5, 0.3]] * 4


def test_the_labels_a_series_ranks_are_bounded(tmp_path, monkeypatch):
    """At most MAX_SERIES_LABELS labels are ranked, those seen most recently, in both sources
    (SQLite here; the store test below runs both databases)."""
    monkeypatch.setattr(reads, "MAX_SERIES_LABELS", 3)
    # window 0 holds the largest string, but windows 1 and 2 hold 3 newer ones
    records = [string_record(0, [("old", 0.9)]),
               string_record(1, [("p", 0.2), ("q", 0.1)]),
               string_record(2, [("r", 0.3), ("p", 0.25), ("s", 0.05)])]
    url = f"sqlite:///{tmp_path}/s.db"
    with both_sources(url, tmp_path, records) as (store, folder):
        for source in (folder, store):
            [series], _ = chart(source, 5)
            assert series["labels"] == ["p", "r", "s"] and series["labels_cut"], source


HOSTILE = ["<script>window.__owned=1</script>", "\"q'&amp;", "\u202eexe.txt", "שלום",
           "constructor", "__proto__", "e\u0301\U0001F44D\U0001F3FD"]


def test_hostile_strings_are_data_in_the_page(tmp_path):
    records = [string_record(0, [(label, 0.1) for label in HOSTILE])]
    source = FolderSource(write_folder(tmp_path / "out", records))
    payload = source.payload(METRIC, 10)
    page = metric_page(METRIC, payload, source.header(METRIC, START, START + HOUR, ""),
                       "here", live=False, top_k=10)
    assert "<script>window" not in page and "\u202e" not in page  # escaped in the page's JSON
    labels = payload["series"][0]["labels"]
    assert "\\u202eexe.txt" in labels  # the override shown as an escape (output.text.printable)
    assert set(labels) - {"\\u202eexe.txt"} == set(HOSTILE) - {"\u202eexe.txt"}
    assert "strings of at most 10 bytes (open)" in page and "Top 10 strings over" in page


def test_the_page_of_a_string_metric_names_no_95_band_over_windows(tmp_path):
    """The chart's hint of a string metric names no 95% band: its heavy hitters have none
    (output.bands.value_band_method), and no band is drawn."""
    records = [string_record(0, [("maps", 0.4), ("mail", 0.3)])]
    source = FolderSource(write_folder(tmp_path / "out", records))
    page = metric_page(METRIC, source.payload(METRIC, 5),
                       source.header(METRIC, START, START + HOUR, ""), "here", live=False,
                       top_k=5)
    hint = page.split("Top 5 strings over windows", 1)[1].split("</span>", 1)[0]
    assert "no 95% band" in hint
    assert "band (±" not in hint and "see its band" not in hint


def test_store_and_folder_sources_draw_the_same_lines(store_url, tmp_path):  # noqa: F811
    records = [string_record(k, hitters) for k, hitters in enumerate(WINDOWS)]
    records += [string_record(0, [("day", 0.7), ("mail", 0.2)], length=4 * HOUR)]  # 2nd series
    with both_sources(store_url, tmp_path, records) as (store, folder):
        drawn = []
        for source in (store, folder):
            series, rows = chart(source, 3)
            drawn.append(([(s["name"], s["labels"], s["by_label"]) for s in series],
                          [(r["start_ms"], r["end_ms"], r["top"], r["low"], r["high"])
                           for r in rows]))
        assert drawn[0] == drawn[1]
        assert drawn[0][0] == [("1 h", ["mail", "maps", "café"], True),
                               ("4 h", ["day", "mail"], True)]
        # the reads themselves
        with open_store(store_url, create=False) as opened:
            totals, cut = reads.label_totals(opened, METRIC, "", HOUR)
            assert totals == pytest.approx({"mail": 1.63, "maps": 1.07, "café": 0.3,
                                            "chat": 0.05}) and not cut
            found = reads.label_values(opened, METRIC, "", HOUR, ["maps", "café"], START,
                                       START + 2 * HOUR)
            # no band stored for a heavy hitter (lower95/upper95 NULL)
            assert found == {(START, START + HOUR): {"maps": (pytest.approx(0.3), None, None)},
                             (START + HOUR, START + 2 * HOUR): {
                                 "maps": (pytest.approx(0.45), None, None)}}
        # a window's detail: its own heavy hitters, no band, their standard errors kept
        one = store.window(METRIC, START + HOUR, START + 2 * HOUR)
        assert one["labels"] == ["maps", "mail"]
        assert one["half95"] == [None, None] and one["lower95"] == one["upper95"] == [None] * 2
        assert one["std_error"] == pytest.approx([0.01, 0.02])
        detail = folder.window(METRIC, START + HOUR, START + 2 * HOUR)
        assert detail["half95"] == [None, None]
        assert detail["std_error"] == pytest.approx(one["std_error"])
        # an export's windows of a string metric are whole, whatever keep_all says
        exported = store.export_windows(METRIC, 3, keep_all=1)
        assert [len(v["labels"]) for v in exported if v["series"] == "1 h"] == [3, 2, 2, 3]


def test_both_sources_cut_the_labels_ranked_by_the_same_rule(tmp_path, monkeypatch):
    """At the bound, labels last seen in the same window are kept by the best rank they had in
    any window, then by the label (`store.reads.label_totals`): the folder source as the store."""
    monkeypatch.setattr(reads, "MAX_SERIES_LABELS", 2)
    # all three strings are in the latest window; "a" was ranked first in window 0, so it
    # and "b" (first in window 1) are kept, not "c" (ranked second at best)
    records = [string_record(0, [("a", 0.5), ("b", 0.4)]),
               string_record(1, [("b", 0.3), ("c", 0.2), ("a", 0.1)])]
    url = f"sqlite:///{tmp_path}/s.db"
    with both_sources(url, tmp_path, records) as (store, folder):
        for source in (store, folder):
            [series], rows = chart(source, 5)
            assert series["labels"] == ["b", "a"] and series["labels_cut"], source
            assert [row["top"] for row in rows] == [[0.4, 0.5], [0.3, 0.1]], source


def labelled_record(k: int, estimate: list[float], length: int) -> dict:
    """The k-th window of length `length` of a labelled (GRR) metric "m.grr" over x, y, z."""
    found = dict(string_record(k, [], metric="m.grr", length=length), protocol="grr",
                 labels=["x", "y", "z"], estimate=estimate, unbiased_estimate=estimate,
                 std_error=[0.01] * 3, p_star=0.6, q_star=0.2, smallest_resolvable=0.01)
    del found["heavy_hitters"], found["band_method"]
    return found


def test_an_export_cuts_each_series_to_its_own_top_values(tmp_path):
    """Two series of one configuration version (two window lengths) with different top values:
    an export of their windows cut to the top-k (a domain above `keep_all`) keeps each
    series' own (the values read are keyed by version and window length)."""
    records = [labelled_record(k, [0.6, 0.3, 0.1], HOUR) for k in range(2)]
    records += [labelled_record(0, [0.1, 0.2, 0.7], 4 * HOUR)]
    url = f"sqlite:///{tmp_path}/s.db"
    write_store(url, records)
    store = StoreSource(url)
    try:
        exported = store.export_windows("m.grr", 1, keep_all=2)
        assert sorted((v["series"], v["labels"], v["estimate"]) for v in exported) == [
            ("1 h", ["x"], [0.6]), ("1 h", ["x"], [0.6]), ("4 h", ["z"], [0.7])]
    finally:
        store.close()


def test_the_bound_breaks_ties_by_code_point_whatever_the_database_collation(postgres_url,  # noqa: F811
                                                                            tmp_path, monkeypatch):
    """A PostgreSQL database whose collation is a language's (ICU, "a" before "B") cuts the
    labels ranked as SQLite and the output folder do: by the label's code points ("B" first)."""
    import uuid

    import psycopg
    monkeypatch.setattr(reads, "MAX_SERIES_LABELS", 1)
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name} TEMPLATE template0 LOCALE_PROVIDER icu "
                      "ICU_LOCALE 'en-US' LOCALE 'C'")
    url = postgres_url.replace("/postgres?", f"/{name}?")
    # "a" and "B" are both in the latest window, both ranked first in some window: a tie
    records = [string_record(0, [("a", 0.5)]), string_record(1, [("B", 0.3), ("a", 0.1)])]
    write_store(url, records)
    write_store(f"sqlite:///{tmp_path}/s.db", records)
    folder = FolderSource(write_folder(tmp_path / "out", records))
    stores = [StoreSource(url), StoreSource(f"sqlite:///{tmp_path}/s.db")]
    try:
        for source in (*stores, folder):
            [series], _ = chart(source, 5)
            assert series["labels"] == ["B"] and series["labels_cut"], source
    finally:
        for store in stores:
            store.close()


def test_ties_are_broken_by_the_string_shown_in_both_sources(tmp_path):
    """A tie between a plain string and one holding a bidirectional override: both sources
    order by the string as the page shows it (`output.text.printable`; the output folder's
    views hold it so), and keep the same one."""
    records = [string_record(0, [("a", 0.3), ("\u202eb", 0.3)])]
    url = f"sqlite:///{tmp_path}/s.db"
    with both_sources(url, tmp_path, records) as (store, folder):
        for source in (store, folder):
            [series], rows = chart(source, 1)
            assert series["labels"] == ["\\u202eb"], source  # "\" sorts before "a"
            assert [row["top"] for row in rows] == [[0.3]], source


def test_a_labelled_metrics_two_lengths_of_one_version_keep_their_own_top_values(
        store_url, tmp_path):  # noqa: F811
    """The rows of each series carry the values of its own top-k indices (read by version and
    window length), in both sources."""
    records = [labelled_record(k, [0.6, 0.3, 0.1], HOUR) for k in range(2)]
    records += [labelled_record(0, [0.1, 0.2, 0.7], 4 * HOUR)]
    with both_sources(store_url, tmp_path, records) as (store, folder):
        for source in (store, folder):
            payload = source.payload("m.grr", 1)
            names = [s["name"] for s in payload["series"]]
            assert [(s["name"], s["indices"], s["labels"]) for s in payload["series"]] == [
                ("1 h", [0], ["x"]), ("4 h", [2], ["z"])], source
            assert sorted((names[row["series"]], row["top"]) for row in unpack(payload)) == [
                ("1 h", [0.6]), ("1 h", [0.6]), ("4 h", [0.7])], source


def test_a_window_decoded_against_a_dictionary_sends_how_each_was_found(store_url, tmp_path):  # noqa: F811
    """The page's window view (store and folder alike, and an export's) holds
    `heavy_hitters.found_by` in the labels' order, which the values table's "found by" column
    prints; a window without it (no dictionary) sends none, and the table has no such column."""
    found = string_record(0, WINDOWS[0])
    found["heavy_hitters"].update(dictionary=2, found_by=["both", "search", "dictionary"])
    plain = string_record(1, WINDOWS[1])
    with both_sources(store_url, tmp_path, [found, plain]) as (store, folder):
        for source in (store, folder):
            view = source.window(METRIC, START, START + HOUR)
            assert view["labels"] == ["mail", "maps", "chat"]
            assert view["heavy_hitters"]["found_by"] == ["both", "search", "dictionary"]
            assert view["heavy_hitters"]["dictionary"] == 2
            other = source.window(METRIC, START + HOUR, START + 2 * HOUR)
            assert not other["heavy_hitters"].get("found_by")
            exported = [v for v in source.export_windows(METRIC, 3, keep_all=1)
                        if v["window_start"] == iso_from_ms(START)]
            assert [v["heavy_hitters"]["found_by"] for v in exported] == [
                ["both", "search", "dictionary"]]


def test_a_control_character_and_its_escape_typed_out_stay_two_lines(store_url,  # noqa: F811
                                                                     tmp_path):
    """A string holding a control character is shown escaped (``a\\x07``); the same escape
    typed out by a fleet (the five characters ``a\\x07``) is another string and must stay
    another line, with another name, in both sources (`printable` doubles backslashes; the
    output folder merged the two before, the store drew two lines with one name)."""
    records = [string_record(0, [("a\x07", 0.4), ("a\\x07", 0.3), ("b", 0.2)])]
    with both_sources(store_url, tmp_path, records) as (store, folder):
        for source in (folder, store):
            [series], [row] = chart(source, 5)
            assert series["labels"] == ["a\\x07", "a\\\\x07", "b"], source
            assert row["top"] == pytest.approx([0.4, 0.3, 0.2], abs=1e-4)


def test_the_dashboard_benchmarks_string_windows_are_as_a_pem_job_writes_them():
    """benchmarks/dashboard.py --strings stores string windows as a job writes them today: no
    band, with the reason (output.records.string_estimate_record), so its store holds today's
    records."""
    import numpy as np

    from ldp_telemetry.ldp.estimation.heavy_hitters import HEAVY_HITTER_BAND_REASON
    from tests.benchmark_scripts import loaded_scripts
    with loaded_scripts("dashboard") as scripts:
        window = scripts["dashboard"].string_window("m", 0, 5, np.random.default_rng(1))
    assert window["band_method"] == "none"
    assert window["band_reasons"] == {"estimate": HEAVY_HITTER_BAND_REASON}
