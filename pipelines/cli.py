"""The `ldp` command line: simulate reports, run the estimation job, show and query estimates,
plan a protocol.

Only `ldp run` imports Apache Beam (seconds of start-up): its job arguments come from
ldp_telemetry.pipelines.estimate and are added to the parser only when the command is `run`, so
`plan`, `show`, `query`, `simulate` and `--help` never import it. Every command imports what it
needs inside its handler: `ldp plan` and `--help` need numpy alone (not even scipy).
"""
from __future__ import annotations

import argparse
import difflib
import json
import logging
import sys


def _drop_optional_gcp_notice(record: logging.LogRecord) -> bool:
    """Beam logs a warning about optional GCP client libraries on import; it is noise here."""
    return "apitools not found" not in record.getMessage()


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(_drop_optional_gcp_notice)
    logging.getLogger("ldp_telemetry").setLevel(logging.INFO)  # e.g. how "protocol": "auto" was resolved
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(job_arguments=_command(argv) == "run")
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "run":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        if args.command == "run":
            _reject_misspelt_job_flags(extra)
        return args.handler(args, extra)
    except (ValueError, OSError) as error:  # RegistryError is a ValueError
        print(f"ldp {args.command}: error: {error}", file=sys.stderr)
        return 2


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
    dashboard.set_defaults(handler=_dashboard)


def _reject_misspelt_job_flags(beam_args: list[str]) -> None:
    """ValueError for an option Beam does not know that is close to one of `ldp run`'s own.

    `ldp run` hands every option it does not define to Beam, which only warns about unknown
    ones: without this check `--window-ofset 1800` would run with the default offset.
    """
    from ldp_telemetry.pipelines.estimate import add_job_arguments
    from ldp_telemetry.pipelines.live import add_live_arguments
    from ldp_telemetry.runners import unknown_pipeline_flags
    job_parser = argparse.ArgumentParser(add_help=False)
    add_job_arguments(job_parser)
    add_live_arguments(job_parser)
    job_flags = {flag.lstrip("-").replace("-", "_"): flag
                 for action in job_parser._actions for flag in action.option_strings}
    for name in unknown_pipeline_flags(beam_args):
        close = difflib.get_close_matches(name, job_flags, n=1, cutoff=0.75)
        if close:
            raise ValueError(f"unknown option --{name.replace('_', '-')}: "
                             f"did you mean {job_flags[close[0]]}?")


def _command(argv: list[str]) -> str | None:
    """The subcommand named in `argv` (its first argument that is not an option), if any."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def build_parser(job_arguments: bool = True) -> argparse.ArgumentParser:
    """The `ldp` parser. `job_arguments=False` leaves out the arguments of `ldp run`, whose
    definition imports Apache Beam: the parser then serves every other command."""
    parser = argparse.ArgumentParser(
        prog="ldp", description="Streaming aggregation of locally differentially private telemetry.")
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
    simulate.set_defaults(handler=_simulate)

    plan = commands.add_parser(
        "plan", help="compare every protocol for a privacy level and domain size",
        description="For every protocol: p*, q*, the analytical n·MSE ([Fang25] eq. 4, "
                    "with the rounded g or k the protocol uses), "
                    "the largest Avro payload in bytes, the aggregation cost, and the "
                    "recommended protocol (lowest n·MSE; ties: fewest bytes, then cheapest "
                    "aggregation).")
    plan.add_argument("--epsilon", required=True, type=float, help="privacy level ε > 0")
    plan.add_argument("--domain", required=True, type=int, help="domain size d >= 2")
    plan.add_argument("--n", type=int, default=None,
                      help="number of reports per window: also print MSE and its square root")
    plan.add_argument("--max-bytes", type=int, default=None,
                      help="recommend only among protocols with at most this many bytes per report")
    plan.add_argument("--json", action="store_true",
                      help="print a JSON list of objects (protocol, n_mse, ...) instead of a table")
    plan.set_defaults(handler=_plan)

    run = commands.add_parser(
        "run", help="run the windowed-estimation Beam job",
        description="Read Avro reports, count support per metric and event-time window, and "
                    "write per-window estimates with standard errors to OUTPUT/estimates-*.jsonl "
                    "(and .avro) and rejected input to OUTPUT/dead_letters-*.jsonl. Any other "
                    "option is a Beam pipeline option, e.g. --runner=PortableRunner "
                    "--job_endpoint=localhost:8099; without --runner the job runs on FnApiRunner "
                    "in this process. --runner=PortableRunner without --job_endpoint starts a "
                    "local job service for the run (LOOPBACK workers unless "
                    "--environment_type is given). With --follow DIR instead of --input the run is "
                    "live: it follows the directory and writes each pane as it fires under "
                    "OUTPUT/panes/ (see the live-run options).")
    if job_arguments:
        from ldp_telemetry.pipelines.estimate import add_job_arguments
        from ldp_telemetry.pipelines.live import add_live_arguments
        add_job_arguments(run)
        add_live_arguments(run)
    run.set_defaults(handler=_run)

    show = commands.add_parser(
        "show", help="print the largest estimates of each window of a finished job",
        description="Print, per metric and window, the K largest post-processed estimates with "
                    "95% error bars (1.96 standard errors: of the unbiased estimate, or of the "
                    "metric's estimator at its final gains when the registry names one).")
    show.add_argument("--output", required=True, help="the job's output directory")
    show.add_argument("--metric", default=None, help="only this metric")
    show.add_argument("--top", type=int, default=5, help="values per window (default 5)")
    show.add_argument("--windows", type=int, default=None, help="at most this many windows per metric")
    show.set_defaults(handler=_show)

    query = commands.add_parser(
        "query", help="answer a point, set, top-k or range query on one window",
        description="Answer a query on one window of a finished job: the sum over --labels "
                    "(one label: a point query), the --top K values, or the --range LO HI of an "
                    "ordinal domain (inclusive, in the registry's label order; LO and HI are "
                    "labels or indices). Prints the answer, its standard error and what kind of "
                    "error it is (see ldp/queries.py).")
    query.add_argument("--output", required=True, help="the job's output directory")
    query.add_argument("--metric", required=True, help="metric name")
    query.add_argument("--window", required=True,
                       help="the window's start as ISO-8601 (UTC if naive), or an integer index "
                            "into the metric's windows sorted by start (0 first, -1 last)")
    what = query.add_mutually_exclusive_group(required=True)
    what.add_argument("--labels", help="comma-separated labels (or indices) to sum")
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
    query.set_defaults(handler=_query)

    _add_dashboard_command(commands)
    return parser


def _simulate(args: argparse.Namespace, _extra: list[str]) -> int:
    from ldp_telemetry.ldp.registry import load_registry
    from ldp_telemetry.pipelines.simulate import (DEFAULT_REPORTS_PER_FILE, read_true_values,
                                                  simulate_live, simulate_reports)
    config = load_registry(args.registry)[args.metric]
    if not args.live and (args.speedup is not None or args.rate is not None):
        raise ValueError("--speedup and --rate need --live")
    truth = read_true_values(args.input, config, args.value_column, args.time_column)
    if args.live:
        speedup = args.speedup if args.speedup is not None or args.rate is not None else 1.0
        paths = simulate_live(config, truth, args.out, args.seed, speedup, args.rate,
                              args.file_every, overwrite=args.overwrite)
        print(f"{len(truth.values):,} reports of {config.name} written live to "
              f"{len(paths)} file(s) in {args.out}")
        return 0
    per_file = (DEFAULT_REPORTS_PER_FILE if args.reports_per_file is None
                else args.reports_per_file)
    if per_file <= 0:
        raise ValueError(f"--reports-per-file must be positive, got {per_file}")
    paths = simulate_reports(config, truth, args.out, args.seed, per_file,
                             overwrite=args.overwrite)
    print(f"{len(truth.values):,} reports of {config.name} ({config.protocol_name}, "
          f"ε={config.epsilon:g}) written to {len(paths)} file(s) in {args.out}")
    return 0


def _plan(args: argparse.Namespace, _extra: list[str]) -> int:
    from ldp_telemetry.ldp.planner import guideline, plan, recommend
    rows = plan(args.epsilon, args.domain, args.n, args.max_bytes)
    if args.json:
        print(json.dumps([row.as_dict() for row in rows], indent=1))
        return 0
    choice, reason = recommend(args.epsilon, args.domain, args.max_bytes)
    print(f"ε = {args.epsilon:g}, d = {args.domain:,}" + (f", n = {args.n:,}" if args.n else ""))
    header = f"  {'protocol':<8} {'param':<9} {'p*':>9} {'q*':>9} {'n·MSE':>10}"
    if args.n:
        header += f" {'MSE':>10} {'√MSE':>9}"
    print(header + f" {'bytes':>6}  server cost")
    for row in rows:
        line = (f"{'*' if row.recommended else ' '} {row.protocol:<8} {row.parameter:<9} "
                f"{row.p_star:>9.4g} {row.q_star:>9.4g} {row.n_mse:>10.4g}")
        if args.n:
            line += f" {row.mse:>10.4g} {row.mse ** 0.5:>9.4g}"
        print(line + f" {row.bytes_per_report:>6}  {row.server_cost}")
    print(f"recommended: {choice} — {reason}")
    print(f"guideline of [Fang25] §4.4: {guideline(args.epsilon, args.domain)}")
    return 0


def _run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from ldp_telemetry.pipelines.estimate import job_from_arguments, run_job
    from ldp_telemetry.runners.portable import with_local_job_service
    job = job_from_arguments(args)
    if args.follow is not None:
        from ldp_telemetry.pipelines.live import live_config_from_arguments, run_live
        live = live_config_from_arguments(args)
        with with_local_job_service(beam_args) as beam_args:
            run_live(job, live, beam_args)
        return 0
    with with_local_job_service(beam_args) as beam_args:  # PortableRunner without an endpoint
        run_job(job, beam_args)
    print(f"estimates: {job.output}/estimates-*.jsonl; dead letters: {job.output}/dead_letters-*.jsonl")
    return 0


def _show(args: argparse.Namespace, _extra: list[str]) -> int:
    from ldp_telemetry.output.reader import read_estimates
    from ldp_telemetry.output.text import format_top
    shown: dict[str, int] = {}
    for record in read_estimates(args.output, args.metric):
        count = shown.get(record["metric"], 0)
        if args.windows is None or count < args.windows:
            print(format_top(record, args.top))
            shown[record["metric"]] = count + 1
    return 0


def _estimator_prefix(window) -> str:
    """'iiw (iterations=30) + ' when the window has an estimator, else ''."""
    if window.estimator.method == "unbiased":
        return ""
    params = ", ".join(f"{k}={v}" for k, v in window.estimator.params)
    return f"{window.estimator.method}{f' ({params})' if params else ''} + "


def _query(args: argparse.Namespace, _extra: list[str]) -> int:
    from ldp_telemetry.ldp.queries import STD_ERROR_KINDS, WindowEstimate
    from ldp_telemetry.output.reader import read_estimates, select_window
    record = select_window(read_estimates(args.output), args.metric, args.window)
    if record.get("bucket_edges") is not None:
        return _numeric_query(record, args)
    if args.quantile is not None:
        raise ValueError(f"--quantile needs a numeric metric; {args.metric!r} is not one")
    try:
        window = WindowEstimate.from_record(record)
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"the estimate of metric {args.metric!r} at {record['window_start']} in "
                         f"{args.output} cannot be read: {type(error).__name__}: {error}") from None
    if args.method is not None:
        window = window.with_method(args.method, **_method_params(args.param))
    elif args.param:
        raise ValueError("--param needs --method")
    if args.top is not None:
        answers = window.top_k(args.top)
    elif args.range is not None:
        answers = [window.range_sum(*args.range)]
    else:
        labels = [label.strip() for label in args.labels.split(",")]
        answers = [window.point(labels[0]) if len(labels) == 1 else window.set_sum(labels)]
    if args.json:
        print(json.dumps({"metric": window.metric, "window_start": window.window_start,
                          "window_end": window.window_end, "n": window.n,
                          "protocol": window.protocol.name, "epsilon": window.protocol.epsilon,
                          "estimator": {"method": window.estimator.method,
                                        "params": dict(window.estimator.params)},
                          "postprocess": {"method": window.spec.method,
                                          "params": dict(window.spec.params)},
                          "answers": [a.as_dict() for a in answers]}))
        return 0
    params = ", ".join(f"{k}={v:g}" if v is not None else f"{k}=fitted"
                       for k, v in window.spec.params)
    print(f"{window.metric}  [{window.window_start} .. {window.window_end})  n={window.n:,}  "
          f"{window.protocol.name} ε={window.protocol.epsilon:g}  "
          f"{_estimator_prefix(window)}{window.spec.method}{f' ({params})' if params else ''}")
    for answer in answers:
        print(f"  {_describe(answer):<40} {answer.value:9.5f} ± {answer.std_error:.5f}")
    kind = answers[0].std_error_kind
    print(f"  (± one standard error; {kind}: {STD_ERROR_KINDS[kind]})")
    return 0


def _numeric_query(record: dict, args: argparse.Namespace) -> int:
    from ldp_telemetry.ldp.numeric_queries import NumericWindow
    if args.labels is not None or args.top is not None or args.method is not None:
        raise ValueError(f"metric {args.metric!r} is numeric: ask --range LO HI (its units) or "
                         "--quantile LEVELS")
    window = NumericWindow.from_record(record)
    if args.range is not None:
        try:
            lo, hi = (float(bound) for bound in args.range)
        except ValueError:
            raise ValueError(f"--range of a numeric metric takes two numbers, got "
                             f"{args.range}") from None
        answers = [window.range_probability(lo, hi)]
    else:
        try:
            levels = [float(level) for level in args.quantile.split(",")]
        except ValueError:
            raise ValueError(f"--quantile takes numbers in [0, 1], got {args.quantile!r}") from None
        answers = [window.quantile(level) for level in levels]
    if args.json:
        print(json.dumps({"metric": window.metric, "window_start": window.window_start,
                          "window_end": window.window_end, "n": window.n,
                          "protocol": record["protocol"], "epsilon": record["epsilon"],
                          "estimator": record["estimator"],
                          "answers": [a.as_dict() for a in answers]}))
        return 0
    print(f"{window.metric}  [{window.window_start} .. {window.window_end})  n={window.n:,}  "
          f"{record['protocol']} ε={record['epsilon']:g}  {record['estimator']['method']}")
    for answer in answers:
        what = (f"P[{answer.argument[0]:g} <= X <= {answer.argument[1]:g}]"
                if answer.query == "range" else f"quantile {answer.argument[0]:g}")
        error = ("" if answer.std_error is None
                 else f" ± {answer.std_error:.5g} (bootstrap standard error)")
        print(f"  {what:<40} {answer.value:.6g}{error}")
    if any(answer.std_error is None for answer in answers):
        print("  (no standard error: the record keeps bootstrap errors for the mean and the "
              "quantiles at levels 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99 only)")
    return 0


def _dashboard(args: argparse.Namespace, _extra: list[str]) -> int:
    from ldp_telemetry.dashboard.cli import run_dashboard
    return run_dashboard(args)


def _method_params(pairs: list[str]) -> dict:
    params = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"--param must be NAME=VALUE, got {pair!r}")
        params[name.strip()] = None if value.strip().lower() in ("null", "none") else float(value)
    return params


def _describe(answer) -> str:
    if answer.query in ("point", "top-k"):
        return answer.labels[0]
    if answer.query == "range":
        return f"range {answer.labels[0]}..{answer.labels[-1]} ({len(answer.labels)} values)"
    shown = ", ".join(answer.labels[:5]) + (", ..." if len(answer.labels) > 5 else "")
    return f"set {{{shown}}} ({len(answer.labels)} values)"


if __name__ == "__main__":
    sys.exit(main())
