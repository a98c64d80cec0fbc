"""Read a job's window estimates back and present them."""
from __future__ import annotations

import glob
import json
import os

import numpy as np


def load_estimates(output_dir: str, metric: str | None = None) -> list[dict]:
    """Every window-estimate record under `output_dir`, sorted by metric and window start."""
    paths = sorted(glob.glob(os.path.join(output_dir, "estimates-*.jsonl")))
    if not paths:
        raise ValueError(f"no estimates-*.jsonl files in {output_dir}")
    records = []
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            records.extend(json.loads(line) for line in handle if line.strip())
    if metric is not None:
        records = [r for r in records if r["metric"] == metric]
    return sorted(records, key=lambda r: (r["metric"], r["window_start"], r["pane"]["index"]))


def format_top(record: dict, k: int = 5) -> str:
    """One window as text: its header, then the k largest estimates with 95% error bars."""
    estimate = np.asarray(record["estimate"])
    error = np.asarray(record["std_error"])
    top = np.argsort(-estimate, kind="stable")[:k]
    method = record["postprocess"]["method"]
    lines = [f"{record['metric']}  [{record['window_start']} .. {record['window_end']})  "
             f"n={record['n']:,}  {record['protocol']} ε={record['epsilon']:g}  {method}"]
    for i in top.tolist():
        lines.append(f"    {record['labels'][i]:>12}  {estimate[i]:7.4f} ± {1.96 * error[i]:.4f}")
    return "\n".join(lines)
