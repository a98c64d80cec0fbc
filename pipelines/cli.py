"""The `ldp` command: simulate reports, run the estimation job, show and query estimates, plan
a protocol, serve the dashboard, make and compare registries.

`main` parses (`ldp_telemetry.pipelines.parser`), dispatches to the command's handler and maps
errors to exit statuses: 0 when the command succeeds; 2 for a `ldp.base.errors.UserError` (a problem
in what the user gave), printed as one line `ldp COMMAND: error: MESSAGE` in which the setting
the error names is written as its flag (`user_message`); any other exception is a bug and
propagates with its traceback (exit status 1). `ldp run` also ends with 3 when its files are
complete but its store failed during the run (`STORE_INCOMPLETE`), and with 130 when
interrupted. Every handler imports what it needs when it runs:
only `ldp run` imports Apache Beam, and `ldp plan` and `--help` need numpy alone.
"""
from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from collections.abc import Mapping

from ldp_telemetry.ldp.base.errors import ConfigError, UserError
from ldp_telemetry.pipelines.parser import (build_parser, command_of, flag_table,
                                            reject_misspelt_job_flags)


def _drop_optional_gcp_notice(record: logging.LogRecord) -> bool:
    """Beam logs a warning about optional GCP client libraries on import; it is noise here."""
    return "apitools not found" not in record.getMessage()


def _drop_user_error_traceback(record: logging.LogRecord) -> bool:
    """Beam logs an exception raised in a step with its traceback before raising it again; a
    UserError (e.g. an input file changed while the job ran) is then one line from `main`. A
    portable runner's worker logs it as text (`partials.reported_source_change`)."""
    if record.exc_info and isinstance(record.exc_info[1], UserError):
        return False
    if record.levelno < logging.ERROR:
        return True
    from ldp_telemetry.ldp.engine.partials import reported_source_change
    return reported_source_change(RuntimeError(record.getMessage())) is None


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(_drop_optional_gcp_notice)
        handler.addFilter(_drop_user_error_traceback)
    # e.g. how "protocol": "auto" was resolved
    logging.getLogger("ldp_telemetry").setLevel(logging.INFO)
    exiting = argv is None  # the process's own command line: it exits when this returns
    argv = sys.argv[1:] if argv is None else list(argv)
    # A live run takes Ctrl-C and SIGTERM as "stop" from its first moment (before Beam loads)
    # to its exit: its final panes and summary, never a half-written end (pipelines/stopping).
    signals = None
    if command_of(argv) == "run" and any(arg.split("=", 1)[0] == "--follow" for arg in argv):
        from ldp_telemetry.pipelines.stopping import StopSignals
        signals = StopSignals()
    parser = build_parser(job_arguments=command_of(argv) == "run")
    args, extra = parser.parse_known_args(argv)
    args.stop_signals = signals
    if extra and args.command != "run":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        if args.command == "run":
            reject_misspelt_job_flags(extra)
        return COMMANDS[args.command](args, extra)
    except UserError as error:
        from ldp_telemetry.output.names import terminal_safe  # a message may quote the data
        flags = flag_table(parser, args.command)
        print(f"ldp {args.command}: error: {terminal_safe(user_message(error, flags))}",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before a run's own handling (pipelines/stopping.py), or another
        print(f"ldp {args.command}: interrupted", file=sys.stderr)  # command's: no traceback
        return 130
    finally:
        if args.stop_signals is not None and exiting:  # a live run has ended: a late SIGTERM
            args.stop_signals.ignore()  # must not end its exit with 143 (StopSignals.ignore)
        elif args.stop_signals is not None:  # called in-process (tests): the caller's again
            args.stop_signals.restore()


#: The subject of a message: the setting(s) it begins with, e.g. ``window / period``.
_SUBJECT = re.compile(r"\w+(?: (?:/|and|or) \w+)*")
_JOINER = re.compile(r" (/|and|or) ")


def user_message(error: UserError, flags: Mapping[str, str]) -> str:
    """The error's message with its setting written as the flag that sets it.

    `flags` (`parser.flag_table`) maps settings to flags. A message that begins with its field
    (alone or joined to other settings by ``/``, ``and``, ``or``: ``window / period must be at
    most 1000``) has those settings replaced by their flags (``--window / --period must be at
    most 1000``); another message about a setting with a flag gets the flag in front, unless it
    names the flag already (the command line's own checks). Errors without a field, or whose
    field has no flag (a registry field such as ``metrics[2].epsilon``), are shown as they are.
    """
    message = str(error)
    setting = _setting_with_flag(error.field, flags)
    if setting is None:
        return _other_settings(message, flags)
    flag = flags[setting]
    subject = _SUBJECT.match(message)
    parts = _JOINER.split(subject.group(0)) if subject else []  # name, joiner, name, ...
    names = parts[::2]
    if setting in names and all(name in flags for name in names):
        written = "".join(flags[part] if i % 2 == 0 else f" {part} "
                          for i, part in enumerate(parts))
        return written + _other_settings(message[subject.end():], flags)
    message = _other_settings(message, flags)
    return message if flag in message else f"{flag}: {message}"


#: A setting named inside a message: a snake_case name of two words or more.
_SNAKE_NAME = re.compile(r"(?<![\w./-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w/-])")


def _other_settings(text: str, flags: Mapping[str, str]) -> str:
    """`text` with every other multi-word setting it names (``max_block_bytes``) written as its
    flag (``--max-block-bytes``)."""
    return _SNAKE_NAME.sub(lambda found: flags.get(found.group(0), found.group(0)), text)


def _setting_with_flag(field: str | None, flags: Mapping[str, str]) -> str | None:
    """The setting a flag sets for `field`: the field itself, or the first part of a dotted
    field (``domain.size`` of a protocol's domain, given by ``ldp plan --domain``)."""
    if not field:
        return None
    if field in flags:
        return field
    head = field.split(".", 1)[0]
    return head if "." in field and head in flags else None


def _simulate(args: argparse.Namespace, _extra: list[str]) -> int:
    from ldp_telemetry.ldp.config.registry import load_registry
    from ldp_telemetry.pipelines.csv_input import read_true_values
    from ldp_telemetry.pipelines.simulate import (DEFAULT_REPORTS_PER_FILE, simulate_live,
                                                  simulate_reports)
    from ldp_telemetry.pipelines.simulate import check_seed
    check_seed(args.seed)
    _check_envelope(args.envelope)
    config = load_registry(args.registry, announce=[args.metric])[args.metric]
    if not args.live and (args.speedup is not None or args.rate is not None):
        raise ConfigError("--speedup and --rate need --live", field="speedup")
    truth = read_true_values(args.input, config, args.value_column, args.time_column)
    if args.live and (args.devices is not None or args.device_column is not None):
        raise ConfigError("--devices and --device-column write at once: leave out --live",
                          field="devices")
    if args.live:
        speedup = args.speedup if args.speedup is not None or args.rate is not None else 1.0
        paths = simulate_live(config, truth, args.out, args.seed, speedup, args.rate,
                              args.file_every, overwrite=args.overwrite, progress=sys.stderr,
                              envelope_reports=args.envelope)
        print(f"{len(truth.values):,} reports of {config.name} written live to "
              f"{len(paths)} file(s) in {args.out}")
        return 0
    per_file = (DEFAULT_REPORTS_PER_FILE if args.reports_per_file is None
                else args.reports_per_file)
    if per_file <= 0:
        raise ConfigError(f"reports_per_file must be positive, got {per_file}",
                          field="reports_per_file")
    devices = None
    if args.devices is not None:
        from ldp_telemetry.pipelines.simulate import fleet_assignment
        devices = fleet_assignment(truth, args.devices)
    elif args.device_column is not None:
        from ldp_telemetry.pipelines.simulate import read_device_column
        devices = read_device_column(args.input, args.device_column, len(truth.values))
    paths = simulate_reports(config, truth, args.out, args.seed, per_file,
                             overwrite=args.overwrite, progress=sys.stderr, devices=devices,
                             envelope_reports=args.envelope)
    print(f"{len(truth.values):,} reports of {config.name} ({config.protocol_name}, "
          f"ε={config.epsilon:g}) written to {len(paths)} file(s) in {args.out}")
    return 0


def _check_envelope(reports: int | None) -> None:
    """ConfigError naming ``envelope`` when --envelope N is not a number of reports per envelope
    a writer makes (schemas.envelopes.envelope_reports_problem)."""
    from ldp_telemetry.schemas.envelopes import envelope_reports_problem
    problem = None if reports is None else envelope_reports_problem(reports)
    if problem:
        raise ConfigError(f"envelope {problem}", field="envelope")


def _convert(args: argparse.Namespace, _extra: list[str]) -> int:
    import glob

    from ldp_telemetry.ldp.base.errors import InputError
    from ldp_telemetry.ldp.config.registry import load_registry
    from ldp_telemetry.pipelines.convert import convert_files
    from ldp_telemetry.schemas.envelopes import DEFAULT_ENVELOPE_REPORTS
    if args.envelope is not None and args.to != "envelope":
        raise ConfigError("--envelope needs --to envelope", field="envelope")
    _check_envelope(args.envelope)
    paths = []
    for pattern in args.input:
        matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        if not matches:
            raise InputError(f"input {pattern!r} matches no file", field="input")
        paths += matches
    done = convert_files(load_registry(args.registry), paths, args.out, args.to,
                         args.envelope or DEFAULT_ENVELOPE_REPORTS, overwrite=args.overwrite)
    dead = sum(done.dead.values())
    reasons = ", ".join(f"{reason} {count:,}" for reason, count in sorted(done.dead.items()))
    print(f"{done.read:,} reports read from {len(paths)} file(s), {done.written:,} written to "
          f"{args.out} as {args.to}, {dead:,} dead-lettered{f' ({reasons})' if dead else ''}")
    return 0


def _plan(args: argparse.Namespace, _extra: list[str]) -> int:
    from ldp_telemetry.ldp.config.cost import cost_model
    from ldp_telemetry.ldp.config.planner import guideline, plan, recommend
    sketch = {key: value for key, value in (("k", args.sketch_k), ("m", args.sketch_m))
              if value is not None}
    rows = plan(args.epsilon, args.domain, args.n, args.max_bytes, args.aggregation_rate,
                sketch)
    if args.json and args.lifetime_epsilon is not None:
        from ldp_telemetry.ldp.config.planner import two_stage_plan
        two = two_stage_plan(args.epsilon, args.lifetime_epsilon, args.domain, args.n,
                             args.max_values)
        print(json.dumps({"one_stage": [row.as_dict() for row in rows],
                          "two_stage": [row.as_dict() for row in two]}, indent=1))
        return 0
    if args.json:
        print(json.dumps([row.as_dict() for row in rows], indent=1))
        return 0
    choice, reason = recommend(args.epsilon, args.domain, args.max_bytes, args.aggregation_rate,
                               sketch)
    print(f"ε = {args.epsilon:g}, d = {args.domain:,}" + (f", n = {args.n:,}" if args.n else ""))
    width = max(9, *(len(row.parameter) for row in rows))
    header = f"  {'protocol':<8} {'param':<{width}} {'p*':>9} {'q*':>9} {'n·MSE':>10}"
    if args.n:
        header += f" {'MSE':>10} {'√MSE':>9}"
    print(header + f" {'bytes':>6} {'reports/s':>10} {'final. s':>8}  server cost")
    for row in rows:
        line = (f"{'*' if row.recommended else ' '} {row.protocol:<8} {row.parameter:<{width}} "
                f"{row.p_star:>9.4g} {row.q_star:>9.4g} {row.n_mse:>10.4g}")
        if args.n:
            line += f" {row.mse:>10.4g} {row.mse ** 0.5:>9.4g}"
        print(line + f" {row.bytes_per_report:>6} {_rate(row.reports_per_second):>10} "
                     f"{_seconds(row.finalize_seconds):>8}  {row.server_cost}")
    print(f"recommended: {choice} — {reason}")
    print(f"guideline of [Fang25] §4.4: {guideline(args.epsilon, args.domain)}")
    print(f"reports/s: counted per core, final. s: one window's support counts (cost model "
          f"measured at ε = {cost_model().epsilon:g}, benchmarks/aggregation_cost.py)")
    if args.lifetime_epsilon is not None:
        _print_two_stage_plan(args)
    return 0


def _rate(value: float | None) -> str:
    """A modelled rate as a plan shows it: 3 significant digits, '-' when unmeasured."""
    return "-" if value is None else f"{value:.3g}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2g}"


def _print_two_stage_plan(args: argparse.Namespace) -> None:
    """The two-stage comparison of `ldp plan --lifetime-epsilon`
    (ldp.config.planner.two_stage_plan)."""
    from ldp_telemetry.ldp.config.planner import two_stage_plan
    rows = two_stage_plan(args.epsilon, args.lifetime_epsilon, args.domain, args.n,
                          args.max_values)
    print(f"\ntwo-stage (memoized): ε1 = {args.epsilon:g} per report, ε∞ = "
          f"{args.lifetime_epsilon:g} per distinct value")
    print(f"  {'protocol':<8} {'construction':<31} {'param':<7} {'p*':>8} {'q*':>8} "
          f"{'n·MSE':>9} {'1-stage':>9} {'ratio':>6} {'floor':>8} {'lifetime ε':>11}")
    for row in rows:
        print(f"{'*' if row.recommended else ' '} {row.protocol:<8} {row.construction:<31} "
              f"{row.parameter:<7} {row.p_star:>8.4g} {row.q_star:>8.4g} {row.n_mse:>9.4g} "
              f"{row.one_stage_n_mse:>9.4g} {row.n_mse / row.one_stage_n_mse:>6.3f} "
              f"{row.floor_n_mse:>8.4g} {row.lifetime_epsilon:>11.4g}")
    reports = args.lifetime_epsilon / args.epsilon
    print(f"one-stage reports at ε1 have no lifetime bound: a device passes ε∞ = "
          f"{args.lifetime_epsilon:g} after {reports:.3g} reports; two-stage, any number of "
          "reports of one value stays within ε∞ (lifetime ε = distinct values x ε∞)")
    print("n·MSE: one window, one report per device; 1-stage: the same protocol at ε1; floor: "
          "the n·MSE an average over many windows of the same devices keeps (the permanent "
          "response's; 0 one-stage)")
    moving = _ratio_declared(args, rows)
    if moving:
        from ldp_telemetry.ldp.estimation.frequency_bands import TOP_K_LIFETIME_RANGE
        low, high = TOP_K_LIFETIME_RANGE
        print(f"top-k answers (ldp query --top) of {', '.join(moving)} records get no band: "
              f"their composed channel moves with ε∞, and ε∞ = "
              f"{args.lifetime_epsilon / args.epsilon:.3g} ε1 lies outside the {low:g}–{high:g} "
              "ε1 it was measured at (the other rows' channel is the same at every ε∞; "
              "docs/error-bars.md)")


def _ratio_declared(args: argparse.Namespace, rows: list) -> list[str]:
    """The two-stage plan's rows (protocol, "(g: loloha)" for LOLOHA's g) whose records' top-k
    answers get no band at the plan's ε1 and ε∞ (frequency_bands.top_k_lifetime_declared)."""
    from ldp_telemetry.ldp.estimation.frequency_bands import (ratio_free_channel,
                                                              top_k_lifetime_declared,
                                                              top_k_oracle)
    from ldp_telemetry.ldp.protocols.memoized import LOLOHA_G, make_memoized_protocol
    out = []
    for row in rows:
        protocol = make_memoized_protocol(row.protocol, args.epsilon, args.domain,
                                          args.lifetime_epsilon, row.g_rule)
        if top_k_lifetime_declared(top_k_oracle(protocol), args.epsilon, args.lifetime_epsilon,
                                   ratio_free_channel(protocol)) is not None:
            out.append(row.protocol + (" (g: loloha)" if row.g_rule == LOLOHA_G else ""))
    return out


#: `ldp run`'s exit status when the job's files are complete but its store failed during the run
#: (the summary says what was and was not stored).
STORE_INCOMPLETE = 3


def _run(args: argparse.Namespace, beam_args: list[str]) -> int:
    signals = args.stop_signals  # a live run's, from `main`
    if signals is None and args.follow is not None:  # --follow spelt otherwise (--foll DIR)
        from ldp_telemetry.pipelines.stopping import StopSignals
        signals = args.stop_signals = StopSignals()
    if args.store is not None and not args.create_store:
        _check_store_exists(args.store)
    from ldp_telemetry.pipelines.batch import run_job
    from ldp_telemetry.pipelines.job import job_from_arguments, live_config_from_arguments
    from ldp_telemetry.pipelines.store_runs import store_failed
    from ldp_telemetry.runners.portable import with_local_job_service
    job = job_from_arguments(args)
    if args.follow is not None:
        from ldp_telemetry.pipelines.live import run_live
        live = live_config_from_arguments(args)
        if signals.event.is_set():  # stopped while it started: nothing was read
            print("ldp run: interrupted before the live run began", file=sys.stderr)
            return 130
        with with_local_job_service(beam_args) as beam_args:
            counters = run_live(job, live, beam_args, stop=signals.event)
        _warn_under_resolved(job.output)
        return STORE_INCOMPLETE if store_failed(counters) else 0
    with with_local_job_service(beam_args) as beam_args:  # PortableRunner without an endpoint
        counters = run_job(job, beam_args)
    from ldp_telemetry.output.layout import DEAD_LETTERS, ESTIMATES, shard_pattern
    _warn_under_resolved(job.output)
    print(f"estimates: {job.output}/{shard_pattern(ESTIMATES)}; "
          f"dead letters: {job.output}/{shard_pattern(DEAD_LETTERS)}")
    return STORE_INCOMPLETE if store_failed(counters) else 0


def _check_store_exists(url: str) -> None:
    """StoreError (field ``store``) when an SQL store URL names no existing store: a misspelt
    URL would otherwise create an empty store beside the real one. --create-store creates it."""
    from urllib.parse import urlsplit

    from ldp_telemetry.ldp.base.errors import StoreError
    from ldp_telemetry.store.sql import CONNECTORS, open_store
    if urlsplit(url).scheme not in CONNECTORS:  # BigQuery, or an unknown scheme: checked later
        return
    try:
        open_store(url, create=False).close()
    except StoreError as error:
        if not str(error).startswith("no estimate store"):
            raise  # a malformed URL, a damaged file: creating would not help
        raise StoreError(f"{error}; --create-store creates it", error.field) from None


def _warn_under_resolved(output: str) -> None:
    """After the summary line: one warning per metric whose windows have too few reports for
    their domain (`output.resolution`). Remote outputs are not read back."""
    import os

    from ldp_telemetry.output.reader import read_estimates
    from ldp_telemetry.output.resolution import under_resolved_summary
    if "://" in output or not os.path.isdir(output):
        return
    try:
        records = read_estimates(output)
    except UserError:  # no window was written
        return
    latest = {}
    for record in records:  # sorted by pane: the last pane of each window (and version) wins
        latest[record.key] = record
    for line in under_resolved_summary(list(latest.values())):
        print(line)


def _show(args: argparse.Namespace, _extra: list[str]) -> int:
    from ldp_telemetry.output.integrity import with_jump_tests
    from ldp_telemetry.output.reader import read_estimates, select_windows
    from ldp_telemetry.output.names import printable
    from ldp_telemetry.output.bands import declares_no_value_band
    from ldp_telemetry.output.text import SELECTED_NOTE, band_note, format_top, no_band_notes
    records = with_jump_tests(read_estimates(args.output))
    metrics = ([args.metric] if args.metric is not None
               else sorted({record.metric for record in records}))
    chosen = [window for metric in metrics
              for window in select_windows(records, metric, args.window, args.windows, args.last,
                                           args.config_version)]
    from ldp_telemetry.ldp.config.budget import budget_text, repeated_reports_note, window_cost
    shown = [format_top(record, args.top) for record in chosen]
    for note in band_note(shown):  # only where a value is printed ± its band's half width
        print(f"({note})")
    if any(not record.numeric and not declares_no_value_band(record) for record in chosen):
        print(f"({SELECTED_NOTE})")
    for note in no_band_notes(chosen):  # once per reason: a string metric's values have none
        print(f"({note})")
    promised: dict[str, str] = {}  # metric -> what its newest shown version promises a device
    for record, text in zip(chosen, shown, strict=True):
        print(text)
        promise = budget_text(record.privacy)
        if promise is not None:
            length = record.end_ms - record.start_ms
            note = repeated_reports_note(record.privacy, length)
            promised[record.metric] = (
                f"{promise}; per window of {length / 1000:g} s: "
                f"{window_cost(record.privacy, length)}"
                + ("" if note is None else f"\n  warning: {note}"))
    for metric, promise in promised.items():
        print(f"privacy of {printable(metric)}: {promise}")
    return 0


def _query(args: argparse.Namespace, _extra: list[str]) -> int:
    from ldp_telemetry.output.layout import COMBINED
    from ldp_telemetry.output.reader import latest_by_window, read_estimates, select_window
    from ldp_telemetry.pipelines.query_text import answer_query
    if args.config_version == COMBINED:
        raise ConfigError("queries are answered from one configuration version's estimate (the "
                          "exact variance of a sum needs that version's protocol): give "
                          "--config-version v1, v2, ...", "config_version")
    records = read_estimates(args.output)
    record = select_window(records, args.metric, args.window, args.config_version)
    if record.combined_versions:  # the window's newest version stands for it here
        bounds, newest = record.key[1:3], f"v{max(record.combined_versions)}"
        record = next(r for r in latest_by_window(records, args.metric, newest)
                      if r.key[1:3] == bounds)
    print(answer_query(record, args))
    return 0


def _dashboard(args: argparse.Namespace, _extra: list[str]) -> int:
    from ldp_telemetry.dashboard.cli import run_dashboard
    return run_dashboard(args)


def _registry(args: argparse.Namespace, _extra: list[str]) -> int:
    from ldp_telemetry.pipelines.registry_tools import run_registry_command
    return run_registry_command(args)


#: The handler of each command: (arguments, the arguments left to Beam) -> exit status.
COMMANDS = {"simulate": _simulate, "plan": _plan, "run": _run, "show": _show, "query": _query,
            "dashboard": _dashboard, "registry": _registry, "convert": _convert}


if __name__ == "__main__":
    sys.exit(main())
