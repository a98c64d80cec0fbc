"""What a job is told to do, validated before any report is read.

`EstimateJob` is the estimation job (registry, input files, output folder, windows, store,
reader limits); `LiveConfig` says how a live run follows its source and when it stops.
`job_from_arguments` and `live_config_from_arguments` make them from `ldp run`'s arguments
(`ldp_telemetry.pipelines.arguments`). Every problem is a `ldp.base.errors.UserError` naming the
setting (`window`, `input`, `follow`, ...): the command line maps it to its flag.
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import os
from dataclasses import dataclass

from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.ldp.base.validation import EVENT_TIME_END_MS, seconds_problem
from ldp_telemetry.ldp.config.budget import repeated_reports_warning
from ldp_telemetry.ldp.config.registry import Registry, load_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.output.atomic import check_writable_folder
from ldp_telemetry.pipelines.follower import WatermarkPolicy
from ldp_telemetry.pipelines.memory import DEFAULT_MEMORY_BUDGET_MB, check_memory_budget
from ldp_telemetry.schemas.limits import DecodeLimits
from ldp_telemetry.store.records import check_metric_names
from ldp_telemetry.transforms.read import expand_file_patterns
from ldp_telemetry.transforms.shard_files import check_output_path
from ldp_telemetry.transforms.sources import SOURCES
from ldp_telemetry.transforms.store import check_store_url

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EstimateJob:
    """Everything the estimation job needs. A live run has no `files`: it follows a source
    (`LiveConfig`)."""

    registry: Registry
    files: tuple[str, ...]
    output: str
    windows: WindowSpec
    store: str | None = None  # also write estimates and dead-letter counts here (docs/store.md)
    limits: DecodeLimits = DecodeLimits()
    store_run: int = 0  # the run's run_seq in a SQL store (`pipelines.store_runs.store_run`)


@dataclass(frozen=True)
class LiveConfig:
    """How a live run follows its source and when it stops (seconds of wall time)."""

    source: str
    location: str
    policy: WatermarkPolicy = WatermarkPolicy()
    poll_s: float = 0.5
    until_s: float | None = None
    stop_when_idle_s: float | None = None
    echo: bool = False

    def __post_init__(self):
        SOURCES.canonical(self.source)  # ConfigError naming the known sources
        if not 0 < self.poll_s <= 10:
            raise ConfigError(f"poll must be in (0, 10] seconds, got {self.poll_s}",
                              field="poll")
        for field, value in (("until", self.until_s), ("stop_when_idle", self.stop_when_idle_s)):
            problem = None if value is None else seconds_problem(value)
            if problem:
                raise ConfigError(f"{field} {problem}", field=field)


def job_from_arguments(args: argparse.Namespace) -> EstimateJob:
    """The job of `ldp run`'s arguments, validated; raises a UserError naming the problem.

    Everything is checked before a report is read: the registry (post-processing included),
    the windows, the accumulators against the memory budget, the store, the inputs (a batch
    run) and that the output folder can be written (a local one is created where absent).
    """
    registry = load_registry(args.registry)
    windows = WindowSpec.from_seconds(args.window, args.period, args.allowed_lateness,
                                      args.early_every, args.window_offset)
    store = getattr(args, "store", None)
    check_memory_budget(registry, windows, getattr(args, "memory_budget",
                                                   DEFAULT_MEMORY_BUDGET_MB), store is not None)
    if store is not None:
        check_metric_names(config.name for config in registry.metrics)
        check_store_url(store)
    limits = DecodeLimits(**{field.name: getattr(args, field.name)
                             for field in dataclasses.fields(DecodeLimits)})
    live = getattr(args, "follow", None) is not None
    if live and args.input:
        raise ConfigError("input and follow exclude each other: give report files to read (a "
                          "batch run) or a location to follow (a live run)", field="input")
    if not live and not args.input:
        raise ConfigError("input or follow is required: report files to read (a batch run) or "
                          "a location to follow (a live run)", field="input")
    files = () if live else tuple(expand_file_patterns(args.input))
    if not live:  # a batch run's shards are deleted and renamed by Beam's file systems
        try:
            check_output_path(args.output)
        except ValueError as error:
            raise ConfigError(str(error), field="output") from None
    check_writable_folder(args.output, "output")
    for config in registry.metrics:  # memoized reports: one per device per window, or wider bars
        warning = repeated_reports_warning(config, windows.size_ms)
        if warning is not None:
            log.warning("%s", warning)
    return EstimateJob(registry, files, args.output, windows, store, limits)


def live_config_from_arguments(args: argparse.Namespace) -> LiveConfig:
    """The live settings of `ldp run --follow`'s arguments, validated."""
    problem = seconds_problem(args.max_out_of_order, EVENT_TIME_END_MS / 1000, zero=True)
    if problem:  # at most the span of valid event times, as --allowed-lateness
        raise ConfigError(f"max_out_of_order {problem}", field="max_out_of_order")
    if args.source == "directory" and not os.path.isdir(args.follow):
        raise ConfigError(f"follow {args.follow!r} is not a directory", field="follow")
    policy = WatermarkPolicy(round(args.max_out_of_order * 1000),
                             args.idle_advance if args.idle_advance else None)
    return LiveConfig(args.source, args.follow, policy, args.poll, args.until,
                      args.stop_when_idle, args.print_panes)
