"""`ldp registry init | diff | show`: writing, comparing and reading metric registries.

`init` makes a labelled metric from a CSV column (its distinct values, sorted, as labels; the
planner's protocol for ε and d) and adds it to a registry file or writes a new one; `diff` says,
per metric, whether its fingerprint changes, what changed, and what becomes of the reports in
flight (made under OLD); `show` lists each metric's versions and fingerprints. Beam-free.
"""
from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import sys
import zlib
from collections import Counter

from ldp_telemetry.ldp.base.errors import ConfigError, InputError
from ldp_telemetry.ldp.config.budget import privacy_budget
from ldp_telemetry.ldp.config.fingerprint import canonical_text
from ldp_telemetry.ldp.config.planner import recommend
from ldp_telemetry.ldp.config.registry import MetricConfig, Registry, load_registry, parse_registry
from ldp_telemetry.ldp.protocols.base import NUMERIC, STRINGS, epsilon_problem
from ldp_telemetry.output.atomic import write_atomically

#: Default largest number of distinct values `registry init` turns into labels.
DEFAULT_MAX_LABELS = 1_000
#: Exit statuses of `registry diff`: every configuration means what it meant; fingerprints
#: change but every report in flight is still counted (under its version); some reports in
#: flight would be dead letters (config_mismatch, or unknown_metric for a removed metric).
SAME, COUNTED, DEAD_LETTERED = 0, 1, 3


def add_registry_arguments(parser: argparse.ArgumentParser) -> None:
    tools = parser.add_subparsers(dest="registry_command", required=True, metavar="ACTION")
    init = tools.add_parser(
        "init", help="add a labelled metric made from a CSV column to a registry",
        description="Read one column of a CSV (optionally .gz): its distinct values, sorted, "
                    "become the metric's labels (their counts are shown), with the planner's "
                    "protocol for --epsilon and that many labels. The metric is added to "
                    "--output (created when absent); its fingerprint is printed.")
    init.add_argument("--from-csv", required=True, metavar="FILE", help="CSV with a header row")
    init.add_argument("--column", required=True, help="the column of the metric's values")
    init.add_argument("--name", required=True, help="the metric's name")
    init.add_argument("--epsilon", required=True, type=float, help="privacy level ε")
    init.add_argument("--max-labels", type=int, default=DEFAULT_MAX_LABELS,
                      help=f"refuse a column with more distinct values (default "
                           f"{DEFAULT_MAX_LABELS:,})")
    init.add_argument("--output", default="registry.json",
                      help="registry file to add to or create (default registry.json)")
    diff = tools.add_parser(
        "diff", help="what changes between two registries, and for reports in flight",
        description="Per metric: whether its fingerprint changes, what changed, and what "
                    "becomes of reports made under OLD. Exit status 0: no configuration "
                    f"changes; {COUNTED}: fingerprints change, every report in flight is "
                    f"counted under its version; {DEAD_LETTERED}: some reports in flight would "
                    "be dead letters (config_mismatch, or unknown_metric).")
    diff.add_argument("old", metavar="OLD", help="the registry the reports were made under")
    diff.add_argument("new", metavar="NEW", help="the registry the job will read")
    show = tools.add_parser(
        "show", help="each metric's versions and fingerprints",
        description="Each metric's configurations, oldest first, with their fingerprints: "
                    "what a client must be configured with.")
    show.add_argument("registry", metavar="REGISTRY", help="a registry file")
    show.add_argument("--canonical", action="store_true",
                      help="also print each configuration's canonical text")
    show.add_argument("--json", action="store_true", help="print a JSON list instead")


def run_registry_command(args: argparse.Namespace, out=None) -> int:
    """Run `ldp registry ACTION`, printing to `out` (default: standard output)."""
    action = {"init": _init, "diff": _diff, "show": _show}[args.registry_command]
    return action(args, out or sys.stdout)


# -- init -------------------------------------------------------------------------------------

def column_counts(path: str, column: str, max_labels: int) -> Counter:
    """The distinct values of `column` and their counts; InputError past `max_labels` values."""
    opener = gzip.open if path.endswith(".gz") else open
    counts: Counter = Counter()
    try:
        with opener(path, "rt", encoding="utf-8", newline="") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header is None:
                raise InputError(f"{path} is empty", "from_csv")
            if column not in header:
                raise InputError(f"{path} has no column {column!r} (columns: {header})",
                                 "column")
            at = header.index(column)
            for row in reader:
                if len(row) <= at:
                    raise InputError(f"{path} row {reader.line_num}: {len(row)} fields, the "
                                     f"header has {len(header)}", "from_csv")
                counts[row[at]] += 1
                if len(counts) > max_labels:
                    raise InputError(
                        f"column {column!r} of {path} has more than {max_labels:,} distinct "
                        f"values (--max-labels): a metric's labels are fixed in advance; raise "
                        "the limit, or make a numeric metric of numbers", "max_labels")
    except (csv.Error, UnicodeDecodeError, EOFError, zlib.error, OSError) as error:
        raise InputError(f"{path} cannot be read: {error}", "from_csv") from None
    return counts


def _init(args: argparse.Namespace, out) -> int:
    problem = epsilon_problem(args.epsilon)
    if problem:
        raise ConfigError(f"--epsilon {problem}", "epsilon")
    if args.max_labels < 2:
        raise ConfigError(f"--max-labels must be at least 2, got {args.max_labels}",
                          "max_labels")
    counts = column_counts(args.from_csv, args.column, args.max_labels)
    if len(counts) < 2:
        raise InputError(f"column {args.column!r} of {args.from_csv} has {len(counts)} distinct "
                         "value(s): a metric needs at least 2", "column")
    labels = sorted(counts)
    protocol, reason = recommend(args.epsilon, len(labels))
    entry = {"name": args.name, "protocol": protocol, "epsilon": args.epsilon,
             "domain": {"labels": labels}}
    document = _registry_document(args.output)
    if any(m.get("name") == args.name for m in document["metrics"] if isinstance(m, dict)):
        raise InputError(f"{args.output} already has a metric {args.name!r}: choose another "
                         "--name, or edit its entry (a new version keeps the old one in "
                         "'history', docs/registry.md)", "name")
    document["metrics"].append(entry)
    config = parse_registry(document)[args.name]  # the whole registry checked before writing
    write_atomically(args.output, json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    width = max(len(label) for label in labels)
    print(f"{len(labels)} labels from column {args.column!r} "
          f"({sum(counts.values()):,} rows):", file=out)
    for label in labels:
        print(f"  {label:<{width}}  {counts[label]:>10,}", file=out)
    print(f"protocol {protocol} for ε={args.epsilon:g}, d={len(labels)}: {reason}", file=out)
    print(f"metric {args.name!r} v{config.version} written to {args.output}; fingerprint "
          f"{config.fingerprint.hex()}", file=out)
    return 0


def _registry_document(path: str) -> dict:
    """The registry at `path` as a JSON document (checked by the loader), or an empty one."""
    if not os.path.exists(path):
        return {"metrics": []}
    load_registry(path)
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


# -- diff -------------------------------------------------------------------------------------

def describe_changes(old: MetricConfig, new: MetricConfig) -> list[str]:
    """What differs between two configurations of a metric, as phrases."""
    changes = []
    if old.protocol_name != new.protocol_name:
        changes.append(f"protocol {old.protocol_name} -> {new.protocol_name}")
    if old.epsilon != new.epsilon:
        changes.append(f"ε {old.epsilon:g} -> {new.epsilon:g}")
    changes += _domain_changes(old, new)
    pools = [getattr(config.protocol, "sketch_parameters", None) for config in (old, new)]
    if old.protocol_name == new.protocol_name and all(pools) and pools[0]() != pools[1]():
        changes.append(f"sketch {old.protocol.parameter} -> {new.protocol.parameter}")
    before, after = _memo_text(old), _memo_text(new)
    if before != after:  # a new ε∞ re-keys every device's permanent responses
        changes.append(f"memoization {before} -> {after}")
    if not changes and old.fingerprint != new.fingerprint:
        changes.append("derived parameters (the canonical texts differ)")
    return changes


def _memo_text(config: MetricConfig) -> str:
    memo = getattr(config, "memoize", None)
    return "none" if memo is None else f"ε∞={memo.lifetime_epsilon:g}"


def _domain_changes(old: MetricConfig, new: MetricConfig) -> list[str]:
    if STRINGS in (old.kind, new.kind):
        before, after = _domain_text(old), _domain_text(new)
        return [] if before == after else [f"domain {before} -> {after}"]
    if old.kind == NUMERIC or new.kind == NUMERIC:
        before, after = _numeric_domain(old), _numeric_domain(new)
        return [] if before == after else [f"domain {before} -> {after}"]
    if old.labels is None or new.labels is None:
        if (old.labels, old.d) == (new.labels, new.d):
            return []
        return [f"domain {_domain_text(old)} -> {_domain_text(new)}"]
    changes = []
    added = [label for label in new.labels if label not in set(old.labels)]
    removed = [label for label in old.labels if label not in set(new.labels)]
    if added:
        changes.append(f"labels added: {_few(added)}")
    if removed:
        changes.append(f"labels removed: {_few(removed)}")
    kept_old = [label for label in old.labels if label in set(new.labels)]
    kept_new = [label for label in new.labels if label in set(old.labels)]
    if kept_old != kept_new:
        changes.append("labels reordered")
    if old.d != new.d:
        changes.append(f"d {old.d} -> {new.d}")
    return changes


def _numeric_domain(config: MetricConfig) -> str:
    if config.kind != NUMERIC:
        return _domain_text(config)
    return f"[{config.low:g}, {config.high:g}] in {config.d} buckets"


def _domain_text(config: MetricConfig) -> str:
    if config.kind == NUMERIC:
        return _numeric_domain(config)
    if config.kind == STRINGS:
        share = f", final share {config.final_share:g}" if config.final_share else ""
        return f"strings of at most {config.d} bytes, pool {config.pool}{share}"
    return f"{config.d} labels" if config.labels is not None else f"size {config.d}"


def _few(labels: list[str], shown: int = 5) -> str:
    text = ", ".join(map(repr, labels[:shown]))
    return text + (f" and {len(labels) - shown} more" if len(labels) > shown else "")


def diff_registries(old: Registry, new: Registry) -> tuple[list[str], int]:
    """(lines of the report, exit status: SAME, COUNTED or DEAD_LETTERED)."""
    lines, status = [], SAME
    names = [m.name for m in old.metrics] + [m.name for m in new.metrics
                                             if m.name not in old]
    for name in names:
        if name not in new:
            lines.append(f"{name}: removed; its reports in flight become unknown_metric dead "
                         "letters")
            status = DEAD_LETTERED
            continue
        if name not in old:
            lines.append(f"{name}: added (v{new[name].version}, fingerprint "
                         f"{new[name].fingerprint.hex()})")
            continue
        before, after = old[name], new[name]
        if before.fingerprint == after.fingerprint:
            note = "" if (before.estimator, before.postprocess) == \
                (after.estimator, after.postprocess) else \
                " (estimator or post-processing changed: the server's choice, reports unchanged)"
            lines.append(f"{name}: fingerprint unchanged{note}")
            status = max(status, _lost_versions(old, new, name, lines))
            continue
        status = max(status, COUNTED)
        lines.append(f"{name}: fingerprint changes {before.fingerprint.hex()} -> "
                     f"{after.fingerprint.hex()} (v{before.version} -> v{after.version}): "
                     + "; ".join(describe_changes(before, after)))
        status = max(status, _lost_versions(old, new, name, lines))
        lines.append("  reports without a fingerprint are read under NEW's current "
                     "configuration")
    return lines, status


def _lost_versions(old: Registry, new: Registry, name: str, lines: list[str]) -> int:
    """Lines on each of OLD's configurations of `name`: counted under its version in NEW, or
    dead-lettered; returns DEAD_LETTERED when any is, else SAME."""
    status = SAME
    for config in old.versions(name):
        known = new.by_fingerprint.get(config.fingerprint)
        if known is not None and known.name == name:
            if known is not new[name] or config is not old[name]:
                lines.append(f"  reports made under v{config.version} "
                             f"({config.fingerprint.hex()}) are counted under NEW's "
                             f"v{known.version}")
        else:
            lines.append(f"  reports made under v{config.version} ({config.fingerprint.hex()}) "
                         "become config_mismatch dead letters: keep that configuration in "
                         "NEW's 'history' to count them")
            status = DEAD_LETTERED
    return status


def _diff(args: argparse.Namespace, out) -> int:
    old, new = load_registry(args.old), load_registry(args.new)
    lines, status = diff_registries(old, new)
    for line in lines:
        print(line, file=out)
    verdict = {SAME: "no configuration changes",
               COUNTED: "fingerprints change; every report in flight is counted under its "
                        "version",
               DEAD_LETTERED: "some reports in flight would be dead letters"}[status]
    print(f"{verdict} (exit status {status})", file=out)
    return status


# -- show -------------------------------------------------------------------------------------

def _shown_domain(config: MetricConfig) -> str:
    """The domain as `show` prints it: `_domain_text` (what the fingerprint holds), and for a
    string metric decoded against a candidate dictionary its size, which is server-side (not in
    the fingerprint, so `diff` does not name it)."""
    text = _domain_text(config)
    if config.kind == STRINGS and config.dictionary:
        text += f", dictionary of {len(config.dictionary):,} strings (server-side)"
    return text


def _show(args: argparse.Namespace, out) -> int:
    registry = load_registry(args.registry)
    rows = [{"metric": config.name, "version": config.version,
             "current": config is registry[config.name], "protocol": config.protocol_name,
             "epsilon": config.epsilon, "domain": _shown_domain(config),
             **({"final_share": config.final_share, "dictionary": len(config.dictionary)}
                if config.kind == STRINGS else {}),
             "fingerprint": config.fingerprint.hex(),
             "privacy": privacy_budget(config).as_record(),
             **({"canonical_text": canonical_text(config)} if args.canonical else {})}
            for metric in registry.metrics for config in registry.versions(metric.name)]
    if args.json:
        print(json.dumps(rows, indent=1, ensure_ascii=False), file=out)
        return 0
    for metric in registry.metrics:
        print(metric.name, file=out)
        for row in (r for r in rows if r["metric"] == metric.name):
            mark = "  (current)" if row["current"] else ""
            print(f"  v{row['version']:<4} {row['fingerprint']}  {row['protocol']:<8} "
                  f"ε={row['epsilon']:g}  {row['domain']}{mark}", file=out)
            if args.canonical:
                print(f"        {row['canonical_text']}", file=out)
        promise = privacy_budget(metric)
        print(f"  privacy (current version): {promise.text()} ({promise.rule})", file=out)
    return 0
