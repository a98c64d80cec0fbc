"""One small multi-metric input, its reference run on FnApiRunner, and a helper that runs the
same job with other pipeline arguments for an exact comparison."""
from __future__ import annotations

import glob
import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from ldp_telemetry.ldp.config.registry import load_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.schemas.codec import write_reports

REPO_ROOT = Path(__file__).resolve().parents[2]
HOUR = 3_600_000
T0 = 1_709_251_200_000  # 2024-03-01T00:00:00Z
REGISTRY_DOC = {"metrics": [
    {"name": "r.grr", "protocol": "grr", "epsilon": 2.0, "domain": {"labels": list("abcde")}},
    {"name": "r.oue", "protocol": "oue", "epsilon": 1.0, "domain": {"size": 7},
     "postprocess": "norm-sub"},
    {"name": "r.olh", "protocol": "olh", "epsilon": 3.0, "domain": {"size": 9}},
]}


@dataclass(frozen=True)
class RunOutput:
    counters: dict
    summary: str
    estimates: list
    dead_letters: list


@dataclass(frozen=True)
class ComparisonInput:
    job: EstimateJob
    reference: RunOutput

    def run(self, output: Path, beam_args: list[str]) -> RunOutput:
        """The same job (same files, registry, windows) with `beam_args`, into `output`."""
        job = EstimateJob(self.job.registry, self.job.files, str(output), self.job.windows)
        printed = io.StringIO()
        counters = run_job(job, list(beam_args), out=printed)
        return RunOutput(counters, printed.getvalue().strip(), records(output, "estimates"),
                         records(output, "dead_letters"))

    def assert_matches_reference(self, got: RunOutput) -> None:
        """Same summary, counters, dead letters and window estimates as the FnApiRunner run."""
        reference = self.reference
        assert got.summary == reference.summary
        assert got.counters == reference.counters
        assert got.dead_letters == reference.dead_letters
        key = lambda r: (r["metric"], r["window_start"])  # noqa: E731
        assert [key(r) for r in got.estimates] == [key(r) for r in reference.estimates]
        for mine, theirs in zip(got.estimates, reference.estimates, strict=True):
            assert mine == theirs, key(mine)  # n, estimates, standard errors: bit for bit


def records(output, name) -> list:
    """The JSON-lines records, in a canonical order (runners may shard or order differently)."""
    paths = sorted(glob.glob(str(Path(output) / f"{name}-*.jsonl")))
    assert paths, f"no {name} files in {output}"
    rows = [json.loads(line) for path in paths
            for line in Path(path).read_text(encoding="utf-8").splitlines()]
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))


@pytest.fixture(scope="session")
def comparison_input(tmp_path_factory) -> ComparisonInput:
    """Three metrics over four hours in sliding 2 h windows every hour, plus one junk file."""
    folder = tmp_path_factory.mktemp("runner-comparison")
    (folder / "registry.json").write_text(json.dumps(REGISTRY_DOC))
    registry = load_registry(folder / "registry.json")
    rng = np.random.default_rng(2024)
    files = []
    for config in registry.metrics:
        n = 1500
        times = T0 + rng.integers(0, 4 * HOUR, n)
        columns = config.protocol.perturb(rng.integers(0, config.d, n), rng)
        for part, rows in enumerate((slice(0, 700), slice(700, None))):
            path = folder / f"{config.name}-{part}.avro"
            write_reports(str(path), config.name, config.protocol, np.arange(n)[rows],
                          times[rows], {k: v[rows] for k, v in columns.items()})
            files.append(str(path))
    junk = folder / "junk.avro"
    junk.write_text("not avro\n")
    files.append(str(junk))
    job = EstimateJob(registry, tuple(sorted(files)), "", WindowSpec(2 * HOUR, HOUR))
    bare = ComparisonInput(job, None)
    reference = bare.run(folder / "reference", ["--runner=FnApiRunner"])
    assert reference.counters["records_read"] == 4501
    assert reference.counters["dead_letter.undecodable"] == 1
    assert len(reference.estimates) == 3 * 5  # windows starting at -1 h .. +3 h
    return ComparisonInput(job, reference)
