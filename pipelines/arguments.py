"""The command-line arguments of `ldp run`: the job's (`add_job_arguments`, reader limits
included) and a live run's (`add_live_arguments`). Each option's destination is the name of the
setting it fills, which is the `field` a `UserError` about it names.

Beam-free, so that `ldp run --help` starts without Apache Beam: `--source` is checked against the
sources' catalog when the live run is configured (`pipelines.job.LiveConfig`), and its help
names `SOURCE_NAMES`, which a test keeps equal to the catalog's names."""
from __future__ import annotations

import argparse
import dataclasses

from ldp_telemetry.pipelines.memory import DEFAULT_MEMORY_BUDGET_MB
from ldp_telemetry.schemas.limits import HELP as LIMITS_HELP
from ldp_telemetry.schemas.limits import DecodeLimits


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the estimation job (`EstimateJob`), reader limits included."""
    parser.add_argument("--registry", required=True, help="metric registry JSON file")
    parser.add_argument("--input", action="append", default=None,
                        help="Avro report files: a glob such as 'reports/*.avro' (repeatable); "
                             "required unless the run is live (--follow)")
    parser.add_argument("--output", required=True, help="directory for estimates and dead letters")
    parser.add_argument("--window", required=True, type=float,
                        help="event-time window length in seconds")
    parser.add_argument("--period", type=float, default=None,
                        help="start a window every PERIOD seconds (sliding windows); "
                             "default: the window length (fixed windows)")
    parser.add_argument("--window-offset", type=float, default=0.0, metavar="SECONDS",
                        help="windows start at OFFSET + k * PERIOD seconds after the Unix epoch "
                             "(default 0: midnight UTC for daily windows, Thursday for weekly "
                             "ones; 345600 starts weekly windows on Monday)")
    parser.add_argument("--allowed-lateness", type=float, default=0.0, metavar="SECONDS",
                        help="keep counting a report while the watermark is at most SECONDS past "
                             "the end of its slice; each late batch fires a LATE pane (default 0)")
    parser.add_argument("--memory-budget", type=float, default=DEFAULT_MEMORY_BUDGET_MB,
                        metavar="MB",
                        help="memory for the accumulators of one slice of every metric and the "
                             "windows it feeds, plus one window being finalized and written, "
                             "checked before any report is read (default "
                             f"{DEFAULT_MEMORY_BUDGET_MB:g} MB)")
    parser.add_argument("--early-every", type=float, default=None, metavar="SECONDS",
                        help="streaming sources: an EARLY pane SECONDS of processing time after "
                             "new reports enter a window (default: none)")
    parser.add_argument("--store", default=None, metavar="URL",
                        help="also write each window's latest pane and the dead-letter counts to "
                             "an estimate store: sqlite:///FILE.db, postgresql://USER@HOST/DB or "
                             "bigquery://PROJECT/DATASET (docs/store.md)")
    parser.add_argument("--create-store", action="store_true",
                        help="create the --store when it does not exist yet (without it, a store "
                             "URL that names no existing store is an error)")
    add_limit_arguments(parser)


def add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per reader limit (`DecodeLimits`): --max-block-bytes and so on."""
    for field in dataclasses.fields(DecodeLimits):
        parser.add_argument("--" + field.name.replace("_", "-"), type=int, default=field.default,
                            metavar="N", help=f"{LIMITS_HELP[field.name]} "
                                              f"(default {field.default})")


#: The live-run sources of `transforms.sources.SOURCES`, the first the default.
SOURCE_NAMES = ("directory", "pubsub", "match-continuously")


def add_live_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a live run (`--follow` and how it is followed and stopped)."""
    group = parser.add_argument_group("live run (--follow)")
    group.add_argument("--follow", metavar="LOCATION", default=None,
                       help="run live: follow this directory of report files (or Pub/Sub "
                            "subscription/topic, or file glob, per --source) and write each "
                            "pane as it fires under OUTPUT/panes/ (instead of --input)")
    group.add_argument("--source", default=SOURCE_NAMES[0], metavar="KIND",
                       help=f"what --follow names, one of {', '.join(SOURCE_NAMES)}: a "
                            "directory followed here (default), Pub/Sub (Dataflow) or a "
                            "directory matched continuously (Flink)")
    group.add_argument("--max-out-of-order", type=float, default=0.0, metavar="SECONDS",
                       help="the watermark trails the largest event time seen (rounded down to "
                            "its slice) by this much (default 0)")
    group.add_argument("--idle-advance", type=float, default=10.0, metavar="SECONDS",
                       help="after this long without a new file the watermark moves to the end "
                            "of the latest slice seen (default 10; 0 never)")
    group.add_argument("--until", type=float, default=None, metavar="SECONDS",
                       help="stop after this many seconds")
    group.add_argument("--stop-when-idle", type=float, default=None, metavar="SECONDS",
                       help="stop after this many seconds without a new file")
    group.add_argument("--poll", type=float, default=0.5, metavar="SECONDS",
                       help="how often the directory is listed (default 0.5)")
    group.add_argument("--print-panes", action="store_true",
                       help="print one line per pane as it is written")
