"""The labels an `ldp query` names (`--labels` or `--label`), read the same way by the frequency
answers (pipelines.query_text) and the heavy hitters' (pipelines.heavy_hitter_query)."""
from __future__ import annotations

import argparse

from ldp_telemetry.output.names import typed_name


def asked_labels(args: argparse.Namespace, names) -> list[str]:
    """The labels a query names: `--labels` split on commas, each stripped of spaces, or every
    `--label` whole (a label holding a comma or an outer space); each as the text output shows
    it or as it is (`typed_name`)."""
    if args.label is not None:
        return [typed_name(label, names) for label in args.label]
    return [typed_name(label.strip(), names) for label in args.labels.split(",")]
