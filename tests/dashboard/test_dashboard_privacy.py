"""The metric page states the configuration's promise to a device: per report, per day at the
configured rate, over a lifetime, with the composition rule (ldp_telemetry.ldp.config.budget)."""
from __future__ import annotations

import json

from ldp_telemetry.dashboard.server import Dashboard
from ldp_telemetry.dashboard.source import FolderSource
from ldp_telemetry.ldp.config.budget import privacy_budget
from ldp_telemetry.ldp.config.registry import parse_registry
from tests.dashboard.test_dashboard_server import record


def page_of(tmp_path, privacy) -> str:
    window = record("2024-03-01T00:00:00Z", "2024-03-01T01:00:00Z", 10)
    if privacy is not None:
        window["privacy"] = privacy
    (tmp_path / "estimates-00000-of-00001.jsonl").write_text(json.dumps(window) + "\n")
    return Dashboard(FolderSource(str(tmp_path))).page("m", live=False)


def test_a_memoized_metric_shows_its_lifetime_budget(tmp_path):
    config = parse_registry({"metrics": [{
        "name": "m", "protocol": "grr", "epsilon": 1.0, "domain": {"labels": ["a", "b"]},
        "memoize": {"lifetime_epsilon": 2.0}, "reports_per_day": 24}]})["m"]
    page = page_of(tmp_path, privacy_budget(config).as_record())
    assert "<dt>lifetime ε</dt><dd>ε = 4</dd>" in page  # 2 distinct values x ε∞ = 2
    assert "<dt>ε per day</dt><dd>ε = 2 at 24 reports/day</dd>" in page
    assert "<dt>ε per window</dt><dd>ε = 1 (1 report at most)</dd>" in page  # 1-hour window
    assert "capped per distinct value by the ε∞" in page


def test_a_one_stage_metric_says_its_budget_grows_and_an_old_record_shows_none(tmp_path):
    config = parse_registry({"metrics": [{
        "name": "m", "protocol": "grr", "epsilon": 1.0, "domain": {"labels": ["a", "b"]},
        "reports_per_day": 24}]})["m"]
    page = page_of(tmp_path, privacy_budget(config).as_record())
    assert "<dt>lifetime ε</dt><dd>unbounded (grows every day)</dd>" in page
    assert "ε=24 per day" in page and "not memoized" in page
    assert "<dt>ε per window</dt><dd>ε = 1 (1 report at most)</dd>" in page
    (tmp_path / "estimates-00000-of-00001.jsonl").unlink()
    assert 'id="privacy"' not in page_of(tmp_path, None)


def test_a_memoized_metric_with_several_reports_per_window_warns_on_its_page(tmp_path):
    config = parse_registry({"metrics": [{
        "name": "m", "protocol": "grr", "epsilon": 1.0, "domain": {"labels": ["a", "b"]},
        "memoize": {"lifetime_epsilon": 2.0}, "reports_per_day": 96}]})["m"]
    page = page_of(tmp_path, privacy_budget(config).as_record())  # 4 reports in the hour
    assert 'id="privacy-warning"' in page and "about 4 reports per window" in page
