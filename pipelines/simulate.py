"""The report simulator: true values (read by `pipelines.csv_input`) -> locally perturbed Avro
report files.

This is what a fleet of devices would send: each value is perturbed by the metric's protocol
(ε-LDP) with an explicit numpy Generator and written as one Avro report carrying the
configuration's fingerprint, by the client library (ldp_telemetry.client): report files are
written under a temporary name and renamed.
"""
from __future__ import annotations

import glob
import os
import re
import sys
import time

import numpy as np

from ldp_telemetry.client import EnvelopeFile, ReportFile, encode_points
from ldp_telemetry.ldp.base.errors import ConfigError, InputError
from ldp_telemetry.ldp.base.validation import (is_nonnegative_int, is_positive_number,
                                               seconds_problem)
from ldp_telemetry.ldp.config.registry import MetricConfig
from ldp_telemetry.output.atomic import check_writable_folder
from ldp_telemetry.output.layout import metric_segment
from ldp_telemetry.pipelines.csv_input import TrueValues

DEFAULT_REPORTS_PER_FILE = 500_000
#: The field of `ldp simulate` its errors name.
OUT = "out"


def check_seed(seed: int | None) -> int | None:
    """`seed` when it is None (fresh entropy) or a non-negative integer (what numpy's seeding
    takes); ConfigError naming ``seed`` otherwise."""
    if seed is not None and not is_nonnegative_int(seed):
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}", "seed")
    return seed


def simulate_reports(config: MetricConfig, truth: TrueValues, out_dir: str, seed: int | None,
                     reports_per_file: int = DEFAULT_REPORTS_PER_FILE, progress=sys.stderr,
                     overwrite: bool = False, devices: np.ndarray | None = None,
                     envelope_reports: int | None = None) -> list[str]:
    """Perturb every true value and write the reports to `out_dir`; returns the file paths.

    The files are `<segment>-NNNNN.avro`, `<segment>` the metric's name as
    `output.layout.metric_segment` encodes it (injective: no two metrics share files). If
    `out_dir` already holds such files of this metric (an earlier run, perhaps split
    differently) that is an InputError, since a job reading the folder would count both runs;
    `overwrite` deletes them first instead. A memoized metric's reports come from simulated
    devices (`device_memos`): `devices` gives each row's device (`fleet_assignment`,
    `read_device_column`), else every row is its own device; reports a device withholds
    (`max_values` reached) are counted on `progress`. With `envelope_reports` the files hold
    report envelopes of that many reports each (`client.EnvelopeFile`) instead of one record
    per report.
    """
    rng = np.random.default_rng(check_seed(seed))
    check_writable_folder(out_dir, OUT)
    earlier = metric_report_files(out_dir, config.name)
    if earlier and not overwrite:
        raise InputError(f"overwrite is not set and {out_dir} already holds {len(earlier)} report "
                         f"file(s) of metric {config.name!r} (e.g. "
                         f"{os.path.basename(earlier[0])}); a job reading the folder would count "
                         "both runs: overwrite them or choose another output folder", "overwrite")
    for path in earlier:
        os.remove(path)
    n = len(truth.values)
    memos = device_memos(config, devices, n, seed)
    paths, withheld = [], 0
    for part, start in enumerate(range(0, max(n, 1), reports_per_file)):
        stop = min(start + reports_per_file, n)
        reports = encode_points(config, truth.values[start:stop], rng,
                                event_times_ms=truth.event_times_ms[start:stop],
                                device=None if memos is None else memos[start:stop])
        withheld += reports.withheld
        path = os.path.join(out_dir, f"{metric_segment(config.name)}-{part:05d}.avro")
        with _report_file(path, envelope_reports) as out:
            out.write(reports)
        paths.append(path)
        if progress is not None and n > reports_per_file:
            print(f"  {stop:,}/{n:,} reports written ({100 * stop / n:.0f}%)", file=progress)
    if withheld and progress is not None:
        print(f"  {withheld:,} of {n:,} values withheld by their devices (memoize.max_values "
              "reached, on_limit 'stop')", file=progress)
    return paths


def _report_file(path: str, envelope_reports: int | None) -> ReportFile:
    """A file of one record per report, or of envelopes of `envelope_reports` reports."""
    if envelope_reports is None:
        return ReportFile(path)
    return EnvelopeFile(path, envelope_reports=envelope_reports)


def metric_report_files(out_dir: str, metric: str) -> list[str]:
    """The report files `simulate` wrote for `metric` in `out_dir`, and no other metric's."""
    pattern = re.compile(re.escape(metric_segment(metric)) + r"-\d{5,}\.avro")
    return sorted(os.path.join(out_dir, name) for name in os.listdir(out_dir)
                  if pattern.fullmatch(name))


def live_schedule(event_times_ms: np.ndarray, speedup: float | None = None,
                  rate: float | None = None) -> np.ndarray:
    """Seconds after the start at which each report (in event-time order) is due.

    `speedup`: event times are replayed that many times faster than real time (the first
    report is due at once); `rate`: reports are due at `rate` per second, in event-time order.
    """
    if (speedup is None) == (rate is None):
        raise ConfigError("give exactly one of speedup or rate", "speedup")
    if speedup is not None:
        if not is_positive_number(speedup):
            raise ConfigError(f"speedup must be a positive finite number, got {speedup}",
                              "speedup")
        return (event_times_ms - event_times_ms.min()) / 1000.0 / speedup
    if not is_positive_number(rate):
        raise ConfigError(f"rate must be a positive finite number (reports per second), got "
                          f"{rate}", "rate")
    return np.arange(len(event_times_ms)) / rate


def simulate_live(config: MetricConfig, truth: TrueValues, out_dir: str, seed: int | None,
                  speedup: float | None = None, rate: float | None = None,
                  file_every_s: float = 1.0, overwrite: bool = False,
                  sleep=time.sleep, clock=time.monotonic, progress=sys.stderr,
                  envelope_reports: int | None = None) -> list[str]:
    """Write the perturbed reports into `out_dir` over time, as a collector would.

    Reports are sorted by event time and each is due at `live_schedule(...)`; every
    `file_every_s` seconds the reports that came due are written to one file
    `<segment>-live-NNNNN.avro` (`output.layout.metric_segment`) as a `client.ReportFile`
    (written as `....avro.tmp`, then renamed), so a follower never sees a partial file. Returns
    the paths, in the order written. `envelope_reports` as in `simulate_reports`.
    """
    problem = seconds_problem(file_every_s)
    if problem:
        raise ConfigError(f"file_every {problem}", "file_every")
    rng = np.random.default_rng(check_seed(seed))
    check_writable_folder(out_dir, OUT)
    stem = metric_segment(config.name)
    earlier = sorted(glob.glob(os.path.join(glob.escape(out_dir),
                                            f"{glob.escape(stem)}-live-*.avro")))
    if earlier and not overwrite:
        raise InputError(f"overwrite is not set and {out_dir} already holds {len(earlier)} live "
                         f"report file(s) of {config.name}: overwrite them or choose another "
                         "output folder", "overwrite")
    for path in earlier:
        os.remove(path)
    order = np.argsort(truth.event_times_ms, kind="stable")
    memos = device_memos(config, None, len(order), seed)
    reports = encode_points(config, truth.values[order], rng,
                            event_times_ms=truth.event_times_ms[order],
                            device=None if memos is None else [memos[i] for i in order.tolist()])
    times = reports.event_times_ms
    due = live_schedule(times, speedup, rate)
    started, written, paths, ticks = clock(), 0, [], 0
    while written < len(times):
        ticks += 1
        sleep(max(0.0, started + ticks * file_every_s - clock()))
        upto = int(np.searchsorted(due, clock() - started, side="right"))
        if upto == written:
            continue
        name = f"{stem}-live-{len(paths):05d}.avro"
        with _report_file(os.path.join(out_dir, name), envelope_reports) as out:
            out.write(reports.rows(slice(written, upto)))
        paths.append(os.path.join(out_dir, name))
        written = upto
        if progress is not None:
            print(f"  {config.name}: {written:,}/{len(times):,} reports, file {name}",
                  file=progress, flush=True)
    return paths


# -- a fleet of devices (memoized metrics) ---------------------------------------------------

#: Most simulated devices (each holds a 32-byte secret and its memoized items).
MAX_DEVICES = 10_000_000


def fleet_assignment(truth: TrueValues, devices: int) -> np.ndarray:
    """Each row's device in a simulated fleet of `devices` devices (`ldp simulate --devices`).

    Every device holds one value all along. The devices are shared out among the values in
    proportion to their rows (at least one each, largest remainders first), and a value's rows, in
    event-time order, are dealt to its devices in turn: each device reports its value about
    rows/devices times, spread evenly over the data's period, and every row is still reported
    once at its time, so the per-window distribution is unchanged. Needs at least one device per
    distinct value and at most one per row.
    """
    n = len(truth.values)
    order = np.lexsort((truth.event_times_ms, truth.values))
    _, starts, counts = np.unique(truth.values[order], return_index=True, return_counts=True)
    if not len(counts) <= devices <= min(n, MAX_DEVICES):
        raise ConfigError(f"devices must be in [{len(counts):,}, {min(n, MAX_DEVICES):,}] (one "
                          "per distinct value at least, at most one per row and MAX_DEVICES), "
                          f"got {devices:,}", "devices")
    share = counts * devices / n
    per_value = np.maximum(1, np.floor(share).astype(np.int64))
    while per_value.sum() > devices:  # the minimum of one pushed past the total
        per_value[np.argmax(np.where(per_value > 1, per_value - share, -np.inf))] -= 1
    extra = devices - int(per_value.sum())
    if extra:
        per_value[np.argsort(-(share - per_value), kind="stable")[:extra]] += 1
    per_value = np.minimum(per_value, counts)
    first = np.cumsum(per_value) - per_value
    group = np.repeat(np.arange(len(counts)), counts)
    position = np.arange(n) - np.repeat(starts, counts)
    assignment = np.empty(n, dtype=np.int64)
    assignment[order] = first[group] + position % per_value[group]
    return assignment


def read_device_column(path: str, column: str, rows: int) -> np.ndarray:
    """The device ids of `column` as indices 0..k-1 (in order of first appearance), one per
    data row as `read_true_values` reads them (blank lines skipped)."""
    import csv
    import gzip
    with (gzip.open(path, "rt", newline="") if path.endswith(".gz")
          else open(path, newline="")) as handle:
        reader = csv.reader(handle)
        header = next(reader, None) or []
        if column not in header:
            raise InputError(f"{path} has no column {column!r} (columns: {header})",
                             "device_column")
        at = header.index(column)
        ids = [row[at] for row in reader if row]
    if len(ids) != rows:
        raise InputError(f"{path}: {len(ids):,} device ids for {rows:,} values", "device_column")
    _, assignment = np.unique(np.array(ids, dtype=object), return_inverse=True)
    return assignment.astype(np.int64)


def device_memos(config: MetricConfig, assignment: np.ndarray | None, rows: int,
                 seed: int | None):
    """One DeviceMemo per row for a memoized `config` (None for any other): the devices of
    `assignment` (row -> device index), or one device per row when it is None. Secrets are
    drawn from their own generator (seeded from `seed` and a fixed tag), so the perturbation's
    draws do not depend on how many devices there are."""
    if getattr(config, "memoize", None) is None:
        return None
    from ldp_telemetry.client.device import DeviceMemo
    rng = np.random.default_rng(None if seed is None else [seed, 19])
    if assignment is None:
        assignment = np.arange(rows)
    count = int(assignment.max()) + 1 if len(assignment) else 0
    if count > MAX_DEVICES:
        raise ConfigError(f"{count:,} devices exceed MAX_DEVICES ({MAX_DEVICES:,})", "devices")
    fleet = [DeviceMemo(rng.bytes(32)) for _ in range(count)]
    return [fleet[i] for i in assignment.tolist()]
