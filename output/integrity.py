"""Integrity sections as readers see them: the jump test over a metric's sequence of windows,
and the text of a window's flags.

The pipeline writes each window's integrity section without the jump test: a window's
estimate is made alone (batch runs finalize windows in any order), while the jump test needs
the metric's earlier windows. Readers have the sequence: `with_jump_tests` adds the jump
statistic (ldp_telemetry.ldp.integrity.statistics.jump_statistic) to each record's section
from the last pane of the `history` latest windows of the same metric, configuration version
and labels that end before the window starts (so sliding windows never share reports with
their baseline), and recomputes the window's flag. `ldp show`, the store's reads and the dashboard
call it, so batch and live runs get the same test. Records without a section (integrity off,
numeric metrics, combined estimates, records written before the section) pass unchanged.
"""
from __future__ import annotations

import copy
import dataclasses
from collections import defaultdict
from collections.abc import Iterable

import numpy as np

from ldp_telemetry.ldp.integrity.statistics import jump_statistic, summarise
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.output.names import printable


def _series_key(record: EstimateRecord) -> tuple[str, str, int]:
    return (record.metric, record.version, len(record.labels))


def with_jump_tests(records: Iterable[EstimateRecord]) -> list[EstimateRecord]:
    """`records` (any order; panes of a window in pane order) with the jump statistic in each
    integrity section, as copies of the records that have a section; same order."""
    records = list(records)
    # series -> window bounds (ms) -> last pane's record
    windows: defaultdict[tuple[str, str, int], dict[tuple[int, int], EstimateRecord]] = (
        defaultdict(dict))
    for record in records:
        if record.integrity is not None:
            windows[_series_key(record)][(record.start_ms, record.end_ms)] = record
    series_bounds = {key: sorted(found) for key, found in windows.items()}
    out = []
    for record in records:
        section = record.integrity
        if section is None:
            out.append(record)
            continue
        key = _series_key(record)
        before = [bounds for bounds in series_bounds[key] if bounds[1] <= record.start_ms]
        earlier = [(windows[key][b].unbiased_estimate, windows[key][b].std_error)
                   for b in before[-int(section["history"]):]]
        section = copy.deepcopy(dict(section))
        section["statistics"] = [s for s in section["statistics"] if s["name"] != "jump"]
        # read as jump_statistic reads them (np.asarray): a null array, which no writer writes
        # beside a section, is a NaN scalar there, as it always was
        section["statistics"].append(jump_statistic(
            np.asarray(record.unbiased_estimate, dtype=np.float64),
            np.asarray(record.std_error, dtype=np.float64), earlier, record.labels,
            int(section["top_k"]), float(section["level"])))
        out.append(dataclasses.replace(record, integrity=summarise(section)))
    return out


def flag_text(record: EstimateRecord) -> str | None:
    """One line naming a flagged window's statistics and implicated values (and their
    recovered estimate, labelled, when the section has one), or None when the record has no
    section or nothing is flagged."""
    section = record.integrity
    if not section or not section.get("flagged"):
        return None
    parts = []
    for entry in section["statistics"]:
        if entry["flagged"]:
            score = "χ²" if entry["name"] == "support_size" else "z"
            parts.append(f"{entry['name']} ({score} {entry['score']:.1f}, "
                         f"p {entry['p_value']:.2g})")
    values = (", ".join(printable(str(value)) for value in section["implicated"][:10])
              or "none named")
    text = (f"integrity: FLAGGED at α={section['alpha']:g}: {'; '.join(parts)}; "
            f"values: {values}")
    recovered = section.get("recovered")
    if recovered:
        estimates = ", ".join(f"{printable(str(label))} {value:.4f}" for label, value
                              in zip(recovered["labels"], recovered["estimate"], strict=True))
        text += (f"; recovered ({printable(str(recovered['method']))}, not applied: "
                 f"{recovered['fake_fraction']:.1%} fakes): {estimates}")
    return text
