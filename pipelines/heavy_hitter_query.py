"""`ldp query` on a string metric's window: answers read from the record's heavy hitters.

A string metric's window holds no estimate of every string, only of the heavy hitters it found
(docs/open-domains.md): `--top K` lists the first K of them, `--labels a,b` the named ones that
are among them. A string that is not a heavy hitter has no estimate in the record (its reports
were never tested against it): a ConfigError says so. Sets, ranges, quantiles and
re-estimation (`--method`) do not apply. A heavy hitter has no 95% band (`band_method` none,
`lower95`, `upper95` and `half95` null; the search chose it for its estimate and no band of the
strings found was measured), as every reader of the record reads it
(output.bands.value_band_method and value_band_reason); its standard error is given.
"""
from __future__ import annotations

import argparse
import json

from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.ldp.estimation.uncertainty import BAND_NONE
from ldp_telemetry.output.bands import value_band_method, value_band_reason
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.output.names import printable
from ldp_telemetry.output.text import dictionary_text, found_by
from ldp_telemetry.pipelines.query_labels import asked_labels


def answer_heavy_hitters(record: EstimateRecord, args: argparse.Namespace) -> str:
    """The text (or JSON, with --json) of --top or --labels on a string metric's record."""
    for flag in ("range", "quantile", "method"):
        if getattr(args, flag, None) is not None:
            raise ConfigError(f"--{flag} does not apply to string metric {args.metric!r}: its "
                              "window holds heavy hitters only (ask --top K or --labels)",
                              field=flag)
    assert record.std_error is not None, "a string record carries its standard errors"
    found = dict(zip(record.labels, zip(record.estimate.tolist(), record.std_error.tolist(),
                                        strict=True), strict=True))
    if args.top is not None:
        chosen = list(record.labels[: args.top])
    else:
        chosen = asked_labels(args, found)
        missing = [label for label in chosen if label not in found]
        if missing:
            raise ConfigError(f"{missing[0]!r} is not among the {len(found)} heavy hitters of "
                              f"string metric {args.metric!r} in this window, so the window "
                              "holds no estimate of it",
                              field="labels" if args.label is None else "label")
    method, reason = value_band_method(record), value_band_reason(record)
    assert method == BAND_NONE, "a string record's values have no band (output.bands)"
    answers = [{"query": "heavy-hitter", "labels": [label], "value": found[label][0],
                "std_error": found[label][1], "band_method": method, "lower95": None,
                "upper95": None, "half95": None, "band_reason": reason}
               for label in chosen]
    by = found_by(record)
    if by is not None:  # decoded against a candidate dictionary: how each was found
        how = dict(zip(record.labels, by, strict=True))
        for answer in answers:
            answer["found_by"] = how[answer["labels"][0]]
    if args.json:
        return json.dumps({"metric": record.metric, "window_start": record.window_start,
                           "window_end": record.window_end, "n": record.n,
                           "protocol": record.protocol, "epsilon": record.epsilon,
                           "heavy_hitters": dict(record.heavy_hitters or {}),
                           "answers": answers},
                          ensure_ascii=False)
    lines = [f"{printable(record.metric)}  [{record.window_start} .. {record.window_end})  "
             f"n={record.n:,}  {printable(record.protocol)} ε={record.epsilon:g}  heavy hitters"
             + dictionary_text(record)]
    for answer in answers:
        lines.append(f"  {printable(answer['labels'][0]):<40} {answer['value']:9.5f} (no band)"
                     f"  (s.e. {answer['std_error']:.5f})"
                     + (f"  found by {answer['found_by']}" if "found_by" in answer else ""))
    lines += [f"  (95% band: {method}; s.e. of the prefix-extension estimate)",
              f"  (no band: {reason})"]
    return "\n".join(lines)
