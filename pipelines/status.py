"""OUT/status.json of a live run: its counters, watermark, per-window too-late counts and the
report ids it holds to find duplicates (8 bytes each), rewritten whole at every poll
(`output.atomic`) so that a reader never sees half of it."""
from __future__ import annotations

import json
import os

from ldp_telemetry.output.atomic import write_atomically
from ldp_telemetry.output.coverage import write_inputs
from ldp_telemetry.output.layout import STATUS
from ldp_telemetry.pipelines.follower import DirectoryFollower
from ldp_telemetry.pipelines.memory import report_id_bytes


def write_status(output: str, follower: DirectoryFollower, finished: bool) -> None:
    """Replace OUT/status.json with the follower's state (`finished`: the run has ended), and
    OUT/inputs.json with what it has read (`output.coverage.write_inputs`)."""
    state = follower.state
    write_inputs(output, follower.inputs())
    write_atomically(os.path.join(output, STATUS), json.dumps({
        "finished": finished, "watermark_ms": state.watermark_ms,
        "files_consumed": len(state.files), "counters": state.counters(),
        "report_ids_held": follower.ids_held,
        "report_id_bytes": report_id_bytes(follower.ids_held),
        "too_late": [{"metric": w.metric, "window_start": w.window_start,
                      "window_end": w.window_end, "too_late": w.too_late,
                      "accepted": w.accepted} for w in follower.too_late_by_window()]},
        sort_keys=True, indent=1))
