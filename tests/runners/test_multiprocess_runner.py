"""FnApiRunner with its SDK workers in two local processes gives the in-process results."""
from __future__ import annotations

from pathlib import Path

from ldp_telemetry.runners.direct import multi_process_options

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_multi_processing_matches_in_process(comparison_input, tmp_path, monkeypatch):
    # The worker processes import the project from this checkout, wherever pytest runs.
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    got = comparison_input.run(tmp_path / "out", multi_process_options(workers=2))
    comparison_input.assert_matches_reference(got)
