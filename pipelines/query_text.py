"""The text of `ldp query`: a query on one window estimate, answered and formatted.

Frequency metrics take `--labels`, `--top` and `--range` (`ldp.estimation.queries.WindowEstimate`),
optionally post-processed again (`--method`, `--param`); numeric metrics take `--range` in their
units and `--quantile` (`ldp.estimation.numeric_queries.NumericWindow`). `--json` gives one JSON
object. This is the command line's own formatting: its messages name flags. Every ± is the half
width of the 95% band, as in `ldp show` and the dashboard (`output.text.BAND_NOTE`, printed where
an answer has one: `output.text.band_note`); the standard error is printed beside it, and in
JSON each answer carries both (`std_error`, `half95`). A top-k answer, a quantile of a
CFO-binning or hierarchical-histogram record, and a Square Wave quantile whose band over-covered
in its setting (`output.bands.conservative_band`), have no 95% band and give a conservative one
beside it, printed `[lower, upper] conservative` and named on the
last lines (`output.text.CONSERVATIVE_NOTE`); in JSON `conservative_lower`, `conservative_upper`
and `conservative_method`, null on every other answer (`half95` null where there is no 95% band).
"""
from __future__ import annotations

import argparse
import json

from ldp_telemetry.ldp.base.errors import ConfigError, InputError
from ldp_telemetry.ldp.estimation.histograms import QUANTILE_LEVELS
from ldp_telemetry.ldp.estimation.queries import STD_ERROR_KINDS, WindowEstimate
from ldp_telemetry.output.bands import conservative_band, conservative_method, half_width95
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.output.names import printable, terminal_safe, typed_name
from ldp_telemetry.output.text import (CONSERVATIVE_NOTE, PLUS_MINUS, band_note,
                                       conservative_text)
from ldp_telemetry.pipelines.query_labels import asked_labels


def answer_query(record: EstimateRecord, args: argparse.Namespace) -> str:
    """The text `ldp query` prints for `record` (a window estimate) and its query arguments
    (`--labels`, `--top`, `--range` or `--quantile`; `--method`, `--param`, `--json`).
    ConfigError for arguments that do not fit the record's metric."""
    if record.numeric:
        return _numeric_answer(record, args)
    if record.heavy_hitters is not None:
        from ldp_telemetry.pipelines.heavy_hitter_query import answer_heavy_hitters
        return answer_heavy_hitters(record, args)
    if args.quantile is not None:
        raise ConfigError(f"--quantile needs a numeric metric; {args.metric!r} is not one",
                          field="quantile")
    window = _read_window(WindowEstimate, record, args)
    if args.method is not None:
        window = window.with_method(args.method, **_method_params(args.param))
    elif args.param:
        raise ConfigError("--param needs --method", field="param")
    if args.top is not None:
        answers = window.top_k(args.top)
    elif args.range is not None:
        answers = [window.range_sum(*(typed_name(bound, window.labels) for bound in args.range))]
    else:
        labels = asked_labels(args, window.labels)
        answers = [window.point(labels[0]) if len(labels) == 1 else window.set_sum(labels)]
    if args.json:
        return json.dumps({"metric": window.metric, "window_start": window.window_start,
                           "window_end": window.window_end, "n": window.n,
                           "protocol": window.protocol.name, "epsilon": window.protocol.epsilon,
                           "estimator": {"method": window.estimator.method,
                                         "params": dict(window.estimator.params)},
                           "postprocess": {"method": window.spec.method,
                                           "params": dict(window.spec.params)},
                           "answers": [_with_frequency_band(a.as_dict()) for a in answers]})
    params = ", ".join(f"{k}={v:g}" if v is not None else f"{k}=fitted"
                       for k, v in window.spec.params)
    lines = [f"{printable(window.metric)}  [{window.window_start} .. {window.window_end})  "
             f"n={window.n:,}  "
             f"{window.protocol.name} ε={window.protocol.epsilon:g}  "
             f"{_estimator_prefix(window)}{window.spec.method}{f' ({params})' if params else ''}"]
    shown = [f"  {_describe(answer):<40} {answer.value:9.5f}{_band_text(answer)}"
             f"  (s.e. {answer.std_error:.5f})" for answer in answers]
    methods = sorted({answer.band_method for answer in answers})
    kind = answers[0].std_error_kind
    conservative = sorted({answer.conservative_method for answer in answers
                           if answer.conservative_method is not None})
    notes = [f"95% band: {', '.join(methods)}",
             *([f"conservative band: {', '.join(conservative)}"] if conservative else []),
             *band_note(shown), f"s.e. {kind}: {STD_ERROR_KINDS[kind]}"]
    lines += [*shown, f"  ({'; '.join(notes)})"]
    if conservative:
        lines.append(f"  ({CONSERVATIVE_NOTE})")
    lines += sorted({f"  ({'' if answer.conservative_method else 'no band: '}"
                     f"{answer.band_reason})" for answer in answers
                     if answer.band_reason is not None})
    return "\n".join(lines)


def _band_text(answer) -> str:
    """" ± half width" of a frequency answer's 95% band when it is centred on the answer,
    " [lower, upper]" when it is not (the band of the unbiased answer), " [lower, upper]
    conservative" for an answer that has no 95% band and gives a conservative one (a top-k
    answer's: `output.text.conservative_text`), or " (no band)"."""
    if answer.lower95 is None or answer.upper95 is None:
        if answer.conservative_lower is not None and answer.conservative_upper is not None:
            return conservative_text(answer.conservative_lower, answer.conservative_upper)
        return " (no band)"
    half = (answer.upper95 - answer.lower95) / 2
    if abs(answer.lower95 + half - answer.value) <= 1e-12 * max(1.0, abs(answer.value)):
        return f"{PLUS_MINUS}{half:.5f}"
    return f" [{answer.lower95:.5f}, {answer.upper95:.5f}]"


def _with_frequency_band(answer: dict) -> dict:
    """A frequency answer's JSON with `half95`, the half width of its 95% band (null without
    a band)."""
    low, high = answer.get("lower95"), answer.get("upper95")
    return {**answer, "half95": None if low is None or high is None else (high - low) / 2}


def _numeric_answer(record: EstimateRecord, args: argparse.Namespace) -> str:
    from ldp_telemetry.ldp.estimation.numeric_queries import NumericWindow
    if (args.labels is not None or args.label is not None or args.top is not None
            or args.method is not None):
        raise ConfigError(f"metric {args.metric!r} is numeric: ask --range LO HI (its units) or "
                          "--quantile LEVELS", field="metric")
    window = _read_window(NumericWindow, record, args)
    if args.range is not None:
        try:
            lo, hi = (float(bound) for bound in args.range)
        except ValueError:
            raise ConfigError(f"--range of a numeric metric takes two numbers, got "
                              f"{args.range}", field="range") from None
        answers = [window.range_probability(lo, hi)]
    else:
        try:
            levels = [float(level) for level in args.quantile.split(",")]
        except ValueError:
            raise ConfigError(f"--quantile takes numbers in [0, 1], got {args.quantile!r}",
                              field="quantile") from None
        answers = [window.quantile(level) for level in levels]
    kept = [_conservative(record, answer) for answer in answers]
    if args.json:
        return json.dumps({"metric": window.metric, "window_start": window.window_start,
                           "window_end": window.window_end, "n": window.n,
                           "protocol": record.protocol, "epsilon": record.epsilon,
                           "estimator": record.estimator,
                           "answers": [_with_conservative(_with_band(a.as_dict()), band)
                                       for a, band in zip(answers, kept, strict=True)]})
    lines = [f"{printable(window.metric)}  [{window.window_start} .. {window.window_end})  "
             f"n={window.n:,}  "
             f"{printable(record.protocol)} ε={record.epsilon:g}  "
             f"{printable(str((record.estimator or {}).get('method', 'unknown estimator')))}"]
    shown: list[str] = []
    for answer, band in zip(answers, kept, strict=True):
        what = (f"P[{answer.argument[0]:g} <= X <= {answer.argument[1]:g}]"
                if answer.query == "range" else f"quantile {answer.argument[0]:g}")
        error = ("" if answer.std_error is None
                 else f"{PLUS_MINUS}{half_width95(answer.std_error):.5g}"
                 f"  (s.e. {answer.std_error:.5g})")
        if answer.band_method is not None:  # the record's own band (maybe none), and a
            # quantile's method is the record's, read from a file: escaped as `ldp show` does;
            # the standard error beside it (a range's score band is not ± 1.96 of it)
            error = ((f"  95% band [{answer.band[0]:.5g}, {answer.band[1]:.5g}] "
                      f"({printable(str(answer.band_method))})" if answer.band is not None
                      else "  (no band)" if band is None
                      else conservative_text(band[0], band[1], ".5g"))
                     + ("" if answer.std_error is None
                        else f"  (s.e. {answer.std_error:.5g})"))
        shown.append(f"  {what:<40} {answer.value:.6g}{error}")
    kinds = sorted({answer.std_error_kind or "bootstrap" for answer in answers
                    if answer.std_error is not None})
    notes = band_note(shown) + ([f"s.e. {', '.join(kinds)}"] if kinds else [])
    lines += shown + ([f"  ({'; '.join(notes)})"] if notes else [])
    if any(answer.std_error_kind == "exact" for answer in answers):
        lines.append(f"  (exact: {NUMERIC_EXACT_NOTE})")
    if any(band is not None for band in kept):
        lines.append(f"  ({CONSERVATIVE_NOTE})")
    missing = {float(answer.argument[0]) in KEPT_LEVELS for answer in answers
               if answer.std_error is None and answer.query == "quantile"}
    if False in missing:
        lines.append("  (no standard error: the record keeps bootstrap errors for the "
                     f"quantiles at levels {', '.join(QUANTILE_LEVELS)} only)")
    if True in missing:
        lines.append(f"  ({NO_QUANTILE_ERROR_NOTE})")
    lines += [f"  ({terminal_safe(answer.band_reason)})" for answer in answers
              if answer.band_reason is not None and answer.query == "range"]
    return "\n".join(lines + _quantile_reasons(answers))


def _quantile_reasons(answers) -> list[str]:
    """One line per distinct band reason of the quantile answers, naming their levels (a
    reason read from the record, so escaped for the terminal)."""
    levels: dict[str, list[str]] = {}
    for answer in answers:
        if answer.query == "quantile" and answer.band_reason is not None:
            levels.setdefault(answer.band_reason, []).append(f"{answer.argument[0]:g}")
    return [f"  (quantile {', '.join(shown)}: {terminal_safe(reason)})"
            for reason, shown in levels.items()]


#: What a range's exact standard error and band are, as the text prints it.
#: The quantile levels a numeric record keeps bootstrap errors for.
KEPT_LEVELS = frozenset(float(level) for level in QUANTILE_LEVELS)
#: After a quantile at a kept level whose record has no finite bootstrap error there.
NO_QUANTILE_ERROR_NOTE = ("no standard error: the record's bootstrap had fewer than 2 replicates "
                          "(its bootstrap_replicates), so it keeps none for its quantiles")
NUMERIC_EXACT_NOTE = ("the exact standard error of the unbiased bin estimate's answer, which the "
                      "band is made around, in its score form (the value printed is the "
                      "record's estimate's)")


def _conservative(record: EstimateRecord, answer) -> tuple[float, float, str | None] | None:
    """(lower, upper, how it was made) of the conservative band of a quantile answer at one of
    the record's levels (`output.bands.conservative_band` and `conservative_method`: not a 95%
    band), None for other answers."""
    key = next((level for level in QUANTILE_LEVELS if float(level) == answer.argument[0]), None)
    if answer.query != "quantile" or key is None:
        return None
    lower, upper = conservative_band(record, key)
    return (None if lower is None or upper is None
            else (lower, upper, conservative_method(record, key)))


def _with_conservative(answer: dict, band: tuple[float, float, str | None] | None) -> dict:
    """An answer's JSON with its conservative band (`_conservative`): `conservative_lower`,
    `conservative_upper` and `conservative_method` (how it was made, as
    `output.bands.conservative_method` reads it), null without one."""
    return {**answer, "conservative_lower": None if band is None else band[0],
            "conservative_upper": None if band is None else band[1],
            "conservative_method": None if band is None else band[2]}


def _with_band(answer: dict) -> dict:
    """A numeric answer's JSON with `half95`, the half width of its 95% band, as the text
    prints it: the record's band (`band95`; null where the record names a band method and
    gives this answer none), Z95 · std_error for a record written before `band_method` (null
    without a standard error)."""
    band = answer.get("band95")
    if answer.get("band_method") is not None:
        return {**answer, "half95": None if band is None else (band[1] - band[0]) / 2}
    return {**answer, "half95": half_width95(answer.get("std_error"))}


def _estimator_prefix(window) -> str:
    """'iiw (iterations=30) + ' when the window has an estimator, else ''."""
    if window.estimator.method == "unbiased":
        return ""
    params = ", ".join(f"{k}={v}" for k, v in window.estimator.params)
    return f"{window.estimator.method}{f' ({params})' if params else ''} + "


def _method_params(pairs: list[str]) -> dict:
    params = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise ConfigError(f"--param must be NAME=VALUE, got {pair!r}", field="param")
        if value.strip().lower() in ("null", "none"):
            params[name.strip()] = None
            continue
        try:
            params[name.strip()] = float(value)
        except ValueError:
            raise ConfigError(f"--param {name.strip()}: the value must be a number (or null), "
                              f"got {value!r}", field="param") from None
    return params


def _describe(answer) -> str:
    """What an answer is about, as the text shows names (`printable`)."""
    labels = [printable(label) for label in answer.labels]
    if answer.query in ("point", "top-k"):
        return labels[0]
    if answer.query == "range":
        return f"range {labels[0]}..{labels[-1]} ({len(labels)} values)"
    shown = ", ".join(labels[:5]) + (", ..." if len(labels) > 5 else "")
    return f"set {{{shown}}} ({len(labels)} values)"


def _read_window(kind, record: EstimateRecord, args: argparse.Namespace):
    """`kind.from_record(record)`; InputError (field `output`) naming the window when the record
    holds what no job of ours writes (the reader checks its shape, not every field's meaning)."""
    try:
        return kind.from_record(record)
    except (KeyError, TypeError, ValueError) as error:
        raise InputError(f"the estimate of metric {args.metric!r} at {record.window_start} in "
                         f"{args.output} cannot be read: {type(error).__name__}: {error}",
                         field="output") from None
