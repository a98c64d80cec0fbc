"""A string metric's chart over windows is keyed by label: its windows' heavy hitters change from
window to window and their value index is their rank there, not an identity. The top-k strings
of a series, a string found in only some windows, two strings swapping ranks, the bound on the
labels a series ranks, and the store source (SQLite and PostgreSQL) agreeing with the
output-folder source."""
from __future__ import annotations

import json

import pytest

from ldp_telemetry.dashboard.pages import metric_page
from ldp_telemetry.dashboard.payload import unpack
from ldp_telemetry.dashboard.source import FolderSource, StoreSource
from ldp_telemetry.ldp.base.times import iso_from_ms
from ldp_telemetry.output.bands import Z95
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
    """The k-th window of a string metric as its job writes it (`output.records.
    string_estimate_record`): its heavy hitters, best first, with standard errors 0.01·(rank+1)."""
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
    # bands as saved: ± 1.96 standard errors of the string's own rank in its window
    assert rows[1]["low"] == pytest.approx([0.35 - Z95 * 0.02, 0.45 - Z95 * 0.01, None],
                                           abs=1e-7)
    assert rows[1]["high"] == pytest.approx([0.35 + Z95 * 0.02, 0.45 + Z95 * 0.01, None],
                                            abs=1e-7)
    assert rows[2]["low"][2] == pytest.approx(0.20 - Z95 * 0.02, abs=1e-7)
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
    write_store(url, records)
    folder = FolderSource(write_folder(tmp_path / "out", records))
    store = StoreSource(url)
    try:
        for source in (folder, store):
            [series], _ = chart(source, 5)
            assert series["labels"] == ["p", "r", "s"] and series["labels_cut"], source
    finally:
        store.close()


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


def test_store_and_folder_sources_draw_the_same_lines(store_url, tmp_path):  # noqa: F811
    records = [string_record(k, hitters) for k, hitters in enumerate(WINDOWS)]
    records += [string_record(0, [("day", 0.7), ("mail", 0.2)], length=4 * HOUR)]  # 2nd series
    write_store(store_url, records)
    folder = FolderSource(write_folder(tmp_path / "out", records))
    store = StoreSource(store_url)
    try:
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
            assert found == {(START, START + HOUR): {"maps": pytest.approx((0.3, 0.3 - Z95 * 0.02,
                                                                            0.3 + Z95 * 0.02))},
                             (START + HOUR, START + 2 * HOUR): {
                                 "maps": pytest.approx((0.45, 0.45 - Z95 * 0.01,
                                                        0.45 + Z95 * 0.01))}}
        # a window's detail: its own heavy hitters with their saved bands
        one = store.window(METRIC, START + HOUR, START + 2 * HOUR)
        assert one["labels"] == ["maps", "mail"]
        assert one["half95"] == pytest.approx([Z95 * 0.01, Z95 * 0.02])
        assert folder.window(METRIC, START + HOUR, START + 2 * HOUR)["half95"] == \
            pytest.approx(one["half95"])
        # an export's windows of a string metric are whole, whatever keep_all says
        exported = store.export_windows(METRIC, 3, keep_all=1)
        assert [len(v["labels"]) for v in exported if v["series"] == "1 h"] == [3, 2, 2, 3]
    finally:
        store.close()
