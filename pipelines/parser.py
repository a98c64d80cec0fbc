"""The `ldp` command line's parser: every command and its options.

`ldp run`'s options are defined with the job (`ldp_telemetry.pipelines.arguments`), whose
imports include Apache Beam: `build_parser(job_arguments=False)` leaves them out, so `plan`,
`show`, `query`, `simulate` and `--help` never import Beam. Each option's destination is the
setting it fills; `flag_table` maps those settings (the `field` of a `UserError`) to flags.
"""
from __future__ import annotations

import argparse
import difflib

from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.output.bands import Z95

#: How the --config-version flags are given (`output.layout.version_label`).
VERSION_HELP = "v1, v2, ... or combined (docs/fleet-contract.md)"
#: How `show` and `query` name windows (`output.reader.windows_at`).
WINDOW_HELP = ("an integer index into the metric's windows sorted by start (0 first, -1 last), "
               "or an ISO-8601 time (UTC if naive): the window starting then, else the "
               "window(s) holding it")


def build_parser(job_arguments: bool = True) -> argparse.ArgumentParser:
    """The `ldp` parser. `job_arguments=False` leaves out the arguments of `ldp run`, whose
    definition imports Apache Beam: the parser then serves every other command."""
    parser = argparse.ArgumentParser(
        prog="ldp",
        description="Streaming aggregation of locally differentially private telemetry.")
    parser.add_argument("--version", action="version", version=f"ldp {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    simulate = commands.add_parser(
        "simulate", help="perturb real values from a CSV into Avro report files",
        description="Read true values and event times from a CSV (optionally .gz), perturb each "
                    "value with the metric's ε-LDP protocol, and write Avro report files.")
    simulate.add_argument("--registry", required=True, help="metric registry JSON file")
    simulate.add_argument("--metric", required=True, help="metric name in the registry")
    simulate.add_argument("--input", required=True, help="CSV file with a header row")
    simulate.add_argument("--value-column", required=True,
                          help="column of true values: labels of the domain, indices "
                               "0..size-1 for a sized domain, or numbers in [low, high] for "
                               "a numeric metric")
    simulate.add_argument("--time-column", required=True,
                          help="column of event times: epoch seconds or ISO-8601 (UTC if naive)")
    simulate.add_argument("--out", required=True, help="directory for the report files")
    simulate.add_argument("--seed", type=int, default=None,
                          help="seed of the perturbation randomness (default: fresh entropy)")
    simulate.add_argument("--reports-per-file", type=int, default=None,
                          help="split output into files of at most this many reports")
    simulate.add_argument("--overwrite", action="store_true",
                          help="replace this metric's report files already in --out")
    fleet = simulate.add_mutually_exclusive_group()
    fleet.add_argument("--devices", type=int, default=None,
                       help="memoized metrics: simulate this many devices, each holding one "
                            "value and reporting it at evenly spread times (a value's rows dealt "
                            "to its devices in turn; default: one device per row)")
    fleet.add_argument("--device-column", default=None,
                       help="memoized metrics: the CSV column naming each row's device")
    simulate.add_argument("--envelope", type=int, default=None, metavar="N",
                          help="write report envelopes of N reports each (columnar batches, "
                               "docs/envelopes.md) instead of one Avro record per report")
    live = simulate.add_argument_group(
        "live mode", "write the reports into --out over time, as a collector would: one file "
        "every --file-every seconds holding the reports that came due, written under a hidden "
        "temporary name and renamed (what `ldp run --follow` expects)")
    live.add_argument("--live", action="store_true", help="write over time instead of at once")
    pace = live.add_mutually_exclusive_group()
    pace.add_argument("--speedup", type=float, default=None,
                      help="replay event times this many times faster than real time")
    pace.add_argument("--rate", type=float, default=None,
                      help="write this many reports per second, in event-time order")
    live.add_argument("--file-every", type=float, default=1.0, metavar="SECONDS",
                      help="close a report file this often (default 1)")

    plan = commands.add_parser(
        "plan", help="compare every protocol for a privacy level and domain size",
        description="For every protocol: p*, q*, the analytical n·MSE ([Fang25] eq. 4, "
                    "with the rounded g or k the protocol uses), "
                    "the largest Avro payload in bytes, the aggregation cost, and the "
                    "recommended protocol (lowest n·MSE; ties: fewest bytes, then cheapest "
                    "aggregation).")
    plan.add_argument("--epsilon", "--report-epsilon", required=True, type=float,
                      help="privacy level ε > 0 (per report, ε1, with --lifetime-epsilon)")
    plan.add_argument("--lifetime-epsilon", type=float, default=None,
                      help="also compare the two-stage (memoized) protocols at this lifetime ε∞ "
                           "per distinct value")
    plan.add_argument("--max-values", type=int, default=None,
                      help="with --lifetime-epsilon: most distinct values memoized per device")
    plan.add_argument("--domain", required=True, type=int, help="domain size d >= 2")
    plan.add_argument("--n", type=int, default=None,
                      help="number of reports per window: also print MSE and its square root")
    plan.add_argument("--max-bytes", type=int, default=None,
                      help="recommend only among protocols with at most this many bytes per report")
    plan.add_argument("--aggregation-rate", type=float, default=None, metavar="REPORTS_PER_S",
                      help="recommend only among protocols the cost model says count at least "
                           "this many reports per second per core")
    plan.add_argument("--sketch-k", type=int, default=None, metavar="K",
                      help="the pooled-hash oracles (cms, hcms, flh) with K hash functions, as "
                           "a registry's sketch.k (default: each one's own)")
    plan.add_argument("--sketch-m", type=int, default=None, metavar="M",
                      help="... and M buckets (FLH: its g), as a registry's sketch.m")
    plan.add_argument("--json", action="store_true",
                      help="print a JSON list of objects (protocol, n_mse, ...) instead of a table")

    run = commands.add_parser(
        "run", help="run the windowed-estimation Beam job",
        description="Read Avro reports, count support per metric and event-time window, and "
                    "write per-window estimates with standard errors to OUTPUT/estimates-*.jsonl "
                    "(and .avro) and rejected input to OUTPUT/dead_letters-*.jsonl. Any other "
                    "option is a Beam pipeline option, e.g. --runner=PortableRunner "
                    "--job_endpoint=localhost:8099; without --runner the job runs on FnApiRunner "
                    "in this process. --runner=PortableRunner without --job_endpoint starts a "
                    "local job service for the run (LOOPBACK workers unless "
                    "--environment_type is given); --runner=dask starts a local Dask cluster of "
                    "--dask_workers processes for the run unless --dask_client_address names a "
                    "scheduler. With --follow DIR instead of --input the run is "
                    "live: it follows the directory and writes each pane as it fires under "
                    "OUTPUT/panes/ (see the live-run options).")
    if job_arguments:
        from ldp_telemetry.pipelines.arguments import add_job_arguments, add_live_arguments
        add_job_arguments(run)
        add_live_arguments(run)

    show = commands.add_parser(
        "show", help="print the largest estimates of each window of a finished job",
        description="Print, per metric and window, the K largest post-processed estimates with "
                    "95% error bars (the band of the unbiased estimate, whatever the "
                    "post-processing or Wiener filter; none where the record declares none); a "
                    "numeric window's mean and quantiles with the record's own 95% bands "
                    "[lower, upper], its band method named on the window's line; and "
                    "a warning under a window whose reports are too few for its domain.")
    show.add_argument("--output", required=True, help="the job's output directory")
    show.add_argument("--metric", default=None, help="only this metric")
    show.add_argument("--top", type=_positive_int, default=5,
                      help="values per window (default 5)")
    show.add_argument("--window", action="append", default=None, metavar="W",
                      help=f"only this window of each metric (repeatable): {WINDOW_HELP}")
    show.add_argument("--last", type=_positive_int, default=None, metavar="N",
                      help="only the last N windows of each metric")
    show.add_argument("--windows", type=_positive_int, default=None, metavar="N",
                      help="only the first N windows of each metric")
    show.add_argument("--config-version", default=None, metavar="V",
                      help=f"only the estimates from this configuration version: {VERSION_HELP} "
                           "(default: every version's, and their combination)")

    query = commands.add_parser(
        "query", help="answer a point, set, top-k or range query on one window",
        description="Answer a query on one window of a finished job: the sum over --labels "
                    "(one label: a point query), the --top K values, or the --range LO HI of an "
                    "ordinal domain (inclusive, in the registry's label order; LO and HI are "
                    "labels or indices). Prints the answer ± the half width of its 95% band "
                    f"({Z95:.2f} standard errors, as ldp show and the dashboard), its standard "
                    "error and what kind of error it is (see ldp/estimation/queries.py).")
    query.add_argument("--output", required=True, help="the job's output directory")
    query.add_argument("--metric", required=True, help="metric name")
    query.add_argument("--window", required=True, metavar="W",
                       help=f"the window: {WINDOW_HELP} (exactly one)")
    query.add_argument("--config-version", default=None, metavar="V",
                       help="the estimate from this configuration version: v1, v2, ... "
                            "(default: the window's highest version; docs/fleet-contract.md)")
    what = query.add_mutually_exclusive_group(required=True)
    what.add_argument("--labels", help="comma-separated labels (or indices) to sum")
    what.add_argument("--label", action="append", metavar="LABEL",
                      help="one label to sum, taken whole (commas and spaces are part of it); "
                           "repeatable")
    what.add_argument("--top", type=int, metavar="K", help="the K largest estimates")
    what.add_argument("--range", nargs=2, metavar=("LO", "HI"),
                      help="values LO..HI inclusive (numeric metrics: the probability of "
                           "[LO, HI] in the metric's units)")
    what.add_argument("--quantile", metavar="LEVELS",
                      help="numeric metrics: comma-separated quantile levels in [0, 1]")
    query.add_argument("--method", default=None,
                       help="post-process the estimator's output (the unbiased estimate "
                            "unless the metric has an estimator) again with this method "
                            "(default: the window's own method)")
    query.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                       help="a parameter of --method, e.g. alpha=1 (repeatable)")
    query.add_argument("--json", action="store_true", help="print one JSON object")

    convert = commands.add_parser(
        "convert", help="convert report files to report envelopes or back",
        description="Read report files (one record per report, envelopes, or both) with the "
                    "job's decoder and write every report it would count to a file of the same "
                    "name in --out, as envelopes (docs/envelopes.md) or one record per report. "
                    "Reports the job would dead-letter are counted by reason, not written.")
    convert.add_argument("--registry", required=True, help="metric registry JSON file")
    convert.add_argument("--to", required=True, choices=("envelope", "records"),
                         help="the layout to write")
    convert.add_argument("--out", required=True, help="directory for the converted files")
    convert.add_argument("--envelope", type=_positive_int, default=None, metavar="N",
                         help="reports per envelope with --to envelope (default 10000)")
    convert.add_argument("--overwrite", action="store_true",
                         help="replace files of the same name already in --out")
    convert.add_argument("input", nargs="+", help="report files (globs are expanded)")

    _add_dashboard_command(commands)
    from ldp_telemetry.pipelines.registry_tools import add_registry_arguments
    add_registry_arguments(commands.add_parser(
        "registry", help="make, compare and list metric registries (init, diff, show)",
        description="Registry tooling: `init` a metric from a CSV column, `diff` two "
                    "registries, `show` each metric's versions and fingerprints."))
    return parser


def _version() -> str:
    """The installed distribution's version."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("ldp-telemetry")
    except PackageNotFoundError:  # not installed: run from a checkout
        return "unknown"


def _positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _add_dashboard_command(commands) -> None:
    from ldp_telemetry.dashboard.cli import add_dashboard_arguments
    dashboard = commands.add_parser(
        "dashboard", help="serve (or export) pages of window estimates for a browser",
        description="Serve an index of metrics and one page per metric, read from an estimate "
                    "store or a job's output folder: the top values over windows with 95% "
                    "bands, the distribution of a selected window with error bars, and n, "
                    "rejects and late reports per window. A page follows a live run (new panes "
                    "appear without a reload). Listens on 127.0.0.1 unless --host says "
                    "otherwise; --export DIR writes the same pages as files.")
    add_dashboard_arguments(dashboard)


def reject_misspelt_job_flags(beam_args: list[str]) -> None:
    """ConfigError for an option Beam does not know that is close to one of `ldp run`'s own.

    `ldp run` hands every option it does not define to Beam, which only warns about unknown
    ones: without this check `--window-ofset 1800` would run with the default offset.
    """
    from ldp_telemetry.pipelines.arguments import add_job_arguments, add_live_arguments
    from ldp_telemetry.runners import unknown_pipeline_flags
    job_parser = argparse.ArgumentParser(add_help=False)
    add_job_arguments(job_parser)
    add_live_arguments(job_parser)
    job_flags = {flag.lstrip("-").replace("-", "_"): flag
                 for action in job_parser._actions for flag in action.option_strings}
    for name in unknown_pipeline_flags(beam_args):
        close = difflib.get_close_matches(name, job_flags, n=1, cutoff=0.75)
        if close:
            raise ConfigError(f"unknown option --{name.replace('_', '-')}: "
                              f"did you mean {job_flags[close[0]]}?")


def command_of(argv: list[str]) -> str | None:
    """The subcommand named in `argv` (its first argument that is not an option), if any."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def flag_table(parser: argparse.ArgumentParser, command: str | None = None) -> dict[str, str]:
    """Setting -> flag: each option's destination (the field a `UserError` names, e.g.
    ``window_offset``) -> its long option string (``--window-offset``), over the options of
    `command` (and the top-level ones), or of every command when `command` is None (commands
    that share a setting share its flag)."""
    table: dict[str, str] = {}
    pending = [parser]
    while pending:
        current = pending.pop()
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                pending.extend(parsed for name, parsed in action.choices.items()
                               if command is None or name == command)
            flags = [flag for flag in action.option_strings if flag.startswith("--")]
            if flags and action.dest != "help":
                table.setdefault(action.dest, flags[0])
    return table
