"""A demo-sized batch job whose estimate files are kept as a golden copy (`golden/`).

The copy was written by the dict-based record writer that the typed record
(`ldp_telemetry.output.estimate.EstimateRecord`) replaced; `test_estimate_golden.py` runs the
same job and checks that the typed writer writes the same records (floats to FLOAT_TOLERANCE).
The job covers every kind of record the pipeline makes: a frequency oracle with labels and
integrity on, a sized domain (labels made lazily), integrity off, a numeric metric with EMS and
bootstrap bands, the mean-only Piecewise Mechanism, and a metric with two configuration
versions (one record per version and a combined one). 28,000 reports a metric over three
one-day windows, one seed.

Regenerate only when what a record holds changes on purpose (as when the numeric bands were
clipped to each statistic's range), and say so in the commit:
    python -m tests.output.golden_job tests/output/golden
"""
from __future__ import annotations

import gzip
import io
import json
import sys
from pathlib import Path

import fastavro
import numpy as np

from ldp_telemetry.client.encoder import encode_points
from ldp_telemetry.client.files import write_report_file
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.job import EstimateJob
from tests.json_close import assert_json_close, skeleton

DAY_MS = 86_400_000
START_MS = 1_357_084_800_000  # 2013-01-02T00:00:00Z
REPORTS = 28_000
SEED = 2013
GOLDEN = Path(__file__).parent / "golden"
LABELS = [f"L{i:02d}" for i in range(12)]

REGISTRY = {"metrics": [
    {"name": "g.labels", "protocol": "grr", "epsilon": 2.0, "domain": {"labels": LABELS[:8]},
     "postprocess": "norm-hyb", "reports_per_day": 0.5},
    {"name": "o.sized", "protocol": "olh", "epsilon": 2.0, "domain": {"size": 24},
     "postprocess": "norm-sub"},
    {"name": "u.plain", "protocol": "oue", "epsilon": 1.0, "domain": {"labels": LABELS[:5]},
     "integrity": False},
    {"name": "s.num", "protocol": "sw", "epsilon": 2.0,
     "domain": {"low": 0, "high": 1440, "buckets": 48},
     "estimator": {"method": "ems", "bootstrap": 10}},
    {"name": "p.mean", "protocol": "pm", "epsilon": 1.0, "domain": {"low": 0, "high": 100},
     "estimator": "mean"},
    {"name": "v.versions", "protocol": "oue", "epsilon": 4.0, "domain": {"labels": LABELS[:10]},
     "version": 2,
     "history": [{"version": 1, "protocol": "oue", "epsilon": 2.0,
                  "domain": {"labels": LABELS}}]},
]}


def registry():
    return parse_registry(REGISTRY)


def write_inputs(folder: Path) -> list[str]:
    """One report file per metric (and per version), from one seed."""
    rng = np.random.default_rng(SEED)
    reg = registry()
    paths = []
    configs = [reg[entry["name"]] for entry in REGISTRY["metrics"]]
    configs.append(reg.version("v.versions", 1))
    for number, config in enumerate(configs):
        if config.kind == "numeric":
            points = rng.beta(2.0, 3.0, REPORTS)
        else:
            weights = rng.dirichlet(np.ones(config.d))
            points = rng.choice(config.d, REPORTS, p=weights)
        times = START_MS + rng.integers(0, 3 * DAY_MS, REPORTS)
        ids = np.arange(REPORTS, dtype=np.int64) + number * REPORTS
        reports = encode_points(config, points, rng, event_times_ms=times, report_ids=ids)
        path = folder / f"reports-{number}.avro"
        write_report_file(path, reports)
        paths.append(str(path))
    return paths


def run_golden_job(folder: Path) -> Path:
    """Write the inputs under `folder` and run the job; returns its output folder."""
    inputs = folder / "reports"
    inputs.mkdir(parents=True, exist_ok=True)
    output = folder / "estimates"
    job = EstimateJob(registry(), tuple(write_inputs(inputs)), str(output),
                      WindowSpec(DAY_MS, DAY_MS))
    run_job(job, [], out=io.StringIO())
    return output


def avro_lines(output: Path) -> list[bytes]:
    """The records of the job's Avro shards, each as sorted-key JSON text, sorted (Avro files
    differ in their sync markers: their decoded records are compared)."""
    lines = []
    for path in sorted(output.glob("estimates-*.avro")):
        with open(path, "rb") as handle:
            lines.extend(json.dumps(record, sort_keys=True).encode() + b"\n"
                         for record in fastavro.reader(handle))
    return sorted(lines)


def json_lines(output: Path) -> list[bytes]:
    """The lines of the job's JSON-lines shards, sorted (record order is not specified)."""
    return sorted(line for path in sorted(output.glob("estimates-*.jsonl"))
                  for line in path.read_bytes().splitlines(keepends=True))


#: How far a written float may lie from its golden value, relative (tests/json_close.py: the
#: last bits of EMS's and the moments' products differ between OpenBLAS's AVX-512 and AVX2
#: kernels, measured 3.3e-15 at most). Six orders of magnitude above that, and far below any
#: change of behaviour a record could show.
FLOAT_TOLERANCE = 1e-9


def assert_same_records(written: list[bytes], golden: list[bytes]) -> None:
    """The JSON records `written` and `golden` (one per line, any order) are the same: every key,
    string, integer, boolean and null exactly, every float to FLOAT_TOLERANCE relative (and
    1e-12 absolute, for values that round to 0)."""
    def parsed(lines: list[bytes]) -> list:
        records = [json.loads(line) for line in lines]
        return sorted(records, key=lambda r: json.dumps(skeleton(r), sort_keys=True))
    mine, theirs = parsed(written), parsed(golden)
    assert len(mine) == len(theirs)
    for record, expected in zip(mine, theirs, strict=True):
        assert_json_close(record, expected, FLOAT_TOLERANCE, 1e-12)


def read_golden(name: str) -> list[bytes]:
    with gzip.open(GOLDEN / name, "rb") as handle:
        return handle.read().splitlines(keepends=True)


def main(target: str) -> None:
    import tempfile
    with tempfile.TemporaryDirectory() as scratch:
        output = run_golden_job(Path(scratch))
        lines, decoded = json_lines(output), avro_lines(output)
    Path(target).mkdir(parents=True, exist_ok=True)
    for name, content in (("estimates.jsonl.gz", lines), ("estimates.avro.jsonl.gz", decoded)):
        with gzip.GzipFile(Path(target) / name, "wb", mtime=0) as out:
            out.writelines(content)
    print(f"{len(lines)} records; kinds: "
          f"{sorted({json.loads(line)['protocol'] for line in lines})}")


if __name__ == "__main__":
    main(sys.argv[1])
