"""`ldp plan`, `show`, `query`, `simulate` and `--help` never import Apache Beam.

Each command runs in a fresh interpreter that then reports whether `apache_beam` is in
sys.modules; only `ldp run` (and `ldp run --help`) may import it. The job output that `show` and
`query` read is made in this process by a real run.
"""
from __future__ import annotations

import io
import json
import subprocess
import sys

import numpy as np
import pytest

from ldp_telemetry.ldp.config.registry import load_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.job import EstimateJob

pytestmark = pytest.mark.slow  # the command line in subprocesses
#: Runs `ldp` with the given arguments in this interpreter, then prints its exit code and
#: whether Beam and scipy were imported.
PROBE = """
import json, sys
from ldp_telemetry.pipelines.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as stop:  # --help and argparse errors exit
    code = stop.code
print(json.dumps({"code": code, "beam": "apache_beam" in sys.modules,
                  "scipy": "scipy" in sys.modules}), file=sys.stderr)
"""


def run_ldp(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                          timeout=300, check=False)
    return json.loads(done.stderr.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("light")
    (root / "registry.json").write_text(json.dumps({"metrics": [
        {"name": "colour", "protocol": "grr", "epsilon": 2.0,
         "domain": {"labels": ["red", "green", "blue", "cyan"]}}]}))
    rng = np.random.default_rng(3)
    rows = "\n".join(f"{['red', 'green', 'blue', 'cyan'][v]},{1_600_000_000 + i}"
                     for i, v in enumerate(rng.choice(4, size=2000, p=[.4, .3, .2, .1])))
    (root / "values.csv").write_text("colour,time\n" + rows + "\n")
    return root


@pytest.fixture(scope="module")
def simulated(workspace):
    """`ldp simulate` run in a fresh interpreter: (what the probe saw, the workspace)."""
    return run_ldp("simulate", "--registry", str(workspace / "registry.json"),
                   "--metric", "colour", "--input", str(workspace / "values.csv"),
                   "--value-column", "colour", "--time-column", "time",
                   "--out", str(workspace / "reports"), "--seed", "1"), workspace


def test_simulate_does_not_import_beam(simulated):
    assert simulated[0]["code"] == 0 and not simulated[0]["beam"]


@pytest.fixture(scope="module")
def job_output(simulated):
    outcome, workspace = simulated
    assert outcome["code"] == 0
    job = EstimateJob(load_registry(workspace / "registry.json"),
                      tuple(str(p) for p in sorted((workspace / "reports").glob("*.avro"))),
                      str(workspace / "out"), WindowSpec.from_seconds(86_400))
    run_job(job, [], out=io.StringIO())
    return str(workspace / "out")


@pytest.mark.parametrize("args", [
    ("plan", "--epsilon", "1", "--domain", "100"),
    ("plan", "--epsilon", "2", "--domain", "1024", "--n", "5000", "--json"),
    ("--help",),
    ("plan", "--help"), ("show", "--help"), ("query", "--help"), ("simulate", "--help"),
], ids=lambda args: " ".join(args))
def test_light_commands_do_not_import_beam(args):
    outcome = run_ldp(*args)
    assert outcome["code"] == 0 and not outcome["beam"]
    if args[0] in ("plan", "--help"):  # numpy alone: scipy costs most of the rest of start-up
        assert not outcome["scipy"]


def test_show_and_query_do_not_import_beam(job_output):
    for args in (("show", "--output", job_output),
                 ("query", "--output", job_output, "--metric", "colour", "--window", "0",
                  "--labels", "red,blue"),
                 ("query", "--output", job_output, "--metric", "colour", "--window", "0",
                  "--top", "2", "--json")):
        outcome = run_ldp(*args)
        assert outcome["code"] == 0 and not outcome["beam"], args


def test_run_help_lists_the_job_arguments_without_beam():
    """`ldp run --help` lists the job's arguments, the live sources included, without Beam."""
    from ldp_telemetry.pipelines.arguments import SOURCE_NAMES
    from ldp_telemetry.transforms.sources import source_names
    done = subprocess.run([sys.executable, "-c", PROBE, "run", "--help"], capture_output=True,
                          text=True, timeout=300, check=False)
    assert "--window-offset" in done.stdout and "--allowed-lateness" in done.stdout
    assert "--create-store" in done.stdout
    outcome = json.loads(done.stderr.strip().splitlines()[-1])
    assert outcome["code"] == 0 and not outcome["beam"]
    assert source_names() == SOURCE_NAMES  # the help names the catalog's sources


def test_version_without_beam():
    done = subprocess.run([sys.executable, "-c", PROBE, "--version"], capture_output=True,
                          text=True, timeout=300, check=False)
    from importlib.metadata import version
    assert done.stdout.strip() == f"ldp {version('ldp-telemetry')}"
    assert not json.loads(done.stderr.strip().splitlines()[-1])["beam"]
