"""The chart over windows draws each top value's band as its record saved it: a post-processed
value's band is the band of its unbiased estimate (`output.bands.value_bands`), not centred on
the printed estimate, which may even lie outside it. The payload carries its bounds, a store
and an output folder of the same records send the same ones, and the page's read-out prints
[lower, upper] for such a band, "± h" for a centred one and "no band" where there is none."""
from __future__ import annotations

import numpy as np
import pytest

from ldp_telemetry.dashboard.pages import metric_page_link
from ldp_telemetry.dashboard.payload import FREQUENCY_SCALE, SKEW_SHARED, Series, pack, unpack
from ldp_telemetry.dashboard.server import Dashboard, serve_in_thread
from ldp_telemetry.dashboard.source import FolderSource, StoreSource
from ldp_telemetry.ldp.base.times import iso_from_ms
from ldp_telemetry.ldp.estimation.postprocess import norm_sub
from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.ldp.protocols.noise import SupportNoise, smallest_resolvable
from ldp_telemetry.output.bands import value_bands

from tests.dashboard.test_dashboard_browser import (  # noqa: F401 - blank_page: autouse
    blank_page, check_clean, wait_for)
from tests.dashboard.test_dashboard_strings import write_folder, write_store
from tests.dashboard.test_dashboard_strings_browser import readout_at
from tests.store.test_sql_store import postgres_url, store_url  # noqa: F401

START = 1_709_251_200_000  # 2024-03-01T00:00:00Z
HOUR = 3_600_000
GRR = make_protocol("grr", 1.0, 4)
LABELS = ["a", "b", "c", "d"]
#: Unbiased estimates per window: Norm-Sub sets "d" (negative) to 0 and shifts the others down
#: by the same δ, so no post-processed value is the centre of its band.
UNBIASED = [[0.55, 0.33, 0.16, -0.04], [0.50, 0.36, 0.18, -0.04], [0.52, 0.30, 0.20, -0.02]]
N = 2_000
#: A bound is sent as an integer in units of 1/FREQUENCY_SCALE: read back within half a unit.
SENT = 0.5 / FREQUENCY_SCALE + 1e-12


def record(k: int, unbiased: list[float], metric: str = "m", **extra) -> dict:
    """Window k of a GRR metric post-processed by Norm-Sub, as a job writes it."""
    noise = SupportNoise(GRR.p_star, GRR.q_star, N)
    estimate = norm_sub(np.array(unbiased), noise)
    error = np.sqrt(noise_variance(np.array(unbiased)))
    return {"metric": metric, "window_start": iso_from_ms(START + k * HOUR),
            "window_end": iso_from_ms(START + (k + 1) * HOUR), "n": N, "protocol": "grr",
            "epsilon": 1.0, "p_star": GRR.p_star, "q_star": GRR.q_star,
            "smallest_resolvable": smallest_resolvable(GRR.p_star, GRR.q_star, N),
            "estimator": {"method": "unbiased", "params": {}},
            "postprocess": {"method": "norm-sub", "params": {}}, "labels": LABELS,
            "estimate": estimate.tolist(), "unbiased_estimate": list(unbiased),
            "std_error": error.tolist(), "band_method": "exact-variance",
            "pane": {"timing": "ON_TIME", "index": 0, "is_last": True}, **extra}


def noise_variance(f: np.ndarray) -> np.ndarray:
    """The variance of GRR's unbiased estimate of f at N reports (only its size matters here:
    the band is computed from p*, q* and n by `value_bands`)."""
    p, q = GRR.p_star, GRR.q_star
    support = q + f * (p - q)
    return support * (1 - support) / (N * (p - q) ** 2)


RECORDS = [record(k, unbiased) for k, unbiased in enumerate(UNBIASED)]


def chart_rows(source) -> tuple[dict, list[dict]]:
    payload = source.payload("m", 4)
    [series] = payload["series"]
    return series, unpack(payload)


def assert_saved_bands(series: dict, rows: list[dict]) -> None:
    """Each row's low/high are its record's value_bands, in the series' top-k order."""
    assert len(rows) == len(RECORDS)
    for row, saved in zip(rows, RECORDS, strict=True):
        lower, upper = value_bands(saved)
        at = series["indices"]
        assert row["top"] == pytest.approx([saved["estimate"][i] for i in at], abs=SENT)
        assert row["low"] == pytest.approx([lower[i] for i in at], abs=SENT)
        assert row["high"] == pytest.approx([upper[i] for i in at], abs=SENT)


def test_the_payload_carries_each_top_values_saved_band_not_estimate_plus_minus_half(tmp_path):
    series, rows = chart_rows(FolderSource(write_folder(tmp_path / "out", RECORDS)))
    assert series["indices"] == [0, 1, 2, 3]
    assert_saved_bands(series, rows)
    for row in rows:
        centres = [(low + high) / 2 for low, high in zip(row["low"], row["high"], strict=True)]
        # not centred: every value is off its band's centre by far more than a sent unit (the
        # old payload's estimate ± half width would have drawn another band)
        assert min(abs(c - e) for c, e in zip(centres, row["top"], strict=True)) > 1e-3
        assert row["top"][3] == 0.0 and row["low"][3] < 0.0  # Norm-Sub's 0; the band's as saved


def test_a_store_and_an_output_folder_send_the_same_bands(store_url, tmp_path):  # noqa: F811
    write_store(store_url, RECORDS)
    store = StoreSource(store_url)
    try:
        from_store = chart_rows(store)
    finally:
        store.close()
    from_folder = chart_rows(FolderSource(write_folder(tmp_path / "out", RECORDS)))
    assert from_store[0]["indices"] == from_folder[0]["indices"]
    for found in (from_store, from_folder):
        assert_saved_bands(*found)
    assert [(r["start_ms"], r["top"], r["low"], r["high"]) for r in from_store[1]] == \
        [(r["start_ms"], r["top"], r["low"], r["high"]) for r in from_folder[1]]


def test_a_record_without_a_band_sends_none(tmp_path):
    none = [record(k, u, band_method="none") for k, u in enumerate(UNBIASED)]
    _, rows = chart_rows(FolderSource(write_folder(tmp_path / "out", none)))
    assert all(set(row["low"]) == set(row["high"]) == {None} for row in rows)
    assert all(None not in row["top"] for row in rows)


def test_the_read_out_prints_a_band_not_centred_as_lower_upper(browser, tmp_path):
    url = f"sqlite:///{tmp_path}/store.db"
    write_store(url, RECORDS + [record(k, u, metric="plain", band_method="none")
                                for k, u in enumerate(UNBIASED)])
    source = StoreSource(url)
    server, base = serve_in_thread(Dashboard(source, top_k=4, poll_ms=300))
    try:
        browser.get(base + metric_page_link("m"))
        assert wait_for(browser, "document.body.getAttribute('data-windows')") == "3"
        for fraction, shown, saved in ((0.0, "2024-03-01 \u2013 ", RECORDS[0]),
                                       (1.0, "2024-03-01 02:00 \u2013 ", RECORDS[-1])):
            items = readout_at(browser, fraction, shown)
            lower, upper = value_bands(saved)
            expected = [f"{label} {saved['estimate'][i]:.4f} [{lower[i]:.4f}, {upper[i]:.4f}]"
                        for i, label in enumerate(LABELS)]
            assert items == expected
            assert not any("\u00b1" in item for item in items)
        assert wait_for(browser, "document.getElementById('topk')"
                        ".getAttribute('data-banded-windows')") == "3"
        # the chosen (latest) window's table prints the same saved bands
        rows = browser.driver.execute_script(
            "return Array.from(document.querySelectorAll('#values-table tbody tr'))"
            ".map(tr => [tr.querySelector('td.label').textContent,"
            " tr.querySelector('td.band').textContent])")
        lower, upper = value_bands(RECORDS[-1])
        assert sorted(rows) == sorted([label, f"[{lower[i]:.4f}, {upper[i]:.4f}]"]
                                      for i, label in enumerate(LABELS))
        check_clean(browser)
        browser.get(base + metric_page_link("plain"))
        assert wait_for(browser, "document.body.getAttribute('data-windows')") == "3"
        items = readout_at(browser, 0.0, "2024-03-01 \u2013 ")
        assert items == [f"{label} {RECORDS[0]['estimate'][i]:.4f} no band"
                         for i, label in enumerate(LABELS)]
        # no fill where the records declare no band (a band of width 0 was drawn before)
        assert wait_for(browser, "document.getElementById('topk')"
                        ".getAttribute('data-banded-windows')") == "0"
        check_clean(browser)
    finally:
        server.shutdown()
        server.server_close()
        source.close()


def packed_bands(top: dict) -> tuple[dict, dict]:
    """(the sent band columns, the unpacked row) of one window whose top values are `top`
    {index: (estimate, lower95, upper95)}."""
    series = Series(name="1 h", version="", length_ms=HOUR, indices=sorted(top))
    row = {"window_start_ms": START, "window_end_ms": START + HOUR, "version": "", "n": N,
           "pane_timing": "ON_TIME", "pane_index": 0, "pane_is_last": True, "top": top}
    payload = pack([row], [series], 1)
    return ({name: payload["columns"][name] for name in ("low", "skew")},
            unpack(payload)[0])


def test_a_rows_skews_are_one_number_only_within_skew_shared_units():
    unit = 1 / FREQUENCY_SCALE
    centred = {0: (0.5, 0.4, 0.6), 1: (0.3, 0.25, 0.35)}
    sent, row = packed_bands(centred)
    assert sent == {"low": {"all": [1_000_000, 500_000]}, "skew": {"all": 0}}
    assert (row["low"], row["high"]) == ([0.4, 0.25], [0.6, 0.35])
    # skews of 10 and 10 + SKEW_SHARED units: one number, each bound within half of it
    near = {0: (0.5, 0.4, 0.6 + 10 * unit), 1: (0.3, 0.25, 0.35 + (10 + SKEW_SHARED) * unit)}
    sent, row = packed_bands(near)
    assert sent["skew"] == {"all": 10 + SKEW_SHARED // 2}
    assert row["high"] == pytest.approx([near[0][2], near[1][2]],
                                        abs=(SKEW_SHARED / 2 + 0.5) * unit)
    # one unit more: each skew sent, each bound exact to the unit
    far = {0: (0.5, 0.4, 0.6 + 10 * unit), 1: (0.3, 0.25, 0.35 + (11 + SKEW_SHARED) * unit)}
    sent, row = packed_bands(far)
    assert sent["skew"] == {"all": [10, 11 + SKEW_SHARED]}
    assert row["high"] == pytest.approx([far[0][2], far[1][2]], abs=SENT)
    # a value without a band (or absent) sends none, and the others keep theirs
    sent, row = packed_bands({0: (0.5, 0.45, 0.58), 1: (0.3, None, None)})
    assert sent["skew"] == {"all": 300_000} and sent["low"] == {"all": [500_000, None]}
    assert (row["low"], row["high"]) == ([0.45, None], [0.58, None])
    sent, row = packed_bands({0: (0.5, None, None)})
    assert sent == {"low": {"all": [None]}, "skew": {"all": None}}
