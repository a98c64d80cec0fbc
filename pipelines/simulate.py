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
from ldp_telemetry.ldp.errors import ConfigError, InputError
from ldp_telemetry.ldp.registry import MetricConfig
from ldp_telemetry.output.atomic import check_writable_folder
from ldp_telemetry.output.layout import metric_segment
from ldp_telemetry.pipelines.csv_input import TrueValues

DEFAULT_REPORTS_PER_FILE = 500_000
#: The field of `ldp simulate` its errors name.
OUT = "out"


def simulate_reports(config: MetricConfig, truth: TrueValues, out_dir: str, seed: int | None,
                     reports_per_file: int = DEFAULT_REPORTS_PER_FILE, progress=sys.stderr,
                     overwrite: bool = False, envelope_reports: int | None = None) -> list[str]:
    """Perturb every true value and write the reports to `out_dir`; returns the file paths.

    The files are `<segment>-NNNNN.avro`, `<segment>` the metric's name as
    `output.layout.metric_segment` encodes it (injective: no two metrics share files). If
    `out_dir` already holds such files of this metric (an earlier run, perhaps split
    differently) that is an InputError, since a job reading the folder would count both runs;
    `overwrite` deletes them first instead. With `envelope_reports` the files hold report
    envelopes of that many reports each (`client.EnvelopeFile`) instead of one record per
    report.
    """
    rng = np.random.default_rng(seed)
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
    paths = []
    for part, start in enumerate(range(0, max(n, 1), reports_per_file)):
        stop = min(start + reports_per_file, n)
        reports = encode_points(config, truth.values[start:stop], rng,
                                event_times_ms=truth.event_times_ms[start:stop])
        path = os.path.join(out_dir, f"{metric_segment(config.name)}-{part:05d}.avro")
        with _report_file(path, envelope_reports) as out:
            out.write(reports)
        paths.append(path)
        if progress is not None and n > reports_per_file:
            print(f"  {stop:,}/{n:,} reports written ({100 * stop / n:.0f}%)", file=progress)
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
        if not speedup > 0:
            raise ConfigError(f"speedup must be positive, got {speedup}", "speedup")
        return (event_times_ms - event_times_ms.min()) / 1000.0 / speedup
    if not rate > 0:
        raise ConfigError(f"rate must be positive (reports per second), got {rate}", "rate")
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
    if not file_every_s > 0:
        raise ConfigError(f"file_every must be positive, got {file_every_s}", "file_every")
    rng = np.random.default_rng(seed)
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
    times = truth.event_times_ms[order]
    reports = encode_points(config, truth.values[order], rng, event_times_ms=times)
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
