"""The live run's final panes equal the batch job's estimates on the same files, bit for bit.

The batch reference is the FnApiRunner run of `comparison_input` (tests/runners/conftest.py);
test_multiprocess_runner.py and test_portable_runner.py hold multi_processing with 2 workers and
the portable runner to the same reference, so all four agree.
"""
from __future__ import annotations

import io
import json
import os

from ldp_telemetry.pipelines.follower import WatermarkPolicy
from ldp_telemetry.pipelines.job import EstimateJob, LiveConfig
from ldp_telemetry.pipelines.live import run_live
from ldp_telemetry.output.reader import latest_panes


def test_live_final_panes_equal_the_batch_estimates(comparison_input, tmp_path, hard_deadline):
    hard_deadline(900)
    inbox = tmp_path / "in"
    inbox.mkdir()
    for path in comparison_input.job.files:
        os.symlink(path, inbox / os.path.basename(path))
    job = EstimateJob(comparison_input.job.registry, (), str(tmp_path / "out"),
                      comparison_input.job.windows)
    printed = io.StringIO()
    counters = run_live(job, LiveConfig("directory", str(inbox), WatermarkPolicy(0, None),
                                        poll_s=0.2, stop_when_idle_s=1.0, until_s=300),
                        [], out=printed)
    reference = comparison_input.reference
    for name in ("records_read", "records_accepted", "dead_letter.undecodable"):
        assert counters[name] == reference.counters[name], name
    latest = latest_panes(job.output)
    finals = sorted((json.loads((tmp_path / "out" / entry["path"]).read_text())
                     for entry in latest.values()),
                    key=lambda r: (r["metric"], r["window_start"]))
    expected = sorted(reference.estimates, key=lambda r: (r["metric"], r["window_start"]))
    assert len(finals) == len(expected)
    for mine, theirs in zip(finals, expected, strict=True):
        assert {k: v for k, v in mine.items() if k != "pane"} == \
            {k: v for k, v in theirs.items() if k != "pane"}, mine["window_start"]
    letters = [json.loads(line) for line in
               (tmp_path / "out" / "dead_letters" / "junk.avro.jsonl").read_text().splitlines()]
    assert [{k: v for k, v in d.items() if k != "source"} for d in letters] == \
        [{k: v for k, v in d.items() if k != "source"} for d in reference.dead_letters]
