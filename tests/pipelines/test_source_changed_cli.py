"""A report file rewritten while `ldp run` runs: the slice it shares with another file cannot be
counted exactly (ldp_telemetry.ldp.engine.partials.SourceChanged), which the command reports as
an input error naming the file, exit status 2, never a traceback.

The change is made for real, on disk, at the one moment it matters: the command below is `ldp`
itself, whose re-decoding step (`transforms.read.FileBatches`) first rewrites the file it is
about to decode again (dropping its last report), as a collector rewriting a file mid-run would.
Both files hold some of the same report ids, so their partial counts collide and are decoded
again (`merge_partials`).
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.schemas.codec import write_reports

from tests.pipelines.test_cli_errors import ldp

T0_MS = 1_709_251_200_000  # 2024-03-01T00:00:00Z
GRR = {"name": "m", "protocol": "grr", "epsilon": 1.0, "domain": {"labels": ["a", "b", "c"]}}
REPORTS = 60

#: `ldp` whose first decoding-again of a file rewrites that file first, one report shorter.
REWRITES_THE_FILE = f"""
import sys
import numpy as np
from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.pipelines.cli import main
from ldp_telemetry.schemas.codec import write_reports
from ldp_telemetry.transforms import read

again = read.FileBatches.__call__
done = set()

def rewritten_then_decoded(self, partial):
    if partial.source not in done:
        done.add(partial.source)
        protocol = make_protocol("grr", 1.0, 3)
        rng = np.random.default_rng(9)
        write_reports(partial.source, "m", protocol, np.arange({REPORTS} - 1),
                      {T0_MS} + rng.integers(0, 3_600_000, {REPORTS} - 1),
                      protocol.perturb(rng.integers(0, 3, {REPORTS} - 1), rng))
    return again(self, partial)

read.FileBatches.__call__ = rewritten_then_decoded
sys.exit(main(sys.argv[1:]))
"""


def write_file(path, ids, seed):
    protocol = make_protocol("grr", 1.0, 3)
    rng = np.random.default_rng(seed)
    write_reports(str(path), "m", protocol, ids, T0_MS + rng.integers(0, 3_600_000, len(ids)),
                  protocol.perturb(rng.integers(0, 3, len(ids)), rng))


@pytest.fixture
def overlapping_files(tmp_path):
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps({"metrics": [GRR]}))
    write_file(tmp_path / "a.avro", np.arange(REPORTS), 1)
    write_file(tmp_path / "b.avro", np.arange(REPORTS // 2, REPORTS + REPORTS // 2), 2)
    return registry, tmp_path


@pytest.mark.slow  # subprocesses
# the FnApiRunner raises the worker's exception again; the PortableRunner (a local job service
# started by `ldp run`, LOOPBACK workers in the process) reports a failed job as a RuntimeError
# holding the worker's traceback as text, which is the path a Flink job server takes too
@pytest.mark.parametrize("runner", [(), ("--runner=PortableRunner",)],
                         ids=["fn-api", "portable"])
def test_a_file_changed_during_the_run_is_an_input_error_naming_it(overlapping_files, runner):
    registry, folder = overlapping_files
    args = ("run", "--registry", registry, "--input", folder / "*.avro", "--output",
            folder / "out", "--window", "3600", *runner)
    done = ldp(*args, code=REWRITES_THE_FILE)
    assert done.returncode == 2, done.stderr
    if not runner:  # a LOOPBACK worker still prints its traceback above the error line
        assert "Traceback" not in done.stderr
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith("ldp run: error: --input file "), error
    assert "changed while the job ran" in error
    changed = [name for name in ("a.avro", "b.avro") if str(folder / name) in error]
    assert len(changed) == 1, error


@pytest.mark.slow  # subprocesses
def test_the_same_files_unchanged_are_counted_once_each(overlapping_files):
    registry, folder = overlapping_files
    done = ldp("run", "--registry", registry, "--input", folder / "*.avro", "--output",
               folder / "out", "--window", "3600")
    assert done.returncode == 0, done.stderr
    assert f"records read: {2 * REPORTS}" in done.stdout
